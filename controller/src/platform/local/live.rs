//! A memory snapshot of a running gVisor sandbox (`SandboxSnapshot` of a running sandbox):
//! the sandbox is checkpointed (it exits), its volumes are copied while nothing writes them,
//! and it is restored from the same image at once. (`checkpoint --leave-running` would keep it
//! running, but the volumes would then be copied while the workload writes them, and memory
//! and files would disagree.) The proxy holds the sandbox's connections from before the checkpoint until
//! the restored workload is ready, as for a checkpoint suspend; that pause is measured.
//!
//! The supervisor runs [`take`] on a [`SnapshotRequest`], restarts the workload (the pending
//! image in the sandbox's checkpoint directory makes the start a restore), and finishes the
//! [`Paused`] snapshot once the restored workload is ready or has exited.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rouse_shared::store::ObjectKey;
use tokio::process::Child;
use tokio::sync::oneshot;

use super::checkpoint::image_dir;
use super::copy::copy_tree;
use super::gvisor::Runsc;
use super::layout::Layout;
use crate::snapshot::{CheckpointOutcome, Quiesce};

/// How long the sandbox may take to exit after its checkpoint was written.
const EXIT_AFTER_CHECKPOINT: Duration = Duration::from_secs(10);

/// What a live snapshot left in its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSnapshot {
    /// The volumes copied into `{dir}/volumes/`.
    pub volumes: Vec<String>,
    /// How long `runsc checkpoint` took.
    pub checkpoint_ms: u64,
    /// From the checkpoint's end to the copies' end (the sandbox's exit, the image and
    /// volume copies).
    pub copy_ms: u64,
    /// From the quiesce to the restored workload being ready; `None` when it never got ready.
    pub pause_ms: Option<u64>,
    /// From the copies' end to the restored workload being ready.
    pub restore_ms: Option<u64>,
}

/// A request to the supervisor of a running workload: save it into `dir` (`image/` and
/// `volumes/`), answer on `reply`.
#[derive(Debug)]
pub struct SnapshotRequest {
    /// The snapshot's directory.
    pub dir: PathBuf,
    /// Where the outcome goes, once the restored workload is ready (or could not be).
    pub reply: oneshot::Sender<Result<LiveSnapshot, String>>,
}

/// A snapshot taken, waiting for the restored workload.
pub struct Paused {
    key: ObjectKey,
    started: Instant,
    saved: Instant,
    quiesce: Option<Arc<dyn Quiesce>>,
    reply: oneshot::Sender<Result<LiveSnapshot, String>>,
    result: Result<LiveSnapshot, String>,
}

impl Paused {
    /// Lets the proxy's held connections through and answers the request; `ready` says the
    /// restored workload passed its readiness check (the pause ends here).
    pub fn finish(self, ready: bool) {
        if let Some(q) = &self.quiesce {
            q.release(&self.key);
        }
        let pause = self.started.elapsed();
        let result = self.result.map(|mut taken| {
            if ready {
                metrics::histogram!("rouse_controller_snapshot_pause_seconds")
                    .record(pause.as_secs_f64());
                taken.pause_ms = Some(millis(pause));
                taken.restore_ms = Some(millis(self.saved.elapsed()));
            }
            taken
        });
        tracing::info!(sandbox.key = %self.key, snapshot.pause_ms = millis(pause), restored = ready, "live snapshot finished");
        let _ = self.reply.send(result);
    }
}

/// Saves the running sandbox into `request.dir` and leaves its image pending in the
/// sandbox's checkpoint directory, so the next start restores it. `Err` (the request
/// answered) when the checkpoint failed: the workload may be gone and is restarted fresh.
pub async fn take(
    runsc: &Runsc,
    layout: &Layout,
    key: &ObjectKey,
    volumes: &[String],
    quiesce: Option<&Arc<dyn Quiesce>>,
    child: &mut Child,
    request: SnapshotRequest,
) -> Result<Paused, String> {
    let started = Instant::now();
    let SnapshotRequest { dir, reply } = request;
    if let Some(q) = quiesce
        && !q.quiesce(key).await
    {
        tracing::warn!(sandbox.key = %key, "connections to the sandbox were still open; checkpointing anyway");
    }
    let image = dir.join("image");
    let checkpointed = Instant::now();
    if let Err(error) = runsc.checkpoint(key, &image, false).await {
        let message = format!("checkpoint of the running sandbox failed: {error}");
        if let Some(q) = quiesce {
            q.release(key);
        }
        let _ = reply.send(Err(message.clone()));
        return Err(message);
    }
    let checkpoint_ms = millis(checkpointed.elapsed());
    let copying = Instant::now();
    let _ = tokio::time::timeout(EXIT_AFTER_CHECKPOINT, child.wait()).await;
    runsc.delete(key).await;
    // The sandbox's own copy first: whatever happens to the snapshot, it is restored.
    let own = pend_restore(layout, key, &image, checkpoint_ms).await;
    let result = match own {
        Err(message) => Err(message),
        Ok(()) => copy_volumes(layout, key, volumes, &dir)
            .await
            .map(|volumes| LiveSnapshot {
                volumes,
                checkpoint_ms,
                copy_ms: millis(copying.elapsed()),
                pause_ms: None,
                restore_ms: None,
            }),
    };
    Ok(Paused {
        key: key.clone(),
        started,
        saved: Instant::now(),
        quiesce: quiesce.cloned(),
        reply,
        result,
    })
}

/// Copies the snapshot's image into the sandbox's checkpoint directory with a `Saved`
/// record, which makes its next start a restore.
async fn pend_restore(
    layout: &Layout,
    key: &ObjectKey,
    image: &Path,
    checkpoint_ms: u64,
) -> Result<(), String> {
    copy_tree(image, &image_dir(layout, key))
        .await
        .map_err(|e| format!("keeping the image for the restore: {e}"))?;
    CheckpointOutcome::Saved {
        taken_at: Timestamp::now(),
        size_bytes: super::copy::disk_usage(image),
        duration_ms: checkpoint_ms,
    }
    .write(&layout.checkpoint_dir(key));
    Ok(())
}

/// Copies each of the sandbox's volume directories that exists into `{dir}/volumes/`.
pub async fn copy_volumes(
    layout: &Layout,
    key: &ObjectKey,
    volumes: &[String],
    dir: &Path,
) -> Result<Vec<String>, String> {
    let mut copied = Vec::new();
    for volume in volumes {
        let from = layout.volume_dir(key, volume);
        if !from.is_dir() {
            continue;
        }
        copy_tree(&from, &dir.join("volumes").join(volume))
            .await
            .map_err(|e| format!("copying volume {volume}: {e}"))?;
        copied.push(volume.clone());
    }
    Ok(copied)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
