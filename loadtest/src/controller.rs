//! The controller benchmark: N sandboxes created against the fake API server with the fake
//! kubelet, or against the real control plane (`--api real`) with the cluster kubelet, timed
//! until every one is `Ready`, next to a baseline doing only the API writes a sandbox needs
//! (create the Sandbox, create its Pod, patch its status), at the same concurrency, against the
//! same kind of server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use metrics_exporter_prometheus::PrometheusHandle;
use rouse_controller::mode::kube::{self as run, ControllerConfig, Probes};
use rouse_shared::api::{Sandbox, SandboxSpec};
use rouse_shared::store::KubeStore;
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};

use crate::real_api::RealApi;

/// The API server the benchmark runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiServer {
    /// The in-process fake API server and fake kubelet.
    Fake,
    /// etcd, kube-apiserver and kube-controller-manager (testsupport/cluster/build.sh builds
    /// them), with the cluster kubelet.
    Real,
}
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// What to run.
#[derive(Debug, Clone)]
pub struct ControllerBench {
    /// Sandboxes created.
    pub sandboxes: usize,
    /// Concurrent creates by the client, and the controller's reconcile concurrency.
    pub concurrency: usize,
    /// Publish Events (one more API write per transition).
    pub events: bool,
    /// Give up after this long.
    pub timeout: Duration,
    /// Which API server.
    pub api: ApiServer,
}

/// What it measured.
#[derive(Debug, Clone)]
pub struct ControllerReport {
    /// Which API server.
    pub api: ApiServer,
    /// Sandboxes that became Ready.
    pub sandboxes: usize,
    /// From the first create to the last Ready.
    pub elapsed: Duration,
    /// Create → Ready latency per sandbox: p50, p99, max.
    pub ready_latency: [Duration; 3],
    /// Reconcile duration quantiles from the controller's histogram: p50, p99 (if recorded).
    pub reconcile_latency: Option<[Duration; 2]>,
    /// API requests the controller and client made, per sandbox.
    pub requests_per_sandbox: f64,
    /// The baseline: the same number of sandboxes with only the necessary writes.
    pub baseline_elapsed: Duration,
}

impl ControllerReport {
    /// Sandboxes per second to Ready.
    pub fn per_sec(&self) -> f64 {
        self.sandboxes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Baseline sandboxes per second.
    pub fn baseline_per_sec(&self) -> f64 {
        self.sandboxes as f64 / self.baseline_elapsed.as_secs_f64().max(1e-9)
    }
}

fn sandbox(i: usize, namespace: &str) -> Sandbox {
    let mut s = Sandbox::new(
        &format!("bench-{i}"),
        SandboxSpec::running(Container {
            name: "main".into(),
            image: Some("busybox".into()),
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        }),
    );
    s.metadata.namespace = Some(namespace.into());
    s
}

/// Where requests are counted.
enum Counter<'a> {
    Fake(&'a FakeApiServer),
    Real(&'a RealApi),
}

impl Counter<'_> {
    /// Requests served so far (client and controller; the kubelet's are not counted).
    async fn requests(&self) -> anyhow::Result<u64> {
        match self {
            Counter::Fake(server) => Ok(server.requests().all().map(|(_, _, n)| n).sum()),
            Counter::Real(real) => real.requests().await,
        }
    }
}

/// Runs the benchmark; `metrics` (a recorder rendering quantiles) adds reconcile latency.
pub async fn run(
    bench: &ControllerBench,
    metrics: Option<&PrometheusHandle>,
) -> anyhow::Result<ControllerReport> {
    match bench.api {
        ApiServer::Fake => {
            let baseline_server = FakeApiServer::start().await.context("fake API server")?;
            let baseline_client = baseline_server.client().context("client")?;
            let baseline_elapsed = baseline(bench, baseline_client, "bench")
                .await
                .context("baseline")?;
            let server = FakeApiServer::start().await.context("fake API server")?;
            let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
            let client = server.client().context("client")?;
            let counter = Counter::Fake(&server);
            measure(bench, metrics, client, counter, baseline_elapsed).await
        }
        ApiServer::Real => {
            let real = RealApi::start(&["bench", "bench-baseline"])
                .await
                .context("real control plane")?;
            let baseline_elapsed = baseline(bench, real.client.clone(), "bench-baseline")
                .await
                .context("baseline")?;
            measure(
                bench,
                metrics,
                real.client.clone(),
                Counter::Real(&real),
                baseline_elapsed,
            )
            .await
        }
    }
}

/// The controller run: sandboxes created in namespace `bench` with `client` until all are
/// Ready.
async fn measure(
    bench: &ControllerBench,
    metrics: Option<&PrometheusHandle>,
    client: Client,
    counter: Counter<'_>,
    baseline_elapsed: Duration,
) -> anyhow::Result<ControllerReport> {
    let shutdown = CancellationToken::new();
    let config = ControllerConfig {
        namespace: Some("bench".into()),
        concurrency: u16::try_from(bench.concurrency.max(1)).unwrap_or(u16::MAX),
        events: bench.events,
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run::run(
        client.clone(),
        KubeStore::new(client.clone()),
        config,
        Probes::default(),
        shutdown.clone(),
    ));

    // Watch for Ready before creating anything, so no transition is missed.
    let api: Api<Sandbox> = Api::namespaced(client.clone(), "bench");
    let (ready_tx, mut ready_rx) =
        tokio::sync::mpsc::channel::<(String, Instant)>(bench.sandboxes.max(1));
    let watch = tokio::spawn({
        let api = api.clone();
        async move {
            let mut seen = std::collections::HashSet::new();
            let events = watcher(api, watcher::Config::default()).applied_objects();
            futures::pin_mut!(events);
            while let Ok(Some(s)) = events.try_next().await {
                let ready = s.status.as_ref().is_some_and(|st| {
                    st.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
                let name = s.metadata.name.clone().unwrap_or_default();
                if ready
                    && seen.insert(name.clone())
                    && ready_tx.send((name, Instant::now())).await.is_err()
                {
                    return;
                }
            }
        }
    });

    let requests_before = counter.requests().await.context("count requests")?;
    let start = Instant::now();
    let created: HashMap<String, Instant> = stream::iter(0..bench.sandboxes)
        .map(|i| {
            let api = api.clone();
            async move {
                let s = sandbox(i, "bench");
                let at = Instant::now();
                api.create(&PostParams::default(), &s)
                    .await
                    .map(|_| (format!("bench-{i}"), at))
            }
        })
        .buffer_unordered(bench.concurrency.max(1))
        .try_collect()
        .await
        .context("create sandboxes")?;

    let mut latencies = Vec::with_capacity(bench.sandboxes);
    let mut last = start;
    let deadline = tokio::time::Instant::now() + bench.timeout;
    while latencies.len() < bench.sandboxes {
        match tokio::time::timeout_at(deadline, ready_rx.recv()).await {
            Ok(Some((name, at))) => {
                if let Some(created_at) = created.get(&name) {
                    latencies.push(at.saturating_duration_since(*created_at));
                    last = last.max(at);
                }
            }
            Ok(None) => bail!("the watch ended"),
            Err(_) => bail!(
                "only {} of {} sandboxes became Ready within {:?}",
                latencies.len(),
                bench.sandboxes,
                bench.timeout
            ),
        }
    }
    let elapsed = last - start;
    let requests = counter
        .requests()
        .await
        .context("count requests")?
        .saturating_sub(requests_before);
    shutdown.cancel();
    watch.abort();
    controller
        .await
        .context("controller task")?
        .context("controller")?;

    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
    Ok(ControllerReport {
        api: bench.api,
        sandboxes: bench.sandboxes,
        elapsed,
        ready_latency: [pick(0.5), pick(0.99), pick(1.0)],
        reconcile_latency: metrics.and_then(reconcile_quantiles),
        requests_per_sandbox: requests as f64 / bench.sandboxes.max(1) as f64,
        baseline_elapsed,
    })
}

/// The minimum API work per sandbox, issued directly: create it, create its pod, patch its
/// status. What a controller with zero overhead would still have to do.
async fn baseline(
    bench: &ControllerBench,
    client: Client,
    namespace: &str,
) -> anyhow::Result<Duration> {
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let start = Instant::now();
    stream::iter(0..bench.sandboxes)
        .map(|i| {
            let (sandboxes, pods) = (sandboxes.clone(), pods.clone());
            async move {
                let s = sandbox(i, namespace);
                sandboxes.create(&PostParams::default(), &s).await?;
                let pod = Pod {
                    metadata: kube::api::ObjectMeta {
                        name: Some(format!("bench-{i}")),
                        ..Default::default()
                    },
                    spec: Some(s.spec.pod_template.spec.clone()),
                    status: None,
                };
                pods.create(&PostParams::default(), &pod).await?;
                let status = json!({"status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "DependenciesReady",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                sandboxes
                    .patch_status(
                        &format!("bench-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&status),
                    )
                    .await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(bench.concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(start.elapsed())
}

/// p50 and p99 of `rouse_controller_reconcile_duration_seconds` from a rendering with
/// quantiles.
fn reconcile_quantiles(handle: &PrometheusHandle) -> Option<[Duration; 2]> {
    let text = handle.render();
    let find = |q: &str| {
        let prefix = format!("rouse_controller_reconcile_duration_seconds{{quantile=\"{q}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(Duration::from_secs_f64)
    };
    Some([find("0.5")?, find("0.99")?])
}

/// Prints a report.
pub fn print(report: &ControllerReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "controller ({:?} API server): {} sandboxes Ready in {:.0} ms = {:.0} sandboxes/s; create->Ready p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        report.api,
        report.sandboxes,
        ms(report.elapsed),
        report.per_sec(),
        ms(report.ready_latency[0]),
        ms(report.ready_latency[1]),
        ms(report.ready_latency[2]),
    );
    match report.reconcile_latency {
        Some([p50, p99]) => println!("reconcile: p50 {:.2} ms, p99 {:.2} ms", ms(p50), ms(p99)),
        None => println!("reconcile: no latency recorded"),
    }
    println!(
        "api requests per sandbox (client + controller; kubelet excluded): {:.1}",
        report.requests_per_sandbox
    );
    println!(
        "baseline (create sandbox + create pod + patch status, no controller): {:.0} sandboxes/s; controller/baseline throughput {:.2}",
        report.baseline_per_sec(),
        report.per_sec() / report.baseline_per_sec().max(1e-9)
    );
}
