//! The Rouse control plane: reconcilers for the sandbox kinds, the `Platform` port with its
//! Kubernetes and local implementations, the embedded store and the REST API.
//!
//! Builds on the API types and the [`rouse_shared::store::Store`] port of `rouse-shared`.

pub mod api;
pub mod store;
