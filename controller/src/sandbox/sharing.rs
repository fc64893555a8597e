//! The `MemorySharing` condition and `status.memorySharing` of a sandbox with
//! `spec.memorySharing: Merge`, from what the platform observed (docs/memory-sharing.md).

use std::time::Duration;

use rouse_shared::api::MemorySharingStatus;
use rouse_shared::api::keys::{condition, reason};

use super::conditions::{FALSE, TRUE, Want};
use super::observed::{ObservedMemorySharing, SharingState};

/// How often a running Merge sandbox is reconciled to refresh `status.memorySharing`
/// (KSM merges over seconds; a status write per sandbox at most this often).
pub const MEMORY_SHARING_REFRESH: Duration = Duration::from_secs(5);

/// The condition the plan wants for what was observed.
pub(crate) fn want(observed: &ObservedMemorySharing) -> Want {
    let (status, why) = match observed.state {
        SharingState::Merging => (TRUE, reason::MERGING),
        SharingState::KsmUnavailable => (FALSE, reason::KSM_UNAVAILABLE),
        SharingState::NotMarked => (FALSE, reason::NOT_MARKED),
        SharingState::Unsupported => (FALSE, reason::UNSUPPORTED),
    };
    Want::new(
        condition::MEMORY_SHARING,
        status,
        why,
        observed.message.clone(),
    )
}

/// `status.memorySharing` while a workload runs, and when to look again.
pub(crate) fn status(
    observed: &ObservedMemorySharing,
) -> (Option<MemorySharingStatus>, Option<Duration>) {
    match observed.merged_bytes {
        Some(bytes) => (
            Some(MemorySharingStatus {
                merged_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
            }),
            Some(MEMORY_SHARING_REFRESH),
        ),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use rouse_shared::api::Sandbox;

    use super::super::fixtures::{SandboxBuilder, now};
    use super::super::{Observed, ObservedMemorySharing, Plan, SharingState, Workload, plan};
    use super::MEMORY_SHARING_REFRESH;

    fn sharing(state: SharingState, merged_bytes: Option<u64>) -> ObservedMemorySharing {
        ObservedMemorySharing {
            state,
            message: "why".to_owned(),
            merged_bytes,
        }
    }

    /// The plan's `MemorySharing` condition.
    fn sharing_condition(plan: &Plan) -> &Condition {
        plan.status
            .conditions
            .iter()
            .find(|c| c.type_ == "MemorySharing")
            .expect("a MemorySharing condition")
    }

    fn observed(sharing: Option<ObservedMemorySharing>) -> Observed {
        Observed {
            memory_sharing: sharing,
            ..Observed::nothing().workload(Workload::ready("alice"))
        }
    }

    #[test]
    fn merging_reports_bytes_and_refreshes_while_running() {
        let sandbox = Sandbox::test("alice");
        let plan = plan(
            &sandbox,
            &observed(Some(sharing(SharingState::Merging, Some(3 << 20)))),
            now(),
        );
        let condition = sharing_condition(&plan);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "Merging")
        );
        assert_eq!(
            plan.status.memory_sharing.map(|s| s.merged_bytes),
            Some(3 << 20)
        );
        assert_eq!(plan.requeue_after, Some(MEMORY_SHARING_REFRESH));
    }

    #[test]
    fn each_refusal_is_false_with_its_reason_and_no_workload_means_no_bytes() {
        let sandbox = Sandbox::test("alice");
        for (state, reason) in [
            (SharingState::KsmUnavailable, "KsmUnavailable"),
            (SharingState::NotMarked, "NotMarked"),
            (SharingState::Unsupported, "Unsupported"),
        ] {
            let plan = plan(&sandbox, &observed(Some(sharing(state, None))), now());
            let condition = sharing_condition(&plan);
            assert_eq!(
                (condition.status.as_str(), condition.reason.as_str()),
                ("False", reason)
            );
            assert_eq!(condition.message, "why");
            assert_eq!(plan.status.memory_sharing, None);
            assert_eq!(plan.requeue_after, None, "nothing to refresh");
        }
    }

    #[test]
    fn sandboxes_without_merge_get_neither() {
        let plan = plan(&Sandbox::test("alice"), &observed(None), now());
        assert!(
            plan.status
                .conditions
                .iter()
                .all(|c| c.type_ != "MemorySharing")
        );
        assert_eq!(plan.status.memory_sharing, None);
    }
}
