//! The `Snapshotter` port: what a runtime can keep of a sandbox when it is suspended by
//! checkpoint (`spec.suspension.strategy: Checkpoint`), and the hook by which the data plane
//! stops traffic to a sandbox around a checkpoint.
//!
//! The reconciler stays runtime-neutral: it asks to stop a suspended sandbox's workload, and
//! the platform checkpoints instead where its [`Capabilities`] allow (the local gVisor
//! runtime: memory, the in-memory root overlay and the volumes), or stops it and reports why
//! in the sandbox's `Checkpointed` condition (see [`outcome`]).
//!
//! `SandboxSnapshot`s are taken by `crate::mode::local` on the local platform, and in Kubernetes
//! mode by [`kube`] with the `kube-csi` ([`kube::csi`]) or `kube-gke` ([`kube::gke`])
//! provider, each a folder of a pure `plan.rs` and its `reconcile.rs`.

#[cfg(test)]
pub(crate) mod fixtures;
pub mod kube;
pub mod outcome;
pub mod plan;
pub mod quantity;
pub mod record;

use futures::future::BoxFuture;
use rouse_shared::api::Sandbox;
use rouse_shared::store::ObjectKey;

pub use outcome::{CHECKPOINTED, CheckpointOutcome};

/// What a provider keeps of a sandbox across a checkpoint suspend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The workload's memory (processes, open files, the in-memory root overlay).
    pub memory: bool,
    /// The sandbox's volumes.
    pub volumes: bool,
}

/// A provider of snapshots: names itself and says what it can keep of a sandbox.
pub trait Snapshotter: Send + Sync + 'static {
    /// The provider's name, as `SandboxSnapshot.status.provider` shows it (`local-gvisor`,
    /// `local-process`).
    fn provider(&self, sandbox: &Sandbox) -> &'static str;

    /// What a checkpoint of this sandbox keeps.
    fn capabilities(&self, sandbox: &Sandbox) -> Capabilities;
}

/// The data plane's part of a checkpoint: no connection may be open to a sandbox while it is
/// saved (runsc refuses, and the sandbox dies), so the proxy closes its upstream connections
/// with a reset and holds new ones until [`Quiesce::release`].
///
/// In standalone mode the proxy runs in the same process; `rouse up` joins the two through
/// this trait, as it does for [`crate::platform::local::ActivityView`].
pub trait Quiesce: Send + Sync + 'static {
    /// Resets every upstream connection to the sandbox and holds new ones; resolves once none
    /// is open (or after a bounded wait, with `false`).
    fn quiesce(&self, key: &ObjectKey) -> BoxFuture<'static, bool>;

    /// Lets connections to the sandbox through again.
    fn release(&self, key: &ObjectKey);
}
