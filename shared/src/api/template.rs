//! The `SandboxTemplate` kind (`extensions.agents.x-k8s.io/v1beta1`): a reusable sandbox
//! blueprint for warm pools and claims, with the network policy its sandboxes get.

use k8s_openapi::api::networking::v1::{NetworkPolicyEgressRule, NetworkPolicyIngressRule};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MemorySharing, PersistentVolumeClaimTemplate, PodTemplate, Suspension};

/// A sandbox blueprint and the policies that govern sandboxes made from it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "extensions.agents.x-k8s.io",
    version = "v1beta1",
    kind = "SandboxTemplate",
    plural = "sandboxtemplates",
    singular = "sandboxtemplate",
    shortname = "sandboxtemplate",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    doc = "A reusable sandbox blueprint for warm pools and claims.",
    printcolumn(
        name = "Network Policy",
        type_ = "string",
        json_path = ".spec.networkPolicyManagement"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxTemplateSpec {
    /// The pod each sandbox runs.
    pub pod_template: PodTemplate,
    /// Persistent volume claims created for each sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaimTemplate>,
    /// Whether sandboxes get a headless Service (see `Sandbox.spec.service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<bool>,
    /// Ingress and egress rules of the managed NetworkPolicy; secure defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
    /// Whether Rouse manages the template's NetworkPolicy; defaults to `Managed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Managed"))]
    pub network_policy_management: Option<NetworkPolicyManagement>,
    /// May a claim's `env` add to or override the template's; defaults to `Disallowed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Disallowed"))]
    pub env_vars_injection_policy: Option<InjectionPolicy>,
    /// May a claim's `volumeClaimTemplates` add to or override the template's; defaults to
    /// `Disallowed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Disallowed"))]
    pub volume_claim_templates_policy: Option<InjectionPolicy>,
    /// Idle suspension, copied to sandboxes made from this template (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
    /// Memory sharing, copied to sandboxes made from this template; defaults to `None`
    /// (Rouse addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub memory_sharing: Option<MemorySharing>,
}

/// The rules of a template's managed NetworkPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Allowed inbound traffic; empty allows none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<NetworkPolicyIngressRule>,
    /// Allowed outbound traffic; empty allows none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<NetworkPolicyEgressRule>,
}

/// Who owns a template's NetworkPolicy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum NetworkPolicyManagement {
    /// Rouse keeps one NetworkPolicy per template, `<template>-network-policy`.
    #[default]
    Managed,
    /// Rouse creates none; the operator provides their own.
    Unmanaged,
}

/// Whether a claim may add to, or override, what its template sets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InjectionPolicy {
    /// The claim may not set it.
    #[default]
    Disallowed,
    /// The claim may add entries the template does not have.
    Allowed,
    /// The claim may add entries and replace the template's entries of the same name.
    Overrides,
}
