//! Memory per held connection: a child process runs the proxy with a suspended sandbox whose
//! wake never completes; this process opens N connections that stay held and reads the child's
//! resident memory before and after. A separate process keeps the load generator's memory and
//! file descriptors out of the measurement.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rouse_proxy::{RouteState, SandboxKey, StaticDirectory};

use super::{rouse, system};

/// Set (to anything) in the child's environment: run the held-connection proxy.
pub const HELD_SERVER_ENV: &str = "ROUSE_LOADTEST_HELD_SERVER";

/// The child: a proxy with `default/held` suspended for ever; prints its addresses and runs
/// until stdin closes.
pub fn serve_held_child() -> anyhow::Result<()> {
    system::raise_fd_limit()?;
    let directory = StaticDirectory::new(&[]);
    directory.set(
        SandboxKey::new("default", "held"),
        RouteState::suspended(true),
    );
    let proxy =
        rouse::RunningProxy::start(rouse::bench_config(Some("default/held"), true)?, directory)?;
    let addrs = proxy.proxy().addrs().clone();
    println!(
        "{} {} {}",
        addrs.http.context("http address")?,
        addrs.tcp.first().context("tcp address")?,
        addrs.admin.context("admin address")?
    );
    std::io::stdout().flush()?;
    let mut rest = Vec::new();
    std::io::stdin().read_to_end(&mut rest)?;
    Ok(())
}

/// The held-connection gauge from the admin endpoint's `/metrics`.
fn held_gauge(admin: SocketAddr) -> anyhow::Result<f64> {
    let mut stream = TcpStream::connect(admin)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("rouse_proxy_held_connections "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0))
}

/// Measures the proxy's RSS growth per held connection, for HTTP requests and for static TCP.
pub fn held_memory(count: usize) -> anyhow::Result<()> {
    println!("### Memory per held connection, {count} held\n");
    for (label, l7) in [("HTTP request (L7)", true), ("static TCP (L4)", false)] {
        let per = held_once(count, l7).with_context(|| format!("held {label}"))?;
        println!(
            "{label}: {:.1} KiB per held connection (goal ≤ 16 KiB).",
            per / 1024.0
        );
    }
    println!();
    Ok(())
}

fn held_once(count: usize, l7: bool) -> anyhow::Result<f64> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .env(HELD_SERVER_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the proxy child")?;
    let pid = child.id().to_string();
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("child stdout")?).read_line(&mut line)?;
    let addrs: Vec<SocketAddr> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("child addresses {line:?}"))?;
    let [http, tcp, admin] = addrs[..] else {
        bail!("child printed {line:?}");
    };
    let request = b"GET / HTTP/1.1\r\nHost: held.default.sandbox.localhost\r\n\r\n";
    // Warm up the path once so first-use allocations are in the baseline.
    let mut warm = Vec::new();
    for _ in 0..16 {
        let mut stream = TcpStream::connect(if l7 { http } else { tcp })?;
        if l7 {
            stream.write_all(request)?;
        }
        warm.push(stream);
    }
    wait_held(admin, 16)?;
    let before = system::rss_bytes(&pid)?;
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(if l7 { http } else { tcp })?;
        if l7 {
            stream.write_all(request)?;
        }
        streams.push(stream);
    }
    wait_held(admin, count + 16)?;
    let after = system::rss_bytes(&pid)?;
    drop(streams);
    drop(warm);
    drop(child.stdin.take());
    let _ = child.wait();
    Ok(after.saturating_sub(before) as f64 / count as f64)
}

fn wait_held(admin: SocketAddr, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let held = held_gauge(admin)?;
        if held >= want as f64 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {held} of {want} connections held after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
