//! The claim lifecycle as one pure function: from the claim, its pool, template, bound
//! sandbox and the pool's members, what to do (adopt, create, delete) and the status to
//! write. No I/O, no clock.
//!
//! Rules (docs/controller.md, "Claims"; reasons as upstream agent-sandbox):
//! - A claim being deleted gets nothing; its sandbox goes with it (ownerReference).
//! - Expiry is the earlier of `lifecycle.shutdownTime` and the sandbox's `Finished` time plus
//!   `ttlSecondsAfterFinished`. Expired with `Delete`/`DeleteForeground`: the claim is deleted
//!   (background or foreground propagation). With `Retain`: its sandbox is deleted, the claim
//!   stays with `Ready=False/ClaimExpired` and `ClaimExpired=True`. Before it: requeue at it.
//! - Bound (the sandbox named by the claim's annotation or status, or named like the claim,
//!   controlled by the claim): `status.sandbox` and the sandbox's `Ready` (and `Finished`) are
//!   forwarded, in one status write.
//! - Unbound: pool or template missing → `WarmPoolNotFound` / `TemplateNotFound`. Bad
//!   `additionalPodMetadata` → `InvalidMetadata`. Without `env` and `volumeClaimTemplates`,
//!   the Ready members of the pool are adopted, oldest first; with them, or when no member is
//!   Ready, a sandbox named like the claim is created from the template (cold start), after
//!   the template's policies allow what the claim adds (`EnvVarsInjectionRejected`,
//!   `VolumeClaimTemplatesError`, `InvalidConfiguration`).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{
    LAUNCH_TYPE, LAUNCH_TYPE_COLD, SANDBOX_NAME, SANDBOX_TEMPLATE_REF, SANDBOX_TEMPLATE_REF_HASH,
};
use rouse_shared::api::{
    ClaimShutdownPolicy, Sandbox, SandboxClaim, SandboxClaimStatus, SandboxTemplate,
    SandboxWarmPool, controller_ref,
};
use rouse_shared::names::sandbox_name_hash;
use rouse_shared::store::Propagation;

use super::status::{self, reason};
use crate::pool::{controlled_by, is_ready};
use crate::template::{Refusal, check_pod_metadata, claim_sandbox_spec, is_system_key};

/// How long a claim waits before looking again for a missing pool or template (a watch of
/// the pool usually triggers it sooner).
pub const MISSING_REQUEUE: Duration = Duration::from_secs(10);

/// The claim's sandbox, as found by its name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Binding<'a> {
    /// No sandbox named by the claim exists, or one exists that it does not control.
    Unbound,
    /// The sandbox the claim controls.
    Ours(&'a Sandbox),
    /// The sandbox the claim's status names is gone.
    Missing,
}

/// What a claim reconcile sees besides the claim.
#[derive(Debug, Clone, Copy)]
pub struct ClaimObserved<'a> {
    /// The claim's warm pool, if it exists.
    pub pool: Option<&'a SandboxWarmPool>,
    /// The pool's template, if it exists.
    pub template: Option<&'a SandboxTemplate>,
    /// The claim's sandbox.
    pub binding: Binding<'a>,
    /// The pool's members (any state; the plan picks the adoptable ones).
    pub members: &'a [Sandbox],
}

/// The write a claim reconcile makes besides its status.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// Nothing.
    None,
    /// Delete the claim itself (expired with `Delete` or `DeleteForeground`).
    DeleteClaim(Propagation),
    /// Delete the claim's sandbox (expired with `Retain`).
    DeleteSandbox {
        /// The sandbox.
        name: String,
        /// The uid it must still have.
        uid: Option<String>,
    },
    /// Adopt one of these pool members, trying them in order.
    Adopt(Vec<String>),
    /// Create this sandbox (cold start).
    Create(Box<Sandbox>),
}

/// What to do for one claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimPlan {
    /// The write to make.
    pub step: ClaimStep,
    /// The status to write (for `Adopt` and `Create`, the status until that succeeds).
    pub status: SandboxClaimStatus,
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// Plans one reconcile of `claim`; see the module documentation for the rules.
pub fn plan(claim: &SandboxClaim, observed: &ClaimObserved<'_>, now: Timestamp) -> ClaimPlan {
    let previous = claim.status.clone().unwrap_or_default();
    let mut out = ClaimPlan {
        step: ClaimStep::None,
        status: previous.clone(),
        requeue_after: None,
    };
    if claim.meta().deletion_timestamp.is_some() {
        return out;
    }
    let sandbox = match observed.binding {
        Binding::Ours(s) => Some(s),
        _ => None,
    };
    let finished = status::finished(claim, sandbox);
    let lifecycle = claim.spec.lifecycle.clone().unwrap_or_default();
    let ttl_deadline = match (&finished, lifecycle.ttl_seconds_after_finished) {
        (Some(f), Some(ttl)) if f.status == status::TRUE => {
            Some(f.last_transition_time.0 + SignedDuration::from_secs(i64::from(ttl.max(0))))
        }
        _ => None,
    };
    let deadline = [lifecycle.shutdown_time.as_ref().map(|t| t.0), ttl_deadline]
        .into_iter()
        .flatten()
        .min();

    if let Some(deadline) = deadline {
        if deadline <= now {
            return expired(
                claim,
                observed,
                lifecycle.shutdown_policy.unwrap_or_default(),
                now,
            );
        }
        out.requeue_after = Some(until(deadline, now));
    }

    match observed.binding {
        Binding::Ours(sandbox) => {
            out.status = status::bound(claim, sandbox, now);
            return out;
        }
        Binding::Missing => {
            out.status = status::failed(
                claim,
                reason::SANDBOX_MISSING,
                "Sandbox does not exist",
                now,
            );
            out.status.sandbox = None;
            return out;
        }
        Binding::Unbound => {}
    }

    let pool_name = &claim.spec.warm_pool_ref.name;
    let Some(pool) = observed.pool else {
        out.status = status::failed(
            claim,
            reason::WARM_POOL_NOT_FOUND,
            format!("SandboxWarmPool {pool_name:?} not found"),
            now,
        );
        out.requeue_after = Some(
            out.requeue_after
                .map_or(MISSING_REQUEUE, |r| r.min(MISSING_REQUEUE)),
        );
        return out;
    };
    let template_name = &pool.spec.sandbox_template_ref.name;
    let Some(template) = observed.template else {
        out.status = status::failed(
            claim,
            reason::TEMPLATE_NOT_FOUND,
            format!("SandboxTemplate {template_name:?} of SandboxWarmPool {pool_name:?} not found"),
            now,
        );
        out.requeue_after = Some(
            out.requeue_after
                .map_or(MISSING_REQUEUE, |r| r.min(MISSING_REQUEUE)),
        );
        return out;
    };
    let refused = |refusal: Refusal| status::failed(claim, refusal.reason, refusal.message, now);
    if let Err(refusal) = check_pod_metadata(
        &claim.spec.additional_pod_metadata,
        &template.spec.pod_template.metadata,
    ) {
        out.status = refused(refusal);
        return out;
    }

    let wants_cold = !claim.spec.env.is_empty() || !claim.spec.volume_claim_templates.is_empty();
    if !wants_cold {
        let candidates = adoptable(
            pool,
            observed.members,
            claim.annotations().get(SANDBOX_NAME),
        );
        if !candidates.is_empty() {
            out.step = ClaimStep::Adopt(candidates);
            out.status = status::failed(
                claim,
                reason::ADOPTION_PENDING,
                "Adopting a warm pool sandbox",
                now,
            );
            return out;
        }
    }
    match claim_sandbox_spec(template_name, &template.spec, &claim.spec) {
        Err(refusal) => out.status = refused(refusal),
        Ok(spec) => {
            let sandbox = cold_sandbox(claim, template_name, spec);
            out.status = status::bound(claim, &sandbox, now);
            out.step = ClaimStep::Create(Box::new(sandbox));
        }
    }
    out
}

/// The plan of an expired claim.
fn expired(
    claim: &SandboxClaim,
    observed: &ClaimObserved<'_>,
    policy: ClaimShutdownPolicy,
    now: Timestamp,
) -> ClaimPlan {
    let step = match policy {
        ClaimShutdownPolicy::Delete => ClaimStep::DeleteClaim(Propagation::Background),
        ClaimShutdownPolicy::DeleteForeground => ClaimStep::DeleteClaim(Propagation::Foreground),
        ClaimShutdownPolicy::Retain => match observed.binding {
            Binding::Ours(s) if s.meta().deletion_timestamp.is_none() => ClaimStep::DeleteSandbox {
                name: s.name_any(),
                uid: s.uid(),
            },
            _ => ClaimStep::None,
        },
    };
    let sandbox = match observed.binding {
        Binding::Ours(s) => Some(s),
        _ => None,
    };
    ClaimPlan {
        step,
        status: status::expired(claim, sandbox, now),
        requeue_after: None,
    }
}

/// The pool members a claim may adopt, in the order to try them: Ready ones only (a member
/// still starting is no faster than a cold start), the one the claim names first (a reconcile
/// cut short between naming and taking it resumes with it), then oldest first.
fn adoptable(pool: &SandboxWarmPool, members: &[Sandbox], named: Option<&String>) -> Vec<String> {
    let uid = pool.uid().unwrap_or_default();
    let mut ready: Vec<&Sandbox> = members
        .iter()
        .filter(|s| controlled_by(s, &uid))
        .filter(|s| s.meta().deletion_timestamp.is_none())
        .filter(|s| is_ready(s))
        .collect();
    ready.sort_by_key(|s| {
        (
            s.meta().name.as_ref() != named,
            s.meta().creation_timestamp.as_ref().map(|t| t.0),
            s.name_any(),
        )
    });
    ready.into_iter().map(ResourceExt::name_any).collect()
}

/// The sandbox a claim starts cold: named like the claim, controlled by it, labelled
/// `launch-type=cold`, naming its template, and with the claim's own labels and annotations.
pub fn cold_sandbox(
    claim: &SandboxClaim,
    template_name: &str,
    spec: rouse_shared::api::SandboxSpec,
) -> Sandbox {
    let mut sandbox = Sandbox::new(&claim.name_any(), spec);
    let meta = &mut sandbox.metadata;
    meta.namespace = claim.namespace();
    let mut labels = propagated(claim.labels());
    labels.insert(LAUNCH_TYPE.to_owned(), LAUNCH_TYPE_COLD.to_owned());
    labels.insert(
        SANDBOX_TEMPLATE_REF_HASH.to_owned(),
        sandbox_name_hash(template_name),
    );
    meta.labels = Some(labels);
    let mut annotations = propagated(claim.annotations());
    annotations.insert(SANDBOX_TEMPLATE_REF.to_owned(), template_name.to_owned());
    meta.annotations = Some(annotations);
    meta.owner_references = controller_ref(claim).map(|o| vec![o]);
    sandbox
}

/// A claim's labels or annotations that its sandbox gets: all but the system ones and
/// kubectl's bookkeeping.
pub(crate) fn propagated(
    map: &std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    map.iter()
        .filter(|(k, _)| !is_system_key(k) && !k.starts_with("kubectl.kubernetes.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The name of the sandbox a claim is bound to or binding: its `sandbox-name` annotation,
/// else its status, else its own name (a cold start).
pub fn bound_name(claim: &SandboxClaim) -> String {
    claim
        .annotations()
        .get(SANDBOX_NAME)
        .filter(|n| !n.is_empty())
        .cloned()
        .or_else(|| {
            claim
                .status
                .as_ref()
                .and_then(|s| s.sandbox.as_ref())
                .map(|s| s.name.clone())
        })
        .unwrap_or_else(|| claim.name_any())
}

fn until(deadline: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO)
}
