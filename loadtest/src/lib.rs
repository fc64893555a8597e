//! Load generator and benchmark scenarios for Rouse.
//!
//! Every scenario measures Rouse's code and a baseline side by side in the same run, in
//! batches, and reports per-operation p50/p99/max and the ratio of the medians, so results
//! compare across machines. Loops are bounded both by a count and by a time budget. Run the
//! release build: `cargo run --release -p rouse-loadtest -- --help`.

#![forbid(unsafe_code)]

pub mod claims;
pub mod controller;
pub mod measure;
pub mod node;
pub mod proxy;
pub mod real_api;
pub mod scale;
pub mod scenarios;
pub mod wake;
