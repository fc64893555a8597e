//! The single writer: one thread that takes requests from a bounded queue, runs a batch of
//! them in one redb transaction, commits it, publishes the changes to watchers, makes the
//! commit durable, and only then answers the callers. A storage failure that leaves the file
//! refusing writes hands over to `recover`, which reopens it.
//!
//! redb allows one write transaction at a time and a durable commit costs an fsync, so one
//! thread that groups the requests waiting in the queue (group commit) serves many writers
//! with few fsyncs, and async callers never block a runtime thread on the write lock.
//!
//! Publishing before the fsync takes it off the path of whoever reacts to a change (a wake:
//! the proxy's patch reaches the local runtime one fsync sooner, and the runtime's status
//! patch reaches the proxy one fsync sooner) while no caller is answered before its write is
//! durable. A crash in between loses a change that watchers may have seen but that nobody was
//! told is written — as any unacknowledged write may be lost. Its resourceVersion is never
//! handed out again: versions are reserved durably in blocks ahead of use
//! ([`RESERVE_BLOCK`]), and a reopened store continues above the reservation. A request
//! whose visibility is itself an acknowledgement ([`Request::durable_first`]: a claim's
//! adoption, which a client takes as done once it sees the claim Ready) has its batch
//! committed durably first and published after.
//!
//! A request may hold several operations that depend on each other: they run in order in
//! the same transaction, and the first one refused ends the request (the ones before it
//! stay written), so a batch of them costs one fsync.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use jiff::Timestamp;
use redb::{Database, Durability, WriteTransaction};
use rouse_shared::store::StoreError;
use tokio::sync::{mpsc, oneshot};

use super::ops::{Op, Outcome, execute};
use super::recover::{file_failed, recover};
use super::select::ChangeType;
use super::storage::Storage;
use super::tables::{
    META, RESERVED_VERSION, RESOURCE_VERSION, reserved_version, resource_version, unavailable,
};
use super::txn::Txn;
use super::watch::{Change, Hub};

/// How many resourceVersions one durable reservation covers: one commit in this many is
/// synced before its changes are published (the others are published first).
pub(crate) const RESERVE_BLOCK: u64 = 10_000;

/// The answers to one request: per sequence, one per operation run (an operation after a
/// failed one is not run); or the failure of the whole batch.
pub(crate) type Answers = Result<Vec<Vec<Result<Outcome, StoreError>>>, StoreError>;

/// A request and where its answer goes.
pub(crate) struct Request {
    /// What to write: sequences of operations, each operation run only if every one before it
    /// in its sequence succeeded. All in the same batch.
    pub sequences: Vec<Vec<Op>>,
    /// Commit the batch durably before any reader or watcher sees it, instead of publishing
    /// first and syncing after: for writes whose visibility is itself an acknowledgement (a
    /// claim reported Ready), at the cost of the watchers waiting for the sync.
    pub durable_first: bool,
    /// The answers, sent after the commit.
    pub reply: oneshot::Sender<Answers>,
}

impl Request {
    /// One operation, published before it is durable (the default).
    pub(crate) fn one(op: Op, reply: oneshot::Sender<Answers>) -> Self {
        Self {
            sequences: vec![vec![op]],
            durable_first: false,
            reply,
        }
    }
}

/// Starts the writer thread on the store file at `path`; it stops when every sender is
/// dropped.
pub(crate) fn spawn(
    storage: Arc<Storage>,
    hub: Arc<Hub>,
    path: PathBuf,
    queue: usize,
    max_batch: usize,
) -> std::io::Result<(mpsc::Sender<Request>, JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::channel::<Request>(queue.max(1));
    let max_batch = max_batch.max(1);
    let handle = std::thread::Builder::new()
        .name("rouse-store-writer".into())
        .spawn(move || {
            while let Some(first) = rx.blocking_recv() {
                let mut batch = vec![first];
                while batch.len() < max_batch {
                    match rx.try_recv() {
                        Ok(request) => batch.push(request),
                        Err(_) => break,
                    }
                }
                let refuse = |request: Request, error: StoreError| {
                    let _ = request.reply.send(Err(error));
                };
                if run_batch(&storage, &hub, batch)
                    && !recover(&storage, &hub, &path, &mut rx, refuse)
                {
                    return;
                }
            }
        })?;
    Ok((tx, handle))
}

/// Runs, commits, publishes and answers one batch; true when an I/O failure left the file
/// refusing writes, marked failed before anyone is answered (the caller reopens it).
fn run_batch(storage: &Storage, hub: &Hub, batch: Vec<Request>) -> bool {
    let size = batch.len();
    let durable_first = batch.iter().any(|r| r.durable_first);
    let (requests, replies): (Vec<Vec<Vec<Op>>>, Vec<_>) =
        batch.into_iter().map(|r| (r.sequences, r.reply)).unzip();
    let fail = |replies: Vec<oneshot::Sender<_>>, err: &StoreError| {
        tracing::warn!(error = %err, batch.size = size, "store write batch failed");
        let message = match err {
            StoreError::Unavailable { message, .. } => message.clone(),
            other => other.to_string(),
        };
        for reply in replies {
            let _ = reply.send(Err(StoreError::Unavailable {
                message: message.clone(),
                source: None,
            }));
        }
    };
    let db = match storage.db() {
        Ok(db) => db,
        Err(err) => {
            fail(replies, &err);
            return false;
        }
    };
    // A batch that failed on the file's I/O leaves it refused by redb: it is reopened. The
    // failure is reported first, so whoever is told of it finds it in the store's health.
    let settle = |replies: Vec<oneshot::Sender<_>>, err: StoreError| {
        let broken = file_failed(&err);
        if broken {
            let reason = match &err {
                StoreError::Unavailable { message, .. } => message.clone(),
                other => other.to_string(),
            };
            storage.fail(reason);
        }
        fail(replies, &err);
        broken
    };
    match write(&db, requests, durable_first) {
        Ok(Written {
            results,
            changes,
            synced,
        }) => {
            count_objects(&changes);
            let changed = !changes.is_empty();
            hub.publish(changes);
            metrics::histogram!("rouse_store_commit_batch_size").record(size as f64);
            if changed
                && !synced
                && let Err(err) = sync(&db)
            {
                // Published but maybe not durable: nobody is told it is written.
                return settle(replies, err);
            }
            for (reply, result) in replies.into_iter().zip(results) {
                // A caller that gave up (its future was dropped) does not need the answer.
                let _ = reply.send(Ok(result));
            }
            false
        }
        Err(err) => settle(replies, err),
    }
}

/// What one batch wrote.
struct Written {
    /// Per request and sequence, one result per operation run.
    results: Vec<Vec<Vec<Result<Outcome, StoreError>>>>,
    /// The committed changes.
    changes: Vec<Change>,
    /// Whether the commit is already durable (a reservation was written with it, or a request
    /// asked for it).
    synced: bool,
}

/// Runs the batch in one transaction and commits it, durably only when it takes versions
/// beyond the reservation or `durable_first` asks for it; an error means nothing was
/// committed.
fn write(
    db: &Database,
    requests: Vec<Vec<Vec<Op>>>,
    durable_first: bool,
) -> Result<Written, StoreError> {
    let mut tx = db
        .begin_write()
        .map_err(|e| unavailable("begin write", e))?;
    let (rv, reserved) = {
        let meta = tx
            .open_table(META)
            .map_err(|e| unavailable("open meta table", e))?;
        (resource_version(&meta)?, reserved_version(&meta)?)
    };
    let mut txn = Txn::new(&tx, rv, Timestamp::now());
    let mut results = Vec::with_capacity(requests.len());
    for sequences in requests {
        let mut request = Vec::with_capacity(sequences.len());
        for ops in sequences {
            let mut answers = Vec::with_capacity(ops.len());
            for op in ops {
                match execute(&mut txn, op) {
                    // A storage failure may have left partial writes: the whole batch is
                    // aborted.
                    Err(err @ StoreError::Unavailable { .. }) => return Err(err),
                    // A refused operation wrote nothing; the ones after it in its sequence
                    // depend on it and are not run.
                    Err(err) => {
                        answers.push(Err(err));
                        break;
                    }
                    ok => answers.push(ok),
                }
            }
            request.push(answers);
        }
        results.push(request);
    }
    let (rv, changes) = txn.finish();
    if changes.is_empty() {
        abort(tx);
        return Ok(Written {
            results,
            changes,
            synced: true,
        });
    }
    let reserve = rv > reserved;
    let durable = reserve || durable_first;
    {
        let mut meta = tx
            .open_table(META)
            .map_err(|e| unavailable("open meta table", e))?;
        meta.insert(RESOURCE_VERSION, rv)
            .map_err(|e| unavailable("write resource version", e))?;
        if reserve {
            meta.insert(RESERVED_VERSION, rv.saturating_add(RESERVE_BLOCK))
                .map_err(|e| unavailable("write reserved version", e))?;
        }
    }
    if !durable {
        // Visible to readers at once; made durable by `sync` before anyone is answered.
        tx.set_durability(Durability::None)
            .map_err(|e| StoreError::Unavailable {
                message: format!("set durability: {e}"),
                source: Some(Box::new(e)),
            })?;
    }
    tx.commit().map_err(|e| unavailable("commit", e))?;
    Ok(Written {
        results,
        changes,
        synced: durable,
    })
}

/// Makes every earlier commit durable: an empty durable commit (redb syncs the ones before
/// it with it).
fn sync(db: &Database) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(|e| unavailable("begin sync", e))?;
    tx.commit().map_err(|e| unavailable("sync commit", e))
}

fn abort(tx: WriteTransaction) {
    if let Err(err) = tx.abort() {
        tracing::warn!(error = %err, "store: aborting a read-only batch failed");
    }
}

/// Moves the per-kind object gauges by the committed creations and deletions.
fn count_objects(changes: &[Change]) {
    for change in changes {
        let gauge = metrics::gauge!("rouse_store_objects", "kind" => change.kind.clone());
        match change.ty {
            ChangeType::Added => gauge.increment(1.0),
            ChangeType::Deleted => gauge.decrement(1.0),
            ChangeType::Modified => {}
        }
    }
}
