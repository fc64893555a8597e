//! The open database file and its health, shared by the readers and the writer.
//!
//! After an I/O error (a full disk, a failing device) redb refuses every later read and write
//! ("Previous I/O error occurred. Please close and re-open the database."). The writer then
//! takes the handle out of here, so reads and writes fail at once with the reason instead of
//! each meeting the broken file, and reopens the file once it can be written again (see
//! `recover`). [`StoreHealth`] says which state the store is in, for readiness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use redb::Database;
use rouse_shared::store::StoreError;

/// Whether an [`EmbeddedStore`](super::EmbeddedStore) can read and write its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHealth {
    /// Reads and writes work.
    Healthy,
    /// A storage failure (a full disk, an I/O error) left the file unusable. Reads and writes
    /// fail at once until the store has reopened it, which it tries with backoff until a
    /// write succeeds again.
    Failed {
        /// What failed.
        reason: String,
        /// When it failed.
        since: SystemTime,
        /// Reopen attempts so far.
        attempts: u64,
        /// Why the last attempt failed, if one did.
        last_attempt: Option<String>,
    },
}

impl StoreHealth {
    /// True while reads and writes work.
    pub fn is_healthy(&self) -> bool {
        matches!(self, StoreHealth::Healthy)
    }

    /// One line for people: `ok`, or what failed and how the recovery goes.
    pub fn describe(&self) -> String {
        match self {
            StoreHealth::Healthy => "ok".to_owned(),
            StoreHealth::Failed {
                reason,
                since,
                attempts,
                last_attempt,
            } => {
                let ago = since.elapsed().unwrap_or(Duration::ZERO);
                let mut text = format!(
                    "the store's file failed {} ago ({reason}); reads and writes fail until it is reopened, which is retried until a write succeeds ({attempts} attempts so far",
                    humantime::format_duration(Duration::from_secs(ago.as_secs()))
                );
                if let Some(last) = last_attempt {
                    text.push_str(&format!("; the last: {last}"));
                }
                text.push(')');
                text
            }
        }
    }
}

/// The database handle, while it is usable, and the store's health.
pub(crate) struct Storage {
    db: RwLock<Option<Arc<Database>>>,
    failed: AtomicBool,
    health: Mutex<StoreHealth>,
}

impl Storage {
    /// A healthy store on `db`.
    pub(crate) fn new(db: Database) -> Self {
        metrics::gauge!("rouse_store_healthy").set(1.0);
        Self {
            db: RwLock::new(Some(Arc::new(db))),
            failed: AtomicBool::new(false),
            health: Mutex::new(StoreHealth::Healthy),
        }
    }

    /// The database, or `Unavailable` with the reason while the file is being reopened.
    pub(crate) fn db(&self) -> Result<Arc<Database>, StoreError> {
        let db = self
            .db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        db.ok_or_else(|| self.unavailable())
    }

    /// Fails at once while the file is down, so a write does not wait in the queue for it.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        if self.failed.load(Ordering::Acquire) {
            Err(self.unavailable())
        } else {
            Ok(())
        }
    }

    /// The error every call gets while the file is down.
    pub(crate) fn unavailable(&self) -> StoreError {
        StoreError::Unavailable {
            message: self.health().describe(),
            source: None,
        }
    }

    /// The store's health now.
    pub(crate) fn health(&self) -> StoreHealth {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the file failed and takes the handle out: later calls fail at once, and the
    /// handle closes once the reads still using it end (it must, for the file to be reopened).
    pub(crate) fn fail(&self, reason: String) {
        tracing::error!(store.error = %reason, "the store's file failed; reads and writes fail until it is reopened");
        metrics::counter!("rouse_store_storage_failures_total").increment(1);
        metrics::gauge!("rouse_store_healthy").set(0.0);
        *self.health.lock().unwrap_or_else(PoisonError::into_inner) = StoreHealth::Failed {
            reason,
            since: SystemTime::now(),
            attempts: 0,
            last_attempt: None,
        };
        self.failed.store(true, Ordering::Release);
        let old = self
            .db
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(old);
    }

    /// Records a reopen attempt that failed.
    pub(crate) fn attempt_failed(&self, error: String) {
        metrics::counter!("rouse_store_reopens_total", "result" => "error").increment(1);
        tracing::warn!(store.error = %error, "reopening the store failed; trying again");
        if let StoreHealth::Failed {
            attempts,
            last_attempt,
            ..
        } = &mut *self.health.lock().unwrap_or_else(PoisonError::into_inner)
        {
            *attempts += 1;
            *last_attempt = Some(error);
        }
    }

    /// Puts the reopened database in service.
    pub(crate) fn recovered(&self, db: Database) {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let down = match &*health {
            StoreHealth::Failed { since, .. } => since.elapsed().unwrap_or(Duration::ZERO),
            StoreHealth::Healthy => Duration::ZERO,
        };
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(db));
        *health = StoreHealth::Healthy;
        self.failed.store(false, Ordering::Release);
        metrics::counter!("rouse_store_reopens_total", "result" => "ok").increment(1);
        metrics::histogram!("rouse_store_outage_duration_seconds").record(down.as_secs_f64());
        metrics::gauge!("rouse_store_healthy").set(1.0);
        tracing::info!(
            store.down_ms = u64::try_from(down.as_millis()).unwrap_or(u64::MAX),
            "the store's file is reopened; reads and writes work again"
        );
    }
}
