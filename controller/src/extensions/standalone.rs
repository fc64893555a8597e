//! The standalone driver of pools and claims: list+watch of Sandboxes, SandboxClaims,
//! SandboxWarmPools and SandboxTemplates from the store feed one work queue (the
//! [`Router`] decides what each change wakes), and at most
//! [`ExtensionsConfig::concurrency`] reconciles run at once. Pool members are ordinary
//! Sandboxes, which the Sandbox driver runs on the local platform.
//!
//! Claims go in batches ([`ExtensionsConfig::claim_batch`]): one batch runs at a time, and
//! the claims that arrive meanwhile wait for it and go together in the next, so a burst of
//! claims costs a few commits instead of several per claim ([`reconcile_claims`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{ListParams, Store, StoreError, StoreObject, WatchEvent};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ExtensionsConfig;
use super::claims::claim_batch;
use super::router::{Router, Work};
use crate::claim::{AdoptionWrites, Reservations, reconcile_claim};
use crate::pool::{Expectations, reconcile_pool};
use crate::queue::{Outcome, Queue, RetryBackoff};

/// Bound of the event channel between the watch tasks and the driver.
const EVENT_CAPACITY: usize = 1024;
/// The first wait after a failed list or watch.
const WATCH_RETRY_MIN: Duration = Duration::from_millis(250);
/// The longest wait after failed lists or watches.
const WATCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// A change seen by one of the watches.
#[derive(Debug)]
enum Event {
    Sandbox(Box<Sandbox>, bool),
    Claim(Box<SandboxClaim>, bool),
    Pool(Box<SandboxWarmPool>, bool),
    Template(Box<SandboxTemplate>, bool),
}

/// The object kinds the driver needs from its store.
pub trait ExtensionsStore:
    Store<Sandbox>
    + Store<SandboxClaim>
    + Store<SandboxWarmPool>
    + Store<SandboxTemplate>
    + AdoptionWrites
    + Clone
    + 'static
{
}

impl<S> ExtensionsStore for S where
    S: Store<Sandbox>
        + Store<SandboxClaim>
        + Store<SandboxWarmPool>
        + Store<SandboxTemplate>
        + AdoptionWrites
        + Clone
        + 'static
{
}

/// What a finished job reports: whether it was the claim batch, and each item's result
/// (`Ok(requeue)`, or `Err(retry)` after a failure).
type Finished = (bool, Vec<(Work, Result<Option<Duration>, bool>)>);

/// Reconciles the store's pools and claims until `shutdown`.
///
/// # Example
/// ```no_run
/// # async fn demo(store: rouse_controller::store::EmbeddedStore) {
/// use rouse_controller::extensions::{ExtensionsConfig, run_standalone};
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// run_standalone(store, ExtensionsConfig::default(), shutdown).await;
/// # }
/// ```
pub async fn run_standalone<S: ExtensionsStore>(
    store: S,
    config: ExtensionsConfig,
    shutdown: CancellationToken,
) {
    let (tx, mut rx) = mpsc::channel(EVENT_CAPACITY);
    let stop = shutdown.child_token();
    let mut watches = JoinSet::new();
    watches.spawn(watch::<Sandbox, S>(
        store.clone(),
        tx.clone(),
        stop.clone(),
        |s, d| Event::Sandbox(Box::new(s), d),
    ));
    watches.spawn(watch::<SandboxClaim, S>(
        store.clone(),
        tx.clone(),
        stop.clone(),
        |c, d| Event::Claim(Box::new(c), d),
    ));
    watches.spawn(watch::<SandboxWarmPool, S>(
        store.clone(),
        tx.clone(),
        stop.clone(),
        |p, d| Event::Pool(Box::new(p), d),
    ));
    watches.spawn(watch::<SandboxTemplate, S>(
        store.clone(),
        tx,
        stop.clone(),
        |t, d| Event::Template(Box::new(t), d),
    ));

    let expectations = Expectations::default();
    let reservations = Reservations::default();
    let mut router = Router::default();
    let mut queue: Queue<Work> = Queue::default();
    let mut jobs: JoinSet<Finished> = JoinSet::new();
    let batching = config.claim_batch > 1;
    let mut batch_running = false;
    let config = Arc::new(config);
    let mut resync = tokio::time::interval(config.resync);
    resync.reset();
    tracing::info!(
        concurrency = config.concurrency,
        "pool and claim driver started"
    );
    loop {
        let next_due = queue.next_due();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            Some(done) = jobs.join_next(), if !jobs.is_empty() => match done {
                Ok((batch, results)) => {
                    batch_running &= !batch;
                    for (work, result) in results {
                        let outcome = match result {
                            Ok(requeue) => Outcome::Done(requeue),
                            Err(true) => Outcome::Retry,
                            // Not worth retrying: drop its backoff; a change or the resync
                            // brings it back.
                            Err(false) => Outcome::Gone,
                        };
                        let backoff = RetryBackoff { min: config.retry_min, max: config.retry_max };
                        queue.finish(work, outcome, backoff, Instant::now());
                    }
                }
                Err(error) => {
                    // A panicked batch leaves its claims running in the queue until the
                    // resync; the next batch must not wait for it.
                    batch_running = false;
                    tracing::error!(%error, "pool or claim reconcile task failed");
                }
            },
            Some(event) = rx.recv() => {
                // Everything already waiting too, so that changes committed together (a burst
                // of claims) are queued before the next dispatch and go in one batch.
                let mut next = Some(event);
                let mut handled = 0;
                while let Some(event) = next.take() {
                    let work = match event {
                        Event::Sandbox(s, deleted) => router.sandbox(&s, deleted, &expectations),
                        Event::Claim(c, deleted) => router.claim(&c, deleted),
                        Event::Pool(p, deleted) => router.pool(&p, deleted, &expectations),
                        Event::Template(t, added) => router.template(&t, added),
                    };
                    for w in work {
                        queue.add(w);
                    }
                    handled += 1;
                    if handled < EVENT_CAPACITY {
                        next = rx.try_recv().ok();
                    }
                }
            }
            () = sleep_until(next_due), if next_due.is_some() => queue.promote(Instant::now()),
            _ = resync.tick() => {
                for w in router.all() {
                    queue.add(w);
                }
            }
        }
        while jobs.len() < config.concurrency.max(1) {
            let is_claim = |w: &Work| matches!(w, Work::Claim(_));
            if batching && !batch_running {
                let claims = queue.pop_matching(config.claim_batch, is_claim);
                if !claims.is_empty() {
                    batch_running = true;
                    let (store, reservations, config) =
                        (store.clone(), reservations.clone(), config.clone());
                    let span = tracing::info_span!(
                        "reconcile",
                        kind = "sandboxclaim",
                        batch = claims.len()
                    );
                    jobs.spawn(
                        async move {
                            (
                                true,
                                claim_batch(&store, &reservations, &config, claims).await,
                            )
                        }
                        .instrument(span),
                    );
                    continue;
                }
            }
            let work = if batching {
                queue.pop_matching(1, |w| !is_claim(w)).pop()
            } else {
                queue.pop()
            };
            let Some(work) = work else { break };
            let store = store.clone();
            let expectations = expectations.clone();
            let reservations = reservations.clone();
            let config = config.clone();
            let span = tracing::info_span!("reconcile", kind = work.kind(), key = ?work);
            jobs.spawn(
                async move {
                    let result =
                        reconcile(&store, &expectations, &reservations, &config, &work).await;
                    (false, vec![(work, result)])
                }
                .instrument(span),
            );
        }
        metrics::gauge!("rouse_controller_queue_depth", "kind" => "extensions")
            .set(queue.len() as f64);
    }
    stop.cancel();
    let drained = tokio::time::timeout(config.drain, async {
        while jobs.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        jobs.shutdown().await;
    }
    watches.shutdown().await;
    tracing::info!("pool and claim driver stopped");
}

/// Runs one reconcile: `Ok(requeue)`, or `Err(retry)` after a failure.
async fn reconcile<S: ExtensionsStore>(
    store: &S,
    expectations: &Expectations,
    reservations: &Reservations,
    config: &ExtensionsConfig,
    work: &Work,
) -> Result<Option<Duration>, bool> {
    let started = std::time::Instant::now();
    let result = match work {
        Work::Pool(key) => match Store::<SandboxWarmPool>::get(store, key).await {
            Err(e) if e.is_not_found() => {
                expectations.forget(key);
                Ok(None)
            }
            Err(e) => Err((e.is_retryable(), e.metric_label(), e.to_string())),
            Ok(pool) => reconcile_pool(
                store,
                expectations,
                &pool,
                config.stuck_after,
                Timestamp::now(),
            )
            .await
            .map(|o| o.requeue_after)
            .map_err(|e| (e.is_retryable(), e.metric_label(), e.to_string())),
        },
        Work::Claim(key) => match Store::<SandboxClaim>::get(store, key).await {
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err((e.is_retryable(), e.metric_label(), e.to_string())),
            Ok(claim) => reconcile_claim(store, reservations, &claim, Timestamp::now())
                .await
                .map(|o| o.requeue_after)
                .map_err(|e| (e.is_retryable(), e.metric_label(), e.to_string())),
        },
    };
    let label = match &result {
        Ok(_) => "ok",
        Err((_, label, message)) => {
            tracing::warn!(error = %message, "reconcile failed");
            label
        }
    };
    metrics::histogram!("rouse_controller_extension_reconcile_duration_seconds", "kind" => work.kind())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!("rouse_controller_extension_reconciles_total", "kind" => work.kind(), "result" => label)
        .increment(1);
    result.map_err(|(retry, _, _)| retry)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Lists and watches one kind until `stop`, sending every object of a list and every change;
/// the flag is "deleted" for most kinds and "added" for templates (see [`Router::template`]).
async fn watch<K, S>(
    store: S,
    tx: mpsc::Sender<Event>,
    stop: CancellationToken,
    event: fn(K, bool) -> Event,
) where
    K: StoreObject,
    S: Store<K>,
{
    let added_flag = K::kind(&()) == "SandboxTemplate";
    let params = ListParams::default();
    let mut retry = WATCH_RETRY_MIN;
    while !stop.is_cancelled() {
        let result: Result<(), StoreError> = async {
            let list = store.list(&params).await?;
            for item in list.items {
                if tx.send(event(item, added_flag)).await.is_err() {
                    return Ok(());
                }
            }
            let mut stream = store.watch(&params, &list.resource_version).await?;
            retry = WATCH_RETRY_MIN;
            loop {
                let next = tokio::select! {
                    next = stream.next() => next,
                    () = stop.cancelled() => return Ok(()),
                };
                let sent = match next {
                    None => return Ok(()),
                    Some(Err(e)) => return Err(e),
                    Some(Ok(WatchEvent::Added(o))) => event(o, added_flag),
                    Some(Ok(WatchEvent::Modified(o))) => event(o, false),
                    Some(Ok(WatchEvent::Deleted(o))) => event(o, !added_flag),
                    Some(Ok(WatchEvent::Bookmark { .. })) => continue,
                };
                if tx.send(sent).await.is_err() {
                    return Ok(());
                }
            }
        }
        .await;
        if let Err(error) = result {
            metrics::counter!("rouse_controller_watch_restarts_total", "kind" => error.metric_label())
                .increment(1);
            if matches!(error, StoreError::Expired { .. }) {
                continue;
            }
            tracing::warn!(%error, kind = %K::kind(&()), "list or watch failed");
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                () = stop.cancelled() => return,
            }
            retry = (retry * 2).min(WATCH_RETRY_MAX);
        }
    }
}
