//! Platforms: where a sandbox's workload and volumes physically live.

pub mod local;
