//! The two composition roots, of the same shape: each takes its ports (store, platform) and
//! settings and runs every reconciler of its mode until a shutdown signal, then drains.
//!
//! - [`local`]: standalone mode (`rouse up`): the embedded store, the local platform, the one
//!   store-watch driver (`crate::drive`) for every kind, and the REST API.
//! - [`kube`]: Kubernetes mode (`rouse controller`): kube-runtime controllers behind leader
//!   election, with Events, metrics and health probes.
//!
//! The kinds' cores (`sandbox`, `claim`, `pool`, `snapshot` plans, `template`) never import
//! this module; `controller/tests/module_graph.rs` checks it.

pub mod kube;
pub mod local;
mod state;
