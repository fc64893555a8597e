//! The `claims` scenario: claim → Ready as an SDK sees it (the claim's `Ready=True` together
//! with `status.sandbox.name`, from a watch of claims), warm and cold, in both modes:
//!
//! - standalone: the embedded store, the Sandbox driver on the process runtime running this
//!   binary's `backend` mode, and the pool and claim driver, with claims reconciled in
//!   batches (the default) and, for comparison in the same run, one at a time
//!   (`claim_batch = 1`, the path before batching);
//! - Kubernetes: `rouse controller`'s code (Sandbox applier plus the pool, claim and template
//!   controllers) against the fake API server and fake kubelet.
//!
//! Each round fills a pool, creates as many claims as it has members one after another (the
//! latency one client sees), deletes them, fills the pool again and creates a pool's worth of
//! claims at once (claims/s, and the latency under that burst). Every warm claim must adopt.
//! Cold claims set `env`, which forces a sandbox of their own. The baseline is a bare Sandbox
//! created directly, create → Ready, in the same mode: what a claim costs without a pool.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use rouse_controller::extensions::{ExtensionsConfig, ExtensionsStore, run_standalone};
use rouse_controller::mode::kube::{self as run, ControllerConfig, Probes};
use rouse_controller::platform::local::{LocalConfig, LocalPlatform};
use rouse_controller::store::{EmbeddedStore, STORE_FILE_NAME};
use rouse_shared::api::keys::LAUNCH_TYPE;
use rouse_shared::api::{
    ClaimEnvVar, InjectionPolicy, LocalObjectReference, PodTemplate, Sandbox, SandboxClaim,
    SandboxClaimSpec, SandboxSpec, SandboxTemplate, SandboxTemplateSpec, SandboxWarmPool,
    SandboxWarmPoolSpec,
};
use rouse_shared::store::{DeleteParams, KubeStore, ListParams, ObjectKey, Store, WatchEvent};
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

const NS: &str = "bench";

/// What to run.
#[derive(Debug, Clone)]
pub struct ClaimsBench {
    /// Pool members, and claims per round.
    pub pool: usize,
    /// Warm rounds (each `pool` claims).
    pub rounds: usize,
    /// Cold claims, and bare sandboxes for the baseline.
    pub cold: usize,
    /// The workload command (this binary's `backend` mode).
    pub backend: Vec<String>,
    /// Give up on any wait after this long.
    pub timeout: Duration,
}

/// Latencies of one kind of request: p50, p99, max, and throughput.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// Samples, sorted.
    pub samples: Vec<Duration>,
    /// Requests per second over the batches that produced them.
    pub per_sec: f64,
}

impl Latencies {
    fn from(mut samples: Vec<Duration>, elapsed: Duration) -> Self {
        samples.sort_unstable();
        let per_sec = samples.len() as f64 / elapsed.as_secs_f64().max(1e-9);
        Self { samples, per_sec }
    }

    /// The `q` quantile (nearest rank).
    pub fn quantile(&self, q: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * self.samples.len() as f64).ceil() as usize).clamp(1, self.samples.len());
        self.samples[rank - 1]
    }
}

/// What one mode measured.
#[derive(Debug, Clone)]
pub struct ClaimsReport {
    /// `standalone, ...` or `kubernetes (fake API server)`.
    pub mode: String,
    /// Claims that adopted a pool member, one at a time.
    pub warm: Latencies,
    /// Claims that adopted a pool member, a whole pool's worth at once.
    pub burst: Latencies,
    /// Claims that started their own sandbox, one at a time.
    pub cold: Latencies,
    /// Bare sandboxes, create → Ready.
    pub baseline: Latencies,
}

fn template() -> SandboxTemplate {
    let mut t = SandboxTemplate::new("bench", SandboxTemplateSpec::default());
    t.metadata.namespace = Some(NS.into());
    t.spec.env_vars_injection_policy = Some(InjectionPolicy::Allowed);
    t
}

fn claim(name: &str, cold: bool) -> SandboxClaim {
    let mut c = SandboxClaim::new(
        name,
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference {
                name: "bench".into(),
            },
            ..SandboxClaimSpec::default()
        },
    );
    c.metadata.namespace = Some(NS.into());
    if cold {
        c.spec.env.push(ClaimEnvVar {
            name: "BENCH".into(),
            value: "cold".into(),
            container_name: None,
        });
    }
    c
}

fn pod_template(backend: &[String]) -> PodTemplate {
    PodTemplate {
        spec: PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                command: Some(backend.to_vec()),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(1),
            ..PodSpec::default()
        },
        ..PodTemplate::default()
    }
}

/// Records when each claim was first seen Ready with its sandbox named.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

fn watch_claims<S: ExtensionsStore>(store: S, stop: CancellationToken) -> Seen {
    let seen: Seen = Arc::default();
    let out = seen.clone();
    tokio::spawn(async move {
        let params = ListParams::namespace(NS);
        let Ok(list) = Store::<SandboxClaim>::list(&store, &params).await else {
            return;
        };
        let Ok(mut events) =
            Store::<SandboxClaim>::watch(&store, &params, &list.resource_version).await
        else {
            return;
        };
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            let claim = match event {
                Some(Ok(WatchEvent::Added(c) | WatchEvent::Modified(c))) => c,
                Some(Ok(_)) => continue,
                _ => return,
            };
            let status = claim.status.as_ref();
            let ready = status.is_some_and(|s| {
                s.sandbox.is_some()
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if ready {
                let name = claim.metadata.name.clone().unwrap_or_default();
                out.lock().await.entry(name).or_insert_with(Instant::now);
            }
        }
    });
    seen
}

async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + timeout;
    while !check().await {
        if Instant::now() > end {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

async fn pool_ready<S: ExtensionsStore>(
    store: &S,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let key = ObjectKey::new(NS, "bench");
    wait_until(timeout, "the pool full and Ready", || async {
        let pool = Store::<SandboxWarmPool>::get(store, &key).await.ok();
        pool.and_then(|p| p.status)
            .is_some_and(|s| usize::try_from(s.ready_replicas).ok() == Some(n))
    })
    .await
}

/// Creates `names` at once and returns their create → Ready latencies and the batch time.
async fn batch<S: ExtensionsStore>(
    store: &S,
    seen: &Seen,
    names: &[String],
    cold: bool,
    timeout: Duration,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let start = Instant::now();
    let created = futures::future::join_all(names.iter().map(|name| async move {
        let at = Instant::now();
        Store::<SandboxClaim>::create(store, &claim(name, cold))
            .await
            .map(|_| (name.clone(), at))
    }))
    .await
    .into_iter()
    .collect::<Result<Vec<_>, _>>()
    .context("create claims")?;
    wait_until(timeout, "every claim Ready", || async {
        let seen = seen.lock().await;
        names.iter().all(|n| seen.contains_key(n))
    })
    .await?;
    let seen = seen.lock().await;
    let latencies = created
        .iter()
        .map(|(name, at)| {
            seen.get(name)
                .map_or(Duration::ZERO, |r| r.saturating_duration_since(*at))
        })
        .collect();
    let elapsed = names
        .iter()
        .filter_map(|n| seen.get(n))
        .max()
        .map_or(Duration::ZERO, |last| last.saturating_duration_since(start));
    Ok((latencies, elapsed))
}

/// Creates `names` one after another, each once the previous is Ready: the latency a single
/// client sees without queueing behind others.
async fn one_by_one<S: ExtensionsStore>(
    store: &S,
    seen: &Seen,
    names: &[String],
    cold: bool,
    timeout: Duration,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let (mut all, mut total) = (Vec::new(), Duration::ZERO);
    for name in names {
        let (latencies, elapsed) =
            batch(store, seen, std::slice::from_ref(name), cold, timeout).await?;
        all.extend(latencies);
        total += elapsed;
    }
    Ok((all, total))
}

/// Checks how each claim got its sandbox; a "warm" round must be all warm.
async fn launches<S: ExtensionsStore>(
    store: &S,
    names: &[String],
    want: &str,
) -> anyhow::Result<()> {
    for name in names {
        let claim = Store::<SandboxClaim>::get(store, &ObjectKey::new(NS, name)).await?;
        let sandbox = claim.status.and_then(|s| s.sandbox).context("bound")?.name;
        let s = Store::<Sandbox>::get(store, &ObjectKey::new(NS, &sandbox)).await?;
        let got = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LAUNCH_TYPE))
            .cloned()
            .unwrap_or_default();
        if got != want {
            bail!("claim {name} launched {got}, expected {want}");
        }
    }
    Ok(())
}

async fn delete_claims<S: ExtensionsStore>(store: &S, names: &[String]) -> anyhow::Result<()> {
    for name in names {
        Store::<SandboxClaim>::delete(store, &ObjectKey::new(NS, name), &DeleteParams::default())
            .await?;
    }
    Ok(())
}

/// Runs the rounds on a store whose controllers are already running.
async fn measure<S: ExtensionsStore>(
    store: S,
    bench: &ClaimsBench,
    mode: String,
) -> anyhow::Result<ClaimsReport> {
    let stop = CancellationToken::new();
    let seen = watch_claims(store.clone(), stop.clone());
    let mut t = template();
    t.spec.pod_template = pod_template(&bench.backend);
    Store::<SandboxTemplate>::create(&store, &t)
        .await
        .context("template")?;

    // Baseline: bare sandboxes, create → Ready, one at a time.
    let start = Instant::now();
    let names: Vec<String> = (0..bench.cold).map(|i| format!("bare-{i}")).collect();
    let mut baseline = Vec::new();
    for name in &names {
        let mut s = Sandbox::new(name, SandboxSpec::default());
        s.metadata.namespace = Some(NS.into());
        s.spec.pod_template = pod_template(&bench.backend);
        let at = Instant::now();
        Store::<Sandbox>::create(&store, &s)
            .await
            .context("create sandbox")?;
        let key = ObjectKey::new(NS, name);
        wait_until(bench.timeout, "a bare sandbox Ready", || async {
            let s = Store::<Sandbox>::get(&store, &key).await.ok();
            s.and_then(|s| s.status).is_some_and(|st| {
                st.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await?;
        baseline.push(at.elapsed());
    }
    let baseline = Latencies::from(baseline, start.elapsed());
    delete_all::<Sandbox, S>(&store, &names).await?;

    let mut pool = SandboxWarmPool::new(
        "bench",
        SandboxWarmPoolSpec {
            replicas: i32::try_from(bench.pool).unwrap_or(i32::MAX),
            sandbox_template_ref: LocalObjectReference {
                name: "bench".into(),
            },
            update_strategy: None,
            readiness_grace_period_seconds: None,
        },
    );
    pool.metadata.namespace = Some(NS.into());
    Store::<SandboxWarmPool>::create(&store, &pool)
        .await
        .context("pool")?;

    let (mut warm, mut warm_time) = (Vec::new(), Duration::ZERO);
    let (mut burst, mut burst_time) = (Vec::new(), Duration::ZERO);
    for round in 0..bench.rounds {
        pool_ready(&store, bench.pool, bench.timeout).await?;
        let names: Vec<String> = (0..bench.pool)
            .map(|i| format!("warm-{round}-{i}"))
            .collect();
        let (latencies, elapsed) = one_by_one(&store, &seen, &names, false, bench.timeout).await?;
        launches(&store, &names, "warm").await?;
        warm.extend(latencies);
        warm_time += elapsed;
        delete_claims(&store, &names).await?;

        pool_ready(&store, bench.pool, bench.timeout).await?;
        let names: Vec<String> = (0..bench.pool)
            .map(|i| format!("burst-{round}-{i}"))
            .collect();
        let (latencies, elapsed) = batch(&store, &seen, &names, false, bench.timeout).await?;
        launches(&store, &names, "warm").await?;
        burst.extend(latencies);
        burst_time += elapsed;
        delete_claims(&store, &names).await?;
    }
    let names: Vec<String> = (0..bench.cold).map(|i| format!("cold-{i}")).collect();
    let (cold, cold_time) = one_by_one(&store, &seen, &names, true, bench.timeout).await?;
    launches(&store, &names, "cold").await?;
    delete_claims(&store, &names).await?;
    stop.cancel();
    Ok(ClaimsReport {
        mode,
        warm: Latencies::from(warm, warm_time),
        burst: Latencies::from(burst, burst_time),
        cold: Latencies::from(cold, cold_time),
        baseline,
    })
}

async fn delete_all<K, S>(store: &S, names: &[String]) -> anyhow::Result<()>
where
    K: rouse_shared::store::StoreObject,
    S: Store<K>,
{
    for name in names {
        store
            .delete(&ObjectKey::new(NS, name), &DeleteParams::default())
            .await?;
    }
    Ok(())
}

/// Standalone: embedded store, process runtime, both drivers; claims reconciled in batches of
/// up to `claim_batch` (1: one at a time).
pub async fn standalone(bench: &ClaimsBench, claim_batch: usize) -> anyhow::Result<ClaimsReport> {
    let dir = tempfile::tempdir().context("data dir")?;
    let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).context("store")?;
    let platform = LocalPlatform::new(LocalConfig::new(dir.path())).context("platform")?;
    let shutdown = CancellationToken::new();
    let sandboxes = tokio::spawn(rouse_controller::mode::local::sandboxes::run(
        store.clone(),
        platform,
        shutdown.clone(),
    ));
    let config = ExtensionsConfig {
        claim_batch,
        ..ExtensionsConfig::default()
    };
    let extensions = tokio::spawn(run_standalone(store.clone(), config, shutdown.clone()));
    let mode = if claim_batch > 1 {
        format!("standalone, claims in batches (claim_batch = {claim_batch})")
    } else {
        "standalone, one claim at a time (claim_batch = 1)".to_owned()
    };
    let report = measure(store, bench, mode).await;
    shutdown.cancel();
    let _ = extensions.await;
    let _ = sandboxes.await;
    report
}

/// Kubernetes: the controller on the fake API server and kubelet.
pub async fn kubernetes(bench: &ClaimsBench) -> anyhow::Result<ClaimsReport> {
    let server = FakeApiServer::start().await.context("fake API server")?;
    let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let client = server.client().context("client")?;
    let store = KubeStore::new(client.clone());
    let shutdown = CancellationToken::new();
    let config = ControllerConfig {
        namespace: Some(NS.into()),
        events: false,
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run::run(
        client,
        store.clone(),
        config,
        Probes::default(),
        shutdown.clone(),
    ));
    let report = measure(store, bench, "kubernetes (fake API server)".to_owned()).await;
    shutdown.cancel();
    let _ = controller.await;
    report
}

/// Prints one mode's numbers as a Markdown table.
pub fn print(report: &ClaimsReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("### {}", report.mode);
    println!();
    println!("| path | n | p50 ms | p99 ms | max ms | per s |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, l) in [
        ("warm claim → Ready, one at a time", &report.warm),
        ("warm claims → Ready, a pool's worth at once", &report.burst),
        ("cold claim → Ready, one at a time", &report.cold),
        ("baseline: bare Sandbox → Ready", &report.baseline),
    ] {
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.0} |",
            l.samples.len(),
            ms(l.quantile(0.5)),
            ms(l.quantile(0.99)),
            ms(l.quantile(1.0)),
            l.per_sec
        );
    }
    let ratio = report.baseline.quantile(0.5).as_secs_f64()
        / report.warm.quantile(0.5).as_secs_f64().max(1e-9);
    println!();
    println!("warm p50 is {ratio:.1}x faster than a bare sandbox's create → Ready");
    println!();
}
