//! Activity accounting: per sandbox, bytes both ways and opened and open connections, reported
//! to the directory coalesced.
//!
//! Each sandbox gets a reporter task only while it has something to report: the first activity
//! starts it, it reports at once, then at most once per `activity.report_interval` — and keeps
//! reporting as a heartbeat while any connection is open. It ends after an interval with no
//! activity and no open connection. There is no global sweep over sandboxes.
//!
//! Besides the coalesced reports, [`SandboxActivity::last_activity`] is the live view: "now" while a
//! connection is open, else when the last one closed. A suspender in the same process (`rouse
//! up`) consults it, so a sandbox in use is never suspended between two reports.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::directory::{ActivityReport, SandboxKey};
use crate::kind::ConnKind;
use crate::metrics as m;
use crate::reporter::Reporter;

/// Activity counters of one sandbox since its last report.
#[derive(Debug)]
pub struct SandboxActivity {
    key: SandboxKey,
    bytes_to_upstream: AtomicU64,
    bytes_to_client: AtomicU64,
    opened: AtomicU64,
    open: AtomicU64,
    dirty: AtomicBool,
    reporter: AtomicBool,
    /// When a connection last opened or closed, in milliseconds since the Unix epoch; 0 = never.
    last_seen_ms: AtomicU64,
}

impl SandboxActivity {
    /// Counters of `key`, all zero.
    pub fn new(key: SandboxKey) -> Self {
        Self {
            key,
            bytes_to_upstream: AtomicU64::new(0),
            bytes_to_client: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            open: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            reporter: AtomicBool::new(false),
            last_seen_ms: AtomicU64::new(0),
        }
    }

    /// The sandbox counted.
    pub fn key(&self) -> &SandboxKey {
        &self.key
    }

    /// Connections open now.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Takes the counters for a report, resetting the deltas.
    fn take(&self) -> ActivityReport {
        self.dirty.store(false, Ordering::Release);
        ActivityReport {
            at: SystemTime::now(),
            bytes_to_upstream: self.bytes_to_upstream.swap(0, Ordering::AcqRel),
            bytes_to_client: self.bytes_to_client.swap(0, Ordering::AcqRel),
            connections_opened: self.opened.swap(0, Ordering::AcqRel),
            connections_open: self.open.load(Ordering::Acquire),
        }
    }

    /// When traffic was last seen: now while a connection is open, else when the last one
    /// opened or closed; `None` when never.
    pub fn last_activity(&self) -> Option<SystemTime> {
        if self.open.load(Ordering::Acquire) > 0 {
            return Some(SystemTime::now());
        }
        match self.last_seen_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    fn touch(&self) {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_seen_ms.fetch_max(ms, Ordering::AcqRel);
    }

    fn busy(&self) -> bool {
        self.dirty.load(Ordering::Acquire) || self.open.load(Ordering::Acquire) > 0
    }
}

/// Counts one open connection to a sandbox for as long as it lives, and the bytes it carries.
///
/// Activity of a sandbox with an open guard is reported as a heartbeat every report interval.
#[derive(Debug)]
pub struct ConnectionGuard {
    activity: Arc<SandboxActivity>,
    reporter: Arc<Reporter>,
    kind: ConnKind,
}

impl ConnectionGuard {
    /// Counts a new open connection of `kind` to the sandbox of `activity`.
    pub(crate) fn new(
        activity: Arc<SandboxActivity>,
        reporter: Arc<Reporter>,
        kind: ConnKind,
    ) -> Self {
        activity.opened.fetch_add(1, Ordering::AcqRel);
        // No `touch` here: while the connection is open `last_activity` is "now", and its
        // close touches before the count drops, so a time stored now would never be read.
        activity.open.fetch_add(1, Ordering::AcqRel);
        activity.dirty.store(true, Ordering::Release);
        m::hot::CONNECTIONS_OPEN_BY_KIND[kind.index()].increment(1.0);
        let guard = Self {
            activity,
            reporter,
            kind,
        };
        guard.ensure_reporter();
        guard
    }

    /// The sandbox this connection goes to.
    pub fn key(&self) -> &SandboxKey {
        &self.activity.key
    }

    /// The kind of connection counted.
    pub fn kind(&self) -> ConnKind {
        self.kind
    }

    /// Adds bytes carried: `to_upstream` from the client to the sandbox, `to_client` back.
    pub fn record_bytes(&self, to_upstream: u64, to_client: u64) {
        let activity = &self.activity;
        if to_upstream > 0 {
            activity
                .bytes_to_upstream
                .fetch_add(to_upstream, Ordering::Relaxed);
            m::hot::BYTES_TO_UPSTREAM.increment(to_upstream);
        }
        if to_client > 0 {
            activity
                .bytes_to_client
                .fetch_add(to_client, Ordering::Relaxed);
            m::hot::BYTES_TO_CLIENT.increment(to_client);
        }
        if to_upstream > 0 || to_client > 0 {
            activity.dirty.store(true, Ordering::Release);
            self.ensure_reporter();
        }
    }

    fn ensure_reporter(&self) {
        if self.activity.reporter.swap(true, Ordering::AcqRel) {
            return;
        }
        spawn_reporter(Arc::clone(&self.reporter), Arc::clone(&self.activity));
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let activity = &self.activity;
        // Touched before the count drops, so a reader never sees no connection and an older
        // time.
        activity.touch();
        activity.open.fetch_sub(1, Ordering::AcqRel);
        activity.dirty.store(true, Ordering::Release);
        m::hot::CONNECTIONS_OPEN_BY_KIND[self.kind.index()].decrement(1.0);
    }
}

/// Starts the reporter task of one sandbox; the caller has set its `reporter` flag.
fn spawn_reporter(reporter: Arc<Reporter>, activity: Arc<SandboxActivity>) {
    let stop = reporter.stop_signal().clone();
    let tasks = reporter.tasks().clone();
    let task = async move {
        let key = &activity.key;
        loop {
            let report = activity.take();
            let interval = reporter.report_interval();
            let result =
                tokio::time::timeout(interval, reporter.directory().report_activity(key, report))
                    .await;
            let label = match result {
                Ok(Ok(())) => "ok",
                Ok(Err(err)) => {
                    tracing::debug!(sandbox.key = %key, error = %err, "activity report failed");
                    "error"
                }
                Err(_) => "timeout",
            };
            metrics::counter!(m::ACTIVITY_REPORTS_TOTAL, "result" => label).increment(1);
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = stop.cancelled() => break,
            }
            if activity.busy() {
                continue;
            }
            activity.reporter.store(false, Ordering::Release);
            // Activity that raced with the flag reset would find the flag still set and not
            // start a reporter; take the duty back if so.
            if !activity.busy() || activity.reporter.swap(true, Ordering::AcqRel) {
                return;
            }
        }
        activity.reporter.store(false, Ordering::Release);
    };
    tasks.spawn(task);
}

#[cfg(test)]
mod tests;
