//! The record a checkpoint suspend leaves beside its image, and the `Checkpointed` condition
//! the sandbox's status shows from it.
//!
//! The record is a small JSON file in the checkpoint directory, so it outlives a restart of
//! `rouse up` with the image it describes.

use std::path::Path;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::{Deserialize, Serialize};

/// The condition type: True while a memory image waits to be restored, False when the last
/// checkpoint suspend fell back to a plain stop (with the reason).
pub const CHECKPOINTED: &str = "Checkpointed";
/// The record's file name in the checkpoint directory.
const RECORD: &str = "outcome.json";

/// How the last checkpoint suspend of a sandbox went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum CheckpointOutcome {
    /// The memory image is saved and is restored on the next start.
    Saved {
        /// When the checkpoint finished.
        taken_at: Timestamp,
        /// The image's size on disk.
        size_bytes: u64,
        /// How long `runsc checkpoint` took.
        duration_ms: u64,
    },
    /// The runtime cannot keep memory; the workload was stopped, volumes kept.
    Unsupported {
        /// When the workload was stopped instead.
        at: Timestamp,
        /// Why.
        message: String,
    },
    /// The checkpoint (or the restore of its image) failed; the workload was stopped and
    /// starts fresh, volumes kept.
    Failed {
        /// When it failed.
        at: Timestamp,
        /// What failed.
        message: String,
    },
}

impl CheckpointOutcome {
    /// Reads the record in `dir`, if one is there.
    pub fn read(dir: &Path) -> Option<Self> {
        let text = std::fs::read(dir.join(RECORD)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Writes the record into `dir` (created if missing); a failure is logged only, the
    /// condition then misses the detail but nothing else depends on it.
    pub fn write(&self, dir: &Path) {
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            let text = serde_json::to_vec(self).map_err(std::io::Error::other)?;
            std::fs::write(dir.join(RECORD), text)
        });
        if let Err(error) = written {
            tracing::warn!(path = %dir.display(), %error, "writing the checkpoint record failed");
        }
    }

    /// The `Checkpointed` condition for this outcome.
    pub fn condition(&self) -> Condition {
        let (status, reason, message, at) = match self {
            CheckpointOutcome::Saved {
                taken_at,
                size_bytes,
                duration_ms,
            } => (
                "True",
                "MemoryKept",
                format!(
                    "memory image of {size_bytes} bytes saved in {duration_ms} ms; restored on wake"
                ),
                *taken_at,
            ),
            CheckpointOutcome::Unsupported { at, message } => (
                "False",
                "CheckpointUnsupported",
                format!("{message}; suspended by stop, volumes kept"),
                *at,
            ),
            CheckpointOutcome::Failed { at, message } => (
                "False",
                "CheckpointFailed",
                format!("{message}; started fresh, volumes kept"),
                *at,
            ),
        };
        Condition {
            type_: CHECKPOINTED.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: Time(at),
            observed_generation: None,
        }
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
