//! `proxy --wrk`: the HTTP/1.1 keep-alive comparison driven by wrk, so the numbers can be
//! reproduced with a standard tool outside this harness.
//!
//! nginx (one worker) is the backend, answering the same 13 bytes as the hyper backend. The
//! targets — the backend directly, nginx as proxy with 1 and 2 workers, Rouse with 1, 2 and 4
//! worker threads, and Rouse with 1 thread and the HTTP/1.1 relay off — all run at once and
//! are measured one after another, round after round, so machine noise hits all alike. Each
//! turn is `wrk -t1 -c{connections} -d{turn} --latency`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use rouse_proxy::SandboxKey;

use super::Options;
use super::nginx::{self, Nginx};
use super::rouse::{BenchDirectory, RunningProxy, bench_config};

/// Rouse worker-thread counts measured.
const ROUSE_WORKERS: [usize; 3] = [1, 2, 4];
/// nginx worker counts measured.
const NGINX_WORKERS: [usize; 2] = [1, 2];
/// The host every request names (the benchmark sandbox `default/app`).
pub(super) const HOST: &str = "app.default.sandbox.localhost";

/// One wrk run's result.
#[derive(Debug, Clone, Copy)]
struct Turn {
    rps: f64,
    p99_ms: f64,
}

/// The wrk binary, if installed.
fn find_wrk() -> Option<PathBuf> {
    ["/usr/bin/wrk", "/usr/local/bin/wrk"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A free loopback address.
pub(super) fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Runs the wrk comparison and prints a Markdown report.
pub fn run(options: Options) -> anyhow::Result<()> {
    let nginx_bin = nginx::find().context("nginx is needed (apt-get install nginx)")?;
    let wrk = find_wrk().context("wrk is needed (apt-get install wrk)")?;
    let fd_limit = super::system::raise_fd_limit().unwrap_or(0);
    println!("## Proxy, driven by wrk\n");
    println!(
        "Machine: {}; open-file limit {fd_limit}.\n",
        super::system::machine()
    );
    let backend = Nginx::backend(&nginx_bin, free_addr()?)?;
    let mut nginx_proxies = Vec::new();
    for workers in NGINX_WORKERS {
        let proxy = Nginx::proxy(
            &nginx_bin,
            free_addr()?,
            backend.addr,
            options.connections,
            workers,
        )?;
        nginx_proxies.push((workers, proxy));
    }
    let directory = BenchDirectory::new();
    directory.running(SandboxKey::new("default", "app"), backend.addr);
    let mut rouse_proxies = Vec::new();
    for workers in ROUSE_WORKERS {
        let proxy = RunningProxy::start_with_workers(
            bench_config(None, false)?,
            directory.clone(),
            workers,
        )?;
        rouse_proxies.push((workers, proxy));
    }
    let mut targets: Vec<(String, SocketAddr)> =
        vec![("direct (nginx backend)".into(), backend.addr)];
    for (workers, proxy) in &nginx_proxies {
        targets.push((format!("nginx, {workers} worker(s)"), proxy.addr));
    }
    for (workers, proxy) in &rouse_proxies {
        let addr = proxy.proxy().addrs().http.context("rouse http address")?;
        targets.push((format!("Rouse, {workers} worker thread(s)"), addr));
    }
    // The same proxy without the HTTP/1.1 relay (every request through the full HTTP path),
    // so the relay's gain is measured side by side.
    let mut full_path = bench_config(None, false)?;
    full_path.http.relay = false;
    let full_path = RunningProxy::start_with_workers(full_path, directory.clone(), 1)?;
    let addr = full_path
        .proxy()
        .addrs()
        .http
        .context("rouse http address")?;
    targets.push(("Rouse, 1 worker thread, relay off".into(), addr));
    let seconds = options.turn.as_secs().max(1);
    println!(
        "### HTTP/1.1 keep-alive, wrk -t1 -c{} -d{seconds}s, {} rounds\n",
        options.connections, options.rounds
    );
    let mut turns: Vec<Vec<Turn>> = vec![Vec::new(); targets.len()];
    for _ in 0..options.rounds {
        for (i, (_, addr)) in targets.iter().enumerate() {
            turns[i].push(wrk_turn(&wrk, *addr, options.connections, seconds)?);
        }
    }
    println!("| target | rps median | rps min–max | p99 median | p99 min–max |");
    println!("|---|---:|---:|---:|---:|");
    let mut medians = Vec::new();
    for ((name, _), runs) in targets.iter().zip(&turns) {
        let rps: Vec<f64> = runs.iter().map(|t| t.rps).collect();
        let p99: Vec<f64> = runs.iter().map(|t| t.p99_ms).collect();
        let (rps_med, rps_min, rps_max) = spread(&rps);
        let (p99_med, p99_min, p99_max) = spread(&p99);
        println!(
            "| {name} | {rps_med:.0} | {rps_min:.0}–{rps_max:.0} | {p99_med:.2} ms | {p99_min:.2}–{p99_max:.2} ms |"
        );
        medians.push((rps_med, p99_med));
    }
    // Index 1.. are nginx proxies, then Rouse.
    let nginx_best =
        medians[1..=NGINX_WORKERS.len()]
            .iter()
            .copied()
            .fold(
                (0.0, f64::MAX),
                |best, m| if m.0 > best.0 { m } else { best },
            );
    println!();
    for (i, workers) in ROUSE_WORKERS.iter().enumerate() {
        let (rps, p99) = medians[1 + NGINX_WORKERS.len() + i];
        println!(
            "Rouse ({workers} thread(s)) / better nginx: {:.2}× rps (goal ≥ 1.2×), p99 {:.2}× (goal ≤ 1.0×)",
            rps / nginx_best.0.max(1.0),
            p99 / nginx_best.1.max(0.001)
        );
    }
    let (rps, p99) = medians[1 + NGINX_WORKERS.len() + ROUSE_WORKERS.len()];
    println!(
        "Rouse (1 thread, relay off) / better nginx: {:.2}× rps, p99 {:.2}×",
        rps / nginx_best.0.max(1.0),
        p99 / nginx_best.1.max(0.001)
    );
    println!();
    drop(full_path);
    drop(rouse_proxies);
    drop(nginx_proxies);
    drop(backend);
    Ok(())
}

/// Median, min and max.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let min = sorted.first().copied().unwrap_or(0.0);
    let max = sorted.last().copied().unwrap_or(0.0);
    (median, min, max)
}

/// One wrk run against `addr`.
fn wrk_turn(
    wrk: &PathBuf,
    addr: SocketAddr,
    connections: usize,
    seconds: u64,
) -> anyhow::Result<Turn> {
    let output = Command::new(wrk)
        .args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .args(["--latency", "-H", &format!("Host: {HOST}")])
        .arg(format!("http://{addr}/"))
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("wrk failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    parse(&text).with_context(|| format!("unexpected wrk output:\n{text}"))
}

/// Reads `Requests/sec` and the 99% latency of wrk's report; non-2xx answers are an error.
fn parse(text: &str) -> anyhow::Result<Turn> {
    if let Some(line) = text
        .lines()
        .find(|l| l.contains("Non-2xx or 3xx responses"))
    {
        bail!("the target answered errors: {}", line.trim());
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .context("no Requests/sec")?
        .trim()
        .parse::<f64>()?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .context("no 99% latency")?
        .trim();
    Ok(Turn {
        rps,
        p99_ms: millis(p99)?,
    })
}

/// A wrk duration (`212.00us`, `1.03ms`, `1.20s`) in milliseconds.
fn millis(text: &str) -> anyhow::Result<f64> {
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        bail!("unknown duration {text}");
    };
    Ok(number.parse::<f64>()? * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wrk_reports() {
        let report = "Running 2s test @ http://127.0.0.1:1/\n  1 threads and 50 connections\n  \
            Latency Distribution\n     50%  212.00us\n     99%    1.03ms\n  \
            442430 requests in 2.00s, 63.71MB read\nRequests/sec: 221215.32\n";
        let turn = parse(report).expect("parses");
        assert!((turn.rps - 221_215.32).abs() < 0.01);
        assert!((turn.p99_ms - 1.03).abs() < 1e-9);
        assert!((millis("212.00us").expect("us") - 0.212).abs() < 1e-9);
        assert!(parse("Non-2xx or 3xx responses: 5\nRequests/sec: 1\n").is_err());
    }
}
