//! The standalone driver of pools and claims, on the one store-watch driver
//! ([`crate::drive::driver`]): list+watch of Sandboxes, SandboxClaims, SandboxWarmPools and
//! SandboxTemplates from the store feed one work queue (the
//! [`Router`] decides what each change wakes), and at most
//! [`ExtensionsConfig::concurrency`] reconciles run at once. Pool members are ordinary
//! Sandboxes, which the Sandbox driver runs on the local platform.
//!
//! Claims go in batches ([`ExtensionsConfig::claim_batch`]): at most
//! [`CLAIM_BATCHES_IN_FLIGHT`] run at once, and the claims that arrive meanwhile wait and go
//! together in the next, so a burst of claims costs a few commits instead of several per
//! claim ([`reconcile_claims`]). Two rather than one: a burst whose claims reach the driver in
//! two groups plans its second group while the first group's adoptions are being made durable,
//! instead of after them; the members either batch takes are reserved, so no two batches
//! plan on the same member.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Most claim batches running at once.
pub const CLAIM_BATCHES_IN_FLIGHT: usize = 2;

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
        batches_running: Arc::new(AtomicUsize::new(0)),
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
    /// Claim batches running; each batch's job takes itself off when it ends, however it
    /// ends.
    batches_running: Arc<AtomicUsize>,
}

impl<S: ExtensionsStore> Extensions<S> {
    /// A template seen in a list or as applied; `true` when it is new (see
    /// [`Router::template`]).
    fn template_added(&mut self, template: &SandboxTemplate) -> bool {
        self.templates.insert(ObjectKey::of(template))
    }

    /// The next claim batch, if batching, fewer than [`CLAIM_BATCHES_IN_FLIGHT`] run and
    /// claims are ready.
    fn claim_batch(&mut self, queue: &mut Queue<Work>) -> Option<Job<Work>> {
        // Only this driver's task starts batches, so the check and the increment below do
        // not race; the jobs only ever lower the count.
        if !self.batching || self.batches_running.load(Ordering::Acquire) >= CLAIM_BATCHES_IN_FLIGHT
        {
            return None;
        }
        let claims = queue.pop_matching(self.config.claim_batch, is_claim);
        if claims.is_empty() {
            return None;
        }
        let running = self.batches_running.fetch_add(1, Ordering::AcqRel) + 1;
        metrics::gauge!("rouse_controller_claim_batches_running").set(running as f64);
        let ended = BatchEnded(self.batches_running.clone());
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

/// Takes a batch off the running count when its job ends — returns, panics or is
/// cancelled — so the next batch never waits for one that is over.
struct BatchEnded(Arc<AtomicUsize>);

impl Drop for BatchEnded {
    fn drop(&mut self) {
        let running = self.0.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        metrics::gauge!("rouse_controller_claim_batches_running").set(running as f64);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EmbeddedStore, STORE_FILE_NAME};

    fn claim(name: &str) -> Work {
        Work::Claim(ObjectKey::new("default", name))
    }

    #[tokio::test]
    async fn a_second_claim_batch_starts_while_one_runs_and_a_third_waits_for_either() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).expect("store");
        let mut kind = Extensions {
            store,
            expectations: Expectations::default(),
            reservations: Reservations::default(),
            router: Router::default(),
            templates: HashSet::new(),
            batching: true,
            batches_running: Arc::new(AtomicUsize::new(0)),
            config: Arc::new(ExtensionsConfig::default()),
        };
        let mut queue = Queue::default();
        // The jobs are not polled: only which jobs start is under test.
        queue.add(claim("a"));
        let first = kind.next_job(&mut queue).expect("a batch");
        queue.add(claim("b"));
        let second = kind
            .next_job(&mut queue)
            .expect("a second batch while the first runs");
        queue.add(claim("c"));
        assert!(
            kind.next_job(&mut queue).is_none(),
            "no third batch while {CLAIM_BATCHES_IN_FLIGHT} run"
        );
        // Pools are not held back by running batches.
        queue.add(Work::Pool(ObjectKey::new("default", "pool")));
        assert!(kind.next_job(&mut queue).is_some(), "the pool's reconcile");
        // A batch that ends however it ends (here: dropped, as on cancellation) frees its place.
        drop(first);
        let third = kind
            .next_job(&mut queue)
            .expect("the waiting claim goes once a batch has ended");
        assert_eq!(kind.batches_running.load(Ordering::Acquire), 2);
        drop((second, third));
        assert_eq!(kind.batches_running.load(Ordering::Acquire), 0);
    }
}
