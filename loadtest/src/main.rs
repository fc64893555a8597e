//! `rouse-loadtest`: runs benchmark scenarios and prints p50/p99/max with ratios against a
//! baseline measured in the same run.

use std::time::Duration;

use clap::{Parser, ValueEnum};
use rouse_loadtest::measure::{self, Budget};
use rouse_loadtest::scenarios;

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
    /// Controller scenario: publish Kubernetes Events.
    #[arg(long, default_value_t = false, env = "ROUSE_LOADTEST_EVENTS")]
    events: bool,
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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
        if scenario == Scenario::Controller {
            println!("== Controller");
            controller(&cli)?;
            continue;
        }
        let (subject, baseline) = match scenario {
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
            Scenario::Controller => continue,
        };
        println!("== {scenario:?}");
        measure::print_pair(&subject, &baseline);
    }
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
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(rouse_loadtest::controller::run(&bench, Some(&metrics)))?;
    rouse_loadtest::controller::print(&report);
    Ok(())
}
