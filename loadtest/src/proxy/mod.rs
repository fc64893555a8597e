//! The proxy benchmark (`rouse-loadtest proxy`): in one run on one machine,
//!
//! - HTTP/1.1 keep-alive, small responses: direct to a hyper backend, through Rouse, and
//!   through nginx (one worker, keep-alive upstream) when installed — rps, p50, p99, ratios;
//! - wake latency: suspended → first byte, minus the backend's own start time;
//! - memory per held connection with 10,000 held (RSS growth of a proxy child process; the
//!   `held` scenario measures it alone, for 10,000 and 100,000);
//! - L4 splice throughput of one stream through a static TCP listener against direct.
//!
//! The backend, the proxy and the load generator each get their own one-thread runtime; the
//! targets are measured alternately, round after round, so machine noise hits all alike.

mod backend;
mod held;
mod loadgen;
mod nginx;
mod rouse;
mod serve;
pub mod splice;
mod system;
mod wrk;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use rouse_proxy::SandboxKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use held::{HELD_SERVER_ENV, HeldKind, HeldResult, serve_held_child};
use loadgen::LoadResult;
pub use serve::run as serve;
pub use wrk::run as run_wrk;

/// Knobs of the proxy benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Keep-alive connections of the HTTP load.
    pub connections: usize,
    /// Alternating rounds of the HTTP load.
    pub rounds: usize,
    /// Length of one target's turn in a round.
    pub turn: Duration,
    /// Connections held for the memory measurement.
    pub held: usize,
    /// Wake latency trials.
    pub wakes: usize,
    /// Length of each splice throughput run.
    pub stream_time: Duration,
}

fn runtime(name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()?)
}

/// Runs every proxy measurement and prints a Markdown report.
pub fn run(options: Options) -> anyhow::Result<()> {
    let fd_limit = system::raise_fd_limit().unwrap_or(0);
    println!("## Proxy\n");
    println!(
        "Machine: {}; open-file limit {fd_limit}.\n",
        system::machine()
    );
    let backend_rt = runtime("backend")?;
    let client_rt = runtime("loadgen")?;
    let (backend_addr, sink_addr) = backend_rt.block_on(async {
        let (http, http_addr) = backend::bind_local().await?;
        let (sink, sink_addr) = backend::bind_local().await?;
        tokio::spawn(backend::serve_http(http));
        tokio::spawn(backend::serve_sink(sink));
        anyhow::Ok((http_addr, sink_addr))
    })?;

    let directory = rouse::BenchDirectory::new();
    directory.running(SandboxKey::new("default", "app"), backend_addr);
    directory.running(SandboxKey::new("default", "sink"), sink_addr);
    let proxy = rouse::RunningProxy::start(
        rouse::bench_config(Some("default/sink"), false)?,
        directory.clone(),
    )?;
    let proxy_http = proxy.proxy().addrs().http.context("proxy http address")?;
    let proxy_tcp = *proxy
        .proxy()
        .addrs()
        .tcp
        .first()
        .context("proxy tcp address")?;

    let nginx = match nginx::find() {
        Some(binary) => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
            Some(nginx::Nginx::start(
                &binary,
                port,
                backend_addr,
                options.connections,
            )?)
        }
        None => {
            println!("nginx is not installed: its column is skipped (apt-get install nginx).\n");
            None
        }
    };

    http_comparison(
        &client_rt,
        options,
        backend_addr,
        proxy_http,
        nginx.as_ref().map(|n| n.addr),
    )?;
    wake_latency(&client_rt, options, &directory, &proxy, proxy_http)?;
    splice_throughput(&client_rt, options, sink_addr, proxy_tcp)?;
    drop(nginx);
    drop(proxy);
    held::held_memory(options.held)?;
    Ok(())
}

fn http_comparison(
    client_rt: &tokio::runtime::Runtime,
    options: Options,
    direct: SocketAddr,
    rouse: SocketAddr,
    nginx: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let host = "app.default.sandbox.localhost";
    let mut targets = vec![("direct (hyper backend)", direct), ("Rouse", rouse)];
    if let Some(addr) = nginx {
        targets.push(("nginx (1 worker)", addr));
    }
    let mut results: Vec<LoadResult> = vec![LoadResult::default(); targets.len()];
    // A short warm-up of each, not measured: connection pools, caches, allocator.
    for (_, addr) in &targets {
        client_rt.block_on(loadgen::run(
            *addr,
            host,
            options.connections,
            Duration::from_millis(300),
        ))?;
    }
    for _ in 0..options.rounds {
        for (i, (name, addr)) in targets.iter().enumerate() {
            let run = client_rt
                .block_on(loadgen::run(*addr, host, options.connections, options.turn))
                .with_context(|| format!("load against {name}"))?;
            results[i].merge(run);
        }
    }
    println!(
        "### HTTP/1.1 keep-alive, {} connections, {} rounds of {:?} per target\n",
        options.connections, options.rounds, options.turn
    );
    println!("| target | requests | errors | rps | p50 | p99 | max |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for ((name, _), result) in targets.iter().zip(results.iter_mut()) {
        let (p50, p99, max) = (
            result.quantile_us(0.5),
            result.quantile_us(0.99),
            result.quantile_us(1.0),
        );
        println!(
            "| {name} | {} | {} | {:.0} | {p50:.0} µs | {p99:.0} µs | {max:.0} µs |",
            result.ok,
            result.errors,
            result.rps()
        );
        summary.push((result.rps(), p99));
    }
    println!();
    println!(
        "Rouse / direct: {:.2}× rps, p99 {:.2}×",
        summary[1].0 / summary[0].0,
        summary[1].1 / summary[0].1.max(1.0)
    );
    if let Some(nginx) = summary.get(2) {
        println!(
            "Rouse / nginx: {:.2}× rps (goal ≥ 1.2×), p99 {:.2}× (goal ≤ 1.0×)",
            summary[1].0 / nginx.0,
            summary[1].1 / nginx.1.max(1.0)
        );
    }
    println!();
    Ok(())
}

fn wake_latency(
    client_rt: &tokio::runtime::Runtime,
    options: Options,
    directory: &rouse::BenchDirectory,
    running: &rouse::RunningProxy,
    proxy: SocketAddr,
) -> anyhow::Result<()> {
    let mut overheads = Vec::with_capacity(options.wakes);
    let mut totals = Vec::with_capacity(options.wakes);
    for trial in 0..options.wakes {
        let name = format!("wake-{trial}");
        let key = SandboxKey::new("default", name.as_str());
        directory.suspended(key.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(
            running.proxy().router().route_state(&key),
            Some(rouse_proxy::RouteState::Suspended { .. })
        ) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{key} not suspended in the proxy within 10 s"
            );
            std::thread::yield_now();
        }
        let host = format!("{name}.default.sandbox.localhost");
        let (sent, first_byte) = client_rt.block_on(first_byte(proxy, &host))?;
        let (woken, ready) = directory
            .wakes
            .lock()
            .map_err(|_| anyhow::anyhow!("wake log poisoned"))?
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|(_, w, r)| (*w, *r))
            .context("the directory saw no wake")?;
        let total = first_byte - sent;
        let backend_start = ready - woken;
        totals.push(total.as_secs_f64() * 1e3);
        overheads.push((total.saturating_sub(backend_start)).as_secs_f64() * 1e3);
    }
    overheads.sort_by(f64::total_cmp);
    totals.sort_by(f64::total_cmp);
    let pick = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    println!("### Wake latency, {} wakes\n", options.wakes);
    println!(
        "Suspended → first response byte, minus the backend's own start (bind + serve + publish \
         the route): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal ≤ 5 ms). End to end: p50 \
         {:.2} ms.\n",
        pick(&overheads, 0.5),
        pick(&overheads, 0.99),
        pick(&overheads, 1.0),
        pick(&totals, 0.5),
    );
    Ok(())
}

/// Sends one request and returns when it was sent and when the first response byte came.
async fn first_byte(proxy: SocketAddr, host: &str) -> anyhow::Result<(Instant, Instant)> {
    let mut stream = TcpStream::connect(proxy).await?;
    stream.set_nodelay(true)?;
    let sent = Instant::now();
    stream
        .write_all(
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut byte = [0u8; 1];
    tokio::time::timeout(Duration::from_secs(30), stream.read_exact(&mut byte))
        .await
        .context("no response within 30 s")??;
    Ok((sent, Instant::now()))
}

fn splice_throughput(
    client_rt: &tokio::runtime::Runtime,
    options: Options,
    direct: SocketAddr,
    rouse: SocketAddr,
) -> anyhow::Result<()> {
    let mut rates = [0.0f64; 2];
    for _ in 0..2 {
        for (i, addr) in [direct, rouse].into_iter().enumerate() {
            let (bytes, secs) = client_rt.block_on(stream_to(addr, options.stream_time))?;
            let rate = bytes as f64 / secs;
            rates[i] = rates[i].max(rate);
        }
    }
    let gbit = |bytes_per_sec: f64| bytes_per_sec * 8.0 / 1e9;
    println!(
        "### L4 splice, one stream, best of 2 runs of {:?}\n",
        options.stream_time
    );
    println!(
        "Direct {:.1} Gbit/s; through a static TCP listener {:.1} Gbit/s ({:.2}× direct; goal ≥ 20 Gbit/s).\n",
        gbit(rates[0]),
        gbit(rates[1]),
        rates[1] / rates[0]
    );
    Ok(())
}

/// Writes as fast as possible to `addr` for `time`; returns the bytes and the seconds taken.
async fn stream_to(addr: SocketAddr, time: Duration) -> anyhow::Result<(u64, f64)> {
    let mut stream = TcpStream::connect(addr).await?;
    let chunk = vec![0x5a_u8; 256 * 1024];
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < time {
        stream.write_all(&chunk).await?;
        sent += chunk.len() as u64;
    }
    stream.shutdown().await?;
    Ok((sent, started.elapsed().as_secs_f64()))
}

/// The `held` scenario: memory per held connection for each count, the compact HTTP hold
/// side by side with the full HTTP path and static TCP, as a Markdown report.
pub fn held_scenario(counts: &[usize]) -> anyhow::Result<()> {
    let kinds = [HeldKind::HttpCompact, HeldKind::HttpFull, HeldKind::Tcp];
    let fd_limit = system::raise_fd_limit_to(system::FD_TARGET).unwrap_or(0);
    println!(
        "Machine: {}; open-file limit {fd_limit}.\n",
        system::machine()
    );
    held::measure(counts, &kinds)?;
    Ok(())
}
