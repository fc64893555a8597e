//! The one store-watch driver: event sources (list-watches and trigger streams) → a kind's
//! routing → the work queue → at most `concurrency` reconciles at once → each outcome back
//! into the queue (requeue, retry with backoff, wait, forget); a periodic resync; on stop,
//! the running reconciles are drained.
//!
//! What differs per kind is a [`Reconciler`]: which items an event wakes, what a resync
//! visits, and how queued items become jobs (one item each, or a batch).

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::backoff::RetryBackoff;
use super::queue::{Outcome, Queue};

/// A running reconcile: each item it covered with how it ended.
pub(crate) type Job<T> = BoxFuture<'static, Vec<(T, Outcome)>>;

/// A job of one item: `reconcile` run in `span`, its outcome recorded for `item`.
pub(crate) fn job<T: Send + 'static>(
    item: T,
    span: tracing::Span,
    reconcile: impl Future<Output = Outcome> + Send + 'static,
) -> Job<T> {
    async move { vec![(item, reconcile.await)] }
        .instrument(span)
        .boxed()
}

/// One kind (or a group of kinds sharing a queue) as the driver runs it.
pub(crate) trait Reconciler: Send + 'static {
    /// What the queue holds: the key of one reconcile.
    type Item: Clone + Eq + Hash + Ord + Debug + Send + 'static;
    /// What the sources deliver.
    type Event: Send + 'static;

    /// The `kind` label of `rouse_controller_queue_depth`.
    const QUEUE: &'static str;

    /// The items `event` wakes, after updating the kind's indexes. Runs before any job the
    /// event leads to, so a kind may do its start-up work (a sweep) on its first list here.
    fn route(&mut self, event: Self::Event) -> impl Future<Output = Vec<Self::Item>> + Send;

    /// Every item known, for the resync.
    fn resync(&self) -> Vec<Self::Item>;

    /// The next job, taking its items from `queue`; `None` when nothing is ready.
    fn next_job(&mut self, queue: &mut Queue<Self::Item>) -> Option<Job<Self::Item>>;
}

/// How the driver runs one reconciler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DriveConfig {
    /// Most jobs running at once.
    pub concurrency: usize,
    /// Every known item is queued at least this often.
    pub resync: Duration,
    /// The retry delays after failed reconciles.
    pub backoff: RetryBackoff,
    /// How long stopping waits for running jobs before it cancels them; `None` waits for all
    /// (a job that must finish its work, such as a snapshot restoring a paused sandbox).
    pub drain: Option<Duration>,
    /// Bound of the channel between the sources and the driver; also the most events
    /// routed together before the next dispatch (so changes committed together, a burst of
    /// claims, are queued together).
    pub events: usize,
}

/// Runs `kind` on `sources` until `shutdown`, then drains; see the module documentation.
pub(crate) async fn run<R: Reconciler>(
    mut kind: R,
    sources: Vec<BoxStream<'static, R::Event>>,
    config: DriveConfig,
    shutdown: CancellationToken,
) {
    let capacity = config.events.max(1);
    let (tx, mut rx) = mpsc::channel(capacity);
    let stop = shutdown.child_token();
    let mut feeds = JoinSet::new();
    for source in sources {
        feeds.spawn(forward(source, tx.clone(), stop.clone()));
    }
    drop(tx);
    let mut queue: Queue<R::Item> = Queue::default();
    let mut jobs: JoinSet<Vec<(R::Item, Outcome)>> = JoinSet::new();
    let mut resync = tokio::time::interval(config.resync);
    resync.reset();
    loop {
        let next_due = queue.next_due();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(done) = jobs.join_next(), if !jobs.is_empty() => match done {
                Ok(results) => {
                    let now = Instant::now();
                    for (item, outcome) in results {
                        queue.finish(item, outcome, config.backoff, now);
                    }
                }
                Err(error) => tracing::error!(%error, kind = R::QUEUE, "reconcile task failed"),
            },
            Some(event) = rx.recv() => {
                let mut next = Some(event);
                let mut routed = 0;
                while let Some(event) = next.take() {
                    for item in kind.route(event).await {
                        queue.add(item);
                    }
                    routed += 1;
                    if routed < capacity {
                        next = rx.try_recv().ok();
                    }
                }
            }
            () = sleep_until(next_due), if next_due.is_some() => queue.promote(Instant::now()),
            _ = resync.tick() => {
                for item in kind.resync() {
                    queue.add(item);
                }
            }
        }
        while jobs.len() < config.concurrency.max(1) {
            let Some(job) = kind.next_job(&mut queue) else {
                break;
            };
            jobs.spawn(job);
        }
        metrics::gauge!("rouse_controller_queue_depth", "kind" => R::QUEUE).set(queue.len() as f64);
    }
    tracing::info!(running = jobs.len(), kind = R::QUEUE, "driver stopping");
    stop.cancel();
    match config.drain {
        Some(drain) => {
            let drained =
                tokio::time::timeout(drain, async { while jobs.join_next().await.is_some() {} })
                    .await;
            if drained.is_err() {
                tracing::warn!(
                    kind = R::QUEUE,
                    "reconciles still running at shutdown were cancelled"
                );
                jobs.shutdown().await;
            }
        }
        None => while jobs.join_next().await.is_some() {},
    }
    while let Some(done) = feeds.join_next().await {
        if let Err(error) = done {
            tracing::error!(%error, kind = R::QUEUE, "event source task failed");
        }
    }
}

/// Sends every event of `source` to the driver until `stop`; sends wait while the driver
/// lags (the channel is bounded), which slows the source down instead of dropping events.
async fn forward<E: Send + 'static>(
    mut source: BoxStream<'static, E>,
    tx: mpsc::Sender<E>,
    stop: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            event = source.next() => event,
            () = stop.cancelled() => return,
        };
        let Some(event) = event else { return };
        let sent = tokio::select! {
            sent = tx.send(event) => sent.is_ok(),
            () = stop.cancelled() => return,
        };
        if !sent {
            return;
        }
    }
}

/// Sleeps until `at`, or forever when nothing is due.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
