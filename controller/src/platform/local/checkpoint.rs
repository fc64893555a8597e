//! Suspend by checkpoint on the local platform: the image a `runsc checkpoint` leaves under
//! `{data}/checkpoints/{namespace}/{sandbox}/image`, its [`CheckpointOutcome`] record beside
//! it, and the stop path that takes it (quiesce the proxy → checkpoint → wait for the exit).
//!
//! A workload whose image is pending is started with `runsc restore` instead of `runsc run`;
//! the image is removed once the restored workload is ready, and a restore that never gets
//! ready is recorded as failed so the next start is a fresh one rather than a loop.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rouse_shared::store::ObjectKey;
use tokio::process::Child;

use super::gvisor::Runsc;
use super::layout::Layout;
use crate::snapshot::{CheckpointOutcome, Quiesce};

/// How long the sandbox may take to exit after its checkpoint was written.
const EXIT_AFTER_CHECKPOINT: Duration = Duration::from_secs(10);
/// How many times a refused checkpoint is tried before the workload is stopped the plain way
/// (its memory then lost): a refusal can be passing (a connection still closing, a restore
/// still loading memory in the background), a stop cannot be undone.
const CHECKPOINT_ATTEMPTS: u32 = 4;
/// The pause before the second attempt, doubled before each further one (0.25 + 0.5 + 1 s).
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// No attempt starts later than this after the first one: with runsc's own deadline per call
/// (15 s), a suspend never takes longer than about 45 s.
const RETRY_WINDOW: Duration = Duration::from_secs(30);

/// The memory image directory of a sandbox.
pub fn image_dir(layout: &Layout, key: &ObjectKey) -> PathBuf {
    layout.checkpoint_dir(key).join("image")
}

/// The image to restore the sandbox from, if its last checkpoint was saved and not yet
/// restored.
pub fn pending_image(layout: &Layout, key: &ObjectKey) -> Option<PathBuf> {
    let dir = layout.checkpoint_dir(key);
    let image = image_dir(layout, key);
    match CheckpointOutcome::read(&dir)? {
        CheckpointOutcome::Saved { .. } if image.join("checkpoint.img").is_file() => Some(image),
        _ => None,
    }
}

/// The restored workload is ready: the image has served its purpose.
pub fn restored(layout: &Layout, key: &ObjectKey) {
    let dir = layout.checkpoint_dir(key);
    if let Err(error) = std::fs::remove_dir_all(&dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(sandbox.key = %key, %error, "removing a restored checkpoint failed");
    }
    tracing::info!(sandbox.key = %key, "workload restored from its checkpoint");
}

/// A restore ended before the workload was ready: record it, and drop the image so the next
/// start is a fresh one.
pub fn restore_failed(layout: &Layout, key: &ObjectKey, why: &str) {
    let _ = std::fs::remove_dir_all(image_dir(layout, key));
    CheckpointOutcome::Failed {
        at: Timestamp::now(),
        message: format!("restoring the checkpoint failed ({why})"),
    }
    .write(&layout.checkpoint_dir(key));
    tracing::warn!(sandbox.key = %key, restore.exit = why, "restore from checkpoint failed; the next start is fresh");
}

/// The runtime cannot keep memory: record why the suspend was a plain stop.
pub fn unsupported(layout: &Layout, key: &ObjectKey, message: &str) {
    CheckpointOutcome::Unsupported {
        at: Timestamp::now(),
        message: message.to_owned(),
    }
    .write(&layout.checkpoint_dir(key));
}

/// Stops a gVisor workload by checkpoint: the proxy resets and holds the sandbox's
/// connections, runsc saves it into the image directory, and the sandbox exits. `Err` when
/// the checkpoint failed (recorded; the caller then stops the workload the plain way).
pub async fn suspend(
    runsc: &Runsc,
    layout: &Layout,
    key: &ObjectKey,
    quiesce: Option<&Arc<dyn Quiesce>>,
    child: &mut Child,
) -> Result<Option<ExitStatus>, ()> {
    let dir = layout.checkpoint_dir(key);
    let image = image_dir(layout, key);
    let _ = std::fs::remove_dir_all(&dir);
    let quiet = match quiesce {
        Some(q) => q.quiesce(key).await,
        None => true,
    };
    if !quiet {
        tracing::warn!(sandbox.key = %key, "connections to the sandbox were still open; checkpointing anyway");
    }
    let started = Instant::now();
    let result = checkpoint_with_retries(runsc, key, &image, child).await;
    let took = started.elapsed();
    let outcome = match result {
        Ok(()) => {
            let status = tokio::time::timeout(EXIT_AFTER_CHECKPOINT, child.wait())
                .await
                .ok()
                .and_then(Result::ok);
            let size_bytes = dir_size(&image);
            metrics::histogram!("rouse_controller_checkpoint_duration_seconds")
                .record(took.as_secs_f64());
            tracing::info!(sandbox.key = %key, checkpoint.bytes = size_bytes, checkpoint.ms = took.as_millis() as u64, "workload checkpointed");
            CheckpointOutcome::Saved {
                taken_at: Timestamp::now(),
                size_bytes,
                duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            }
            .write(&dir);
            Ok(status)
        }
        Err(message) => {
            tracing::warn!(sandbox.key = %key, error = %message, "checkpoint failed; stopping the workload");
            let _ = std::fs::remove_dir_all(&image);
            CheckpointOutcome::Failed {
                at: Timestamp::now(),
                message,
            }
            .write(&dir);
            Err(())
        }
    };
    let label = if outcome.is_ok() { "saved" } else { "failed" };
    metrics::counter!("rouse_controller_checkpoints_total", "result" => label).increment(1);
    if let Some(q) = quiesce {
        // Held connections now see the sandbox suspended and wake it (a restore).
        q.release(key);
    }
    if outcome.is_ok() {
        runsc.delete(key).await;
    }
    outcome
}

/// `runsc checkpoint`, tried again while runsc refuses and the sandbox still runs, at most
/// [`CHECKPOINT_ATTEMPTS`] times within [`RETRY_WINDOW`]. `Err` says how often it was tried,
/// for how long, and runsc's last answer.
async fn checkpoint_with_retries(
    runsc: &Runsc,
    key: &ObjectKey,
    image: &Path,
    child: &mut Child,
) -> Result<(), String> {
    let first = Instant::now();
    let mut pause = RETRY_PAUSE;
    let mut attempt = 1;
    loop {
        let error = match runsc.checkpoint(key, image, false).await {
            Ok(()) => {
                if attempt > 1 {
                    tracing::info!(sandbox.key = %key, checkpoint.attempts = attempt, "checkpoint saved after a retry");
                }
                return Ok(());
            }
            Err(error) => error.to_string(),
        };
        let spent = first.elapsed();
        let gone = !matches!(child.try_wait(), Ok(None)) || !runsc.running(key).await;
        let tries = if attempt == 1 {
            "once".to_owned()
        } else {
            format!("{attempt} times")
        };
        if gone {
            return Err(format!(
                "{error} (tried {tries} in {:.1} s; the sandbox ended)",
                spent.as_secs_f64()
            ));
        }
        if attempt >= CHECKPOINT_ATTEMPTS || spent + pause > RETRY_WINDOW {
            return Err(format!(
                "{error} (tried {tries} in {:.1} s)",
                spent.as_secs_f64()
            ));
        }
        metrics::counter!("rouse_controller_checkpoint_retries_total").increment(1);
        tracing::info!(sandbox.key = %key, checkpoint.attempt = attempt, %error, "checkpoint refused; trying again");
        let _ = std::fs::remove_dir_all(image);
        tokio::time::sleep(pause).await;
        pause *= 2;
        attempt += 1;
    }
}

/// The bytes of the files directly in `dir` (an image is a flat directory).
fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}
