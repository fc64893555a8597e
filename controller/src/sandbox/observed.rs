//! What a platform found for one sandbox: its workloads, volumes and Service, in terms that
//! mean the same for Kubernetes Pods and for local processes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use rouse_shared::api::EndpointPort;

/// Everything a platform observed for one sandbox, the input of [`super::plan`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observed {
    /// Workloads that are or may be the sandbox's: the one named [`super::pod_name`] (whoever
    /// owns it) and any other the sandbox owns (its `sandbox-name-hash` label or owner).
    pub workloads: Vec<Workload>,
    /// Volumes (PVCs `<template>-<sandbox>` or directories) that exist.
    pub volumes: Vec<ObservedVolume>,
    /// The Service named like the sandbox, if one exists.
    pub service: Option<ObservedService>,
    /// DNS suffix of Services, e.g. `cluster.local`; `serviceFQDN` is
    /// `<name>.<namespace>.svc.<cluster_domain>`.
    pub cluster_domain: String,
    /// The data plane's live view of the sandbox's traffic, where the platform has one
    /// (standalone mode: the proxy in the same process): now while a connection is open, else
    /// when the last one closed. Idle suspend counts it like `status.lastActivityTime`.
    pub activity: Option<jiff::Timestamp>,
    /// The platform's `Checkpointed` condition (see [`crate::snapshot::outcome`]), for a
    /// sandbox suspended by checkpoint; copied into the status as it is.
    pub checkpoint: Option<Condition>,
    /// For a sandbox with `spec.restoreFrom`, where its snapshot stands; `None` when the
    /// platform does not restore from snapshots (the sandbox then starts as usual).
    pub restore: Option<RestoreSource>,
    /// What the platform can say about memory sharing, for a sandbox with
    /// `spec.memorySharing: Merge` (`None` otherwise, or where the platform says nothing).
    pub memory_sharing: Option<ObservedMemorySharing>,
}

/// Memory sharing of a sandbox's workload as its platform sees it: the `MemorySharing`
/// condition and `status.memorySharing`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedMemorySharing {
    /// Where merging stands.
    pub state: SharingState,
    /// The condition's message.
    pub message: String,
    /// Bytes of the workload's memory merged now; `None` when no workload runs.
    pub merged_bytes: Option<u64>,
}

/// Where merging stands for one sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharingState {
    /// The workload is marked mergeable and KSM runs (or it will be, once a workload starts).
    Merging,
    /// KSM is off or missing and could not be turned on.
    KsmUnavailable,
    /// The workload runs but could not be marked mergeable.
    NotMarked,
    /// The runtime cannot merge this sandbox's memory at all (gVisor).
    Unsupported,
}

/// Where the snapshot a sandbox starts from (`spec.restoreFrom`) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreSource {
    /// It can be started from (or it already was).
    Ready,
    /// No `SandboxSnapshot` of that name; the message says which.
    NotFound(String),
    /// It exists but is not `Ready` (pending or failed); the message says why.
    NotReady(String),
}

/// One workload (a Pod, or a local process) and its state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Workload {
    /// Its name (the Pod's name).
    pub name: String,
    /// Whose it is.
    pub ownership: Ownership,
    /// The controller that owns it when that is not this sandbox, as `Kind/name (UID: uid)`.
    pub owner: Option<String>,
    /// Lifecycle phase.
    pub phase: WorkloadPhase,
    /// True when it passed its readiness check.
    pub ready: bool,
    /// Its addresses, the primary one first; empty until it has one.
    pub ips: Vec<String>,
    /// The node (or host) it runs on.
    pub node_name: Option<String>,
    /// The declared container ports and the port to dial for each at `ips[0]`.
    pub ports: Vec<EndpointPort>,
    /// True when it is being deleted (Pod `deletionTimestamp` set, process stopping).
    pub terminating: bool,
    /// The `PodScheduled` condition, copied into the sandbox's status.
    pub scheduled: Option<Condition>,
    /// The pod template hash it was made from (`None` for a workload that carries none).
    pub template_hash: Option<String>,
    /// While it waits to be started again after exits, why and until when (a container's
    /// `waiting` state: `CrashLoopBackOff: back-off 4s ...`); the `Ready` message carries it.
    pub back_off: Option<String>,
}

/// Whose a workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ownership {
    /// It has a controller reference to this sandbox.
    #[default]
    Owned,
    /// It has no controller and carries the `agents.x-k8s.io/adoptable` label or this
    /// sandbox's `sandbox-name-hash` label: the sandbox may take it over (as upstream does).
    Adoptable,
    /// Another controller owns it, or it has no controller and neither label: never touched.
    NotOwned,
}

/// The phase of a workload, as a Pod's `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkloadPhase {
    /// Accepted, not yet running (scheduling, pulling, starting).
    #[default]
    Pending,
    /// At least one container runs.
    Running,
    /// All containers exited successfully and will not restart.
    Succeeded,
    /// All containers exited, at least one in failure, and will not restart.
    Failed,
    /// The state cannot be read (node lost).
    Unknown,
}

impl WorkloadPhase {
    /// Parses a Pod `status.phase`; absent or unrecognised phases are `Pending` / `Unknown`.
    pub fn from_pod_phase(phase: Option<&str>) -> Self {
        match phase {
            None | Some("Pending") => Self::Pending,
            Some("Running") => Self::Running,
            Some("Succeeded") => Self::Succeeded,
            Some("Failed") => Self::Failed,
            Some(_) => Self::Unknown,
        }
    }

    /// The phase as a Pod's `status.phase` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }

    /// True for `Succeeded` and `Failed`, from which a workload never runs again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// A volume that exists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedVolume {
    /// Its name: the claim name `<template>-<sandbox>`.
    pub claim_name: String,
}

/// The Service named like the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedService {
    /// Its name.
    pub name: String,
    /// True when it has a controller reference to this sandbox.
    pub owned: bool,
}
