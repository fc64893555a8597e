//! One reconcile of one claim, the same in both modes: read the pool, template, bound sandbox
//! and members → plan → adopt (annotate the claim, then re-own the member under a
//! resourceVersion precondition, moving on to the next member on a conflict), create, or
//! delete → one status write.
//!
//! Restart safety: the claim names a member (annotation) before taking it, and the member
//! names the claim (controller ownerReference) once taken, so a reconcile cut short anywhere
//! finds on the next pass either the member still in the pool (and tries again) or the member
//! it owns. A member is taken by one conditional write, so no two claims ever own it.

use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{CONTROLLER_FIRST_OBSERVED_AT, SANDBOX_NAME};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{DeleteParams, ObjectKey, Patch, Store, StoreError};
use serde_json::json;
use tracing::debug;

use super::adopt::{Adopted, adopt};
use super::plan::{Binding, ClaimObserved, ClaimStep, bound_name, plan};
use super::reservations::{FreeMembers, Reservations, free_members};
use super::status::{self, reason};
use crate::pool::controlled_by;
use crate::status::status_patch;
use crate::template::refusal::INVALID_CONFIGURATION;

/// Rounds of (list members, try each) before a claim gives up adopting for this pass; every
/// lost round means other claims won members, so the pool empties or the claim wins.
const ADOPTION_ROUNDS: usize = 8;

/// Retry delay after adoption rounds ran out (every member raced away).
const ADOPTION_RETRY: Duration = Duration::from_millis(50);

/// When to look again at a claim handed over at a version this process wrote over: the
/// newer version's watch event normally comes first.
const SUPERSEDED_RECHECK: Duration = Duration::from_secs(1);

/// Passes over a claim that changed under it before giving up for now. A watch cache hands a
/// reconcile the claim as it was a moment ago; binding from such a read could bind a claim
/// that is already bound a second time, so it is read again first.
const STALE_PASSES: usize = 3;

/// Why a claim reconcile failed; the caller retries with a backoff.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Reading the pool, template or sandboxes failed.
    #[error("read for claim {key}: {source}")]
    Read {
        /// The claim.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Writing the claim or its sandbox failed.
    #[error("{step} for claim {key}: {source}")]
    Write {
        /// The claim.
        key: ObjectKey,
        /// Which write (`annotate`, `adopt`, `create`, `delete_claim`, `delete_sandbox`,
        /// `patch_status`).
        step: &'static str,
        /// What failed.
        #[source]
        source: StoreError,
    },
}

impl ClaimError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ClaimError::Read { .. } => "read",
            ClaimError::Write { step, .. } => step,
        }
    }

    /// Whether retrying may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClaimError::Read { source, .. } | ClaimError::Write { source, .. } => {
                source.is_retryable()
            }
        }
    }
}

/// What a claim reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// The sandbox bound by this pass, and whether it was adopted warm.
    pub bound: Option<(String, bool)>,
    /// The claim itself was deleted (expired with a `Delete*` policy).
    pub deleted: bool,
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// Reconciles one claim (the stored object) at time `now`.
///
/// `reservations` are the members other reconciles of this process are adopting right now;
/// they are left to them.
pub async fn reconcile_claim<S>(
    store: &S,
    reservations: &Reservations,
    claim: &SandboxClaim,
    now: Timestamp,
) -> Result<ClaimOutcome, ClaimError>
where
    S: Store<Sandbox> + Store<SandboxTemplate> + Store<SandboxWarmPool> + Store<SandboxClaim>,
{
    let mut claim = claim.clone();
    for _ in 0..STALE_PASSES {
        match reconcile_pass(store, reservations, &claim, now).await? {
            Pass::Done(outcome) => return Ok(outcome),
            Pass::Stale => {
                let key = ObjectKey::of(&claim);
                claim = match Store::<SandboxClaim>::get(store, &key).await {
                    Ok(fresh) => fresh,
                    // Deleted meanwhile: nothing left to do.
                    Err(e) if e.is_not_found() => return Ok(ClaimOutcome::default()),
                    Err(source) => return Err(ClaimError::Read { key, source }),
                };
            }
        }
    }
    debug!(claim.key = %ObjectKey::of(&claim), "the claim kept changing under its binding; trying again");
    Ok(ClaimOutcome {
        requeue_after: Some(ADOPTION_RETRY),
        ..ClaimOutcome::default()
    })
}

/// How one pass over a claim ended.
enum Pass {
    /// Reconciled.
    Done(ClaimOutcome),
    /// The claim read is older than the stored one, and about to bind: read it again first.
    Stale,
}

/// One pass over `claim` as read; [`Pass::Stale`] before binding from an old read of it.
async fn reconcile_pass<S>(
    store: &S,
    reservations: &Reservations,
    claim: &SandboxClaim,
    now: Timestamp,
) -> Result<Pass, ClaimError>
where
    S: Store<Sandbox> + Store<SandboxTemplate> + Store<SandboxWarmPool> + Store<SandboxClaim>,
{
    let key = ObjectKey::of(claim);
    let read = |source| ClaimError::Read {
        key: key.clone(),
        source,
    };
    let write = |step, source| ClaimError::Write {
        key: key.clone(),
        step,
        source,
    };
    // A version this process wrote over: planning from it would bind a claim perhaps bound
    // already, only to be refused. The newer version is on its way.
    if reservations.is_claim_superseded(claim) {
        metrics::counter!("rouse_controller_claim_stale_reads_skipped_total").increment(1);
        return Ok(Pass::Done(ClaimOutcome {
            requeue_after: Some(SUPERSEDED_RECHECK),
            ..ClaimOutcome::default()
        }));
    }
    let uid = claim.uid().unwrap_or_default();
    // Written with the first write this pass makes: the adoption's annotation carries it, so
    // a warm binding costs no request of its own for it.
    let mut stamp = first_observed_stamp(claim, now);

    let pool: Option<SandboxWarmPool> = optional(
        Store::<SandboxWarmPool>::get(
            store,
            &ObjectKey::new(&key.namespace, &claim.spec.warm_pool_ref.name),
        )
        .await,
    )
    .map_err(read)?;
    let template: Option<SandboxTemplate> = match &pool {
        Some(p) => optional(
            Store::<SandboxTemplate>::get(
                store,
                &ObjectKey::new(&key.namespace, &p.spec.sandbox_template_ref.name),
            )
            .await,
        )
        .map_err(read)?,
        None => None,
    };
    let name = bound_name(claim);
    // A claim never reconciled (not stamped, no status, no sandbox named) cannot own a
    // sandbox yet: every pass stamps it before it creates or adopts one. A stale read of a
    // claim stamped since is caught by the conditional annotation or the current-claim check
    // before it binds.
    let sandbox: Option<Sandbox> = if never_reconciled(claim) {
        None
    } else {
        optional(Store::<Sandbox>::get(store, &ObjectKey::new(&key.namespace, &name)).await)
            .map_err(read)?
    };
    let was_bound = claim
        .status
        .as_ref()
        .and_then(|s| s.sandbox.as_ref())
        .is_some_and(|s| s.name == name);
    let binding = match &sandbox {
        Some(s) if controlled_by(s, &uid) => Binding::Ours(s),
        Some(_) => Binding::Unbound,
        None if was_bound => Binding::Missing,
        None => Binding::Unbound,
    };
    let wants_warm = claim.spec.env.is_empty() && claim.spec.volume_claim_templates.is_empty();
    let mut free = match (&binding, &pool) {
        (Binding::Unbound, Some(_)) if wants_warm => pool_members(store, reservations, claim)
            .await
            .map_err(read)?,
        _ => FreeMembers::default(),
    };

    let mut claim = claim.clone();
    for _ in 0..ADOPTION_ROUNDS {
        let observed = ClaimObserved {
            pool: pool.as_ref(),
            template: template.as_ref(),
            binding,
            members: &free.members,
        };
        let plan = plan(&claim, &observed, now);
        // An adoption that lost its member may have written the stamp already.
        stamp = stamp.filter(|_| {
            !claim
                .annotations()
                .contains_key(CONTROLLER_FIRST_OBSERVED_AT)
        });
        // Whether `claim` is known to be the stored claim (a conditional write of it just
        // succeeded), so a cold start need not read it again to be sure.
        let mut current = false;
        if let Some(annotation) = stamp.take_if(|_| !matches!(plan.step, ClaimStep::Adopt(_))) {
            let stamped = stamp_first_observed(store, &claim, annotation).await;
            if matches!(stamped, Ok(_) | Err(StoreError::Conflict { .. })) {
                reservations.supersede_claim(&claim);
            }
            claim = match stamped {
                Ok(claim) => claim,
                // The plan was made from an older read than the stored claim, which may be
                // bound by now: plan again from the stored one.
                Err(StoreError::Conflict { .. }) => return Ok(Pass::Stale),
                // Deleted meanwhile: nothing left to do.
                Err(e) if e.is_not_found() => return Ok(Pass::Done(ClaimOutcome::default())),
                Err(e) => return Err(write("annotate", e)),
            };
            current = true;
        }
        let mut outcome = ClaimOutcome {
            requeue_after: plan.requeue_after,
            ..ClaimOutcome::default()
        };
        let status = match plan.step {
            ClaimStep::None => plan.status,
            ClaimStep::DeleteClaim(propagation) => {
                let params = DeleteParams {
                    uid: Some(uid.clone()),
                    propagation: Some(propagation),
                    ..DeleteParams::default()
                };
                match Store::<SandboxClaim>::delete(store, &key, &params).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(write("delete_claim", e)),
                }
                outcome.deleted = true;
                return Ok(Pass::Done(outcome));
            }
            ClaimStep::DeleteSandbox { name, uid } => {
                let params = DeleteParams {
                    uid,
                    ..DeleteParams::default()
                };
                match Store::<Sandbox>::delete(
                    store,
                    &ObjectKey::new(&key.namespace, &name),
                    &params,
                )
                .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(write("delete_sandbox", e)),
                }
                plan.status
            }
            // The only Ready members are being adopted by other reconciles right now: one of
            // those may fail and free its member, so wait for them rather than start cold.
            ClaimStep::Create(_) if free.contended => {
                return Ok(Pass::Done(ClaimOutcome {
                    requeue_after: Some(ADOPTION_RETRY),
                    ..ClaimOutcome::default()
                }));
            }
            ClaimStep::Create(sandbox) => {
                // A cold start from an old read of a claim that is bound by now would give it
                // a second sandbox.
                if !current && !is_current(store, &claim).await.map_err(read)? {
                    return Ok(Pass::Stale);
                }
                let created = match Store::<Sandbox>::create(store, &sandbox).await {
                    Ok(created) => created,
                    Err(StoreError::AlreadyExists { .. }) => {
                        Store::<Sandbox>::get(store, &ObjectKey::of(sandbox.as_ref()))
                            .await
                            .map_err(read)?
                    }
                    // The API server refuses this sandbox whatever the retry (e.g. a name too
                    // long for its Service): say so and stop, as upstream does, rather than
                    // retrying it forever.
                    Err(StoreError::Invalid { message, .. }) => {
                        let status = status::failed(
                            &claim,
                            INVALID_CONFIGURATION,
                            format!("the sandbox for this claim is invalid: {message}"),
                            now,
                        );
                        write_status(store, reservations, &key, &claim, &status)
                            .await
                            .map_err(|e| write("patch_status", e))?;
                        return Ok(Pass::Done(outcome));
                    }
                    Err(e) => return Err(write("create", e)),
                };
                if controlled_by(&created, &uid) {
                    outcome.bound = Some((created.name_any(), false));
                    status::bound(&claim, &created, now)
                } else {
                    status::failed(
                        &claim,
                        reason::RECONCILER_ERROR,
                        format!(
                            "Sandbox {:?} exists and is not controlled by this claim",
                            created.name_any()
                        ),
                        now,
                    )
                }
            }
            ClaimStep::Adopt(candidates) => {
                match adopt(
                    store,
                    reservations,
                    &mut claim,
                    template.as_ref(),
                    &free.members,
                    &candidates,
                    stamp.as_deref(),
                )
                .await
                {
                    Ok(Adopted::Member(adopted)) => {
                        outcome.bound = Some((adopted.name_any(), true));
                        metrics::counter!("rouse_controller_claims_bound_total", "launch" => "warm")
                            .increment(1);
                        status::bound(&claim, &adopted, now)
                    }
                    Ok(Adopted::StaleClaim) => return Ok(Pass::Stale),
                    Ok(Adopted::AllTaken) => {
                        // Every member tried was taken by another claim: look again.
                        free = pool_members(store, reservations, &claim)
                            .await
                            .map_err(read)?;
                        continue;
                    }
                    Err((step, e)) => return Err(write(step, e)),
                }
            }
        };
        if matches!(outcome.bound, Some((_, false))) {
            metrics::counter!("rouse_controller_claims_bound_total", "launch" => "cold")
                .increment(1);
        }
        write_status(store, reservations, &key, &claim, &status)
            .await
            .map_err(|e| write("patch_status", e))?;
        return Ok(Pass::Done(outcome));
    }
    debug!(claim.key = %key, "every warm member raced away; trying again");
    Ok(Pass::Done(ClaimOutcome {
        requeue_after: Some(ADOPTION_RETRY),
        ..ClaimOutcome::default()
    }))
}

/// The `controller-first-observed-at` annotation a claim that does not carry it yet (and is
/// not being deleted) gets: `now` with nanoseconds, once, as upstream does, the start of the
/// claim's startup latency for whoever reads it. RFC 3339 in UTC, the fraction kept (as Go's
/// RFC3339Nano writes it).
fn first_observed_stamp(claim: &SandboxClaim, now: Timestamp) -> Option<String> {
    let stamped = claim
        .annotations()
        .contains_key(CONTROLLER_FIRST_OBSERVED_AT);
    (claim.meta().deletion_timestamp.is_none() && !stamped).then(|| now.to_string())
}

/// Whether no pass over `claim` has written anything yet: no first-observed stamp, no status,
/// no sandbox named by annotation.
pub(super) fn never_reconciled(claim: &SandboxClaim) -> bool {
    claim.status.is_none()
        && !claim
            .annotations()
            .contains_key(CONTROLLER_FIRST_OBSERVED_AT)
        && !claim.annotations().contains_key(SANDBOX_NAME)
}

/// Writes the first-observed `stamp` on the claim, only if it is still the claim as read (a
/// conflict otherwise); returns the claim as stored.
async fn stamp_first_observed<S: Store<SandboxClaim>>(
    store: &S,
    claim: &SandboxClaim,
    stamp: String,
) -> Result<SandboxClaim, StoreError> {
    let mut patch = Patch::merge(json!({"metadata": {"annotations": {
        CONTROLLER_FIRST_OBSERVED_AT: stamp,
    }}}))
    .unwrap_or(Patch::Merge(serde_json::Map::new()));
    // Unconditional, the write would hand back the stored claim, perhaps bound since this
    // pass read it, and the pass would go on from a plan made for an unbound one.
    if let Some(rv) = claim.resource_version() {
        patch = patch.with_resource_version(&rv);
    }
    Store::<SandboxClaim>::patch(store, &ObjectKey::of(claim), &patch).await
}

/// The members of the claim's pool it may try (see [`free_members`]).
pub(super) async fn pool_members<S: Store<Sandbox>>(
    store: &S,
    reservations: &Reservations,
    claim: &SandboxClaim,
) -> Result<FreeMembers, StoreError> {
    let namespace = claim.namespace().unwrap_or_else(|| "default".into());
    free_members(
        store,
        reservations,
        &namespace,
        &claim.spec.warm_pool_ref.name,
    )
    .await
}

/// Whether `claim` is the claim as stored (a watch cache may hand out an older one).
async fn is_current<S: Store<SandboxClaim>>(
    store: &S,
    claim: &SandboxClaim,
) -> Result<bool, StoreError> {
    match Store::<SandboxClaim>::get(store, &ObjectKey::of(claim)).await {
        Ok(stored) => Ok(stored.resource_version() == claim.resource_version()),
        // Deleted meanwhile: the next pass finds it gone.
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `status` over the claim's as read, if it differs.
async fn write_status<S: Store<SandboxClaim>>(
    store: &S,
    reservations: &Reservations,
    key: &ObjectKey,
    claim: &SandboxClaim,
    status: &rouse_shared::api::SandboxClaimStatus,
) -> Result<(), StoreError> {
    let previous = claim.status.clone().unwrap_or_default();
    if let Some(patch) = status_patch(&previous, status) {
        match store.patch_status(key, &patch).await {
            Ok(_) => reservations.supersede_claim(claim),
            // Deleted meanwhile: nothing left to describe.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn optional<K>(result: Result<K, StoreError>) -> Result<Option<K>, StoreError> {
    match result {
        Ok(k) => Ok(Some(k)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

impl ClaimOutcome {
    /// True when this pass bound a sandbox adopted from the pool.
    pub fn warm(&self) -> bool {
        matches!(self.bound, Some((_, true)))
    }
}
