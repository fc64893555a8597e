//! Load generator and benchmark scenarios for Rouse.
//!
//! Benchmarks run release builds and print p50/p99/max with ratios against a baseline measured
//! in the same run; this crate currently holds no scenarios.
