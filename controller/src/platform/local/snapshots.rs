//! The local platform's part of `SandboxSnapshot`s: taking one (memory through a live
//! checkpoint or the image of a sandbox suspended by checkpoint, volumes by copy), removing
//! and sweeping their directories, and seeding a sandbox made with `spec.restoreFrom` (a
//! fork) from one before its first start.
//!
//! A snapshot's data lives in [`rouse_shared::datadir::snapshot_dir`]: `owner` (its UID,
//! first), `image/` (the memory image), `volumes/{name}/`, and `snapshot.json` (last).

use std::collections::HashMap;
use std::path::PathBuf;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rouse_shared::api::{OperatingMode, Sandbox, SandboxSnapshot};
use rouse_shared::store::ObjectKey;

use super::LocalPlatform;
use super::checkpoint::{image_dir, pending_image};
use super::copy::{copy_tree, disk_usage};
use super::error::{Error, Result};
use super::layout::ensure_parent;
use super::live::copy_volumes;
use super::spec::{LaunchSpec, RuntimeKind};
use super::supervisor::WorkloadPhase;
use crate::snapshot::plan::Source;
use crate::snapshot::record::{OWNER, SnapshotRecord, owner};
use crate::snapshot::{CheckpointOutcome, Snapshotter};

/// Why a snapshot could not be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeError {
    /// The sandbox changed under the take (it woke, it stopped): try again.
    Retry(String),
    /// It cannot be taken; the snapshot fails with this message.
    Failed(String),
}

impl LocalPlatform {
    /// The directory of a snapshot's data.
    pub fn snapshot_dir(&self, key: &ObjectKey) -> PathBuf {
        rouse_shared::datadir::snapshot_dir(self.layout().data(), &key.namespace, &key.name)
    }

    /// The record of a whole snapshot taken under this name, if there is one.
    pub fn snapshot_record(&self, key: &ObjectKey) -> Option<SnapshotRecord> {
        SnapshotRecord::read(&self.snapshot_dir(key))
    }

    /// Whether a snapshot of `sandbox` can be taken now (see [`Source`]).
    pub fn snapshot_source(&self, sandbox: &Sandbox) -> Source {
        let key = ObjectKey::of(sandbox);
        let busy = |why: &str| Source::Busy(why.to_owned());
        match self.current(&key) {
            Some((status, stopping, _)) => match status.phase {
                WorkloadPhase::Running if status.ready && !stopping => Source::Available,
                WorkloadPhase::Stopped | WorkloadPhase::Succeeded | WorkloadPhase::Failed => {
                    Source::Available
                }
                _ if stopping => busy("its workload is stopping"),
                _ => busy("its workload is starting"),
            },
            None if sandbox.spec.effective_operating_mode() == OperatingMode::Running => {
                busy("its workload is starting")
            }
            None => Source::Available,
        }
    }

    /// Takes a snapshot of `sandbox` for `snapshot` into the snapshot's directory and
    /// records it; see the module documentation.
    pub async fn take_snapshot(
        &self,
        sandbox: &Sandbox,
        snapshot: &SandboxSnapshot,
    ) -> Result<SnapshotRecord, TakeError> {
        let key = ObjectKey::of(sandbox);
        let dir = self.snapshot_dir(&ObjectKey::of(snapshot));
        let uid = snapshot.uid().unwrap_or_default();
        let io = |e: std::io::Error| TakeError::Retry(format!("{}: {e}", dir.display()));
        // A half-taken snapshot of an earlier try (or a crash) starts over.
        if let Err(error) = std::fs::remove_dir_all(&dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            return Err(io(error));
        }
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::write(dir.join(OWNER), &uid).map_err(io)?;
        let provider = self.provider(sandbox);
        let launch =
            LaunchSpec::from_sandbox(sandbox).map_err(|e| TakeError::Failed(e.to_string()))?;
        let volumes: Vec<String> = launch.volumes.iter().map(|v| v.name.clone()).collect();
        let want_memory = snapshot.spec.include_memory;
        let gvisor = launch.runtime == RuntimeKind::Gvisor;
        let mut memory = false;
        let mut pause_ms = None;
        let mut breakdown = String::new();
        let mut why_no_memory = None;
        let copied = match self.current(&key) {
            Some((status, false, live))
                if status.phase == WorkloadPhase::Running && status.ready =>
            {
                match live {
                    Some(live) if want_memory => {
                        let taken = live.take(dir.clone()).await.map_err(TakeError::Failed)?;
                        memory = true;
                        pause_ms = taken.pause_ms;
                        breakdown = format!(
                            " (checkpoint {} ms, copies {} ms, restore until ready {} ms)",
                            taken.checkpoint_ms,
                            taken.copy_ms,
                            taken.restore_ms.unwrap_or_default()
                        );
                        taken.volumes
                    }
                    _ => {
                        why_no_memory = Some(if gvisor {
                            "the gvisor sandbox runs with host networking (suspension.strategy: Checkpoint makes it checkpointable)"
                        } else {
                            "the local-process provider cannot snapshot memory"
                        });
                        copy_volumes(self.layout(), &key, &volumes, &dir)
                            .await
                            .map_err(TakeError::Retry)?
                    }
                }
            }
            Some((status, ..))
                if !matches!(
                    status.phase,
                    WorkloadPhase::Stopped | WorkloadPhase::Succeeded | WorkloadPhase::Failed
                ) =>
            {
                return Err(TakeError::Retry(
                    "the sandbox's workload is starting or stopping".to_owned(),
                ));
            }
            _ => {
                match pending_image(self.layout(), &key) {
                    Some(image) if want_memory && gvisor => {
                        // Woken meanwhile: the restore deletes the image; the retry takes a
                        // live snapshot instead.
                        copy_tree(&image, &dir.join("image"))
                            .await
                            .map_err(|e| TakeError::Retry(e.to_string()))?;
                        memory = true;
                    }
                    _ => {
                        why_no_memory = Some(if gvisor {
                            "the sandbox is suspended without a memory image (suspension.strategy: Checkpoint keeps one)"
                        } else {
                            "the local-process provider cannot snapshot memory"
                        });
                    }
                }
                copy_volumes(self.layout(), &key, &volumes, &dir)
                    .await
                    .map_err(TakeError::Retry)?
            }
        };
        let mut message = match (memory, copied.len()) {
            (true, n) => format!("memory image and {n} volume(s)"),
            (false, n) => format!("{n} volume(s), no memory"),
        };
        if let Some(ms) = pause_ms {
            message.push_str(&format!("; the sandbox was paused {ms} ms{breakdown}"));
        }
        if want_memory && let Some(why) = why_no_memory {
            message.push_str(&format!("; includeMemory is unsupported here: {why}"));
        }
        let record = SnapshotRecord {
            uid,
            sandbox: key.name.clone(),
            taken_at: Timestamp::now(),
            size_bytes: disk_usage(&dir),
            provider: provider.to_owned(),
            memory,
            volumes: copied,
            pause_ms,
            message,
        };
        record.write(&dir).map_err(io)?;
        metrics::counter!("rouse_controller_snapshots_total", "provider" => provider).increment(1);
        tracing::info!(snapshot.key = %ObjectKey::of(snapshot), sandbox.key = %key, snapshot.bytes = record.size_bytes, snapshot.memory = memory, "snapshot taken");
        Ok(record)
    }

    /// Removes a snapshot's data (the snapshot was deleted).
    pub fn remove_snapshot(&self, key: &ObjectKey) {
        let dir = self.snapshot_dir(key);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(snapshot.key = %key, "snapshot data removed"),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(snapshot.key = %key, %error, "removing a snapshot's data failed");
            }
        }
    }

    /// Removes the data of snapshots missing from `existing` (key → UID), or left by a
    /// deleted snapshot of the same name; returns how many directories went.
    pub fn sweep_snapshots(&self, existing: &HashMap<ObjectKey, String>) -> usize {
        let root = self.layout().data().join("snapshots");
        let mut removed = 0;
        for namespace in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for dir in std::fs::read_dir(namespace.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = dir.path();
                let kept = owner(&path).is_some_and(|uid| {
                    namespace.file_name().to_str().is_some_and(|ns| {
                        existing.iter().any(|(key, u)| {
                            key.namespace == ns && *u == uid && self.snapshot_dir(key) == path
                        })
                    })
                });
                if !kept && std::fs::remove_dir_all(&path).is_ok() {
                    tracing::info!(path = %path.display(), "removed the data of a snapshot that no longer exists");
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Whether a sandbox made with `spec.restoreFrom` was already seeded from its snapshot
    /// (it then runs on its own, whatever happens to the snapshot).
    pub fn seeded(&self, sandbox: &Sandbox) -> bool {
        let marker = self.layout().fork_marker(&ObjectKey::of(sandbox));
        std::fs::read_to_string(marker)
            .is_ok_and(|uid| Some(uid.trim()) == sandbox.meta().uid.as_deref())
    }

    /// Before the first start of a sandbox made with `spec.restoreFrom`: its volumes become
    /// copies of the snapshot's, and a memory image (gVisor) is left pending in its
    /// checkpoint directory, so the start is a restore into the sandbox's own network
    /// namespace.
    pub(super) async fn seed_fork(&self, sandbox: &Sandbox, launch: &mut LaunchSpec) -> Result<()> {
        let Some(from) = &sandbox.spec.restore_from else {
            return Ok(());
        };
        let key = ObjectKey::of(sandbox);
        let restores_memory = launch.runtime == RuntimeKind::Gvisor;
        if self.seeded(sandbox) {
            // The image (if still pending) restores on this start too.
            return Ok(());
        }
        let snapshot = ObjectKey::new(key.namespace.clone(), from.snapshot_name.clone());
        let dir = self.snapshot_dir(&snapshot);
        let record = SnapshotRecord::read(&dir).ok_or_else(|| {
            Error::Unsupported(format!(
                "spec.restoreFrom: snapshot {} has no data (not taken yet, or deleted)",
                from.snapshot_name
            ))
        })?;
        for volume in launch
            .volumes
            .iter()
            .filter(|v| record.volumes.contains(&v.name))
        {
            copy_tree(
                &dir.join("volumes").join(&volume.name),
                &self.layout().volume_dir(&key, &volume.name),
            )
            .await?;
        }
        if record.memory && restores_memory {
            copy_tree(&dir.join("image"), &image_dir(self.layout(), &key)).await?;
            CheckpointOutcome::Saved {
                taken_at: record.taken_at,
                size_bytes: record.size_bytes,
                duration_ms: 0,
            }
            .write(&self.layout().checkpoint_dir(&key));
        }
        let marker = self.layout().fork_marker(&key);
        ensure_parent(&marker)?;
        std::fs::write(&marker, sandbox.meta().uid.as_deref().unwrap_or_default())
            .map_err(|e| Error::data_dir(&marker, e))?;
        tracing::info!(sandbox.key = %key, snapshot.name = %from.snapshot_name, memory = record.memory && restores_memory, "sandbox seeded from its snapshot");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rouse_shared::store::ObjectKey;

    use crate::platform::local::{LocalConfig, LocalPlatform};
    use crate::snapshot::record::OWNER;

    #[tokio::test]
    async fn a_sweep_keeps_only_the_data_of_existing_snapshots_of_the_same_uid() {
        let data = tempfile::tempdir().expect("tempdir");
        let platform = LocalPlatform::new(LocalConfig::new(data.path())).expect("platform");
        let dir = |name: &str| platform.snapshot_dir(&ObjectKey::new("team", name));
        for (name, uid) in [("kept", "u1"), ("gone", "u2"), ("renewed", "old")] {
            std::fs::create_dir_all(dir(name).join("volumes/work")).expect("mkdir");
            std::fs::write(dir(name).join(OWNER), uid).expect("owner");
        }
        // Half-created before a crash: no owner yet.
        std::fs::create_dir_all(dir("partial")).expect("mkdir");
        let existing: HashMap<ObjectKey, String> = [
            (ObjectKey::new("team", "kept"), "u1".to_owned()),
            (ObjectKey::new("team", "renewed"), "new".to_owned()),
            (ObjectKey::new("team", "partial"), "u3".to_owned()),
        ]
        .into_iter()
        .collect();
        assert_eq!(platform.sweep_snapshots(&existing), 3);
        assert!(dir("kept").join("volumes/work").is_dir());
        for name in ["gone", "renewed", "partial"] {
            assert!(!dir(name).exists(), "{name}");
        }
        platform.remove_snapshot(&ObjectKey::new("team", "kept"));
        assert!(!dir("kept").exists());
    }
}
