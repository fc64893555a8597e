//! The plan both Kubernetes providers return ([`KubePlan`]): a snapshot is in progress until
//! `Ready` or `Failed` (the statuses of waiting and failing are [`super::plan::pending`] and
//! [`super::plan::failed`]), and ends `Ready` naming itself in its sandbox's
//! `status.lastSnapshot`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Resource, ResourceExt};
use rouse_shared::api::{LastSnapshot, SandboxSnapshot, SandboxSnapshotStatus, SnapshotPhase};

/// A snapshot waiting for an object it owns (its `VolumeSnapshot`s to become ready to use,
/// its trigger to be processed) is looked at again this often, besides the watch of them (a
/// safety net for a missed event).
pub const READY_RECHECK: Duration = Duration::from_secs(30);

/// What to do for one snapshot, and the status to write. `C` is what to create now: the
/// volumes whose `VolumeSnapshot` is missing (`kube-csi`), or the pod to snapshot
/// (`kube-gke`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubePlan<C> {
    /// What to create now.
    pub create: C,
    /// The desired status; written when it differs from the current one.
    pub status: SandboxSnapshotStatus,
    /// `status.lastSnapshot` to set on the source sandbox (written before the status).
    pub last_snapshot: Option<LastSnapshot>,
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

impl<C: Default> KubePlan<C> {
    /// The plan of a snapshot no longer in progress: its status as it is, nothing to do.
    pub fn unchanged(snapshot: &SandboxSnapshot) -> Self {
        Self::settle(snapshot.status.clone().unwrap_or_default(), None)
    }

    /// A plan that writes `status` and creates nothing; looked at again after
    /// `requeue_after`, if given.
    pub fn settle(status: SandboxSnapshotStatus, requeue_after: Option<Duration>) -> Self {
        Self {
            status,
            requeue_after,
            ..Self::default()
        }
    }

    /// The plan of a snapshot taken by `provider`: `Ready` with `message`, and named in its
    /// sandbox's `status.lastSnapshot`.
    pub fn ready(
        snapshot: &SandboxSnapshot,
        provider: &str,
        taken_at: Option<Time>,
        size_bytes: Option<i64>,
        message: String,
    ) -> Self {
        Self {
            status: SandboxSnapshotStatus {
                phase: Some(SnapshotPhase::Ready),
                taken_at: taken_at.clone(),
                size_bytes,
                provider: Some(provider.to_owned()),
                message: Some(message),
            },
            last_snapshot: Some(LastSnapshot {
                name: snapshot.name_any(),
                taken_at,
            }),
            ..Self::default()
        }
    }
}

/// True while the snapshot still needs work: not being deleted, neither `Ready` nor `Failed`.
pub fn in_progress(snapshot: &SandboxSnapshot) -> bool {
    let phase = snapshot.status.as_ref().and_then(|s| s.phase);
    snapshot.meta().deletion_timestamp.is_none()
        && !matches!(phase, Some(SnapshotPhase::Ready | SnapshotPhase::Failed))
}
