//! Test fixtures of the snapshot plans.

use rouse_shared::api::{SandboxSnapshot, SandboxSnapshotSpec};

/// Snapshot `monday` (uid `uid-1`, namespace `team-a`) of sandbox `alice`, with no status.
pub(crate) fn monday(include_memory: bool) -> SandboxSnapshot {
    let mut s = SandboxSnapshot::new(
        "monday",
        SandboxSnapshotSpec {
            sandbox_name: "alice".to_owned(),
            include_memory,
        },
    );
    s.metadata.uid = Some("uid-1".to_owned());
    s.metadata.namespace = Some("team-a".to_owned());
    s
}
