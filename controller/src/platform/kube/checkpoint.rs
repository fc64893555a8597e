//! Suspend by checkpoint in Kubernetes mode: pods cannot be checkpointed there, so a sandbox
//! with `spec.suspension.strategy: Checkpoint` is suspended by stop, and its `Checkpointed`
//! condition says so (as the local process runtime does).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use rouse_shared::api::{OperatingMode, Sandbox, SuspensionStrategy};

use crate::snapshot::{CHECKPOINTED, CheckpointOutcome};

/// Why the pod was stopped rather than checkpointed.
const MESSAGE: &str = "Kubernetes mode does not checkpoint pods";

/// The `Checkpointed` condition of a sandbox suspended while asking for a checkpoint; `None`
/// for any other. The transition time of a condition already there is kept, so a reconcile
/// does not rewrite the status.
pub(super) fn unsupported(sandbox: &Sandbox) -> Option<Condition> {
    let checkpoints = sandbox
        .spec
        .suspension
        .as_ref()
        .is_some_and(|s| s.strategy == SuspensionStrategy::Checkpoint);
    if !checkpoints || sandbox.spec.effective_operating_mode() != OperatingMode::Suspended {
        return None;
    }
    let since = sandbox
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CHECKPOINTED))
        .filter(|c| c.reason == "CheckpointUnsupported")
        .map(|c| c.last_transition_time.0);
    let outcome = CheckpointOutcome::Unsupported {
        at: since.unwrap_or_else(Timestamp::now),
        message: MESSAGE.to_owned(),
    };
    Some(outcome.condition())
}

#[cfg(test)]
mod tests {
    use rouse_shared::api::{SandboxSpec, Suspension};

    use super::*;

    fn sandbox(strategy: SuspensionStrategy, mode: OperatingMode) -> Sandbox {
        let mut sandbox = Sandbox::new("s", SandboxSpec::default());
        sandbox.spec.suspension = Some(Suspension {
            strategy,
            ..Suspension::default()
        });
        sandbox.spec.operating_mode = Some(mode);
        sandbox
    }

    #[test]
    fn only_a_suspended_checkpointing_sandbox_says_its_checkpoint_is_unsupported() {
        let suspended = sandbox(SuspensionStrategy::Checkpoint, OperatingMode::Suspended);
        let condition = unsupported(&suspended).expect("a condition");
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str()),
            (CHECKPOINTED, "False")
        );
        assert_eq!(condition.reason, "CheckpointUnsupported");
        assert!(condition.message.contains(MESSAGE), "{}", condition.message);
        let running = sandbox(SuspensionStrategy::Checkpoint, OperatingMode::Running);
        assert_eq!(unsupported(&running), None);
        let stop = sandbox(SuspensionStrategy::Stop, OperatingMode::Suspended);
        assert_eq!(unsupported(&stop), None);
    }

    #[test]
    fn the_transition_time_of_an_existing_condition_is_kept() {
        let mut suspended = sandbox(SuspensionStrategy::Checkpoint, OperatingMode::Suspended);
        let first = unsupported(&suspended).expect("a condition");
        let mut earlier = first.clone();
        earlier.last_transition_time.0 =
            first.last_transition_time.0 - jiff::SignedDuration::from_secs(3600);
        suspended.status = Some(rouse_shared::api::SandboxStatus {
            conditions: vec![earlier.clone()],
            ..Default::default()
        });
        assert_eq!(unsupported(&suspended), Some(earlier));
    }
}
