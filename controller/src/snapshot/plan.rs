//! The `SandboxSnapshot` lifecycle as one pure function: from the snapshot and what was
//! observed (its source sandbox, its data on disk), whether to take it now and the status to
//! write. No I/O, no clock.
//!
//! Rules (docs/snapshots.md):
//! - A snapshot being deleted gets nothing; its data is removed once it is gone.
//! - Once `Ready` or `Failed` a snapshot never changes: it is a point in time. A `Ready` one
//!   whose data vanished from disk turns `Failed`.
//! - Data on disk for this UID (taken, but the status was not written before a crash): the
//!   status is built from it, and the sandbox's `status.lastSnapshot` names it.
//! - No such sandbox: `Pending`, requeue (it may be created after the snapshot).
//! - The sandbox is starting or stopping: `Pending`, requeue soon; a snapshot is taken of a
//!   sandbox that runs and is ready, or that is suspended (or finished).
//! - Otherwise: take it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use rouse_shared::api::{LastSnapshot, SandboxSnapshot, SandboxSnapshotStatus, SnapshotPhase};

use super::record::SnapshotRecord;

/// How long a snapshot waits for a sandbox that does not exist before looking again.
pub const MISSING_RETRY: Duration = Duration::from_secs(2);
/// How long a snapshot waits for a sandbox that is starting or stopping before looking again.
pub const BUSY_RETRY: Duration = Duration::from_millis(500);

/// The state of the sandbox a snapshot is taken of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// No sandbox of that name in the snapshot's namespace.
    Missing,
    /// It is starting or stopping; the message says which.
    Busy(String),
    /// It runs and is ready, or it is suspended or finished: a snapshot can be taken.
    Available,
}

/// What was observed for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotObserved {
    /// The source sandbox.
    pub source: Source,
    /// The snapshot's data on disk, if a whole snapshot for this UID is there.
    pub record: Option<SnapshotRecord>,
}

/// What to do for one snapshot, and the status to write.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SnapshotPlan {
    /// Take the snapshot now.
    pub take: bool,
    /// The desired status; written when it differs from the current one.
    pub status: SandboxSnapshotStatus,
    /// `status.lastSnapshot` to set on the source sandbox (written before the status).
    pub last_snapshot: Option<LastSnapshot>,
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// Plans one reconcile of `snapshot`; see the module documentation for the rules.
pub fn plan(snapshot: &SandboxSnapshot, observed: &SnapshotObserved) -> SnapshotPlan {
    let previous = snapshot.status.clone().unwrap_or_default();
    let keep = |status: SandboxSnapshotStatus| SnapshotPlan {
        status,
        ..SnapshotPlan::default()
    };
    if snapshot.meta().deletion_timestamp.is_some() {
        return keep(previous);
    }
    let uid = snapshot.meta().uid.as_deref().unwrap_or_default();
    let record = observed.record.as_ref().filter(|r| r.uid == uid);
    match (previous.phase, record) {
        (Some(SnapshotPhase::Failed), _) => return keep(previous),
        (Some(SnapshotPhase::Ready), Some(_)) => return keep(previous),
        (Some(SnapshotPhase::Ready), None) => {
            return keep(SandboxSnapshotStatus {
                phase: Some(SnapshotPhase::Failed),
                message: Some("the snapshot's data is missing from the data directory".to_owned()),
                ..previous
            });
        }
        (_, Some(record)) => {
            let taken_at = Some(Time(record.taken_at));
            return SnapshotPlan {
                status: ready(record),
                last_snapshot: Some(LastSnapshot {
                    name: snapshot.meta().name.clone().unwrap_or_default(),
                    taken_at,
                }),
                ..SnapshotPlan::default()
            };
        }
        _ => {}
    }
    let sandbox = &snapshot.spec.sandbox_name;
    let pending = |message: String, requeue: Option<Duration>, take: bool| SnapshotPlan {
        take,
        status: SandboxSnapshotStatus {
            phase: Some(SnapshotPhase::Pending),
            message: Some(message),
            ..SandboxSnapshotStatus::default()
        },
        last_snapshot: None,
        requeue_after: requeue,
    };
    match &observed.source {
        Source::Missing => pending(
            format!("waiting for sandbox {sandbox} to exist"),
            Some(MISSING_RETRY),
            false,
        ),
        Source::Busy(why) => pending(
            format!("waiting for sandbox {sandbox}: {why}"),
            Some(BUSY_RETRY),
            false,
        ),
        Source::Available => pending(
            format!("taking a snapshot of sandbox {sandbox}"),
            None,
            true,
        ),
    }
}

/// The `Ready` status a record stands for.
pub fn ready(record: &SnapshotRecord) -> SandboxSnapshotStatus {
    SandboxSnapshotStatus {
        phase: Some(SnapshotPhase::Ready),
        taken_at: Some(Time(record.taken_at)),
        size_bytes: Some(i64::try_from(record.size_bytes).unwrap_or(i64::MAX)),
        provider: Some(record.provider.clone()),
        message: Some(record.message.clone()),
    }
}

/// The `Failed` status for a take that failed for good.
pub fn failed(provider: &str, message: String) -> SandboxSnapshotStatus {
    said(SnapshotPhase::Failed, provider, message)
}

/// The `Pending` status of `provider` saying `message` (what it waits for).
pub fn pending(provider: &str, message: String) -> SandboxSnapshotStatus {
    said(SnapshotPhase::Pending, provider, message)
}

/// A status of `phase` by `provider` with `message` alone.
fn said(phase: SnapshotPhase, provider: &str, message: String) -> SandboxSnapshotStatus {
    SandboxSnapshotStatus {
        phase: Some(phase),
        provider: Some(provider.to_owned()),
        message: Some(message),
        ..SandboxSnapshotStatus::default()
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
