//! Shared ground of Rouse: the API types and their CRDs, names and hostnames, the `Store` port
//! that the controller and the proxy meet through, and manifest validation.

#![forbid(unsafe_code)]

pub mod api;
pub mod crds;
pub mod datadir;
pub mod manifest;
pub mod names;
pub mod store;
pub mod validate;
