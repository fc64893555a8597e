//! The workload's phases, each measured on its own: sandboxes at a fixed rate or in one burst,
//! a warm pool filled and claimed at a fixed rate, a pool's worth of claims at once and the
//! refill after it, and the deletion of everything.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use tokio::task::JoinSet;

use super::measure::{Latency, PhaseReport, Probe, latencies};
use super::objects::{self, Apis};
use super::process::Controller;
use super::tracker::{Seen, Tracker};

/// Most creates in flight at once when pacing to a rate (a server slower than the rate
/// makes the run fall behind rather than pile up requests).
const MAX_IN_FLIGHT: usize = 256;

/// How objects are created.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// This many per second.
    Rate(f64),
    /// All at once, this many requests in flight.
    Burst(usize),
}

/// One controller's run in one namespace.
pub struct Run<'a> {
    /// The benchmark's admin client.
    pub client: Client,
    /// The namespace's APIs.
    pub apis: Apis,
    /// The namespace.
    pub namespace: String,
    /// Its watches.
    pub tracker: Tracker,
    /// The controller under test.
    pub controller: &'a mut Controller,
    /// Longest wait of any phase.
    pub deadline: Duration,
}

impl Run<'_> {
    /// Waits until `done` holds for what the watches saw, failing when the controller exits
    /// or the deadline passes (naming `what`).
    async fn wait(&mut self, what: &str, done: impl Fn(&Seen) -> bool) -> Result<()> {
        let end = Instant::now() + self.deadline;
        loop {
            if self.tracker.with(&done) {
                return Ok(());
            }
            self.controller.check()?;
            if Instant::now() > end {
                bail!(
                    "{what}: not within {:?}\n{} log:\n{}",
                    self.deadline,
                    self.controller.which,
                    self.controller.log_tail(20)
                );
            }
            // A poll of the watches' state with a deadline; the instants it reports are
            // taken by the watches themselves, not here.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn probe(&self) -> Result<Probe> {
        Probe::start(&self.client, Some(self.controller)).await
    }

    /// Sandboxes `<phase>-<i>`, `n` of them at `pace`, until every one is Ready.
    pub async fn sandboxes(
        &mut self,
        phase: &'static str,
        n: usize,
        pace: Pace,
    ) -> Result<PhaseReport> {
        let names: Vec<String> = (0..n).map(|i| format!("{phase}-{i}")).collect();
        let mut probe = self.probe().await?;
        let created = create(&self.apis.sandboxes, &names, pace, objects::sandbox).await?;
        probe.own("POST", n);
        let waited = self
            .wait(&format!("{n} sandboxes of phase {phase} Ready"), |s| {
                names.iter().all(|n| s.sandbox_ready.contains_key(n))
            })
            .await;
        if let Err(error) = waited {
            let ready = self.tracker.with(|s| {
                names
                    .iter()
                    .filter(|n| s.sandbox_ready.contains_key(*n))
                    .count()
            });
            return Err(error.context(format!("{phase}: {ready} of {n} sandboxes Ready")));
        }
        let (samples, last) = self.tracker.with(|s| latencies(&created, &s.sandbox_ready));
        let (requests, usage) = probe.finish(&self.client, Some(self.controller)).await?;
        Ok(PhaseReport {
            phase,
            items: n,
            elapsed: span(&created, last),
            latency: Latency::of(samples),
            requests,
            usage,
            ..PhaseReport::default()
        })
    }

    /// The template and a pool of `size`, until `size` members are Ready.
    pub async fn pool(&mut self, size: usize) -> Result<PhaseReport> {
        let mut probe = self.probe().await?;
        let start = Instant::now();
        Apis::create(&self.apis.templates, &objects::template())
            .await
            .context("template")?;
        Apis::create(&self.apis.pools, &objects::pool(size))
            .await
            .context("pool")?;
        probe.own("POST", 2);
        self.wait(&format!("the pool's {size} members Ready"), |s| {
            s.ready_members.len() >= size
        })
        .await?;
        let elapsed = start.elapsed();
        let (requests, usage) = probe.finish(&self.client, Some(self.controller)).await?;
        Ok(PhaseReport {
            phase: "pool",
            items: size,
            elapsed,
            requests,
            usage,
            ..PhaseReport::default()
        })
    }

    /// Claims `<phase>-<i>` of the pool, `n` at `pace`, until every one is Ready with its
    /// sandbox named; for `refill`, also until the pool has `size` Ready members again.
    pub async fn claims(
        &mut self,
        phase: &'static str,
        n: usize,
        pace: Pace,
        size: usize,
    ) -> Result<PhaseReport> {
        if phase == "refill" {
            self.wait(
                &format!("the pool full ({size} Ready) before the burst"),
                |s| s.ready_members.len() >= size,
            )
            .await?;
        }
        let names: Vec<String> = (0..n).map(|i| format!("{phase}-{i}")).collect();
        let mut probe = self.probe().await?;
        let created = create(&self.apis.claims, &names, pace, objects::claim).await?;
        probe.own("POST", n);
        let waited = self
            .wait(&format!("{n} claims of phase {phase} Ready"), |s| {
                names.iter().all(|n| s.claim_ready.contains_key(n))
            })
            .await;
        if let Err(error) = waited {
            let ready = self.tracker.with(|s| {
                names
                    .iter()
                    .filter(|n| s.claim_ready.contains_key(*n))
                    .count()
            });
            return Err(error.context(format!("{phase}: {ready} of {n} claims Ready")));
        }
        let (samples, last, warm, cold) = self.tracker.with(|s| {
            let (samples, last) = latencies(&created, &s.claim_ready);
            let (mut warm, mut cold) = (Vec::new(), Vec::new());
            for (name, at) in &created {
                let Some(ready) = s.claim_ready.get(name) else {
                    continue;
                };
                let latency = ready.saturating_duration_since(*at);
                let sandbox = s.claim_sandbox.get(name);
                match sandbox.and_then(|b| s.launch.get(b)).map(String::as_str) {
                    Some("warm") => warm.push(latency),
                    _ => cold.push(latency),
                }
            }
            (samples, last, warm, cold)
        });
        let mut marks = Vec::new();
        if phase == "refill" {
            let first = created.values().min().copied().unwrap_or_else(Instant::now);
            self.wait(
                &format!("the pool refilled ({size} Ready) after the burst"),
                |s| s.ready_members.len() >= size,
            )
            .await?;
            marks.push(("pool refilled", first.elapsed()));
        }
        let (requests, usage) = probe.finish(&self.client, Some(self.controller)).await?;
        Ok(PhaseReport {
            phase,
            items: n,
            elapsed: span(&created, last),
            latency: Latency::of(samples),
            warm: Latency::of(warm),
            cold: Latency::of(cold),
            marks,
            requests,
            usage,
        })
    }

    /// Deletes every claim, the pool, the template and every sandbox no claim or pool
    /// controls, `concurrency` at a time, and waits until no sandbox, claim, pool, pod or
    /// Service is left; returns the report and what was left at the deadline.
    pub async fn delete_all(&mut self, concurrency: usize) -> Result<(PhaseReport, Vec<String>)> {
        let mut probe = self.probe().await?;
        let claims = names(&self.apis.claims, |_| true).await?;
        let loose = names(&self.apis.sandboxes, |o| {
            !o.metadata
                .owner_references
                .as_ref()
                .is_some_and(|r| r.iter().any(|r| r.controller == Some(true)))
        })
        .await?;
        let items = self
            .apis
            .sandboxes
            .list(&ListParams::default())
            .await?
            .items
            .len();
        probe.own("LIST", 3);
        let start = Instant::now();
        let mut deletes = Vec::new();
        deletes.extend(claims.iter().map(|n| (self.apis.claims.clone(), n.clone())));
        deletes.extend(
            loose
                .iter()
                .map(|n| (self.apis.sandboxes.clone(), n.clone())),
        );
        for api in [&self.apis.pools, &self.apis.templates] {
            deletes.extend(
                names(api, |_| true)
                    .await?
                    .into_iter()
                    .map(|n| (api.clone(), n)),
            );
        }
        probe.own("LIST", 2);
        probe.own("DELETE", deletes.len());
        objects::delete_each(deletes, concurrency).await?;
        let mut marks = Vec::new();
        let end = start + self.deadline;
        let left = loop {
            let left = self.left().await?;
            if left.iter().all(|l| !l.starts_with("sandboxes")) && marks.is_empty() {
                marks.push(("sandboxes gone", start.elapsed()));
            }
            if left.is_empty() || Instant::now() > end {
                break left;
            }
            // A poll of the API with a deadline: pods go when kwok plays their deletion.
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let (requests, usage) = probe.finish(&self.client, Some(self.controller)).await?;
        let report = PhaseReport {
            phase: "delete",
            items,
            elapsed: start.elapsed(),
            marks,
            requests,
            usage,
            ..PhaseReport::default()
        };
        Ok((report, left))
    }

    /// What of the workload is left in the namespace: `kind: count` for each kind with any.
    pub async fn left(&self) -> Result<Vec<String>> {
        let params = ListParams::default();
        let ns = &self.namespace;
        let counts = [
            (
                "sandboxes",
                self.apis.sandboxes.list(&params).await?.items.len(),
            ),
            (
                "sandboxclaims",
                self.apis.claims.list(&params).await?.items.len(),
            ),
            (
                "sandboxwarmpools",
                self.apis.pools.list(&params).await?.items.len(),
            ),
            (
                "pods",
                Api::<Pod>::namespaced(self.client.clone(), ns)
                    .list(&params)
                    .await?
                    .items
                    .len(),
            ),
            (
                "services",
                Api::<Service>::namespaced(self.client.clone(), ns)
                    .list(&params)
                    .await?
                    .items
                    .len(),
            ),
        ];
        Ok(counts
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect())
    }
}

/// Names of the objects `api` lists that `keep` picks.
async fn names(
    api: &Api<DynamicObject>,
    keep: impl Fn(&DynamicObject) -> bool,
) -> Result<Vec<String>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|o| keep(o))
        .filter_map(|o| o.metadata.name)
        .collect())
}

/// From the first create to `last` (zero without one).
fn span(created: &HashMap<String, Instant>, last: Option<Instant>) -> Duration {
    match (created.values().min(), last) {
        (Some(first), Some(last)) => last.saturating_duration_since(*first),
        _ => Duration::ZERO,
    }
}

/// Creates `make(name)` for every name at `pace`; when each create was sent.
pub async fn create(
    api: &Api<DynamicObject>,
    names: &[String],
    pace: Pace,
    make: fn(&str) -> DynamicObject,
) -> Result<HashMap<String, Instant>> {
    let one = |name: String| {
        let api = api.clone();
        async move {
            let at = Instant::now();
            Apis::create(&api, &make(&name))
                .await
                .with_context(|| format!("create {name}"))
                .map(|()| (name, at))
        }
    };
    match pace {
        Pace::Burst(concurrency) => {
            stream::iter(names.iter().cloned())
                .map(one)
                .buffer_unordered(concurrency.max(1))
                .try_collect()
                .await
        }
        Pace::Rate(rate) => {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.001)));
            // Behind schedule (a slow server): catch up, so the average rate holds.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut jobs = JoinSet::new();
            let mut created = HashMap::with_capacity(names.len());
            for name in names {
                tick.tick().await;
                while jobs.len() >= MAX_IN_FLIGHT {
                    if let Some(done) = jobs.join_next().await {
                        let (name, at) = done??;
                        created.insert(name, at);
                    }
                }
                jobs.spawn(one(name.clone()));
            }
            while let Some(done) = jobs.join_next().await {
                let (name, at) = done??;
                created.insert(name, at);
            }
            Ok(created)
        }
    }
}
