//! The `kube-gke` provider: GKE pod snapshots of the sandbox's gVisor pod. [`plan`] holds
//! the objects and the pure plan; `reconcile` reads and writes them.

pub mod plan;
pub(super) mod reconcile;
