//! The embedded store: Rouse objects in one redb file, with the Kubernetes API server's
//! semantics (resourceVersion, optimistic concurrency, generateName, the status subresource,
//! finalizers, owner-reference cascading, label selectors and watch from a version).
//!
//! Reads run on the blocking pool against redb snapshots, concurrently. Writes go through one
//! writer thread that commits, publishes the changes to the watch hub (see `watch`), makes
//! the commit durable and only then answers (see `writer`).

mod error;
mod meta;
mod open;
mod ops;
mod recover;
mod select;
mod sequence;
mod storage;
mod tables;
mod txn;
mod typed;
mod watch;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc;

pub use error::{OpenError, Result};
pub use sequence::{SequenceError, WriteSequence};
pub use storage::StoreHealth;
#[cfg(test)]
pub(crate) use writer::RESERVE_BLOCK;

use open::open_file;
use storage::Storage;
use watch::{Hub, HubLimits};

/// Limits of an [`EmbeddedStore`]; the defaults suit one machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedStoreConfig {
    /// Changes kept in memory so a watch can resume from an older version; a watch from
    /// before them gets `Expired`. Default 10,000.
    pub watch_history: usize,
    /// Bytes of changes (their JSON) kept in memory for watch replay, the other bound of the
    /// history; older changes are dropped first. Default 64 MiB.
    pub watch_history_bytes: usize,
    /// Events buffered per watcher; a watcher that falls this far behind is ended with
    /// `Expired`. Default 1,000.
    pub watch_buffer: usize,
    /// Open watches at once. Default 1,024.
    pub max_watchers: usize,
    /// Write requests waiting for the writer. Default 1,024.
    pub write_queue: usize,
    /// Most write requests committed in one transaction. Default 256.
    pub max_batch: usize,
    /// How long a write may wait for its commit before the caller gets `Unavailable` (the
    /// write may still commit). Default 30s.
    pub write_timeout: Duration,
}

impl Default for EmbeddedStoreConfig {
    fn default() -> Self {
        Self {
            watch_history: 10_000,
            watch_history_bytes: 64 * 1024 * 1024,
            watch_buffer: 1_000,
            max_watchers: 1_024,
            write_queue: 1_024,
            max_batch: 256,
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// The store file's name inside a data dir.
pub const STORE_FILE_NAME: &str = "store.redb";

/// Rouse objects in a redb file; implements [`rouse_shared::store::Store`] for every kind.
///
/// Cloning is cheap and shares the database. Watch streams end when the last clone is
/// dropped; dropping it waits for the writer to finish its current batch and releases the
/// file, so the same path can be opened again right after.
///
/// # Example
/// ```no_run
/// use rouse_controller::store::EmbeddedStore;
/// use rouse_shared::api::Sandbox;
/// use rouse_shared::store::{ListParams, Store};
///
/// # async fn demo() -> anyhow::Result<()> {
/// let store = EmbeddedStore::open(std::path::Path::new("/var/lib/rouse/store.redb"))?;
/// let sandboxes = Store::<Sandbox>::list(&store, &ListParams::namespace("team-a")).await?;
/// println!("{} sandboxes at version {}", sandboxes.items.len(), sandboxes.resource_version);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Arc<Storage>,
    hub: Arc<Hub>,
    writer: Option<mpsc::Sender<writer::Request>>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
    write_timeout: Duration,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue stops the writer after its current batch; joining it releases
        // its database handle so the file lock goes with the last store handle.
        drop(self.writer.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(store.path = %self.path.display(), "store writer thread panicked");
        }
        self.hub.close();
    }
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store file at `path` with the default limits.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, EmbeddedStoreConfig::default())
    }

    /// Opens (or creates) the store file at `path`.
    pub fn open_with(path: &Path, config: EmbeddedStoreConfig) -> Result<Self> {
        let (db, current) = open_file(path)?;
        let storage = Arc::new(Storage::new(db));
        let hub = Arc::new(Hub::new(
            current,
            HubLimits {
                history: config.watch_history,
                history_bytes: config.watch_history_bytes,
                buffer: config.watch_buffer,
                max_watchers: config.max_watchers,
            },
        ));
        let (writer, thread) = writer::spawn(
            storage.clone(),
            hub.clone(),
            path.to_owned(),
            config.write_queue,
            config.max_batch,
        )
        .map_err(OpenError::Thread)?;
        tracing::info!(store.path = %path.display(), store.resource_version = current, "store opened");
        Ok(Self {
            inner: Arc::new(Inner {
                storage,
                hub,
                writer: Some(writer),
                thread: Some(thread),
                path: path.to_owned(),
                write_timeout: config.write_timeout,
            }),
        })
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the store can read and write its file now: after a storage failure (a full
    /// disk) it reports what failed until it has reopened the file. For readiness checks.
    pub fn health(&self) -> StoreHealth {
        self.inner.storage.health()
    }
}

#[cfg(test)]
mod tests;
