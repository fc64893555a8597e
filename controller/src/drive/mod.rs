//! The driver layer: what runs reconcilers, knowing no kind. The work queue ([`queue`]), the
//! one per-key retry backoff of every reconciler in both modes ([`backoff`]), the event
//! sources from the `Store` port ([`watch`]), the one store-watch driver of standalone
//! mode ([`driver`]), and the list-watch behind every cache of Kubernetes mode
//! ([`cached_watch`]).
//!
//! Kinds plug in through [`driver::Reconciler`] (what wakes which item, what a resync visits,
//! how queued items become jobs): the local sandboxes and snapshots in `crate::mode::local`,
//! pools and claims in `crate::extensions`; the composition roots in `crate::mode` start them.
//! Nothing here imports a kind (`controller/tests/module_graph.rs`).

pub mod backoff;
pub(crate) mod cached_watch;
pub(crate) mod driver;
pub(crate) mod queue;
pub(crate) mod watch;

pub use backoff::{Failures, KeyedBackoff, RetryBackoff};
