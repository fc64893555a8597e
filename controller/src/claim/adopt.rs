//! Re-owning a warm pool member for a claim: the claim names the member (an annotation,
//! conditional on the claim as read), then one merge patch of the Sandbox, conditional on
//! the resourceVersion the claim saw, so that of two claims racing for one member exactly one
//! wins and the other moves on to the next.

use kube::ResourceExt;
use rouse_shared::api::keys::{
    ADOPTABLE, CONTROLLER_FIRST_OBSERVED_AT, LAUNCH_TYPE, LAUNCH_TYPE_WARM, SANDBOX_NAME,
    SANDBOX_TEMPLATE_HASH, WARM_POOL_SANDBOX,
};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, controller_ref};
use rouse_shared::store::Patch;
use rouse_shared::store::{ObjectKey, Store, StoreError};
use serde_json::{Map, Value, json};

use super::plan::propagated;
use super::reservations::Reservations;

/// What trying a claim's candidates came to.
#[derive(Debug)]
pub(super) enum Adopted {
    /// This member, re-owned by the claim.
    Member(Box<Sandbox>),
    /// Every candidate was taken by another claim first.
    AllTaken,
    /// The claim changed since it was read: read it again before binding.
    StaleClaim,
}

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

/// Tries the candidates in order for `claim`, annotating it with each before the re-own (and
/// with the `first_observed` stamp when it does not carry one yet).
pub(super) async fn adopt<S>(
    store: &S,
    reservations: &Reservations,
    claim: &mut SandboxClaim,
    template: Option<&SandboxTemplate>,
    members: &[Sandbox],
    candidates: &[String],
    first_observed: Option<&str>,
) -> Result<Adopted, (&'static str, StoreError)>
where
    S: Store<Sandbox> + Store<SandboxClaim>,
{
    let key = ObjectKey::of(&*claim);
    for name in candidates {
        let Some(member) = members.iter().find(|m| &m.name_any() == name) else {
            continue;
        };
        // Picked from a read another claim's adoption has overtaken since.
        if reservations.is_superseded(member) {
            continue;
        }
        let Some(reservation) = reservations.try_reserve(ObjectKey::of(member)) else {
            continue;
        };
        let stamp = first_observed.filter(|_| {
            !claim
                .annotations()
                .contains_key(CONTROLLER_FIRST_OBSERVED_AT)
        });
        if claim.annotations().get(SANDBOX_NAME) != Some(name) || stamp.is_some() {
            let mut annotations = Map::new();
            annotations.insert(SANDBOX_NAME.to_owned(), Value::from(name.as_str()));
            if let Some(stamp) = stamp {
                annotations.insert(CONTROLLER_FIRST_OBSERVED_AT.to_owned(), Value::from(stamp));
            }
            let mut patch = Patch::merge(json!({"metadata": {"annotations": annotations}}))
                .unwrap_or(Patch::Merge(Map::new()));
            // Only on the claim as read: an older read than the stored one may miss that it
            // is bound already.
            if let Some(rv) = claim.resource_version() {
                patch = patch.with_resource_version(&rv);
            }
            let annotated = Store::<SandboxClaim>::patch(store, &key, &patch).await;
            if matches!(annotated, Ok(_) | Err(StoreError::Conflict { .. })) {
                reservations.supersede_claim(claim);
            }
            *claim = match annotated {
                Ok(annotated) => annotated,
                Err(StoreError::Conflict { .. }) => return Ok(Adopted::StaleClaim),
                Err(e) => return Err(("annotate", e)),
            };
        }
        let patch = adoption_patch(claim, template, member);
        let result = Store::<Sandbox>::patch(store, &ObjectKey::of(member), &patch).await;
        if matches!(
            result,
            Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound { .. })
        ) {
            // Taken now (by this claim or another): no reconcile should try this view again.
            reservation.supersede(member.resource_version());
        }
        match result {
            Ok(adopted) => return Ok(Adopted::Member(Box::new(adopted))),
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                metrics::counter!("rouse_controller_claim_adoption_conflicts_total").increment(1);
            }
            Err(e) => return Err(("adopt", e)),
        }
    }
    Ok(Adopted::AllTaken)
}
