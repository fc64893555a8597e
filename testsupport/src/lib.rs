//! Test-only support code for Rouse. Never a dependency of the shipped binary: only
//! `[dev-dependencies]` name this crate.

#![forbid(unsafe_code)]

pub mod cluster;
pub mod gvisor;
pub mod image;
pub mod kube;
pub mod module_graph;
pub mod node;
pub mod provisioner;
pub mod tmpfs;
pub mod upstream;
