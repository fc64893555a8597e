//! `rouse-loadtest`: runs benchmark scenarios and prints p50/p99/max with ratios against a
//! baseline measured in the same run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use rouse_loadtest::measure::{self, Budget};
use rouse_loadtest::node::Runtime;
use rouse_loadtest::scale::{self, Phase, Which};
use rouse_loadtest::wake::{self, WakeOptions, WakePath};
use rouse_loadtest::{proxy, scenarios};

/// Rouse benchmarks; build with --release.
#[derive(Debug, Parser)]
#[command(name = "rouse-loadtest", version, about)]
struct Cli {
    /// Scenarios to run (all when none are given).
    #[arg(value_enum)]
    scenarios: Vec<Scenario>,
    /// Batches per side.
    #[arg(long, default_value_t = 200, env = "ROUSE_LOADTEST_BATCHES")]
    batches: usize,
    /// Time budget per side, in seconds.
    #[arg(long, default_value_t = 10, env = "ROUSE_LOADTEST_SECONDS")]
    seconds: u64,
    /// Controller scenario: sandboxes created.
    #[arg(long, default_value_t = 2000, env = "ROUSE_LOADTEST_SANDBOXES")]
    sandboxes: usize,
    /// Controller scenario: concurrent creates and reconciles.
    #[arg(long, default_value_t = 64, env = "ROUSE_LOADTEST_CONCURRENCY")]
    concurrency: usize,
    /// Claims scenario: warm pool members (and claims per round).
    #[arg(long, default_value_t = 20, env = "ROUSE_LOADTEST_POOL")]
    pool: usize,
    /// Claims scenario: warm rounds.
    #[arg(long, default_value_t = 5, env = "ROUSE_LOADTEST_CLAIM_ROUNDS")]
    claim_rounds: usize,
    /// Claims scenario: the modes to measure, in order (`standalone-one-by-one` is the path
    /// before claims were batched, for a before/after in one run).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ClaimMode::StandaloneOneByOne, ClaimMode::Standalone, ClaimMode::Kubernetes])]
    claim_modes: Vec<ClaimMode>,
    /// Claims scenario: cold claims (and bare sandboxes of the baseline).
    #[arg(long, default_value_t = 20, env = "ROUSE_LOADTEST_COLD")]
    cold: usize,
    /// Controller scenario: publish Kubernetes Events.
    #[arg(long, default_value_t = false, env = "ROUSE_LOADTEST_EVENTS")]
    events: bool,
    /// Controller scenario: the fake API server, or the real control plane (built by
    /// testsupport/cluster/build.sh).
    #[arg(long, value_enum, default_value = "fake", env = "ROUSE_LOADTEST_API")]
    api: rouse_loadtest::controller::ApiServer,
    /// scale: sandbox counts N, one full run of every controller each.
    #[arg(long, value_delimiter = ',', default_values_t = [1000], env = "ROUSE_SCALE_SIZES")]
    sizes: Vec<usize>,
    /// scale: kwok nodes.
    #[arg(long, default_value_t = 50, env = "ROUSE_SCALE_NODES")]
    nodes: usize,
    /// scale: the controllers, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Which::Upstream, Which::Rouse])]
    controllers: Vec<Which>,
    /// scale: the phases to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Phase::Rate, Phase::Burst, Phase::Claims, Phase::Refill, Phase::Delete])]
    phases: Vec<Phase>,
    /// scale: sandboxes per second of the `rate` phase.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// scale: warm pool size (and the claims of the `refill` burst).
    #[arg(long, default_value_t = 200)]
    warm_pool: usize,
    /// scale: claims of the `claims` phase.
    #[arg(long, default_value_t = 1000)]
    claims: usize,
    /// scale: claims per second of the `claims` phase.
    #[arg(long, default_value_t = 10.0)]
    claim_rate: f64,
    /// scale: runs of each controller, alternating which goes first.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// scale: the longest wait of one phase, in seconds.
    #[arg(long, default_value_t = 1800)]
    phase_seconds: u64,
    /// proxy: keep-alive connections of the HTTP load.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// proxy: alternating rounds of the HTTP load.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// proxy: milliseconds of each target's turn per round.
    #[arg(long, default_value_t = 2000)]
    turn_ms: u64,
    /// proxy: connections held for the memory measurement.
    #[arg(long, default_value_t = 10_000)]
    held: usize,
    /// held: how many connections to hold, one measurement per count and kind.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000, 100_000])]
    held_counts: Vec<usize>,
    /// proxy: wake latency trials.
    #[arg(long, default_value_t = 50)]
    wakes: usize,
    /// proxy: drive wrk instead (Rouse with 1, 2 and 4 worker threads against nginx with 1
    /// and 2 workers, nginx as the backend); needs `wrk` and `nginx` installed.
    #[arg(long, default_value_t = false)]
    wrk: bool,
    /// proxy: serve Rouse alone in front of an nginx backend until stdin closes, for
    /// profilers (perf, callgrind) driven by wrk; prints the address.
    #[arg(long, default_value_t = false)]
    serve: bool,
    /// proxy --serve: the proxy's worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// proxy: milliseconds of each splice throughput run.
    #[arg(long, default_value_t = 3000)]
    stream_ms: u64,
    /// Wake cycles of the `wake` scenario (and backend starts for its baseline).
    #[arg(long, default_value_t = 200, env = "ROUSE_LOADTEST_CYCLES")]
    cycles: usize,
    /// wake: the wake paths to measure, each in its own `rouse up` (`direct`, `store`).
    #[arg(long, value_delimiter = ',', default_values_t = [WakePathArg::Direct, WakePathArg::Store])]
    wake_paths: Vec<WakePathArg>,
    /// restore: MiB of memory the workload writes before it is checkpointed.
    #[arg(long, default_value_t = 256, env = "ROUSE_LOADTEST_MIB")]
    mib: usize,
    /// restore: the runsc to run; default: the pinned build of testsupport/gvisor/build.sh,
    /// else `runsc` on PATH.
    #[arg(long, value_name = "PATH")]
    runsc: Option<PathBuf>,
    /// restore: `full` waits for the whole image (`runsc restore`), `background` lets memory
    /// load after the sandbox runs (`--background`, Rouse's default).
    #[arg(long, value_enum, default_value_t = RestoreModeArg::Background)]
    restore_mode: RestoreModeArg,
    /// restore: keep the data directory, and so the images, on tmpfs (/dev/shm).
    #[arg(long)]
    tmpfs: bool,
    /// restore: also restore the image bare under each option runsc offers (compression,
    /// direct I/O, background loading, tmpfs) and print the matrix.
    #[arg(long)]
    restore_matrix: bool,
    /// node: wake cycles per runtime class, and claim cycles (a warm claim and a cold create
    /// each).
    #[arg(long, default_value_t = 20, env = "ROUSE_LOADTEST_NODE_CYCLES")]
    node_cycles: usize,
    /// node: sandboxes of the memory measurement (the node runs at most 110 pods).
    #[arg(long, default_value_t = 100, env = "ROUSE_LOADTEST_NODE_SANDBOXES")]
    node_sandboxes: usize,
    /// node: warm pool members of the claim measurement.
    #[arg(long, default_value_t = 2)]
    node_pool: usize,
    /// node: the runtime classes of the wake measurement (`gvisor`, `runc`).
    #[arg(long, value_delimiter = ',', default_values_t = [Runtime::Gvisor, Runtime::Runc])]
    node_runtimes: Vec<Runtime>,
    /// node: seconds after which a part starts no more cycles.
    #[arg(long, default_value_t = 900)]
    node_seconds: u64,
    /// The `rouse` binary the `wake` and `restore` scenarios run and the `node` scenario packs
    /// into its image; default: `rouse` beside this binary.
    #[arg(long, value_name = "PATH")]
    rouse: Option<PathBuf>,
}

/// How the restore scenario restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RestoreModeArg {
    /// The whole image is loaded before the sandbox runs.
    Full,
    /// The sandbox runs once its state is loaded; memory follows in the background.
    Background,
}

/// A wake path on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WakePathArg {
    /// `[runtime] direct_wake = true`.
    Direct,
    /// `[runtime] direct_wake = false`.
    Store,
}

impl std::fmt::Display for WakePathArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WakePathArg::Direct => "direct",
            WakePathArg::Store => "store",
        })
    }
}

/// A mode of the claims scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ClaimMode {
    /// `rouse up`'s drivers on the embedded store, claims in batches (the default).
    Standalone,
    /// The same with `claim_batch = 1`: each claim reconciled on its own.
    StandaloneOneByOne,
    /// `rouse controller`'s code on the fake API server.
    Kubernetes,
}

impl std::fmt::Display for ClaimMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClaimMode::Standalone => "standalone",
            ClaimMode::StandaloneOneByOne => "standalone-one-by-one",
            ClaimMode::Kubernetes => "kubernetes",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Hostname parsing against a naive split.
    Hostnames,
    /// Manifest validation against parsing alone.
    Validate,
    /// Sandboxes to Ready through the controller on the fake API server (not in the default
    /// set: it takes a while).
    Controller,
    /// Claim → Ready (warm and cold) in both modes against a bare sandbox (not in the
    /// default set).
    Claims,
    /// The proxy against direct and nginx: HTTP rps and latency, wake latency, memory per held
    /// connection, splice throughput (writes a Markdown report to stdout).
    Proxy,
    /// Memory per held connection (compact hold against the full HTTP path, and static TCP)
    /// for each of `--held-counts` (not in the default set: 100,000 connections take a while
    /// and a raised open-file limit).
    Held,
    /// Wake-on-connect latency of `rouse up` against the backend's own start time (needs
    /// `cargo build --release -p rouse`; not part of the default set).
    Wake,
    /// Wake of a gVisor sandbox suspended by checkpoint (`--mib` MiB in memory) through the
    /// proxy, against the bare `runsc restore` and a cold start of the same workload (needs
    /// `cargo build --release -p rouse`, runsc and root; not part of the default set).
    Restore,
    /// L4 splice throughput of one stream, direct against the buffered copy and the kernel
    /// pipe, with the proxy's CPU per GB (`--rounds` of `--stream-ms`; not in the default set).
    Splice,
    /// Rouse's controller against upstream agent-sandbox's on a real control plane with
    /// kwok nodes, with the bare writes as the baseline (needs testsupport/cluster/build.sh,
    /// testsupport/upstream/build.sh and `cargo build --release -p rouse`; not in the default
    /// set).
    Scale,
    /// Kubernetes mode on a real node with the Helm-installed release: wake through the cluster
    /// against the bare pod start, warm claim and cold create → Ready, the memory of the
    /// controller and proxy pods with N sandboxes (needs root, the real node's binaries and
    /// `cargo build --release -p rouse`; not part of the default set).
    Node,
    /// The `wake` scenario's workload: an HTTP server on `$PORT` (internal).
    #[value(hide = true)]
    Backend,
}

fn main() -> anyhow::Result<()> {
    if std::env::var_os(proxy::HELD_SERVER_ENV).is_some() {
        return proxy::serve_held_child();
    }
    let cli = Cli::parse();
    if cli.scenarios.first() == Some(&Scenario::Backend) {
        return wake::backend();
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; numbers are meaningful only with --release");
    }
    let scenarios = if cli.scenarios.is_empty() {
        vec![Scenario::Hostnames, Scenario::Validate]
    } else {
        cli.scenarios.clone()
    };
    let max_time = Duration::from_secs(cli.seconds);
    for scenario in scenarios {
        if scenario == Scenario::Claims {
            println!("== Claims");
            claims(&cli)?;
            continue;
        }
        if scenario == Scenario::Controller {
            println!("== Controller");
            controller(&cli)?;
            continue;
        }
        if scenario == Scenario::Scale {
            println!("== Scale");
            scale(&cli)?;
            continue;
        }
        if scenario == Scenario::Held {
            println!("== Held");
            proxy::held_scenario(&cli.held_counts)?;
            continue;
        }
        if scenario == Scenario::Restore {
            println!("== Restore");
            restore_scenario(&cli)?;
            continue;
        }
        if scenario == Scenario::Splice {
            println!("== Splice");
            proxy::splice::run(cli.rounds, Duration::from_millis(cli.stream_ms))?;
            continue;
        }
        if scenario == Scenario::Node {
            println!("== Node");
            node_scenario(&cli)?;
            continue;
        }
        if scenario == Scenario::Wake {
            println!("== Wake");
            wake_scenario(&cli)?;
            continue;
        }
        let (subject, baseline) = match scenario {
            Scenario::Proxy if cli.serve => {
                proxy::serve(cli.workers)?;
                continue;
            }
            Scenario::Proxy => {
                let run = if cli.wrk { proxy::run_wrk } else { proxy::run };
                run(proxy::Options {
                    connections: cli.connections,
                    rounds: cli.rounds,
                    turn: Duration::from_millis(cli.turn_ms),
                    held: cli.held,
                    wakes: cli.wakes,
                    stream_time: Duration::from_millis(cli.stream_ms),
                })?;
                continue;
            }
            Scenario::Backend => anyhow::bail!("`backend` is the wake scenario's workload only"),
            Scenario::Hostnames => scenarios::hostnames(Budget {
                batches: cli.batches,
                batch_size: 4096,
                max_time,
            })?,
            Scenario::Validate => scenarios::validation(Budget {
                batches: cli.batches,
                batch_size: 32,
                max_time,
            })?,
            Scenario::Controller
            | Scenario::Scale
            | Scenario::Wake
            | Scenario::Claims
            | Scenario::Held
            | Scenario::Splice
            | Scenario::Node
            | Scenario::Restore => continue,
        };
        println!("== {scenario:?}");
        measure::print_pair(&subject, &baseline);
    }
    Ok(())
}

/// Runs the wake benchmark against the `rouse` binary beside this one (or `--rouse`).
fn wake_scenario(cli: &Cli) -> anyhow::Result<()> {
    let options = WakeOptions {
        rouse: rouse_binary(cli)?,
        cycles: cli.cycles,
        max_time: Duration::from_secs(cli.seconds.max(60)),
        paths: cli
            .wake_paths
            .iter()
            .map(|p| match p {
                WakePathArg::Direct => WakePath::Direct,
                WakePathArg::Store => WakePath::Store,
            })
            .collect(),
    };
    wake::print(&wake::run(&options)?);
    Ok(())
}

/// Runs the real-node benchmark with the image of the `rouse` binary beside this one (or
/// `--rouse`).
fn node_scenario(cli: &Cli) -> anyhow::Result<()> {
    use rouse_loadtest::node::{self, NodeOptions};
    let options = NodeOptions {
        rouse: rouse_binary(cli)?,
        cycles: cli.node_cycles.max(1),
        sandboxes: cli.node_sandboxes.max(1),
        pool: cli.node_pool.max(1),
        runtimes: cli.node_runtimes.clone(),
        max_time: Duration::from_secs(cli.node_seconds.max(1)),
    };
    node::print(&node::run(&options)?);
    Ok(())
}

/// `--rouse`, or `rouse` beside this binary.
fn rouse_binary(cli: &Cli) -> anyhow::Result<PathBuf> {
    Ok(match &cli.rouse {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("rouse"),
    })
}

/// Runs the restore benchmark against the `rouse` binary beside this one (or `--rouse`).
fn restore_scenario(cli: &Cli) -> anyhow::Result<()> {
    let options = wake::restore::RestoreOptions {
        rouse: rouse_binary(cli)?,
        cycles: cli.cycles,
        max_time: Duration::from_secs(cli.seconds.max(60)),
        mib: cli.mib.max(1),
        runsc: match &cli.runsc {
            Some(path) => path.clone(),
            None => rouse_testsupport::gvisor::runsc()?,
        },
        background_restore: cli.restore_mode == RestoreModeArg::Background,
        tmpfs: cli.tmpfs,
        matrix: cli.restore_matrix,
    };
    println!(
        "runsc {}, restore {:?}, images on {}",
        options.runsc.display(),
        cli.restore_mode,
        if cli.tmpfs { "tmpfs" } else { "disk" }
    );
    wake::restore::print(&wake::restore::run(&options)?);
    Ok(())
}

/// Runs the claims benchmark in both modes; the workload is this binary's `backend` mode.
fn claims(cli: &Cli) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let bench = rouse_loadtest::claims::ClaimsBench {
        pool: cli.pool.max(1),
        rounds: cli.claim_rounds.max(1),
        cold: cli.cold.max(1),
        backend: vec![exe, "backend".into()],
        timeout: Duration::from_secs(cli.seconds.max(60)),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let batch = rouse_controller::extensions::ExtensionsConfig::default().claim_batch;
    for mode in &cli.claim_modes {
        let report = match mode {
            ClaimMode::Standalone => {
                runtime.block_on(rouse_loadtest::claims::standalone(&bench, batch))?
            }
            ClaimMode::StandaloneOneByOne => {
                runtime.block_on(rouse_loadtest::claims::standalone(&bench, 1))?
            }
            ClaimMode::Kubernetes => {
                runtime.block_on(rouse_loadtest::claims::kubernetes(&bench))?
            }
        };
        rouse_loadtest::claims::print(&report);
    }
    Ok(())
}

/// Runs the scale benchmark: both controllers on one real control plane with kwok.
fn scale(cli: &Cli) -> anyhow::Result<()> {
    let rouse = match &cli.rouse {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("rouse"),
    };
    let mut phases = cli.phases.clone();
    phases.sort();
    phases.dedup();
    let options = scale::Options {
        sizes: cli.sizes.clone(),
        nodes: cli.nodes.max(1),
        controllers: cli.controllers.clone(),
        phases,
        rate: cli.rate,
        concurrency: cli.concurrency.max(1),
        pool: cli.warm_pool.max(1),
        claims: cli.claims,
        claim_rate: cli.claim_rate,
        repeat: cli.repeat.max(1),
        rouse,
        phase_deadline: Duration::from_secs(cli.phase_seconds.max(10)),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let reports = runtime.block_on(scale::run(&options))?;
    scale::print(&reports);
    Ok(())
}

/// Runs the controller benchmark on a multi-threaded runtime.
fn controller(cli: &Cli) -> anyhow::Result<()> {
    // A summary with quantiles, so the reconcile latency can be read back.
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_quantiles(&[0.5, 0.99])?
        .install_recorder()?;
    let bench = rouse_loadtest::controller::ControllerBench {
        sandboxes: cli.sandboxes,
        concurrency: cli.concurrency,
        events: cli.events,
        timeout: Duration::from_secs(cli.seconds.max(60)),
        api: cli.api,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(rouse_loadtest::controller::run(&bench, Some(&metrics)))?;
    rouse_loadtest::controller::print(&report);
    Ok(())
}
