//! The standalone driver of pools and claims, on the one store-watch driver
//! ([`crate::drive::driver`]): list+watch of Sandboxes, SandboxClaims, SandboxWarmPools and
//! SandboxTemplates from the store feed one work queue (the
//! [`Router`] decides what each change wakes), and at most
//! [`ExtensionsConfig::concurrency`] reconciles run at once. Pool members are ordinary
//! Sandboxes, which the Sandbox driver runs on the local platform.
//!
//! Claims go in batches ([`ExtensionsConfig::claim_batch`]): one batch runs at a time, and
//! the claims that arrive meanwhile wait for it and go together in the next, so a burst of
//! claims costs a few commits instead of several per claim ([`reconcile_claims`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use jiff::Timestamp;
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{ObjectKey, Store};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::claims::claim_batch;
use super::router::{Router, Work};
use super::{ExtensionsConfig, ExtensionsStore};
use crate::claim::{Reservations, reconcile_claim};
use crate::drive::RetryBackoff;
use crate::drive::driver::{self, DriveConfig, Job, Reconciler};
use crate::drive::queue::{Outcome, Queue};
use crate::drive::watch::{Change, watch};
use crate::pool::{Expectations, reconcile_pool};

/// Bound of the event channel between the watches and the driver.
const EVENT_CAPACITY: usize = 1024;

/// A change seen by one of the watches.
#[derive(Debug)]
enum Event {
    Sandbox(Change<Sandbox>),
    Claim(Change<SandboxClaim>),
    Pool(Change<SandboxWarmPool>),
    Template(Change<SandboxTemplate>),
}

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
    let sources = vec![
        watch::<Sandbox, S, _>(store.clone(), Event::Sandbox),
        watch::<SandboxClaim, S, _>(store.clone(), Event::Claim),
        watch::<SandboxWarmPool, S, _>(store.clone(), Event::Pool),
        watch::<SandboxTemplate, S, _>(store.clone(), Event::Template),
    ];
    let drive = DriveConfig {
        concurrency: config.concurrency,
        resync: config.resync,
        backoff: RetryBackoff {
            min: config.retry_min,
            max: config.retry_max,
        },
        drain: Some(config.drain),
        events: EVENT_CAPACITY,
    };
    tracing::info!(
        concurrency = config.concurrency,
        "pool and claim driver started"
    );
    let kind = Extensions {
        store,
        expectations: Expectations::default(),
        reservations: Reservations::default(),
        router: Router::default(),
        templates: HashSet::new(),
        batching: config.claim_batch > 1,
        batch_running: Arc::new(AtomicBool::new(false)),
        config: Arc::new(config),
    };
    driver::run(kind, sources, drive, shutdown).await;
    tracing::info!("pool and claim driver stopped");
}

/// Pools and claims as the driver runs them: one queue, so the [`Router`] can wake a claim
/// from a pool's change and a pool from a claim's adoption.
struct Extensions<S> {
    store: S,
    expectations: Expectations,
    reservations: Reservations,
    router: Router,
    /// The templates the watch reported, to tell an added template from a changed one.
    templates: HashSet<ObjectKey>,
    config: Arc<ExtensionsConfig>,
    /// Claims go in batches (`claim_batch > 1`).
    batching: bool,
    /// A claim batch runs; cleared by the batch's job when it ends, however it ends.
    batch_running: Arc<AtomicBool>,
}

impl<S: ExtensionsStore> Extensions<S> {
    /// A template seen in a list or as applied; `true` when it is new (see
    /// [`Router::template`]).
    fn template_added(&mut self, template: &SandboxTemplate) -> bool {
        self.templates.insert(ObjectKey::of(template))
    }

    /// The next claim batch, if batching, none runs and claims are ready.
    fn claim_batch(&mut self, queue: &mut Queue<Work>) -> Option<Job<Work>> {
        if !self.batching || self.batch_running.load(Ordering::Acquire) {
            return None;
        }
        let claims = queue.pop_matching(self.config.claim_batch, is_claim);
        if claims.is_empty() {
            return None;
        }
        self.batch_running.store(true, Ordering::Release);
        let ended = BatchEnded(self.batch_running.clone());
        let (store, reservations, config) = (
            self.store.clone(),
            self.reservations.clone(),
            self.config.clone(),
        );
        let span = tracing::info_span!("reconcile", kind = "sandboxclaim", batch = claims.len());
        Some(
            async move {
                let _ended = ended;
                let results = claim_batch(&store, &reservations, &config, claims).await;
                results
                    .into_iter()
                    .map(|(work, result)| (work, outcome(result)))
                    .collect()
            }
            .instrument(span)
            .boxed(),
        )
    }
}

impl<S: ExtensionsStore> Reconciler for Extensions<S> {
    type Item = Work;
    type Event = Event;
    const QUEUE: &'static str = "extensions";

    async fn route(&mut self, event: Event) -> Vec<Work> {
        let (router, expectations) = (&mut self.router, &self.expectations);
        match event {
            Event::Sandbox(Change::Listed(all)) => all
                .iter()
                .flat_map(|s| router.sandbox(s, false, expectations))
                .collect(),
            Event::Sandbox(Change::Applied(s)) => router.sandbox(&s, false, expectations),
            Event::Sandbox(Change::Deleted(s)) => router.sandbox(&s, true, expectations),
            Event::Claim(Change::Listed(all)) => {
                all.iter().flat_map(|c| router.claim(c, false)).collect()
            }
            Event::Claim(Change::Applied(c)) => router.claim(&c, false),
            Event::Claim(Change::Deleted(c)) => router.claim(&c, true),
            Event::Pool(Change::Listed(all)) => all
                .iter()
                .flat_map(|p| router.pool(p, false, expectations))
                .collect(),
            Event::Pool(Change::Applied(p)) => router.pool(&p, false, expectations),
            Event::Pool(Change::Deleted(p)) => router.pool(&p, true, expectations),
            // Every template of a list counts as added: claims waiting for one may have
            // missed it while no watch ran.
            Event::Template(Change::Listed(all)) => {
                self.templates = all.iter().map(ObjectKey::of).collect();
                all.iter()
                    .flat_map(|t| self.router.template(t, true))
                    .collect()
            }
            Event::Template(Change::Applied(t)) => {
                let added = self.template_added(&t);
                self.router.template(&t, added)
            }
            Event::Template(Change::Deleted(t)) => {
                self.templates.remove(&ObjectKey::of(t.as_ref()));
                self.router.template(&t, false)
            }
        }
    }

    fn resync(&self) -> Vec<Work> {
        self.router.all()
    }

    fn next_job(&mut self, queue: &mut Queue<Work>) -> Option<Job<Work>> {
        if let Some(batch) = self.claim_batch(queue) {
            return Some(batch);
        }
        let work = if self.batching {
            queue.pop_matching(1, |w| !is_claim(w)).pop()
        } else {
            queue.pop()
        }?;
        let store = self.store.clone();
        let expectations = self.expectations.clone();
        let reservations = self.reservations.clone();
        let config = self.config.clone();
        let span = tracing::info_span!("reconcile", kind = work.kind(), key = ?work);
        Some(driver::job(work.clone(), span, async move {
            outcome(reconcile(&store, &expectations, &reservations, &config, &work).await)
        }))
    }
}

fn is_claim(work: &Work) -> bool {
    matches!(work, Work::Claim(_))
}

/// A job's result as the queue takes it.
fn outcome(result: Result<Option<Duration>, bool>) -> Outcome {
    match result {
        Ok(requeue) => Outcome::Done(requeue),
        Err(true) => Outcome::Retry,
        // Not worth retrying: drop its backoff; a change or the resync brings it back.
        Err(false) => Outcome::Gone,
    }
}

/// Clears the batch flag when the batch's job ends — returns, panics or is cancelled — so
/// the next batch never waits for one that is over.
struct BatchEnded(Arc<AtomicBool>);

impl Drop for BatchEnded {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
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
