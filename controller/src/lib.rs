//! The Rouse control plane: reconcilers for the sandbox kinds, the `Platform` port with its
//! Kubernetes and local implementations, and the embedded store.
//!
//! The reconcilers are a functional core ([`sandbox::plan`]) wrapped by one generic driver
//! ([`sandbox::reconcile_sandbox`]) that both modes call: the kube-runtime controller in
//! Kubernetes mode and the one store-watch driver ([`drive`]) in standalone mode. The two
//! composition roots are [`mode::local`] and [`mode::kube`]; the kinds' cores import neither
//! (`controller/tests/module_graph.rs`).

#![forbid(unsafe_code)]

pub mod api;
pub mod claim;
pub mod drive;
pub mod extensions;
pub mod mode;
pub mod platform;
pub mod pool;
pub mod sandbox;
pub mod snapshot;
mod status;
pub mod store;
pub mod template;
