//! [`Reporter`]: the small handle through which the data path talks to the directory in the
//! background — activity reports and wakes — without holding the whole router.
//!
//! Guards and the hold/wake driver keep an `Arc<Reporter>`; it owns nothing of the routing
//! table, so the modules that use it never import the router.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::directory::Directory;

/// The directory, the background task tracker and stop signal, and the report interval in
/// force.
pub struct Reporter {
    directory: Arc<dyn Directory>,
    tasks: TaskTracker,
    stop: CancellationToken,
    /// `activity.report_interval` in milliseconds, updated on config reload.
    report_interval_ms: AtomicU64,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("report_interval", &self.report_interval())
            .finish_non_exhaustive()
    }
}

impl Reporter {
    /// A reporter sending to `directory`, reporting activity every `report_interval`.
    pub(crate) fn new(directory: Arc<dyn Directory>, report_interval: Duration) -> Self {
        let reporter = Self {
            directory,
            tasks: TaskTracker::new(),
            stop: CancellationToken::new(),
            report_interval_ms: AtomicU64::new(0),
        };
        reporter.set_report_interval(report_interval);
        reporter
    }

    /// The directory routes come from and reports go to.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        &self.directory
    }

    /// The interval between activity reports of one sandbox.
    pub fn report_interval(&self) -> Duration {
        Duration::from_millis(self.report_interval_ms.load(Ordering::Relaxed))
    }

    /// Changes the report interval (config reload); reporters pick it up at their next report.
    pub(crate) fn set_report_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.report_interval_ms.store(ms, Ordering::Relaxed);
    }

    /// Cancelled when background work must stop.
    pub fn stop_signal(&self) -> &CancellationToken {
        &self.stop
    }

    /// The tracker owning background work.
    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// Runs `work` as tracked background work.
    pub(crate) fn spawn(self: &Arc<Self>, work: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(work);
    }

    /// Stops background work and waits for it.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}
