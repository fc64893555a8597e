//! The `SandboxWarmPool` kind (`extensions.agents.x-k8s.io/v1beta1`): keeps a number of
//! pre-warmed sandboxes from a template ready for claims to adopt.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::LocalObjectReference;

/// Desired size and template of a warm pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "extensions.agents.x-k8s.io",
    version = "v1beta1",
    kind = "SandboxWarmPool",
    plural = "sandboxwarmpools",
    singular = "sandboxwarmpool",
    shortname = "swp",
    namespaced,
    status = "SandboxWarmPoolStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A pool of pre-warmed sandboxes made from one template, ready for claims to adopt.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(
        name = "Template",
        type_ = "string",
        json_path = ".spec.sandboxTemplateRef.name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxWarmPoolSpec {
    /// Number of unclaimed sandboxes to keep.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// The template pool members are made from.
    pub sandbox_template_ref: LocalObjectReference,
    /// How members made from an older version of the template are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<WarmPoolUpdateStrategy>,
    /// Seconds a member may stay not Ready before it is replaced (held instead while its pod
    /// is unschedulable); overrides the controller's setting for this pool, at least 30.
    /// Changing it does not make existing members stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30))]
    pub readiness_grace_period_seconds: Option<i32>,
}

fn default_replicas() -> i32 {
    1
}

/// How a warm pool replaces stale members.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarmPoolUpdateStrategy {
    /// The replacement strategy; defaults to `OnReplenish`.
    #[serde(default, rename = "type")]
    pub type_: WarmPoolUpdateStrategyType,
}

/// When stale warm pool members are replaced.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WarmPoolUpdateStrategyType {
    /// Stale members are replaced only as claims consume them.
    #[default]
    OnReplenish,
    /// Stale unclaimed members are deleted and recreated.
    Recreate,
}

/// Observed state of a warm pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxWarmPoolStatus {
    /// Number of unclaimed members.
    #[serde(default)]
    pub replicas: i32,
    /// Number of unclaimed members that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Label selector of the members, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
