//! The bodies of the fuzz targets, shared with the stable corpus test
//! (`tests/fuzz_corpus.rs` includes `targets.rs` by path).

pub mod targets;
