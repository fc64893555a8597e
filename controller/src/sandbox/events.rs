//! The Events a sandbox's lifecycle produces, with upstream agent-sandbox's reasons (its
//! lifecycle Events of v1.0.4): derived from what a reconcile did and which conditions changed,
//! so both modes report the same ones (as Kubernetes Events, or as log lines in standalone
//! mode).

use rouse_shared::api::keys::{condition, reason};
use rouse_shared::api::{Sandbox, ShutdownPolicy};

use super::conditions::Transition;

/// Event reasons (upstream's; the last two are Rouse's own warnings).
pub mod event_reason {
    /// The sandbox's pod was created.
    pub const SANDBOX_POD_CREATED: &str = "SandboxPodCreated";
    /// Creating the sandbox's pod failed.
    pub const SANDBOX_POD_CREATE_FAILED: &str = "SandboxPodCreateFailed";
    /// The sandbox became Ready.
    pub const SANDBOX_READY: &str = "SandboxReady";
    /// The sandbox's pod is gone after a suspend.
    pub const SANDBOX_SUSPENDED: &str = "SandboxSuspended";
    /// `shutdownTime` passed and `shutdownPolicy: Retain` keeps the sandbox.
    pub const SANDBOX_EXPIRED: &str = "SandboxExpired";
    /// The pod finished successfully.
    pub const POD_SUCCEEDED: &str = "PodSucceeded";
    /// The pod failed.
    pub const POD_FAILED: &str = "PodFailed";
    /// More than one pod is controlled by the sandbox.
    pub const MULTIPLE_PODS: &str = "MultiplePods";
    /// A pod of the sandbox's name is someone else's (Rouse's own).
    pub const POD_NOT_OWNED: &str = "PodNotOwned";
    /// A reconcile failed; the note says why (Rouse's own).
    pub const RECONCILER_ERROR: &str = "ReconcilerError";
}

/// `Normal` or `Warning`, as Kubernetes Events are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// One Event about a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleEvent {
    /// Normal or Warning.
    pub kind: EventKind,
    /// Why (one of [`event_reason`]).
    pub reason: &'static str,
    /// What happened, for people.
    pub note: String,
}

impl LifecycleEvent {
    fn new(kind: EventKind, reason: &'static str, note: impl Into<String>) -> Self {
        Self {
            kind,
            reason,
            note: note.into(),
        }
    }
}

/// The Events of one successful reconcile: the pod it created (`created`) and the conditions
/// that changed.
pub(crate) fn lifecycle_events(
    sandbox: &Sandbox,
    created: Option<&str>,
    transitions: &[Transition],
) -> Vec<LifecycleEvent> {
    use EventKind::{Normal, Warning};
    use event_reason as r;
    let mut events: Vec<LifecycleEvent> = created
        .map(|pod| {
            LifecycleEvent::new(Normal, r::SANDBOX_POD_CREATED, format!("Created pod {pod}"))
        })
        .into_iter()
        .collect();
    for t in transitions {
        let event = match (t.type_.as_str(), t.status.as_str(), t.reason.as_str()) {
            (condition::READY, "True", _) => {
                LifecycleEvent::new(Normal, r::SANDBOX_READY, "Sandbox is ready")
            }
            (condition::SUSPENDED, "True", _) => {
                LifecycleEvent::new(Normal, r::SANDBOX_SUSPENDED, t.message.clone())
            }
            (condition::READY, _, reason::SANDBOX_EXPIRED)
                if sandbox.spec.effective_shutdown_policy() == ShutdownPolicy::Retain =>
            {
                LifecycleEvent::new(Normal, r::SANDBOX_EXPIRED, t.message.clone())
            }
            (condition::FINISHED, "True", reason::POD_SUCCEEDED) => {
                LifecycleEvent::new(Normal, r::POD_SUCCEEDED, t.message.clone())
            }
            (condition::FINISHED, "True", reason::POD_FAILED) => {
                LifecycleEvent::new(Warning, r::POD_FAILED, t.message.clone())
            }
            (condition::READY, _, reason::MULTIPLE_PODS) => {
                LifecycleEvent::new(Warning, r::MULTIPLE_PODS, t.message.clone())
            }
            (condition::SUSPENDED, _, reason::POD_NOT_OWNED) => {
                LifecycleEvent::new(Warning, r::POD_NOT_OWNED, t.message.clone())
            }
            (condition::READY, _, reason::RECONCILER_ERROR) => {
                LifecycleEvent::new(Warning, r::RECONCILER_ERROR, t.message.clone())
            }
            _ => continue,
        };
        events.push(event);
    }
    events
}

/// The Event of a pod that could not be created.
pub(crate) fn create_failed(pod: &str, error: &impl std::fmt::Display) -> LifecycleEvent {
    LifecycleEvent::new(
        EventKind::Warning,
        event_reason::SANDBOX_POD_CREATE_FAILED,
        format!("Failed to create pod {pod}: {error}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::SandboxBuilder;
    use super::*;

    fn t(type_: &str, status: &str, reason: &str) -> Transition {
        Transition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn upstreams_lifecycle_events_from_what_changed() {
        let sandbox = Sandbox::test("alice");
        let got: Vec<_> = lifecycle_events(
            &sandbox,
            Some("alice"),
            &[
                t("Ready", "False", "DependenciesNotReady"),
                t("Suspended", "False", "NotSuspended"),
                t("PodScheduled", "Unknown", "PodSchedulingUnknown"),
            ],
        )
        .into_iter()
        .map(|e| (e.kind, e.reason))
        .collect();
        assert_eq!(got, [(EventKind::Normal, "SandboxPodCreated")]);

        let cases = [
            (
                t("Ready", "True", "DependenciesReady"),
                Some("SandboxReady"),
            ),
            (
                t("Suspended", "True", "PodTerminated"),
                Some("SandboxSuspended"),
            ),
            (
                t("Ready", "False", "SandboxExpired"),
                Some("SandboxExpired"),
            ),
            (t("Finished", "True", "PodSucceeded"), Some("PodSucceeded")),
            (t("Finished", "True", "PodFailed"), Some("PodFailed")),
            (t("Ready", "False", "MultiplePods"), Some("MultiplePods")),
            (t("Ready", "False", "SandboxSuspended"), None),
            (t("Suspended", "False", "PodTerminating"), None),
        ];
        for (transition, want) in cases {
            let got = lifecycle_events(&sandbox, None, std::slice::from_ref(&transition));
            assert_eq!(got.first().map(|e| e.reason), want, "{transition:?}");
        }
        let deleted =
            sandbox.shutdown_at(super::super::fixtures::now(), Some(ShutdownPolicy::Delete));
        assert!(
            lifecycle_events(&deleted, None, &[t("Ready", "False", "SandboxExpired")]).is_empty(),
            "a sandbox deleted at expiry gets no SandboxExpired (upstream: Retain only)"
        );
        let failed = create_failed("alice", &"quota exceeded");
        assert_eq!(
            (failed.kind, failed.reason, failed.note.as_str()),
            (
                EventKind::Warning,
                "SandboxPodCreateFailed",
                "Failed to create pod alice: quota exceeded"
            )
        );
    }
}
