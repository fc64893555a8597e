//! The bodies of the fuzz targets, shared with the stable corpus test
//! (`tests/fuzz_corpus.rs` includes these files by path).

pub mod chunked_grammar;
pub mod relay;
pub mod targets;
