//! The Sandbox reconciler: the pure [`plan`] function, what it observes and what it asks for,
//! and the generic [`reconcile_sandbox`] driver that runs observe → plan → apply → status.

mod action;
mod conditions;
mod events;
mod observed;
mod plan;
pub mod port;
mod reconcile;
mod report;
mod sharing;
mod workload;

pub use action::{Action, SandboxOp, ServiceSpec, VolumeSpec, WorkloadSpec};
pub use conditions::Transition;
pub use events::{EventKind, LifecycleEvent, event_reason};
pub use observed::{
    Observed, ObservedMemorySharing, ObservedService, ObservedVolume, Ownership, RestoreSource,
    SharingState, Workload, WorkloadPhase,
};
pub use plan::{Plan, plan};
pub use reconcile::{ReconcileError, ReconcileOutcome, reconcile_sandbox};
pub(crate) use report::not_owned_error;
pub use sharing::MEMORY_SHARING_REFRESH;
pub use workload::{pod_name, pod_template_hash, volume_specs, workload_spec};

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;
