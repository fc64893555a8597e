//! The Sandbox lifecycle as one pure function: from the sandbox, what the platform observed and
//! the current time, the actions to take and the status to write. No I/O, no clock.
//!
//! Rules (docs/controller.md lists them with every condition and reason):
//! - A sandbox being deleted gets no actions; the garbage collector removes what it owns.
//! - `shutdownTime` passed: delete the workload and an owned Service, `Ready=False/SandboxExpired`;
//!   with `shutdownPolicy: Delete` the Sandbox object is deleted too. Before it: requeue at it.
//! - Idle suspend: with `suspension.idleTimeoutSeconds` set and the sandbox running, once that
//!   long passed since the idle clock started, set `spec.operatingMode: Suspended`. The clock
//!   starts at the latest of `lastActivityTime`, creation, the last `Ready=True` transition and
//!   the last resume (`Suspended` turning `False/NotSuspended`), so a resume counts as activity,
//!   and the platform's live view of the traffic (`Observed::activity`) where it has one.
//!   Stored times have whole seconds (the API's `Time` drops the fraction), so each is taken
//!   as the end of its second: a sandbox is never suspended early, at most one second late.
//!   Before the deadline: requeue at it.
//! - `operatingMode: Suspended` deletes the workload only; `Running` (re)creates it on the same
//!   volumes. Volumes are ensured whenever the sandbox is not expired and not waiting for its
//!   `restoreFrom` snapshot.
//! - Workloads: more than one owned → refuse (`Ready=False/MultiplePods`), touch none; the one
//!   named like the pod but owned by someone else → never touched; an adoptable one is adopted.
//! - `spec.restoreFrom` names a snapshot that does not exist or is not `Ready` (as the
//!   platform observed it): no workload and no volume is created (on Kubernetes a claim is
//!   restored only when it is created), `Ready=False/SnapshotNotFound` or
//!   `SnapshotNotReady`, requeue after [`SNAPSHOT_WAIT`].
//! - The status describes the state once the actions succeed.

use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{condition, reason};
use rouse_shared::api::{Endpoint, OperatingMode, Sandbox, SandboxStatus, ShutdownPolicy};

use super::action::{Action, SandboxOp};
use super::conditions::{FALSE, TRUE, Want, find};
use super::observed::{Observed, Ownership, RestoreSource, WorkloadPhase};
use super::report::{self, Current, Decided, classify};
use super::workload::{
    pod_name, pod_template_hash, selector, service_spec, volume_specs, workload_spec,
};

/// How long a sandbox waits for its `restoreFrom` snapshot before looking again.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(2);

/// What to do for one sandbox, and the status to write afterwards.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Platform actions, in order.
    pub actions: Vec<Action>,
    /// Changes to the Sandbox object itself, applied after the actions.
    pub sandbox_ops: Vec<SandboxOp>,
    /// The desired status; written only when it differs from the current one.
    pub status: SandboxStatus,
    /// Reconcile again after this long even if nothing changes (expiry, idle deadline).
    pub requeue_after: Option<Duration>,
}

/// Plans one reconcile of `sandbox`; see the module documentation for the rules.
pub fn plan(sandbox: &Sandbox, observed: &Observed, now: Timestamp) -> Plan {
    let previous = sandbox.status.clone().unwrap_or_default();
    if sandbox.meta().deletion_timestamp.is_some() {
        return Plan {
            status: previous,
            ..Plan::default()
        };
    }
    let spec = &sandbox.spec;
    let mut out = Plan::default();
    let mut deadlines: Vec<Timestamp> = Vec::new();

    let expired = match &spec.shutdown_time {
        Some(t) if t.0 <= now => true,
        Some(t) => {
            deadlines.push(t.0);
            false
        }
        None => false,
    };
    let mut mode = spec.effective_operating_mode();
    if mode == OperatingMode::Running
        && !expired
        && let Some(deadline) = idle_deadline(sandbox, &previous, observed.activity, now)
    {
        if deadline <= now {
            out.sandbox_ops.push(SandboxOp::Suspend);
            mode = OperatingMode::Suspended;
        } else {
            deadlines.push(deadline);
        }
    }
    let want_running = mode == OperatingMode::Running && !expired;

    let restore_waits = matches!(
        observed.restore,
        Some(RestoreSource::NotFound(_) | RestoreSource::NotReady(_))
    );
    // Volumes first, so a created workload finds its claims.
    if !expired && !restore_waits {
        for volume in volume_specs(sandbox) {
            let exists = observed
                .volumes
                .iter()
                .any(|v| v.claim_name == volume.claim_name);
            if !exists {
                out.actions.push(Action::EnsureVolume(Box::new(volume)));
            }
        }
    }

    // The Service.
    let service = service_spec(sandbox);
    let observed_service = observed.service.as_ref();
    let owned_service = observed_service.is_some_and(|s| s.owned);
    let service_present = if expired || spec.service == Some(false) {
        if owned_service {
            out.actions.push(Action::DeleteService {
                name: service.name.clone(),
            });
        }
        false
    } else if spec.service == Some(true) {
        if observed_service.is_none() {
            out.actions.push(Action::EnsureService(service.clone()));
        }
        true
    } else {
        owned_service
    };

    // The workload.
    let name = pod_name(sandbox);
    let current = classify(&observed.workloads, &name);
    let mut created = false;
    let mut deleting = false;
    let waiting = match &observed.restore {
        Some(RestoreSource::NotFound(message)) => Some((reason::SNAPSHOT_NOT_FOUND, message)),
        Some(RestoreSource::NotReady(message)) => Some((reason::SNAPSHOT_NOT_READY, message)),
        _ => None,
    }
    .filter(|_| want_running && matches!(current, Current::None));
    if let Current::Ours(w) = current
        && w.ownership == Ownership::Adoptable
    {
        out.actions.push(Action::AdoptWorkload {
            name: w.name.clone(),
        });
    }
    match (&current, want_running) {
        (Current::None, true) if waiting.is_some() => {
            deadlines.push(now.saturating_add(SNAPSHOT_WAIT).unwrap_or(now));
        }
        (Current::None, true) => {
            out.actions
                .push(Action::CreateWorkload(Box::new(workload_spec(sandbox))));
            created = true;
        }
        (Current::Ours(w), false) if !w.terminating => {
            out.actions.push(Action::DeleteWorkload {
                name: w.name.clone(),
            });
            deleting = true;
        }
        _ => {}
    }
    if expired && spec.effective_shutdown_policy() == ShutdownPolicy::Delete {
        out.sandbox_ops.push(SandboxOp::Delete);
    }

    // The status. An expired sandbox keeps only its conditions (and Rouse's history fields):
    // nothing it had runs any more.
    let ours = match current {
        Current::Ours(w) => Some(w),
        _ => None,
    };
    let status = &mut out.status;
    status.last_activity_time = previous.last_activity_time.clone();
    status.last_snapshot = previous.last_snapshot.clone();
    if !expired {
        status.selector = Some(selector(sandbox));
    }
    if service_present {
        status.service = Some(service.name.clone());
        status.service_fqdn = Some(format!(
            "{}.{}.svc.{}",
            service.name,
            sandbox.namespace().unwrap_or_else(|| "default".to_owned()),
            observed.cluster_domain
        ));
    }
    if let Some(w) = ours.filter(|_| !expired) {
        status.pod_ips = w.ips.clone();
        status.node_name = w.node_name.clone();
        if w.phase == WorkloadPhase::Running
            && !w.terminating
            && !deleting
            && let Some(ip) = w.ips.first()
        {
            status.endpoint = Some(Endpoint {
                address: ip.clone(),
                ports: w.ports.clone(),
            });
        }
    }

    let sandbox_name = sandbox.name_any();
    let decided = Decided {
        current,
        sandbox: &sandbox_name,
        mode,
        expired,
        deleting,
        created,
        service_required: spec.service == Some(true) || (spec.service.is_none() && owned_service),
        service_present,
    };
    let mut wants = vec![report::ready(&decided), report::suspended(&decided)];
    if let Some((why, message)) = waiting {
        wants[0] = Want::new(condition::READY, FALSE, why, message.clone());
    }
    // A workload waiting to be started again after exits says so, with its restarts and the
    // next try (on Kubernetes its pod shows that; standalone mode has no pod to look at).
    if let Some(back_off) = ours.and_then(|w| w.back_off.as_deref())
        && wants[0].reason == reason::DEPENDENCIES_NOT_READY
    {
        wants[0].message = format!("{}; {back_off}", wants[0].message);
    }
    wants.extend(report::pod_scheduled(&decided));
    if let Some(checkpoint) = &observed.checkpoint {
        status.conditions.push(checkpoint.clone());
    }
    let mut refresh = None;
    if let Some(sharing) = &observed.memory_sharing {
        wants.push(super::sharing::want(sharing));
        (status.memory_sharing, refresh) = super::sharing::status(sharing);
    }
    match ours {
        Some(w) if w.phase.is_terminal() => wants.extend(report::finished(w)),
        Some(_) => {}
        None if created => {}
        None => {
            if let Some(finished) = find(&previous.conditions, condition::FINISHED) {
                status.conditions.push(finished.clone());
            }
        }
    }
    // A template change does not restart a running workload (a sandbox is stateful; upstream
    // does not either): say so, rather than let observedGeneration suggest it was applied.
    if let Some(w) = ours
        && !w.terminating
        && !deleting
        && w.template_hash
            .as_ref()
            .is_some_and(|h| *h != pod_template_hash(sandbox))
    {
        wants.push(Want::new(
            condition::POD_TEMPLATE_UP_TO_DATE,
            FALSE,
            reason::RESTART_REQUIRED,
            format!(
                "spec.podTemplate.spec changed after pod {} started; it runs the old template until it restarts (suspend and resume the sandbox, or delete the pod)",
                w.name
            ),
        ));
    }
    let generation = sandbox.meta().generation;
    let built: Vec<_> = wants
        .into_iter()
        .map(|w| w.into_condition(&previous.conditions, generation, now))
        .collect();
    status.conditions.splice(0..0, built);

    out.requeue_after = deadlines
        .into_iter()
        .map(|deadline| until(now, deadline))
        .chain(refresh)
        .min();
    out
}

/// When the sandbox becomes idle, if it has an idle timeout; see the module documentation.
fn idle_deadline(
    sandbox: &Sandbox,
    previous: &SandboxStatus,
    live: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let seconds = sandbox.spec.suspension.as_ref()?.idle_timeout_seconds?;
    let resumed = match find(&previous.conditions, condition::SUSPENDED) {
        Some(c) if c.status == FALSE && c.reason == reason::NOT_SUSPENDED => {
            end_of_second(c.last_transition_time.0)
        }
        // Not running before this reconcile: it is resuming (or starting) now.
        _ => now,
    };
    let became_ready = find(&previous.conditions, condition::READY)
        .filter(|c| c.status == TRUE)
        .map(|c| end_of_second(c.last_transition_time.0));
    let start = [
        Some(resumed),
        became_ready,
        previous
            .last_activity_time
            .as_ref()
            .map(|t| end_of_second(t.0)),
        sandbox
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| end_of_second(t.0)),
        live,
    ]
    .into_iter()
    .flatten()
    .max()?;
    Some(
        start
            .saturating_add(jiff::SignedDuration::from_secs(seconds.max(0)))
            .unwrap_or(start),
    )
}

/// The latest instant a stored time of whole seconds may stand for: a time without a fraction
/// lost it when stored (and a reported time may have been rounded to the nearest second), so
/// the idle clock takes the end of that second. Times with a fraction are exact.
fn end_of_second(t: Timestamp) -> Timestamp {
    if t.subsec_nanosecond() == 0 {
        t.checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap_or(t)
    } else {
        t
    }
}

/// The time from `now` to `deadline`, at least one millisecond so a requeue never spins.
fn until(now: Timestamp, deadline: Timestamp) -> Duration {
    let left = deadline.duration_since(now);
    Duration::try_from(left)
        .unwrap_or_default()
        .max(Duration::from_millis(1))
}
