//! The drivers of the `extensions.agents.x-k8s.io` kinds — SandboxWarmPool and SandboxClaim
//! (SandboxTemplate is read by both, and gets its NetworkPolicy in Kubernetes mode) — around
//! the pure cores in [`crate::pool`], [`crate::claim`] and [`crate::template`]: a store-watch
//! driver for standalone mode ([`run_standalone`]) and kube-runtime controllers for
//! Kubernetes mode ([`kube`]).

mod cached;
mod claims;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod kube;
mod router;
mod standalone;

use std::time::Duration;

use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::Store;

use crate::claim::AdoptionWrites;

pub use router::{Router, Work, sandbox_controller};
pub use standalone::run_standalone;

/// Settings of the pool and claim reconcilers, in both modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionsConfig {
    /// Most pool and claim reconciles running at once. Default 16.
    pub concurrency: usize,
    /// A pool member not Ready for this long is deleted and replaced. Default 5m.
    pub stuck_after: Duration,
    /// Every pool and claim is reconciled at least this often. Default 60s.
    pub resync: Duration,
    /// The first retry delay after a failed reconcile. Default 100ms.
    pub retry_min: Duration,
    /// The longest retry delay after failed reconciles. Default 30s.
    pub retry_max: Duration,
    /// How long shutdown waits for running reconciles. Default 5s.
    pub drain: Duration,
    /// Standalone: most claims reconciled together, their adoptions written in one commit;
    /// 1 reconciles each claim on its own (at most `concurrency` at once). Default 128.
    pub claim_batch: usize,
}

impl Default for ExtensionsConfig {
    fn default() -> Self {
        Self {
            concurrency: 16,
            stuck_after: Duration::from_secs(300),
            resync: Duration::from_secs(60),
            retry_min: Duration::from_millis(100),
            retry_max: Duration::from_secs(30),
            drain: Duration::from_secs(5),
            claim_batch: 128,
        }
    }
}

/// The object kinds the driver needs from its store.
pub trait ExtensionsStore:
    Store<Sandbox>
    + Store<SandboxClaim>
    + Store<SandboxWarmPool>
    + Store<SandboxTemplate>
    + AdoptionWrites
    + Clone
    + 'static
{
}

impl<S> ExtensionsStore for S where
    S: Store<Sandbox>
        + Store<SandboxClaim>
        + Store<SandboxWarmPool>
        + Store<SandboxTemplate>
        + AdoptionWrites
        + Clone
        + 'static
{
}
