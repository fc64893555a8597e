//! The conditions a sandbox reports about its workload — `Ready`, `Suspended`,
//! `PodScheduled` and `Finished` — with upstream agent-sandbox's reasons and messages, word for
//! word: tools and scripts written against upstream compare them (docs/api.md).

use rouse_shared::api::OperatingMode;
use rouse_shared::api::keys::{ADOPTABLE, SANDBOX_NAME_HASH, condition, reason};

use super::conditions::{FALSE, TRUE, UNKNOWN, Want, status_of};
use super::observed::{Ownership, Workload, WorkloadPhase};

/// Which workload the sandbox has, after sorting out ownership.
pub(super) enum Current<'a> {
    /// No workload.
    None,
    /// Exactly one workload that is (or is about to be) the sandbox's.
    Ours(&'a Workload),
    /// A workload of the pod's name that the sandbox does not own and may not adopt.
    NotOwned(&'a Workload),
    /// More than one owned workload; how many.
    Multiple(usize),
}

impl Current<'_> {
    /// True when a pod of the sandbox's name (or of its own) exists.
    fn exists(&self) -> bool {
        !matches!(self, Current::None)
    }
}

/// Sorts the observed workloads into the sandbox's current one, or the reason there is none.
pub(super) fn classify<'a>(workloads: &'a [Workload], pod_name: &str) -> Current<'a> {
    let named = workloads.iter().find(|w| w.name == pod_name);
    let owned: Vec<&Workload> = workloads
        .iter()
        .filter(|w| {
            w.ownership == Ownership::Owned
                || (w.name == pod_name && w.ownership == Ownership::Adoptable)
        })
        .collect();
    if owned.len() > 1 {
        return Current::Multiple(owned.len());
    }
    match (named, owned.first()) {
        (Some(w), _) if w.ownership == Ownership::NotOwned => Current::NotOwned(w),
        (_, Some(w)) => Current::Ours(w),
        (_, None) => Current::None,
    }
}

/// What the plan decided, as far as the reported conditions depend on it.
pub(super) struct Decided<'a> {
    /// The sandbox's workload.
    pub current: Current<'a>,
    /// The sandbox's name.
    pub sandbox: &'a str,
    /// The operating mode in force (after an idle suspend of this pass).
    pub mode: OperatingMode,
    /// `shutdownTime` has passed.
    pub expired: bool,
    /// The plan deletes the workload in this pass.
    pub deleting: bool,
    /// The plan creates the workload in this pass.
    pub created: bool,
    /// A Service must exist for the sandbox to be ready: `spec.service: true`, or unset with
    /// an owned Service present (upstream's backward-compatible rule).
    pub service_required: bool,
    /// The Service exists (once this pass's actions succeed).
    pub service_present: bool,
}

/// The `Ready` condition.
pub(super) fn ready(d: &Decided<'_>) -> Want {
    let not_ready = |why: &str, message: String| Want::new(condition::READY, FALSE, why, message);
    if d.expired {
        return not_ready(reason::SANDBOX_EXPIRED, "Sandbox has expired".to_owned());
    }
    if let Current::Multiple(n) = d.current {
        return not_ready(
            reason::MULTIPLE_PODS,
            format!(
                "multiple Pods ({n}) are controlled by this Sandbox; refusing to choose or create a Pod"
            ),
        );
    }
    if d.mode == OperatingMode::Suspended {
        let message = if d.current.exists() {
            "Sandbox is suspending"
        } else {
            "Sandbox is suspended"
        };
        return not_ready(reason::SANDBOX_SUSPENDED, message.to_owned());
    }
    if let Current::NotOwned(w) = d.current {
        return not_ready(
            reason::RECONCILER_ERROR,
            format!(
                "Error seen: {}",
                not_owned_error(&w.name, w.owner.as_deref(), d.sandbox)
            ),
        );
    }
    let pod = match d.current {
        Current::Ours(w) => Some(w),
        _ => None,
    };
    match pod.map(|w| w.phase) {
        Some(WorkloadPhase::Succeeded) => {
            return not_ready(
                reason::POD_SUCCEEDED,
                "Pod completed successfully".to_owned(),
            );
        }
        Some(WorkloadPhase::Failed) => {
            return not_ready(reason::POD_FAILED, "Pod failed".to_owned());
        }
        _ => {}
    }
    let (mut message, pod_ready) = match pod {
        // Created by this pass: the API server makes every new pod Pending.
        None if d.created => ("Pod exists with phase: Pending".to_owned(), false),
        None => ("Pod does not exist".to_owned(), false),
        // Being deleted: not ready, whatever the pod still says (upstream v1.0.11).
        Some(w) if w.terminating || d.deleting => ("Pod is terminating".to_owned(), false),
        Some(w) if w.phase != WorkloadPhase::Running => (
            format!("Pod exists with phase: {}", w.phase.as_str()),
            false,
        ),
        Some(w) if !w.ready => ("Pod is Running but not Ready".to_owned(), false),
        Some(w) if w.ips.is_empty() => ("Pod is Ready but has no podIPs yet".to_owned(), false),
        Some(_) => ("Pod is Ready".to_owned(), true),
    };
    if d.service_required {
        message.push_str(if d.service_present {
            "; Service Exists"
        } else {
            "; Service does not exist"
        });
    }
    if pod_ready && (d.service_present || !d.service_required) {
        Want::new(condition::READY, TRUE, reason::DEPENDENCIES_READY, message)
    } else {
        not_ready(reason::DEPENDENCIES_NOT_READY, message)
    }
}

/// Why pod `pod` of the sandbox's name is left alone, in upstream's words; `owner` is the
/// other controller that owns it (`Kind/name (UID: uid)`), if any.
pub(crate) fn not_owned_error(pod: &str, owner: Option<&str>, sandbox: &str) -> String {
    match owner {
        Some(owner) => format!("pod {pod:?} is owned by {owner}, not by sandbox {sandbox:?}"),
        None => format!(
            "cannot adopt unowned pod {pod:?}: missing required pool authorization label ({ADOPTABLE:?}) or sandbox tracking label ({SANDBOX_NAME_HASH:?})"
        ),
    }
}

/// The `Suspended` condition; present in every status, `False` while running.
pub(super) fn suspended(d: &Decided<'_>) -> Want {
    let want = |status, why, message: &str| Want::new(condition::SUSPENDED, status, why, message);
    if d.mode == OperatingMode::Running {
        return want(FALSE, reason::NOT_SUSPENDED, "Sandbox is not suspended");
    }
    match d.current {
        Current::None => want(
            TRUE,
            reason::POD_TERMINATED,
            "Pod has been terminated. Sandbox is suspended",
        ),
        Current::NotOwned(_) => want(
            FALSE,
            reason::POD_NOT_OWNED,
            "Refused to delete pod because it is not owned by this sandbox",
        ),
        Current::Multiple(_) => want(
            UNKNOWN,
            reason::POD_STATE_UNKNOWN,
            "Pod state is unknown. Sandbox suspension cannot be confirmed",
        ),
        Current::Ours(_) => want(
            FALSE,
            reason::POD_TERMINATING,
            "Pod is terminating. Sandbox is suspending",
        ),
    }
}

/// The `PodScheduled` condition: the sandbox's own pod's, copied; absent without one (and
/// once expired).
pub(super) fn pod_scheduled(d: &Decided<'_>) -> Option<Want> {
    let unknown = |message: &str| {
        Some(Want::new(
            condition::POD_SCHEDULED,
            UNKNOWN,
            reason::POD_SCHEDULING_UNKNOWN,
            message,
        ))
    };
    if d.expired {
        return None;
    }
    match d.current {
        Current::Multiple(_) => {
            unknown("Pod state is unknown. Pod scheduling cannot be determined")
        }
        Current::Ours(w) => match &w.scheduled {
            Some(c) => {
                let status = status_of(&c.status);
                let why = match (c.reason.is_empty(), status) {
                    (false, _) => c.reason.clone(),
                    (true, TRUE) => reason::POD_SCHEDULED.to_owned(),
                    (true, _) => reason::POD_SCHEDULING_UNKNOWN.to_owned(),
                };
                Some(Want::new(
                    condition::POD_SCHEDULED,
                    status,
                    why,
                    c.message.clone(),
                ))
            }
            None => unknown("Pod has not reported a PodScheduled condition yet"),
        },
        Current::None if d.created => unknown("Pod has not reported a PodScheduled condition yet"),
        Current::None | Current::NotOwned(_) => None,
    }
}

/// The `Finished` condition of a workload in a terminal phase.
pub(super) fn finished(w: &Workload) -> Option<Want> {
    let (why, message) = match w.phase {
        WorkloadPhase::Succeeded => (reason::POD_SUCCEEDED, "Pod completed successfully"),
        WorkloadPhase::Failed => (reason::POD_FAILED, "Pod failed"),
        _ => return None,
    };
    Some(Want::new(condition::FINISHED, TRUE, why, message))
}
