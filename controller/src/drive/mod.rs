//! The driver layer: what runs reconcilers, knowing no kind. The work queue ([`queue`]), the
//! one per-key retry backoff of every reconciler in both modes ([`backoff`]), the event
//! sources from the `Store` port ([`watch`]) and the one store-watch driver of standalone
//! mode ([`driver`]).
//!
//! Kinds plug in through [`driver::Reconciler`]; the kinds' own wiring lives beside their
//! cores, and the composition roots in `crate::mode` start them.

pub mod backoff;
pub(crate) mod driver;
pub(crate) mod queue;
pub(crate) mod watch;

pub use backoff::{Failures, KeyedBackoff, RetryBackoff};
