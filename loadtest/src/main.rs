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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Hostname parsing against a naive split.
    Hostnames,
    /// Manifest validation against parsing alone.
    Validate,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; numbers are meaningful only with --release");
    }
    let scenarios = if cli.scenarios.is_empty() {
        vec![Scenario::Hostnames, Scenario::Validate]
    } else {
        cli.scenarios
    };
    let max_time = Duration::from_secs(cli.seconds);
    for scenario in scenarios {
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
        };
        println!("== {scenario:?}");
        measure::print_pair(&subject, &baseline);
    }
    Ok(())
}
