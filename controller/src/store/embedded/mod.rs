//! The embedded store: Rouse objects in one redb file, with the Kubernetes API server's
//! semantics (resourceVersion, optimistic concurrency, generateName, the status subresource,
//! finalizers, owner-reference cascading, label selectors and watch from a version).
//!
//! Reads run on the blocking pool against redb snapshots, concurrently. Writes go through one
//! writer thread that commits, publishes the changes to the watch hub (see `watch`), makes
//! the commit durable and only then answers (see `writer`).

mod error;
mod meta;
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::mpsc;

pub use error::{OpenError, Result};
pub use sequence::{SequenceError, WriteSequence};
pub use storage::StoreHealth;
#[cfg(test)]
pub(crate) use writer::RESERVE_BLOCK;

use storage::Storage;
use tables::{
    FORMAT, FORMAT_VERSION, META, OBJECTS, OWNERS, RESOURCE_VERSION, reserved_version,
    resource_version,
};
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

/// Opens (or creates) the file, with redb's repair after a crash or an I/O error, and
/// initialises it; returns the database and its last resourceVersion. Opening commits a
/// durable write, so a file that opens can be written.
fn open_file(path: &Path) -> Result<(Database, u64)> {
    let db = Database::create(path).map_err(|source| match source {
        redb::DatabaseError::DatabaseAlreadyOpen => OpenError::Locked {
            path: path.to_owned(),
        },
        source => OpenError::Open {
            path: path.to_owned(),
            source,
        },
    })?;
    let current = init(&db, path)?;
    Ok((db, current))
}

/// Creates the tables of a new file, checks the format of an old one, sets the object
/// gauges, and returns the last resourceVersion.
fn init(db: &Database, path: &Path) -> Result<u64> {
    let init_err = |e: redb::Error| OpenError::Init {
        path: path.to_owned(),
        source: e,
    };
    let tx = db.begin_write().map_err(|e| init_err(e.into()))?;
    {
        tx.open_table(OBJECTS).map_err(|e| init_err(e.into()))?;
        tx.open_table(OWNERS).map_err(|e| init_err(e.into()))?;
        let mut meta = tx.open_table(META).map_err(|e| init_err(e.into()))?;
        let found = meta
            .get(FORMAT)
            .map_err(|e| init_err(e.into()))?
            .map(|v| v.value());
        match found {
            None => {
                meta.insert(FORMAT, FORMAT_VERSION)
                    .map_err(|e| init_err(e.into()))?;
            }
            Some(FORMAT_VERSION) => {}
            Some(found) => {
                return Err(OpenError::Format {
                    path: path.to_owned(),
                    found,
                    supported: FORMAT_VERSION,
                });
            }
        }
        // Versions up to the reserved one may have been seen by watchers and readers in a
        // commit that a crash then lost: continue above them, so no version means two things.
        let damaged = |e: rouse_shared::store::StoreError| OpenError::Damaged {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let current = resource_version(&meta).map_err(damaged)?;
        let reserved = reserved_version(&meta).map_err(damaged)?;
        if reserved > current {
            meta.insert(RESOURCE_VERSION, reserved)
                .map_err(|e| init_err(e.into()))?;
        }
    }
    tx.commit().map_err(|e| init_err(e.into()))?;

    let damaged = |e: rouse_shared::store::StoreError| OpenError::Damaged {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let tx = db.begin_read().map_err(|e| init_err(e.into()))?;
    let meta = tx.open_table(META).map_err(|e| init_err(e.into()))?;
    let current = resource_version(&meta).map_err(damaged)?;
    let objects = tx.open_table(OBJECTS).map_err(|e| init_err(e.into()))?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for entry in objects.iter().map_err(|e| init_err(e.into()))? {
        let (key, _) = entry.map_err(|e| init_err(e.into()))?;
        *counts.entry(key.value().0.to_owned()).or_default() += 1;
    }
    for (kind, count) in counts {
        metrics::gauge!("rouse_store_objects", "kind" => kind).set(count as f64);
    }
    Ok(current)
}

#[cfg(test)]
mod tests;
