//! [`Routes`]: the routes part of the `Router` — the routing table the directory
//! feeds, and the start barrier that keeps connections from being told a sandbox does not
//! exist before the directory's first full list arrived.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::slot::Slot;
use super::table::RouteTable;
use crate::directory::SandboxKey;

/// The routes part of the router.
#[derive(Debug, Default)]
pub(super) struct Routes {
    pub(super) table: RouteTable,
    /// Cancelled once the directory has sent its first full list (a one-shot start barrier).
    synced: CancellationToken,
    /// `synced` is cancelled: read on every request without the token's lock.
    synced_flag: AtomicBool,
}

impl Routes {
    /// The slot of a sandbox, if it is in the table.
    pub(super) fn slot(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.table.get(key)
    }

    /// Marks the directory's first full list as arrived.
    pub(super) fn mark_synced(&self) {
        self.synced.cancel();
        self.synced_flag.store(true, Ordering::Release);
    }

    /// Whether the directory's first full list arrived.
    pub(super) fn is_synced(&self) -> bool {
        self.synced_flag.load(Ordering::Acquire)
    }

    /// Waits at most `limit` for the first full list; returns at once after it.
    pub(super) async fn wait_synced(&self, limit: Duration) {
        if self.is_synced() {
            return;
        }
        let _ = tokio::time::timeout(limit, self.synced.cancelled()).await;
    }
}
