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
