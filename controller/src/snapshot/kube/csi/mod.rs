//! The `kube-csi` provider: one CSI `VolumeSnapshot` per PVC of the sandbox. [`plan`] holds
//! the objects and the pure plan; `reconcile` reads and writes them.

pub mod plan;
pub(super) mod reconcile;
