//! The record a taken snapshot leaves in its directory
//! (`{data}/snapshots/{namespace}/{snapshot}.snapshot/snapshot.json`, see
//! [`rouse_shared::datadir::snapshot_dir`]): what was taken and when. It is written last, so a
//! directory with a record holds a whole snapshot; the `SandboxSnapshot`'s status is built from
//! it, and after a crash between the take and the status write the next reconcile finds it
//! instead of taking the snapshot again.

use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The record's file name in a snapshot directory.
const RECORD: &str = "snapshot.json";
/// The file holding the UID of the `SandboxSnapshot` a directory belongs to, written before
/// anything else, so a sweep can tell a half-taken snapshot's directory from another's.
pub const OWNER: &str = "owner";

/// What a snapshot directory holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRecord {
    /// UID of the `SandboxSnapshot` it was taken for.
    pub uid: String,
    /// The sandbox it was taken of.
    pub sandbox: String,
    /// When it was taken.
    pub taken_at: Timestamp,
    /// The bytes its files take on disk.
    pub size_bytes: u64,
    /// The provider that took it (`local-gvisor`, `local-process`).
    pub provider: String,
    /// True when it holds a memory image (`image/`).
    pub memory: bool,
    /// The volumes copied (`volumes/{name}/`).
    pub volumes: Vec<String>,
    /// How long the sandbox was paused for a live memory snapshot (checkpoint, copies,
    /// restore until ready), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_ms: Option<u64>,
    /// A human-readable summary (and why memory is missing, when it was asked for).
    pub message: String,
}

impl SnapshotRecord {
    /// Reads the record in `dir`, if a whole snapshot is there.
    pub fn read(dir: &Path) -> Option<Self> {
        let text = std::fs::read(dir.join(RECORD)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Writes the record into `dir`, through a temporary file and a rename so a crash never
    /// leaves half a record.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let partial = dir.join(format!("{RECORD}.partial"));
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, dir.join(RECORD))
    }
}

/// The UID recorded as the owner of a snapshot directory.
pub fn owner(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(OWNER))
        .ok()
        .map(|s| s.trim().to_owned())
}
