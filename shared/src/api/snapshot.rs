//! The `SandboxSnapshot` kind (`agents.x-k8s.io/v1beta1`, Rouse addition): a point-in-time
//! snapshot of one sandbox, which `Sandbox.spec.restoreFrom` can start a new sandbox from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::default_true;

/// Desired state of a snapshot: which sandbox to snapshot and how.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "agents.x-k8s.io",
    version = "v1beta1",
    kind = "SandboxSnapshot",
    plural = "sandboxsnapshots",
    singular = "sandboxsnapshot",
    shortname = "sbxsnap",
    namespaced,
    status = "SandboxSnapshotStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A point-in-time snapshot of one sandbox's filesystem and, where the runtime can, memory.",
    printcolumn(name = "Sandbox", type_ = "string", json_path = ".spec.sandboxName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Size", type_ = "integer", json_path = ".status.sizeBytes"),
    printcolumn(name = "Taken", type_ = "date", json_path = ".status.takenAt"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSnapshotSpec {
    /// Name of the sandbox to snapshot, in the snapshot's namespace.
    pub sandbox_name: String,
    /// Include the memory image where the runtime can checkpoint; filesystem only otherwise.
    #[serde(default = "default_true")]
    pub include_memory: bool,
}

/// Progress of a snapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SnapshotPhase {
    /// Not taken yet.
    #[default]
    Pending,
    /// Taken and usable by `restoreFrom`.
    Ready,
    /// Could not be taken; `message` says why.
    Failed,
}

/// Observed state of a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSnapshotStatus {
    /// Progress of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<SnapshotPhase>,
    /// When the snapshot was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Time>,
    /// Size of the stored snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub size_bytes: Option<i64>,
    /// Which runtime or platform took it (for example `gvisor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Human-readable detail, set when the phase is `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
