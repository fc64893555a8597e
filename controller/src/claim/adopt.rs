//! Re-owning a warm pool member for a claim: one merge patch of the Sandbox, conditional on
//! the resourceVersion the claim saw, so that of two claims racing for one member exactly one
//! wins and the other moves on to the next.

use kube::ResourceExt;
use rouse_shared::api::keys::{
    ADOPTABLE, LAUNCH_TYPE, LAUNCH_TYPE_WARM, SANDBOX_TEMPLATE_HASH, WARM_POOL_SANDBOX,
};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, controller_ref};
use rouse_shared::store::Patch;
use serde_json::{Map, Value, json};

use super::plan::propagated;

/// The patch that hands `member` over to `claim`: the claim becomes its only (controller)
/// owner, the warm pool labels go, `launch-type=warm`, the claim's labels and annotations and
/// its `additionalPodMetadata` are merged in, and the template's idle suspension (held back
/// while the member waited in the pool) applies from now on. Fails with a conflict unless the
/// member still has the resourceVersion it was read with.
pub fn adoption_patch(
    claim: &SandboxClaim,
    template: Option<&SandboxTemplate>,
    member: &Sandbox,
) -> Patch {
    let mut labels = Map::new();
    for key in [WARM_POOL_SANDBOX, SANDBOX_TEMPLATE_HASH, ADOPTABLE] {
        if member.labels().contains_key(key) {
            labels.insert(key.to_owned(), Value::Null);
        }
    }
    labels.insert(LAUNCH_TYPE.to_owned(), Value::from(LAUNCH_TYPE_WARM));
    for (k, v) in propagated(claim.labels()) {
        labels.insert(k, Value::from(v));
    }
    let annotations: Map<String, Value> = propagated(claim.annotations())
        .into_iter()
        .map(|(k, v)| (k, Value::from(v)))
        .collect();
    let owners: Vec<Value> = controller_ref(claim)
        .and_then(|o| serde_json::to_value(o).ok())
        .into_iter()
        .collect();
    let extra = &claim.spec.additional_pod_metadata;
    let mut root = json!({
        "metadata": {
            "labels": labels,
            "ownerReferences": owners,
        },
        "spec": {
            "podTemplate": {"metadata": {
                "labels": extra.labels,
                "annotations": extra.annotations,
            }},
        },
    });
    if !annotations.is_empty() {
        root["metadata"]["annotations"] = Value::Object(annotations);
    }
    if let Some(suspension) = template.and_then(|t| t.spec.suspension.as_ref()) {
        root["spec"]["suspension"] = serde_json::to_value(suspension).unwrap_or(Value::Null);
    }
    let patch = Patch::merge(root).unwrap_or(Patch::Merge(Map::new()));
    match member.resource_version() {
        Some(rv) => patch.with_resource_version(&rv),
        None => patch,
    }
}
