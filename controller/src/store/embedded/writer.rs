//! The single writer: one thread that takes requests from a bounded queue, runs a batch of
//! them in one redb transaction, commits it durably, publishes the changes to watchers, and
//! only then answers the callers.
//!
//! redb allows one write transaction at a time and a durable commit costs an fsync, so one
//! thread that groups the requests waiting in the queue (group commit) serves many writers
//! with few fsyncs, and async callers never block a runtime thread on the write lock.

use std::sync::Arc;
use std::thread::JoinHandle;

use jiff::Timestamp;
use redb::{Database, WriteTransaction};
use rouse_shared::store::StoreError;
use tokio::sync::{mpsc, oneshot};

use super::ops::{Op, Outcome, execute};
use super::select::ChangeType;
use super::tables::{META, RESOURCE_VERSION, resource_version, unavailable};
use super::txn::Txn;
use super::watch::{Change, Hub};

/// A request and where its answer goes.
pub(crate) struct Request {
    /// What to write.
    pub op: Op,
    /// The answer, sent after the commit.
    pub reply: oneshot::Sender<Result<Outcome, StoreError>>,
}

/// Starts the writer thread; it stops when every sender is dropped.
pub(crate) fn spawn(
    db: Arc<Database>,
    hub: Arc<Hub>,
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
                run_batch(&db, &hub, batch);
            }
        })?;
    Ok((tx, handle))
}

/// Runs, commits and answers one batch.
fn run_batch(db: &Database, hub: &Hub, batch: Vec<Request>) {
    let size = batch.len();
    let (ops, replies): (Vec<Op>, Vec<_>) = batch.into_iter().map(|r| (r.op, r.reply)).unzip();
    match write(db, ops) {
        Ok((results, changes)) => {
            count_objects(&changes);
            hub.publish(changes);
            metrics::histogram!("rouse_store_commit_batch_size").record(size as f64);
            for (reply, result) in replies.into_iter().zip(results) {
                // A caller that gave up (its future was dropped) does not need the answer.
                let _ = reply.send(result);
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, batch.size = size, "store write batch failed");
            let message = err.to_string();
            for reply in replies {
                let _ = reply.send(Err(StoreError::Unavailable {
                    message: message.clone(),
                    source: None,
                }));
            }
        }
    }
}

/// Per-request results and the committed changes; an error means nothing was committed.
type Written = (Vec<Result<Outcome, StoreError>>, Vec<Change>);

fn write(db: &Database, ops: Vec<Op>) -> Result<Written, StoreError> {
    let tx = db
        .begin_write()
        .map_err(|e| unavailable("begin write", e))?;
    let rv = {
        let meta = tx
            .open_table(META)
            .map_err(|e| unavailable("open meta table", e))?;
        resource_version(&meta)?
    };
    let mut txn = Txn::new(&tx, rv, Timestamp::now());
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        match execute(&mut txn, op) {
            // A storage failure may have left partial writes: the whole batch is aborted.
            Err(err @ StoreError::Unavailable { .. }) => return Err(err),
            result => results.push(result),
        }
    }
    let (rv, changes) = txn.finish();
    if changes.is_empty() {
        abort(tx);
    } else {
        {
            let mut meta = tx
                .open_table(META)
                .map_err(|e| unavailable("open meta table", e))?;
            meta.insert(RESOURCE_VERSION, rv)
                .map_err(|e| unavailable("write resource version", e))?;
        }
        // Durability::Immediate (redb's default): the commit returns once the data is synced.
        tx.commit().map_err(|e| unavailable("commit", e))?;
    }
    Ok((results, changes))
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
