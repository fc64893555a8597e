//! [`Runtime`]: the runtime part of the `Router` — what every connection shares
//! besides config and routes: the lifecycle (drain, hard stop, readiness, task trackers),
//! the admission limits, the held totals, the background reporter and the quiescer.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::limits::Limits;
use crate::quiesce::Quiescer;
use crate::reporter::Reporter;
use crate::wake::HeldTotals;

/// A readiness check `/readyz` asks besides the proxy's own: `Ok`, or why not ready.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The runtime part of the router.
pub(super) struct Runtime {
    /// The directory, background tasks and report interval, shared with connection guards.
    pub(super) reporter: Arc<Reporter>,
    /// Held connections over all sandboxes.
    pub(super) held: Arc<HeldTotals>,
    /// Connection caps and per-IP rates.
    pub(super) limits: Limits,
    /// Accept loops and per-connection tasks.
    pub(super) tasks: TaskTracker,
    /// Cancelled when draining starts.
    pub(super) drain: CancellationToken,
    /// Cancelled when the drain deadline passes.
    pub(super) hard_stop: CancellationToken,
    draining: AtomicBool,
    /// Resets and holds upstream connections around checkpoints.
    pub(super) quiescer: Quiescer,
    /// What else `/readyz` asks (set once by the embedding, e.g. its store's health).
    readiness: OnceLock<ReadinessCheck>,
}

impl Runtime {
    /// A runtime whose background work reports to `reporter`.
    pub(super) fn new(reporter: Reporter) -> Self {
        Self {
            reporter: Arc::new(reporter),
            held: Arc::new(HeldTotals::default()),
            limits: Limits::new(),
            tasks: TaskTracker::new(),
            drain: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            draining: AtomicBool::new(false),
            quiescer: Quiescer::default(),
            readiness: OnceLock::new(),
        }
    }

    /// Sets the embedding's readiness check; false when one was set already.
    pub(super) fn set_readiness_check(&self, check: ReadinessCheck) -> bool {
        self.readiness.set(check).is_ok()
    }

    /// The embedding's readiness verdict: `Err` says why it is not ready.
    pub(super) fn embedding_ready(&self) -> Result<(), String> {
        self.readiness.get().map_or(Ok(()), |check| check())
    }

    /// Whether draining started.
    pub(super) fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Starts draining: listeners stop accepting, connections finish in-flight work.
    pub(super) fn start_drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.drain.cancel();
    }

    /// Ends the drain: connections still open are closed.
    pub(super) fn stop_now(&self) {
        self.start_drain();
        self.hard_stop.cancel();
    }
}
