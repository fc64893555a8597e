//! The bodies of the fuzz targets, shared with the stable corpus test
//! (`tests/fuzz_corpus.rs` includes `targets.rs` and `relay.rs` by path).

pub mod relay;
pub mod targets;
