//! The `Sandbox` kind (`agents.x-k8s.io/v1beta1`): one stateful, isolated workload with a
//! stable name, persistent volumes and a lifecycle.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    MemorySharing, OperatingMode, PersistentVolumeClaimTemplate, PodTemplate, ShutdownPolicy,
    Suspension,
};

/// Desired state of a sandbox.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "agents.x-k8s.io",
    version = "v1beta1",
    kind = "Sandbox",
    plural = "sandboxes",
    singular = "sandbox",
    shortname = "sandbox",
    namespaced,
    status = "SandboxStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A single, stateful, isolated workload with a stable name, persistent storage and a lifecycle.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.operatingMode"),
    printcolumn(
        name = "Pod IP",
        type_ = "string",
        json_path = ".status.podIPs[0]",
        priority = 1
    ),
    printcolumn(
        name = "Last Activity",
        type_ = "date",
        json_path = ".status.lastActivityTime",
        priority = 1
    ),
    printcolumn(
        name = "Shutdown",
        type_ = "date",
        json_path = ".spec.shutdownTime",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.volumeClaimTemplates) ? self.volumeClaimTemplates : []) == (has(oldSelf.volumeClaimTemplates) ? oldSelf.volumeClaimTemplates : [])",
    "message": "volumeClaimTemplates is immutable"
}]))]
pub struct SandboxSpec {
    /// The pod the sandbox runs.
    pub pod_template: PodTemplate,
    /// Persistent volume claims created for the sandbox, one per template; immutable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaimTemplate>,
    /// `true` creates a headless Service named like the sandbox, `false` deletes an owned one,
    /// unset keeps an existing one and creates none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<bool>,
    /// When the workload and Service are deleted (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_time: Option<Time>,
    /// What happens to the Sandbox object at `shutdownTime`; defaults to `Retain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub shutdown_policy: Option<ShutdownPolicy>,
    /// Whether the workload runs; defaults to `Running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Running"))]
    pub operating_mode: Option<OperatingMode>,
    /// Idle suspension and wake-on-connect (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
    /// Start from this snapshot instead of empty volumes (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_from: Option<RestoreFrom>,
    /// Whether the workload's memory may be merged with identical memory of other sandboxes;
    /// defaults to `None` (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub memory_sharing: Option<MemorySharing>,
}

impl SandboxSpec {
    /// A spec whose pod runs `container` alone, every other field at its default.
    pub fn running(container: Container) -> Self {
        Self {
            pod_template: PodTemplate {
                spec: PodSpec {
                    containers: vec![container],
                    ..PodSpec::default()
                },
                ..PodTemplate::default()
            },
            ..Self::default()
        }
    }

    /// The effective operating mode: `Running` unless set.
    pub fn effective_operating_mode(&self) -> OperatingMode {
        self.operating_mode.unwrap_or_default()
    }

    /// The effective memory sharing: `None` unless set.
    pub fn effective_memory_sharing(&self) -> MemorySharing {
        self.memory_sharing.unwrap_or_default()
    }

    /// The effective shutdown policy: `Retain` unless set.
    pub fn effective_shutdown_policy(&self) -> ShutdownPolicy {
        self.shutdown_policy.unwrap_or_default()
    }
}

/// The snapshot a sandbox starts from (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreFrom {
    /// Name of a `SandboxSnapshot` in the sandbox's namespace.
    pub snapshot_name: String,
}

/// Observed state of a sandbox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// `<name>.<namespace>.svc.<cluster domain>` of the sandbox's Service.
    #[serde(
        default,
        rename = "serviceFQDN",
        skip_serializing_if = "Option::is_none"
    )]
    pub service_fqdn: Option<String>,
    /// Name of the sandbox's Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Label selector of the sandbox's pod: `agents.x-k8s.io/sandbox-name-hash=<hash>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// IPs of the pod; empty when there is no pod.
    #[serde(default, rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<String>,
    /// Node the pod runs on; unset when there is no pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// `Ready`, `Suspended`, `PodScheduled` and `Finished` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Last time the proxy saw traffic or an open connection (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_time: Option<Time>,
    /// The newest snapshot taken of this sandbox (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_snapshot: Option<LastSnapshot>,
    /// Where the proxy dials the sandbox (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
    /// How much of the workload's memory is merged with other sandboxes', for a sandbox with
    /// `spec.memorySharing: Merge` whose runtime reports it (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_sharing: Option<MemorySharingStatus>,
}

/// The merged memory of a sandbox's workload (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySharingStatus {
    /// Bytes of the workload's memory that are currently merged (backed by a page shared with
    /// other processes), summed over its processes.
    #[schemars(range(min = 0))]
    pub merged_bytes: i64,
}

/// The newest snapshot of a sandbox (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastSnapshot {
    /// Name of the `SandboxSnapshot`.
    pub name: String,
    /// When it was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<Time>,
}

/// The address and ports the proxy dials to reach a sandbox (Rouse addition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// IP address or hostname to dial.
    pub address: String,
    /// Declared container ports and the port to dial for each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["containerPort"]))]
    pub ports: Vec<EndpointPort>,
}

/// One declared container port and where to dial it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// Name of the container port, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port declared in the pod template.
    #[schemars(range(min = 1, max = 65535))]
    pub container_port: i32,
    /// The port to dial at `address` (differs from `containerPort` in standalone mode).
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}
