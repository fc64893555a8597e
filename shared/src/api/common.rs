//! Types shared by several kinds: embedded metadata, volume claim templates, suspension and
//! lifecycle enums.
//!
//! They mirror the upstream `agents.x-k8s.io` Go types field for field, so upstream manifests
//! deserialize unchanged; Rouse additions are optional.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Labels and annotations applied to a pod; the only metadata a pod template may carry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMetadata {
    /// Labels added to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl PodMetadata {
    /// True when there are neither labels nor annotations.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// Name, labels and annotations of an object embedded in a spec (a volume claim template).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedObjectMetadata {
    /// Name of the embedded object; for a volume claim template, the pod volume it becomes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Labels of the embedded object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the embedded object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The pod a sandbox runs: labels and annotations plus a full `PodSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    /// Labels and annotations of the pod; other metadata fields are ignored.
    #[serde(default)]
    pub metadata: PodMetadata,
    /// The pod's specification.
    pub spec: PodSpec,
}

/// A persistent volume claim created for a sandbox and mounted as the pod volume of its name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimTemplate {
    /// Name (required), labels and annotations; the claim is named `<name>-<sandbox>`.
    #[serde(default)]
    pub metadata: EmbeddedObjectMetadata,
    /// The claim's specification.
    pub spec: PersistentVolumeClaimSpec,
}

/// What happens to a sandbox's object when its `shutdownTime` passes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ShutdownPolicy {
    /// The workload is deleted and the Sandbox object stays, with `Ready=False/SandboxExpired`.
    #[default]
    Retain,
    /// The Sandbox object is deleted too.
    Delete,
}

/// Whether a sandbox's workload should run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OperatingMode {
    /// The workload runs.
    #[default]
    Running,
    /// The workload is deleted; volumes and Service stay.
    Suspended,
}

/// How a sandbox is suspended (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SuspensionStrategy {
    /// Delete the workload and keep the volumes; resume starts it fresh.
    #[default]
    Stop,
    /// Snapshot memory and filesystem, restore on resume; falls back to `Stop` with a condition
    /// where the runtime cannot checkpoint.
    Checkpoint,
}

/// Idle suspension and wake-on-connect settings (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// Suspend after this many seconds without traffic; absent means never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub idle_timeout_seconds: Option<i64>,
    /// Resume the sandbox when a client connects to it while suspended.
    #[serde(default = "default_true")]
    pub wake_on_connect: bool,
    /// How the workload is suspended.
    #[serde(default)]
    pub strategy: SuspensionStrategy,
}

impl Default for Suspension {
    fn default() -> Self {
        Self {
            idle_timeout_seconds: None,
            wake_on_connect: true,
            strategy: SuspensionStrategy::Stop,
        }
    }
}

/// Whether a sandbox's memory may be merged with identical memory of other sandboxes (Rouse
/// addition; see docs/memory-sharing.md).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MemorySharing {
    /// The workload's memory is its own (the default).
    #[default]
    None,
    /// The workload's anonymous memory is offered to the kernel's same-page merging (KSM):
    /// pages identical to another opted-in process's are kept once, copy-on-write.
    Merge,
}

/// A reference to another object of the same namespace, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    pub name: String,
}

pub(crate) fn default_true() -> bool {
    true
}
