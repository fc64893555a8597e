//! The `scale` scenario: Rouse's controller side by side with upstream agent-sandbox's on one
//! real control plane with kwok-simulated nodes, one controller at a time, the same workload
//! for each, and the bare writes of the same objects as the baseline (docs/benchmarks.md,
//! "Controller at scale").
//!
//! For each size N: the baseline (no controller), then for each controller — its CRDs and
//! RBAC installed, the controller started as its ServiceAccount and warmed up on one sandbox —
//! the phases: N sandboxes at a fixed rate (then deleted), N at once, a warm pool filled and
//! claimed at a fixed rate, a pool's worth of claims at once and the refill, the deletion of
//! everything; then the correctness checks.

mod apimetrics;
mod baseline;
mod cluster;
mod measure;
mod objects;
mod phases;
mod process;
mod report;
mod tracker;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rouse_testsupport::cluster as kube_cluster;

pub use cluster::Binaries;
pub use measure::{Latency, PhaseReport};
pub use process::{Usage, Which};
pub use report::{RunReport, print};

use phases::{Pace, Run};

/// A phase of the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Phase {
    /// N sandboxes at `rate` per second, then deleted.
    Rate,
    /// N sandboxes at once.
    Burst,
    /// A warm pool filled, then claimed at `claim_rate` per second.
    Claims,
    /// A pool's worth of claims at once, and the pool's refill.
    Refill,
    /// Everything deleted, and checked gone.
    Delete,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Rate => "rate",
            Phase::Burst => "burst",
            Phase::Claims => "claims",
            Phase::Refill => "refill",
            Phase::Delete => "delete",
        })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sandbox counts N, one full run each.
    pub sizes: Vec<usize>,
    /// kwok nodes.
    pub nodes: usize,
    /// Controllers, in order.
    pub controllers: Vec<Which>,
    /// Phases, in the order of [`Phase`].
    pub phases: Vec<Phase>,
    /// Sandboxes per second of the `rate` phase.
    pub rate: f64,
    /// Requests in flight for the bursts and deletions.
    pub concurrency: usize,
    /// Warm pool size.
    pub pool: usize,
    /// Claims of the `claims` phase.
    pub claims: usize,
    /// Claims per second of the `claims` phase.
    pub claim_rate: f64,
    /// Runs of every controller (alternating which goes first), for a noisy machine.
    pub repeat: usize,
    /// The `rouse` binary.
    pub rouse: PathBuf,
    /// Longest wait of one phase.
    pub phase_deadline: Duration,
}

/// Everything one size measured.
#[derive(Debug, Clone)]
pub struct SizeReport {
    /// N.
    pub n: usize,
    /// The bare writes: sandboxes, then claims.
    pub baseline: Vec<PhaseReport>,
    /// One per controller run.
    pub runs: Vec<RunReport>,
}

/// Runs the scenario.
pub async fn run(options: &Options) -> Result<Vec<SizeReport>> {
    let binaries = Binaries::find(options.rouse.clone())?;
    let started = Instant::now();
    let mut cluster = cluster::Cluster::start(&binaries, options.nodes)
        .await
        .context("start the cluster")?;
    eprintln!(
        "scale: control plane, scheduler and {} kwok nodes up in {:.0?}",
        options.nodes,
        started.elapsed()
    );
    let mut reports = Vec::new();
    for &n in &options.sizes {
        let namespace = format!("baseline-{n}");
        cluster.install_rouse().await?;
        kube_cluster::create_namespace(&cluster.client, &namespace).await?;
        let baseline = baseline::run(
            &cluster.client,
            &namespace,
            n,
            options.pool,
            options.concurrency,
            options.phase_deadline,
        )
        .await
        .context("baseline")?;
        let mut runs = Vec::new();
        for round in 0..options.repeat.max(1) {
            let mut order = options.controllers.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            for &which in &order {
                cluster.check_parts()?;
                eprintln!("scale: N = {n}, {which} (round {})", round + 1);
                let report = one_run(&cluster, &binaries, options, which, n, round)
                    .await
                    .with_context(|| format!("{which}, N = {n}"))?;
                runs.push(report);
            }
        }
        reports.push(SizeReport { n, baseline, runs });
    }
    Ok(reports)
}

/// One controller's run at size `n`.
async fn one_run(
    cluster: &cluster::Cluster,
    binaries: &Binaries,
    options: &Options,
    which: Which,
    n: usize,
    round: usize,
) -> Result<RunReport> {
    let (binary, kubeconfig) = match which {
        Which::Upstream => (
            &binaries.upstream.controller,
            cluster
                .install_upstream(&binaries.upstream_manifests)
                .await?,
        ),
        Which::Rouse => (&binaries.rouse, cluster.install_rouse().await?),
    };
    let namespace = format!("{which}-{n}-{round}");
    kube_cluster::create_namespace(&cluster.client, &namespace).await?;
    let mut controller =
        process::Controller::start(which, binary, &kubeconfig, cluster.dir.path())?;
    let start = controller.usage()?;
    let mut run = Run {
        client: cluster.client.clone(),
        apis: objects::Apis::new(&cluster.client, &namespace),
        namespace: namespace.clone(),
        tracker: tracker::Tracker::start(&cluster.client, &namespace),
        controller: &mut controller,
        deadline: options.phase_deadline,
    };
    // Warm-up: the controller's caches are synced once it brings one sandbox to Ready.
    run.sandboxes("warmup", 1, Pace::Burst(1))
        .await
        .context("warm-up")?;
    let _ = run.delete_all(1).await?;
    let mut report = RunReport::new(which, n);
    // A phase that does not finish is reported, and the run goes on to the deletion, so the
    // other phases and the other controller still count.
    if let Err(error) = phases(&mut run, options, &mut report).await {
        eprintln!("scale: {which}, N = {n}: {error:#}");
        report.failures.push(format!("{error:#}"));
    }
    let (deleted, left) = run.delete_all(options.concurrency).await?;
    report.leftovers.extend(left);
    if options.phases.contains(&Phase::Delete) {
        report.phases.push(deleted);
    }
    report.check(&run.tracker, options.pool);
    drop(run);
    report.usage.cpu_seconds = controller.usage()?.cpu_seconds - start.cpu_seconds;
    Ok(report)
}

/// The measured phases of one run, each appended to `report` as it finishes; the first that
/// fails ends them.
async fn phases(run: &mut Run<'_>, options: &Options, report: &mut RunReport) -> Result<()> {
    let n = report.n;
    let has = |p| options.phases.contains(&p);
    if has(Phase::Rate) {
        report
            .phases
            .push(run.sandboxes("rate", n, Pace::Rate(options.rate)).await?);
        let (deleted, left) = run.delete_all(options.concurrency).await?;
        report
            .leftovers
            .extend(left.into_iter().map(|l| format!("after rate: {l}")));
        if has(Phase::Delete) {
            let mut deleted = deleted;
            deleted.phase = "delete-rate";
            report.phases.push(deleted);
        }
    }
    if has(Phase::Burst) {
        let burst = run
            .sandboxes("burst", n, Pace::Burst(options.concurrency))
            .await?;
        report.phases.push(burst);
    }
    if has(Phase::Claims) || has(Phase::Refill) {
        report.phases.push(run.pool(options.pool).await?);
    }
    if has(Phase::Claims) {
        let claims = run
            .claims(
                "claims",
                options.claims,
                Pace::Rate(options.claim_rate),
                options.pool,
            )
            .await?;
        report.phases.push(claims);
    }
    if has(Phase::Refill) {
        let refill = run
            .claims(
                "refill",
                options.pool,
                Pace::Burst(options.pool),
                options.pool,
            )
            .await?;
        report.phases.push(refill);
    }
    Ok(())
}
