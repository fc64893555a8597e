//! The `SandboxClaim` kind (`extensions.agents.x-k8s.io/v1beta1`): asks for a sandbox from a
//! warm pool, adopting a pre-warmed one or starting one cold.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{LocalObjectReference, PersistentVolumeClaimTemplate, PodMetadata};

/// A request for a sandbox from a warm pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "extensions.agents.x-k8s.io",
    version = "v1beta1",
    kind = "SandboxClaim",
    plural = "sandboxclaims",
    singular = "sandboxclaim",
    shortname = "sandboxclaim",
    namespaced,
    status = "SandboxClaimStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A request for a sandbox from a warm pool.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(name = "Sandbox", type_ = "string", json_path = ".status.sandbox.name"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(
        name = "Pool",
        type_ = "string",
        json_path = ".spec.warmPoolRef.name",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxClaimSpec {
    /// The warm pool to take a sandbox from.
    pub warm_pool_ref: LocalObjectReference,
    /// When the claim and its sandbox expire, and what happens then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<ClaimLifecycle>,
    /// Labels and annotations added to the sandbox's pod; system prefixes are rejected.
    #[serde(default, skip_serializing_if = "PodMetadata::is_empty")]
    pub additional_pod_metadata: PodMetadata,
    /// Environment variables for the sandbox's containers; forces a cold start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<ClaimEnvVar>,
    /// Extra persistent volume claims for the sandbox; forces a cold start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaimTemplate>,
}

/// When a claim expires and what is deleted then.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimLifecycle {
    /// Absolute expiry time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_time: Option<Time>,
    /// Expire this many seconds after the sandbox finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// What is deleted at expiry; defaults to `Retain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub shutdown_policy: Option<ClaimShutdownPolicy>,
}

/// What happens to a claim and its sandbox at expiry.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ClaimShutdownPolicy {
    /// Delete the claim; its sandbox goes by garbage collection in the background.
    Delete,
    /// Delete the claim only after its sandbox is gone.
    DeleteForeground,
    /// Keep the claim with `ClaimExpired`; the sandbox is deleted.
    #[default]
    Retain,
}

/// One environment variable a claim injects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimEnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value.
    pub value: String,
    /// Container to set it in; all containers when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
}

/// Observed state of a claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxClaimStatus {
    /// `Ready` and `Finished` mirrored from the sandbox, and `ClaimExpired`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The sandbox bound to this claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<ClaimedSandbox>,
}

/// The sandbox a claim is bound to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimedSandbox {
    /// Name of the Sandbox.
    pub name: String,
    /// IPs of its pod.
    #[serde(default, rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<String>,
    /// The in-cluster DNS name of its Service, as the sandbox's `status.serviceFQDN` says.
    #[serde(
        default,
        rename = "serviceFQDN",
        skip_serializing_if = "Option::is_none"
    )]
    pub service_fqdn: Option<String>,
}
