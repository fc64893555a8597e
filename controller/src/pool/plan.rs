//! The warm pool as one pure function: from the pool, its template, its members, the writes
//! still in flight and the time, which members to create and delete and the status to write.
//!
//! Rules (docs/controller.md, "Warm pools"):
//! - Members are the Sandboxes the pool controls (controller ownerReference with its uid),
//!   labelled `agents.x-k8s.io/warm-pool-sandbox=<hash of the pool name>`; a claim that
//!   adopts one removes both, so it stops counting.
//! - The count is the live members (not being deleted, no delete in flight) plus creates in
//!   flight, so a cache that has not seen its own writes yet never over-creates.
//! - `Recreate`: stale members are deleted (and so replaced); `OnReplenish`: they stay until
//!   claims consume them. As upstream decides it, a member is stale when it was made from
//!   another template (the pool now names a different one, even with an identical spec), or
//!   when its pod spec, volume claim templates (names and specs), Service or memory sharing
//!   differ from what the template makes now; metadata-only changes (labels, annotations)
//!   never make a member stale.
//! - A member not Ready for longer than the grace period (since creation, or since it last
//!   stopped being Ready) is deleted and replaced, unless its pod is unschedulable
//!   (`PodScheduled=False/Unschedulable`: a new one would be too), which is looked at again
//!   every [`UNSCHEDULABLE_RECHECK`]. Before the deadline: requeue at it. The grace period is
//!   the pool's `spec.readinessGracePeriodSeconds`, else the controller's.
//! - Too few: create the difference (the adapter creates in growing batches). Too many:
//!   delete the surplus, not-Ready members first, then the newest.
//! - No template: nothing is created; the status still counts the members.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use kube::core::{Expression, Selector};
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{
    SANDBOX_TEMPLATE_HASH, SANDBOX_TEMPLATE_REF, SANDBOX_TEMPLATE_REF_HASH, WARM_POOL_SANDBOX,
    condition, template_ref,
};
use rouse_shared::api::{
    Sandbox, SandboxTemplate, SandboxWarmPool, SandboxWarmPoolStatus, WarmPoolUpdateStrategyType,
    controller_ref,
};
use rouse_shared::names::sandbox_name_hash;

use crate::template::{sandbox_spec, template_hash};

/// How often a pool holding unschedulable members past their grace period looks again
/// (upstream's default).
pub const UNSCHEDULABLE_RECHECK: Duration = Duration::from_secs(60);

/// What a pool reconcile sees besides the pool itself.
#[derive(Debug, Clone, Copy)]
pub struct PoolObserved<'a> {
    /// The pool's template, if it exists.
    pub template: Option<&'a SandboxTemplate>,
    /// The Sandboxes the pool controls.
    pub members: &'a [Sandbox],
    /// Creates issued whose result the member list does not show yet.
    pub creates_in_flight: usize,
    /// Members deleted whose deletion the member list does not show yet.
    pub deletes_in_flight: &'a BTreeSet<String>,
}

/// What to do for one pool, and the status to write.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolPlan {
    /// Members to create, each from this prototype (`generateName: <pool>-`).
    pub create: usize,
    /// The prototype of new members; `None` without a template.
    pub prototype: Option<Sandbox>,
    /// Members to delete, by name, with the uid they must still have.
    pub delete: Vec<(String, Option<String>)>,
    /// The status to write when it differs.
    pub status: SandboxWarmPoolStatus,
    /// Reconcile again after this long (a member's stuck deadline).
    pub requeue_after: Option<Duration>,
}

/// The label selector of a pool's members, as `status.selector` writes it.
pub fn member_selector_string(pool_name: &str) -> String {
    format!("{WARM_POOL_SANDBOX}={}", sandbox_name_hash(pool_name))
}

/// The label selector of a pool's members.
pub fn member_selector(pool_name: &str) -> Selector {
    Selector::from_iter([Expression::Equal(
        WARM_POOL_SANDBOX.to_owned(),
        sandbox_name_hash(pool_name),
    )])
}

/// True when the sandbox is controlled by the object with this uid.
pub fn controlled_by(sandbox: &Sandbox, uid: &str) -> bool {
    sandbox
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// True when the sandbox's `Ready` condition is `True`.
pub fn is_ready(sandbox: &Sandbox) -> bool {
    sandbox.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == condition::READY && c.status == "True")
    })
}

/// A new member of `pool` made from `template`.
pub fn member_prototype(pool: &SandboxWarmPool, template: &SandboxTemplate) -> Sandbox {
    let template_name = template.name_any();
    let mut spec = sandbox_spec(&template_name, &template.spec);
    // Members wait for claims: idle suspension starts once adopted (the claim copies it back).
    spec.suspension = None;
    let mut sandbox = Sandbox::new("", spec);
    let meta = &mut sandbox.metadata;
    meta.name = None;
    meta.generate_name = Some(format!("{}-", pool.name_any()));
    meta.namespace = pool.namespace();
    meta.labels = Some(
        [
            (WARM_POOL_SANDBOX, sandbox_name_hash(&pool.name_any())),
            (SANDBOX_TEMPLATE_REF_HASH, sandbox_name_hash(&template_name)),
            (SANDBOX_TEMPLATE_HASH, template_hash(&template.spec)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    );
    meta.annotations = Some([(SANDBOX_TEMPLATE_REF.to_owned(), template_name)].into());
    meta.owner_references = controller_ref(pool).map(|o| vec![o]);
    sandbox
}

/// Plans one reconcile of `pool`; see the module documentation for the rules.
pub fn plan(
    pool: &SandboxWarmPool,
    observed: &PoolObserved<'_>,
    stuck_after: Duration,
    now: Timestamp,
) -> PoolPlan {
    let replicas = usize::try_from(pool.spec.replicas.max(0)).unwrap_or(0);
    let live: Vec<&Sandbox> = observed
        .members
        .iter()
        .filter(|s| s.meta().deletion_timestamp.is_none())
        .filter(|s| !observed.deletes_in_flight.contains(&s.name_any()))
        .collect();
    let status = SandboxWarmPoolStatus {
        replicas: i32::try_from(live.len()).unwrap_or(i32::MAX),
        ready_replicas: i32::try_from(live.iter().filter(|s| is_ready(s)).count())
            .unwrap_or(i32::MAX),
        selector: Some(member_selector_string(&pool.name_any())),
        observed_generation: pool.meta().generation,
    };
    let mut out = PoolPlan {
        status,
        ..PoolPlan::default()
    };
    if pool.meta().deletion_timestamp.is_some() {
        return out;
    }

    let current = observed
        .template
        .map(|t| (t, template_hash(&t.spec), member_prototype(pool, t)));
    let recreate = pool
        .spec
        .update_strategy
        .as_ref()
        .is_some_and(|s| s.type_ == WarmPoolUpdateStrategyType::Recreate);
    let grace = pool
        .spec
        .readiness_grace_period_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(stuck_after, Duration::from_secs);
    let mut doomed: BTreeSet<String> = BTreeSet::new();
    let mut deadlines: Vec<(String, Timestamp)> = Vec::new();
    for member in &live {
        let stale = current
            .as_ref()
            .is_some_and(|(t, hash, fresh)| is_stale(member, &t.name_any(), hash, fresh));
        if recreate && stale {
            doomed.insert(member.name_any());
            continue;
        }
        if let Some(since) = not_ready_since(member) {
            let deadline = since + grace;
            if deadline > now {
                deadlines.push((member.name_any(), deadline));
            } else if unschedulable(member) {
                let recheck = now + UNSCHEDULABLE_RECHECK;
                deadlines.push((member.name_any(), recheck));
            } else {
                doomed.insert(member.name_any());
            }
        }
    }

    let kept = live.len() - doomed.len();
    let count = kept + observed.creates_in_flight;
    if count > replicas {
        // Surplus: not-Ready first, then the newest, never more than were observed.
        let mut surplus: Vec<&&Sandbox> = live
            .iter()
            .filter(|s| !doomed.contains(&s.name_any()))
            .collect();
        surplus.sort_by_key(|s| (is_ready(s), std::cmp::Reverse(created(s)), s.name_any()));
        for member in surplus.into_iter().take(count - replicas) {
            doomed.insert(member.name_any());
        }
    } else if let (Some((_, _, fresh)), true) = (current, count < replicas) {
        out.create = replicas - count;
        out.prototype = Some(fresh);
    }
    out.delete = live
        .iter()
        .filter(|s| doomed.contains(&s.name_any()))
        .map(|s| (s.name_any(), s.uid()))
        .collect();
    out.requeue_after = deadlines
        .into_iter()
        .filter(|(name, _)| !doomed.contains(name))
        .map(|(_, d)| d)
        .min()
        .map(|d| Duration::try_from(d.duration_since(now)).unwrap_or(Duration::ZERO));
    out
}

/// Whether `member` is stale against template `template_name` (whose blueprint hash is `hash`
/// and whose new members look like `fresh`); see the module documentation.
fn is_stale(member: &Sandbox, template_name: &str, hash: &str, fresh: &Sandbox) -> bool {
    if template_ref(member.meta()) != Some(template_name) {
        return true;
    }
    if member
        .labels()
        .get(SANDBOX_TEMPLATE_HASH)
        .map(String::as_str)
        == Some(hash)
    {
        return false;
    }
    // The hash covers metadata too: compare what the sandbox runs.
    let (have, want) = (&member.spec, &fresh.spec);
    let claims = |s: &rouse_shared::api::SandboxSpec| {
        s.volume_claim_templates
            .iter()
            .map(|v| (v.metadata.name.clone(), v.spec.clone()))
            .collect::<Vec<_>>()
    };
    have.pod_template.spec != want.pod_template.spec
        || claims(have) != claims(want)
        || have.service != want.service
        || have.effective_memory_sharing() != want.effective_memory_sharing()
}

/// When a member that is not Ready stopped being (or was created, if never Ready);
/// `None` when it is Ready.
fn not_ready_since(member: &Sandbox) -> Option<Timestamp> {
    if is_ready(member) {
        return None;
    }
    let ready = member
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY));
    let since = ready
        .map(|c| c.last_transition_time.0)
        .into_iter()
        .chain(created(member))
        .max();
    Some(since.unwrap_or(Timestamp::UNIX_EPOCH))
}

/// True when the member's pod cannot be scheduled (its mirrored `PodScheduled` condition is
/// `False/Unschedulable`): replacing it would not help.
fn unschedulable(member: &Sandbox) -> bool {
    member.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == condition::POD_SCHEDULED
                && c.status == "False"
                && c.reason == "Unschedulable"
        })
    })
}

fn created(sandbox: &Sandbox) -> Option<Timestamp> {
    sandbox.meta().creation_timestamp.as_ref().map(|t| t.0)
}
