//! Claims reconciled as a batch (the standalone driver, `ExtensionsConfig::claim_batch`): one
//! read of each pool, its template and its members for every claim of the batch, the members
//! handed out in order, and every adoption written at once through [`AdoptionWrites`] — on the
//! embedded store, one transaction and one fsync for the whole batch instead of three durable
//! writes in a row per claim and one member list per claim.
//!
//! The rules are [`plan`]'s, as for one claim; a claim that does not adopt (bound already,
//! cold, expired, waiting for its pool) goes through [`reconcile_claim`] after the batch's
//! adoptions are written, so a claim the pool ran out for sees the members taken and starts
//! cold, as it would alone.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::future::join_all;
use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{CONTROLLER_FIRST_OBSERVED_AT, SANDBOX_NAME};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{ObjectKey, Patch, Store, StoreError};
use serde_json::json;

use super::adopt::adoption_patch;
use super::plan::{Binding, ClaimObserved, ClaimStep, bound_name, plan};
use super::reconcile::{
    ClaimError, ClaimOutcome, never_reconciled, optional, pool_members, reconcile_claim,
};
use super::reservations::{Reservation, Reservations};
use super::status;
use super::writes::{Adoption, AdoptionStep, AdoptionWrites};
use crate::pool::controlled_by;
use crate::status::status_patch;

/// What one claim of a batch came to: `None` when the claim is gone.
pub type BatchResult = (ObjectKey, Result<Option<ClaimOutcome>, ClaimError>);

/// A claim of the batch about to adopt, with the member reserved for it.
struct Pending {
    key: ObjectKey,
    outcome: ClaimOutcome,
    reservation: Reservation,
    /// The member's version the adoption was planned on.
    member_version: Option<String>,
}

/// Reconciles the claims `keys` at time `now`: adoptions in one batch of writes, the others
/// one by one, at most `concurrency` at once. One result per key.
pub async fn reconcile_claims<S>(
    store: &S,
    reservations: &Reservations,
    keys: Vec<ObjectKey>,
    concurrency: usize,
    now: Timestamp,
) -> Vec<BatchResult>
where
    S: Store<Sandbox>
        + Store<SandboxTemplate>
        + Store<SandboxWarmPool>
        + Store<SandboxClaim>
        + AdoptionWrites,
{
    let claims = join_all(keys.iter().map(|k| Store::<SandboxClaim>::get(store, k))).await;
    let mut results = Vec::new();
    // Claims that may adopt, by pool; the rest go one by one.
    let mut by_pool: BTreeMap<ObjectKey, Vec<SandboxClaim>> = BTreeMap::new();
    let mut single = Vec::new();
    for (key, claim) in keys.into_iter().zip(claims) {
        match claim {
            Ok(c) if may_adopt(&c) => {
                let pool = ObjectKey::new(&key.namespace, &c.spec.warm_pool_ref.name);
                by_pool.entry(pool).or_default().push(c);
            }
            Ok(c) => single.push(c),
            Err(e) if e.is_not_found() => results.push((key, Ok(None))),
            Err(source) => results.push((key.clone(), Err(ClaimError::Read { key, source }))),
        }
    }
    let mut adoptions = Vec::new();
    let mut pending = Vec::new();
    for (pool, claims) in by_pool {
        match plan_pool(store, reservations, &pool, claims, now).await {
            Ok((planned, rest)) => {
                for (adoption, p) in planned {
                    adoptions.push(adoption);
                    pending.push(p);
                }
                single.extend(rest);
            }
            // Every claim of the pool failed on the same read.
            Err((claims, source)) => results.extend(claims.into_iter().map(|c| {
                let key = ObjectKey::of(&c);
                let source = StoreError::Unavailable {
                    message: source.to_string(),
                    source: None,
                };
                (key.clone(), Err(ClaimError::Read { key, source }))
            })),
        }
    }
    if !adoptions.is_empty() {
        metrics::histogram!("rouse_controller_claim_batch_adoptions")
            .record(adoptions.len() as f64);
    }
    let written = store.write_adoptions(adoptions).await;
    for (p, result) in pending.into_iter().zip(written) {
        results.push((p.key.clone(), finish(p, result)));
    }
    let rest = futures::stream::iter(single)
        .map(|claim| async move {
            let key = ObjectKey::of(&claim);
            (
                key,
                reconcile_claim(store, reservations, &claim, now)
                    .await
                    .map(Some),
            )
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    results.extend(rest);
    results
}

/// The outcome of one written adoption.
// The error is `reconcile_claim`'s, passed on as it is, once per claim: boxing it here only
// to unbox it in the driver would buy nothing.
#[allow(clippy::result_large_err)]
fn finish(
    p: Pending,
    result: Result<(), (AdoptionStep, StoreError)>,
) -> Result<Option<ClaimOutcome>, ClaimError> {
    let taken = match &result {
        // Re-owned (a failed status write comes after the re-own).
        Ok(()) | Err((AdoptionStep::Status, _)) => true,
        Err((AdoptionStep::Adopt, e)) => {
            matches!(e, StoreError::Conflict { .. } | StoreError::NotFound { .. })
        }
        Err((AdoptionStep::Annotate, _)) => false,
    };
    if taken {
        // That version of the member is gone: no claim should plan on it again.
        p.reservation.supersede(p.member_version.clone());
    }
    match result {
        Ok(()) => {
            metrics::counter!("rouse_controller_claims_bound_total", "launch" => "warm")
                .increment(1);
            Ok(Some(p.outcome))
        }
        // The claim was deleted meanwhile.
        Err((AdoptionStep::Annotate, e)) if e.is_not_found() => Ok(None),
        // The member changed or went since it was read: at once again, with a fresh list.
        Err((AdoptionStep::Adopt, StoreError::Conflict { .. } | StoreError::NotFound { .. })) => {
            metrics::counter!("rouse_controller_claim_adoption_conflicts_total").increment(1);
            Ok(Some(ClaimOutcome {
                requeue_after: Some(std::time::Duration::ZERO),
                ..ClaimOutcome::default()
            }))
        }
        Err((step, source)) => Err(ClaimError::Write {
            key: p.key,
            step: step.label(),
            source,
        }),
    }
}

/// Whether `claim` can be planned with the batch: not being deleted, and asking for no cold
/// start of its own (the plan decides the rest).
fn may_adopt(claim: &SandboxClaim) -> bool {
    claim.meta().deletion_timestamp.is_none()
        && claim.spec.env.is_empty()
        && claim.spec.volume_claim_templates.is_empty()
}

type Planned = (Vec<(Adoption, Pending)>, Vec<SandboxClaim>);

/// Plans the claims of one pool against one read of the pool, its template and its free
/// members: the adoptions, and the claims left to reconcile one by one.
async fn plan_pool<S>(
    store: &S,
    reservations: &Reservations,
    pool_key: &ObjectKey,
    claims: Vec<SandboxClaim>,
    now: Timestamp,
) -> Result<Planned, (Vec<SandboxClaim>, StoreError)>
where
    S: Store<Sandbox> + Store<SandboxTemplate> + Store<SandboxWarmPool> + Store<SandboxClaim>,
{
    let reads = async {
        let pool: Option<SandboxWarmPool> =
            optional(Store::<SandboxWarmPool>::get(store, pool_key).await)?;
        let template: Option<SandboxTemplate> = match &pool {
            Some(p) => optional(
                Store::<SandboxTemplate>::get(
                    store,
                    &ObjectKey::new(&pool_key.namespace, &p.spec.sandbox_template_ref.name),
                )
                .await,
            )?,
            None => None,
        };
        // A claim never reconciled owns no sandbox yet (every pass stamps or names one on the
        // claim before it binds it), and the claims were just read from the store: a burst
        // of new claims costs no read of a sandbox named like each.
        let bound = join_all(claims.iter().map(|c| {
            let key = ObjectKey::new(&pool_key.namespace, bound_name(c));
            let new = never_reconciled(c);
            async move {
                if new {
                    return Ok(None);
                }
                optional(Store::<Sandbox>::get(store, &key).await)
            }
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, StoreError>>()?;
        let members = match (&pool, claims.first()) {
            (Some(_), Some(first)) => pool_members(store, reservations, first).await?.members,
            _ => Vec::new(),
        };
        Ok((pool, template, bound, members))
    };
    let (pool, template, bound, members) = match reads.await {
        Ok(read) => read,
        Err(e) => return Err((claims, e)),
    };
    // The members not handed out yet in this batch; each pick takes one out (moved, never
    // copied: a burst plans every claim against the same list).
    let mut free = members;
    let (mut planned, mut rest) = (Vec::new(), Vec::new());
    for (claim, sandbox) in claims.into_iter().zip(bound) {
        let uid = claim.uid().unwrap_or_default();
        let binding = match &sandbox {
            Some(s) if controlled_by(s, &uid) => Binding::Ours(s),
            // Bound, lost, or named like a sandbox it does not own: one by one.
            Some(_) => Binding::Unbound,
            None if claim
                .status
                .as_ref()
                .and_then(|s| s.sandbox.as_ref())
                .is_some() =>
            {
                Binding::Missing
            }
            None => Binding::Unbound,
        };
        let observed = ClaimObserved {
            pool: pool.as_ref(),
            template: template.as_ref(),
            binding,
            members: &free,
        };
        let plan = plan(&claim, &observed, now);
        let ClaimStep::Adopt(candidates) = &plan.step else {
            rest.push(claim);
            continue;
        };
        let picked = candidates.iter().find_map(|name| {
            let index = free
                .iter()
                .position(|m| m.meta().name.as_ref() == Some(name))?;
            let reservation = reservations.try_reserve(ObjectKey::of(&free[index]))?;
            Some((index, reservation))
        });
        let Some((index, reservation)) = picked else {
            rest.push(claim);
            continue;
        };
        let member = free.swap_remove(index);
        let adoption = adoption_of(&claim, template.as_ref(), &member, now);
        let pending = Pending {
            key: ObjectKey::of(&claim),
            outcome: ClaimOutcome {
                bound: Some((member.name_any(), true)),
                deleted: false,
                requeue_after: plan.requeue_after,
            },
            reservation,
            member_version: member.resource_version(),
        };
        planned.push((adoption, pending));
    }
    Ok((planned, rest))
}

/// The writes that hand `member` to `claim`: the same as one reconcile makes, the status
/// computed ahead from the member (an adoption changes its metadata and spec, not its status).
fn adoption_of(
    claim: &SandboxClaim,
    template: Option<&SandboxTemplate>,
    member: &Sandbox,
    now: Timestamp,
) -> Adoption {
    let key = ObjectKey::of(claim);
    let mut annotations = serde_json::Map::new();
    annotations.insert(SANDBOX_NAME.to_owned(), json!(member.name_any()));
    if !claim
        .annotations()
        .contains_key(CONTROLLER_FIRST_OBSERVED_AT)
    {
        annotations.insert(
            CONTROLLER_FIRST_OBSERVED_AT.to_owned(),
            json!(now.to_string()),
        );
    }
    let annotate = Patch::merge(json!({"metadata": {"annotations": annotations}}))
        .unwrap_or(Patch::Merge(serde_json::Map::new()));
    let previous = claim.status.clone().unwrap_or_default();
    Adoption {
        claim: key,
        annotate,
        member: ObjectKey::of(member),
        adopt: adoption_patch(claim, template, member),
        status: status_patch(&previous, &status::bound(claim, member, now)),
    }
}
