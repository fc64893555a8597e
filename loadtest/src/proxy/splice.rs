//! The L4 splice benchmark (`rouse-loadtest splice`): one stream written as fast as possible
//! to a discarding sink — directly, through a static TCP listener with the buffered copy
//! (`[upstream] zero_copy = false`) and with the kernel pipe (the default) — alternating round
//! by round. Throughput depends on who else runs on the machine's CPUs; the proxy's own CPU
//! time per gigabyte moved does much less, so both are reported.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use rouse_proxy::SandboxKey;

use super::{backend, rouse, runtime, stream_to, system};

/// The proxy's CPU time (every thread named `rouse-proxy` in this process), in nanoseconds.
fn proxy_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim() == "rouse-proxy")
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One side of the comparison.
struct Side {
    name: &'static str,
    addr: SocketAddr,
    gbits: Vec<f64>,
    cpu_ms_per_gb: Vec<f64>,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `rounds` alternating rounds of `stream_time` per side and prints a Markdown report.
pub fn run(rounds: usize, stream_time: Duration) -> anyhow::Result<()> {
    let backend_rt = runtime("backend")?;
    let client_rt = runtime("loadgen")?;
    let sink_addr = backend_rt.block_on(async {
        let (sink, sink_addr) = backend::bind_local().await?;
        tokio::spawn(backend::serve_sink(sink));
        anyhow::Ok(sink_addr)
    })?;
    let directory = rouse::BenchDirectory::new();
    directory.running(SandboxKey::new("default", "sink"), sink_addr);
    let start = |zero_copy: bool| -> anyhow::Result<rouse::RunningProxy> {
        let mut config = rouse::bench_config(Some("default/sink"), false)?;
        config.upstream.zero_copy = zero_copy;
        rouse::RunningProxy::start(config, directory.clone())
    };
    let (copying, piping) = (start(false)?, start(true)?);
    let tcp = |proxy: &rouse::RunningProxy| -> anyhow::Result<SocketAddr> {
        proxy
            .proxy()
            .addrs()
            .tcp
            .first()
            .copied()
            .context("proxy tcp address")
    };
    let mut sides = [
        ("direct", sink_addr),
        ("Rouse, buffered copy (`zero_copy = false`)", tcp(&copying)?),
        ("Rouse, kernel pipe (default)", tcp(&piping)?),
    ]
    .map(|(name, addr)| Side {
        name,
        addr,
        gbits: Vec::new(),
        cpu_ms_per_gb: Vec::new(),
    });
    for _ in 0..rounds.max(1) {
        for side in &mut sides {
            let cpu_before = proxy_cpu_ns();
            let (bytes, secs) = client_rt.block_on(stream_to(side.addr, stream_time))?;
            let cpu = proxy_cpu_ns().saturating_sub(cpu_before);
            side.gbits.push(bytes as f64 * 8.0 / 1e9 / secs);
            side.cpu_ms_per_gb
                .push(cpu as f64 / 1e6 / (bytes as f64 / 1e9).max(f64::EPSILON));
        }
    }
    println!("## L4 splice, one stream\n");
    println!(
        "Machine: {}; {} rounds of {stream_time:?} per side, alternating.\n",
        system::machine(),
        rounds.max(1)
    );
    println!("| target | Gbit/s median | min–max | × direct | proxy CPU per GB moved (median) |");
    println!("|---|---:|---:|---:|---:|");
    let direct = median(&sides[0].gbits);
    for side in &sides {
        let min = side.gbits.iter().copied().fold(f64::INFINITY, f64::min);
        let max = side.gbits.iter().copied().fold(0.0, f64::max);
        let cpu = if side.name == "direct" {
            "–".to_owned()
        } else {
            format!("{:.0} ms", median(&side.cpu_ms_per_gb))
        };
        println!(
            "| {} | {:.1} | {min:.1}–{max:.1} | {:.2} | {cpu} |",
            side.name,
            median(&side.gbits),
            median(&side.gbits) / direct.max(f64::EPSILON),
        );
    }
    println!();
    drop(copying);
    drop(piping);
    Ok(())
}
