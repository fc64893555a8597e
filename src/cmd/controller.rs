//! `rouse controller`: the Sandbox controller on a Kubernetes cluster.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rouse_controller::mode::kube::{self as run, ControllerConfig, LeaseConfig, Probes};
use rouse_controller::snapshot::kube::{KubeSnapshotConfig, KubeSnapshotProvider};
use rouse_shared::store::KubeStore;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// Arguments of `rouse controller`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Reconcile Sandboxes of this namespace only (all namespaces when unset).
    #[arg(long, env = "ROUSE_CONTROLLER_NAMESPACE")]
    namespace: Option<String>,
    /// Sandboxes reconciled at once.
    #[arg(long, default_value_t = 16, env = "ROUSE_CONTROLLER_CONCURRENCY")]
    concurrency: u16,
    /// Address of `/healthz`, `/readyz` and `/metrics`.
    #[arg(
        long,
        default_value = "0.0.0.0:8081",
        env = "ROUSE_CONTROLLER_METRICS_ADDRESS"
    )]
    metrics_address: SocketAddr,
    /// DNS suffix of Services, for `status.serviceFQDN`.
    #[arg(
        long,
        default_value = "cluster.local",
        env = "ROUSE_CONTROLLER_CLUSTER_DOMAIN"
    )]
    cluster_domain: String,
    /// Publish the lifecycle Events of sandboxes (docs/controller.md, "Events").
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "ROUSE_CONTROLLER_EVENTS")]
    events: bool,
    /// Reconcile every Sandbox at least this often (e.g. `5m`).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration, env = "ROUSE_CONTROLLER_RESYNC")]
    resync: Duration,
    /// Hold a Lease so that only one replica reconciles.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "ROUSE_CONTROLLER_LEADER_ELECTION")]
    leader_election: bool,
    /// Name of the leader election Lease.
    #[arg(
        long,
        default_value = "rouse-controller",
        env = "ROUSE_CONTROLLER_LEASE_NAME"
    )]
    lease_name: String,
    /// Namespace of the Lease (default: `POD_NAMESPACE`, else `--namespace`, else `default`).
    #[arg(long, env = "ROUSE_CONTROLLER_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity in the Lease (default: `POD_NAME`, else the host name).
    #[arg(long, env = "ROUSE_CONTROLLER_IDENTITY")]
    identity: Option<String>,
    /// How long the Lease stays valid without renewal.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration, env = "ROUSE_CONTROLLER_LEASE_DURATION")]
    lease_duration: Duration,
    /// How often the leader renews and a standby retries.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration, env = "ROUSE_CONTROLLER_LEASE_RETRY")]
    lease_retry: Duration,
    /// The provider taking SandboxSnapshots: `csi` (a CSI VolumeSnapshot per PVC) or `gke` (a
    /// GKE pod snapshot of the sandbox's gVisor pod).
    #[arg(
        long,
        default_value = "csi",
        env = "ROUSE_CONTROLLER_SNAPSHOT_PROVIDER"
    )]
    snapshot_provider: KubeSnapshotProvider,
    /// `volumeSnapshotClassName` of the VolumeSnapshots made (unset: the cluster's default).
    #[arg(long, env = "ROUSE_CONTROLLER_VOLUME_SNAPSHOT_CLASS")]
    volume_snapshot_class: Option<String>,
}

/// Runs the controller until SIGINT or SIGTERM.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    if args.lease_retry >= args.lease_duration {
        return Err(super::usage::usage(
            "--lease-retry must be shorter than --lease-duration",
        ));
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(args))?;
    Ok(ExitCode::SUCCESS)
}

fn config(args: &Args) -> ControllerConfig {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let leader_election = args.leader_election.then(|| LeaseConfig {
        name: args.lease_name.clone(),
        namespace: args
            .lease_namespace
            .clone()
            .or_else(|| env("POD_NAMESPACE"))
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "default".to_owned()),
        identity: args
            .identity
            .clone()
            .or_else(|| env("POD_NAME"))
            .or_else(|| env("HOSTNAME"))
            .unwrap_or_else(|| format!("rouse-controller-{}", std::process::id())),
        duration: args.lease_duration,
        retry_period: args.lease_retry,
    });
    ControllerConfig {
        namespace: args.namespace.clone(),
        concurrency: args.concurrency.max(1),
        cluster_domain: args.cluster_domain.clone(),
        events: args.events,
        resync: args.resync,
        leader_election,
        extensions: rouse_controller::extensions::ExtensionsConfig::default(),
        snapshots: KubeSnapshotConfig {
            provider: args.snapshot_provider,
            volume_snapshot_class: args.volume_snapshot_class.clone().filter(|c| !c.is_empty()),
            ..KubeSnapshotConfig::default()
        },
    }
}

async fn serve(args: &Args) -> anyhow::Result<()> {
    let metrics = run::install_metrics().context("cannot install the metrics recorder")?;
    let client = super::cluster::client().await?;
    let store = KubeStore::new(client.clone());
    let listener = tokio::net::TcpListener::bind(args.metrics_address)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_address))?;
    info!(metrics.address = %listener.local_addr()?, "serving /healthz, /readyz and /metrics");
    let shutdown = CancellationToken::new();
    let probes = Probes::default();
    let http = tokio::spawn(run::serve_probes(
        listener,
        probes.clone(),
        Some(metrics),
        shutdown.clone(),
    ));
    let signals = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("shutting down");
            shutdown.cancel();
        })
    };
    let result = run::run(client, store, config(args), probes, shutdown.clone()).await;
    shutdown.cancel();
    signals.abort();
    if let Ok(Err(e)) = http.await {
        error!(error = %e, "probe server failed");
    }
    result.context("controller stopped")
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            error!(error = %e, "cannot watch SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
