//! The `wake` scenario: wake-on-connect latency of standalone mode, end to end.
//!
//! It starts the real `rouse up` binary (process runtime) on a temporary data directory with a
//! sandbox whose workload is this binary's own `backend` mode: a minimal HTTP server on
//! `$PORT`. Each cycle suspends the sandbox through the REST API, waits until it is suspended,
//! measures the baseline — that backend's own start time, spawned directly: spawn → the first
//! byte of an HTTP response, the same end point as a wake — and then times connect → request →
//! the first response byte through the proxy. Baseline and wake alternate, so both see the
//! same load on a shared machine. Rouse's overhead is the wake latency minus the backend's
//! start time, compared per percentile. Each wake path (`[runtime] direct_wake` on and off)
//! runs in its own `rouse up`, one after the other.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use up::RouseUp;

pub mod bare;
pub mod restore;
mod up;

/// Bounds every wait for a state; only a failure takes this long.
const DEADLINE: Duration = Duration::from_secs(30);
/// Pause between two polls of the REST API.
const POLL: Duration = Duration::from_millis(2);
/// Time given to the proxy to see a state change the store already has, so a cycle starts
/// from a route the proxy knows to be suspended (the route follows the store by a watch).
const SETTLE: Duration = Duration::from_millis(100);
/// The sandbox's name and its host under the default domain.
const NAME: &str = "bench";
const HOST: &str = "bench.default.sandbox.localhost";

/// How `rouse up` wakes a sandbox (`[runtime] direct_wake`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakePath {
    /// The local platform starts the workload directly; the store write follows behind.
    Direct,
    /// Through the store: the proxy's write, the reconciler's start and status write.
    Store,
}

impl WakePath {
    /// The name printed and accepted on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WakePath::Direct => "direct",
            WakePath::Store => "store",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct WakeOptions {
    /// The `rouse` binary (a release build).
    pub rouse: PathBuf,
    /// Wake cycles (and backend starts for the baseline).
    pub cycles: usize,
    /// Stop starting cycles after this long per side.
    pub max_time: Duration,
    /// The wake paths measured, each in its own `rouse up`, one after the other.
    pub paths: Vec<WakePath>,
}

/// Latencies of one side, in order measured.
#[derive(Debug, Clone)]
pub struct Latencies {
    /// What was measured.
    pub name: &'static str,
    /// One sample per run.
    pub samples: Vec<Duration>,
}

impl Latencies {
    /// The `q` quantile (0..=1) of the samples, nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.samples.clone();
        sorted.sort();
        let i = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
        sorted.get(i).copied().unwrap_or_default()
    }

    /// One printed line: the name padded to `width`, the count, p50, p99 and max in ms with
    /// `decimals` digits.
    pub fn row(&self, width: usize, decimals: usize) -> String {
        let ms = |q| self.quantile(q).as_secs_f64() * 1e3;
        format!(
            "{:<width$} n {:>4}  p50 {:>8.decimals$} ms  p99 {:>8.decimals$} ms  max {:>8.decimals$} ms",
            self.name,
            self.samples.len(),
            ms(0.5),
            ms(0.99),
            ms(1.0),
        )
    }
}

/// The results: per wake path, the backend start, the wake through the proxy and a request to
/// the running sandbox.
#[derive(Debug, Clone)]
pub struct WakeReport {
    /// One per wake path measured.
    pub sides: Vec<WakeSide>,
}

/// The measurements of one wake path.
#[derive(Debug, Clone)]
pub struct WakeSide {
    /// The wake path.
    pub path: WakePath,
    /// spawn → first response byte of the backend alone, one measured right before each wake
    /// (so both see the machine's load of the same moment).
    pub backend: Latencies,
    /// connect → first response byte through the proxy, the sandbox suspended.
    pub wake: Latencies,
    /// connect → first response byte through the proxy, the sandbox running.
    pub warm: Latencies,
    /// Means from `rouse up`'s own `/metrics` over the whole run, in seconds, by name.
    pub means: Vec<(&'static str, f64)>,
}

/// Serves `GET` with `200 ok` on `127.0.0.1:$PORT` until killed: the benchmark's workload.
pub fn backend() -> anyhow::Result<()> {
    let port: u16 = std::env::var("PORT")
        .context("PORT is not set")?
        .parse()
        .context("PORT is not a port")?;
    let listener = TcpListener::bind(("127.0.0.1", port)).context("bind $PORT")?;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        // A thread per connection, so a readiness probe that sends nothing blocks nobody.
        // One request per connection is enough for the benchmark.
        std::thread::spawn(move || {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        });
    }
    Ok(())
}

/// Runs the whole scenario.
pub fn run(options: &WakeOptions) -> anyhow::Result<WakeReport> {
    let me = std::env::current_exe().context("this binary's path")?;
    let mut sides = Vec::new();
    for &path in &options.paths {
        let data = tempfile::tempdir().context("temporary data directory")?;
        let direct = path == WakePath::Direct;
        let mut rouse = RouseUp::start(&options.rouse, data.path(), direct)?;
        let result = cycles(&rouse, &me, options);
        let means = rouse.means();
        rouse.stop();
        let (backend, wake, warm) = result?;
        sides.push(WakeSide {
            path,
            backend,
            wake,
            warm,
            means,
        });
    }
    Ok(WakeReport { sides })
}

/// spawn → first response byte of the backend started directly, once.
fn backend_start(me: &Path) -> anyhow::Result<Duration> {
    let port = free_port()?;
    let t = Instant::now();
    let mut child = Command::new(me)
        .arg("backend")
        .env_clear()
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn the backend")?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let result = first_byte_retrying(addr, "localhost", t + DEADLINE);
    let took = t.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    result?;
    Ok(took)
}

/// The wake cycles, each right after a backend start (the baseline) and followed by one
/// request to the running sandbox.
fn cycles(
    rouse: &RouseUp,
    me: &Path,
    options: &WakeOptions,
) -> anyhow::Result<(Latencies, Latencies, Latencies)> {
    let sandbox = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": NAME},
        "spec": {"podTemplate": {"spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "backend",
                "image": "informational",
                "command": [me.to_string_lossy(), "backend"],
                "ports": [{"containerPort": 8000}],
            }],
        }}},
    });
    let (code, body) = rouse.api("POST", "/v1/namespaces/default/sandboxes", Some(&sandbox))?;
    if code != 201 {
        bail!("create answered {code}: {body}");
    }
    rouse.wait_condition("Ready", "True")?;
    let mut backend = Vec::with_capacity(options.cycles);
    let mut wake = Vec::with_capacity(options.cycles);
    let mut warm = Vec::with_capacity(options.cycles);
    let started = Instant::now();
    let suspend = format!("/v1/namespaces/default/sandboxes/{NAME}/suspend");
    while wake.len() < options.cycles && started.elapsed() < options.max_time {
        let (code, body) = rouse.api("POST", &suspend, None)?;
        if code != 200 {
            bail!("suspend answered {code}: {body}");
        }
        rouse.wait_condition("Suspended", "True")?;
        std::thread::sleep(SETTLE);
        backend.push(backend_start(me)?);
        let t = Instant::now();
        first_byte(rouse.proxy, HOST)?;
        wake.push(t.elapsed());
        rouse.wait_condition("Ready", "True")?;
        std::thread::sleep(SETTLE);
        let t = Instant::now();
        first_byte(rouse.proxy, HOST)?;
        warm.push(t.elapsed());
    }
    Ok((
        Latencies {
            name: "backend start (spawn → first byte)",
            samples: backend,
        },
        Latencies {
            name: "wake (connect → first byte)",
            samples: wake,
        },
        Latencies {
            name: "running (connect → first byte)",
            samples: warm,
        },
    ))
}

/// Connects, sends a GET and returns once the first response byte arrived.
fn first_byte(addr: SocketAddr, host: &str) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(DEADLINE))?;
    stream.set_nodelay(true)?;
    write!(
        stream,
        "GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )?;
    let mut byte = [0u8; 1];
    if stream.read(&mut byte)? == 0 {
        bail!("{addr} closed without answering");
    }
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let text = String::from_utf8_lossy(&byte).into_owned() + &String::from_utf8_lossy(&rest);
    if !text.starts_with("HTTP/1.1 200") {
        bail!(
            "{addr} answered {:?}",
            text.lines().next().unwrap_or_default()
        );
    }
    Ok(())
}

/// [`first_byte`], retried while nothing listens yet, until `until`.
fn first_byte_retrying(addr: SocketAddr, host: &str, until: Instant) -> anyhow::Result<()> {
    loop {
        match first_byte(addr, host) {
            Ok(()) => return Ok(()),
            Err(err) if Instant::now() > until => return Err(err),
            // Busy-polling keeps the measurement's resolution at the connect's cost.
            Err(_) => std::thread::yield_now(),
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("find a free port")?;
    Ok(listener.local_addr()?.port())
}

impl WakeSide {
    /// Per cycle, the wake minus the backend start measured right before it, in ms, sorted.
    /// Each pair sees the machine's load of the same moment, so the spread is the wake's own
    /// rather than the difference of two noisy percentiles.
    pub fn paired_overhead_ms(&self) -> Vec<f64> {
        paired_ms(&self.wake, &self.backend)
    }
}

/// Per cycle, `side` minus the `baseline` sample of the same cycle, in ms, sorted.
pub fn paired_ms(side: &Latencies, baseline: &Latencies) -> Vec<f64> {
    let mut paired: Vec<f64> = side
        .samples
        .iter()
        .zip(&baseline.samples)
        .map(|(side, base)| (side.as_secs_f64() - base.as_secs_f64()) * 1e3)
        .collect();
    paired.sort_by(f64::total_cmp);
    paired
}

/// The `q` quantile (0..=1) of sorted values, nearest rank; 0 when there are none.
pub fn quantile_ms(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// Prints per wake path the baseline, the wake, the running request and the overhead per
/// percentile.
pub fn print(report: &WakeReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for side in &report.sides {
        println!("-- wake path: {}", side.path.name());
        for latencies in [&side.backend, &side.wake, &side.warm] {
            println!("{}", latencies.row(38, 2));
        }
        let overhead = |q| ms(side.wake.quantile(q)) - ms(side.backend.quantile(q));
        println!(
            "overhead (wake − backend start): p50 {:.2} ms  p99 {:.2} ms  (goal p99 ≤ 2 ms)",
            overhead(0.5),
            overhead(0.99)
        );
        let paired = side.paired_overhead_ms();
        println!(
            "overhead per cycle (wake − the backend start before it): p50 {:.2} ms  p99 {:.2} ms",
            quantile_ms(&paired, 0.5),
            quantile_ms(&paired, 0.99)
        );
        for (name, mean) in &side.means {
            println!("mean {name:<42} {:>8.2} ms", mean * 1e3);
        }
    }
}

#[cfg(test)]
mod tests;
