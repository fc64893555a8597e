//! The `wake` scenario: wake-on-connect latency of standalone mode, end to end.
//!
//! It starts the real `rouse up` binary (process runtime) on a temporary data directory with a
//! sandbox whose workload is this binary's own `backend` mode: a minimal HTTP server on
//! `$PORT`. The baseline is that backend's own start time, measured directly: spawn → the
//! first byte of an HTTP response, the same end point as a wake. Then each cycle suspends the
//! sandbox through the REST API, waits until it is suspended, and times connect → request →
//! the first response byte through the proxy. Rouse's overhead is the wake latency minus the
//! backend's start time, compared per percentile.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

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

/// What to run.
#[derive(Debug, Clone)]
pub struct WakeOptions {
    /// The `rouse` binary (a release build).
    pub rouse: PathBuf,
    /// Wake cycles (and backend starts for the baseline).
    pub cycles: usize,
    /// Stop starting cycles after this long per side.
    pub max_time: Duration,
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
}

/// The results: backend start, wake through the proxy, and a request to the running sandbox.
#[derive(Debug, Clone)]
pub struct WakeReport {
    /// spawn → first response byte of the backend alone.
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
    let backend = measure_backend(&me, options)?;
    let data = tempfile::tempdir().context("temporary data directory")?;
    let mut rouse = RouseUp::start(&options.rouse, data.path())?;
    let result = cycles(&rouse, &me, options);
    let means = rouse.means();
    rouse.stop();
    let (wake, warm) = result?;
    Ok(WakeReport {
        backend,
        wake,
        warm,
        means,
    })
}

/// spawn → first response byte of the backend started directly, `cycles` times.
fn measure_backend(me: &Path, options: &WakeOptions) -> anyhow::Result<Latencies> {
    let mut samples = Vec::with_capacity(options.cycles);
    let started = Instant::now();
    while samples.len() < options.cycles && started.elapsed() < options.max_time {
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
        let _ = child.kill();
        let _ = child.wait();
        result?;
        samples.push(t.elapsed());
    }
    Ok(Latencies {
        name: "backend start (spawn → first byte)",
        samples,
    })
}

/// The wake cycles and, after each, one request to the running sandbox.
fn cycles(
    rouse: &RouseUp,
    me: &Path,
    options: &WakeOptions,
) -> anyhow::Result<(Latencies, Latencies)> {
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

/// A `rouse up` child process, stopped with SIGINT.
struct RouseUp {
    child: Option<Child>,
    api: SocketAddr,
    proxy: SocketAddr,
    admin: Option<SocketAddr>,
}

impl RouseUp {
    fn start(rouse: &Path, data: &Path) -> anyhow::Result<RouseUp> {
        if !rouse.exists() {
            bail!(
                "{} does not exist; build it first: cargo build --release -p rouse",
                rouse.display()
            );
        }
        let config = data.join("config.toml");
        std::fs::write(
            &config,
            "[api]\nlisten = \"127.0.0.1:0\"\n[http]\nlisten = \"127.0.0.1:0\"\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n",
        )?;
        let mut child = Command::new(rouse)
            .arg("up")
            .arg("--no-auth")
            .arg("--data-dir")
            .arg(data.join("data"))
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {} up", rouse.display()))?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let mut up = RouseUp {
            child: Some(child),
            api: SocketAddr::from(([127, 0, 0, 1], 0)),
            proxy: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
        };
        // The banner comes first; a thread keeps draining stdout afterwards.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let (mut api, mut proxy) = (None, None);
        while api.is_none() || proxy.is_none() || up.admin.is_none() {
            let line = rx
                .recv_timeout(DEADLINE)
                .context("no banner from rouse up")?;
            api = api.or_else(|| banner_addr(&line, "api: http://"));
            proxy = proxy.or_else(|| banner_addr(&line, "proxy: http://"));
            up.admin = up.admin.or_else(|| banner_addr(&line, "metrics: http://"));
        }
        up.api = api.context("api address")?;
        up.proxy = proxy.context("proxy address")?;
        Ok(up)
    }

    /// One REST call over HTTP/1.0, so the answer is never chunked.
    fn api(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<(u16, Value)> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = TcpStream::connect(self.api)?;
        stream.set_read_timeout(Some(DEADLINE))?;
        write!(
            stream,
            "{method} {path} HTTP/1.0\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let code = answer
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("not an HTTP answer: {answer:?}"))?;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        Ok((code, serde_json::from_str(body).unwrap_or(Value::Null)))
    }

    /// Means of the histograms that break a wake down, from `/metrics` (empty if unreadable).
    fn means(&self) -> Vec<(&'static str, f64)> {
        let Some(text) = self.admin.and_then(metrics_text) else {
            return Vec::new();
        };
        // (label, histogram, a label filter on its lines)
        let wanted = [
            (
                "proxy: wake sent → route running",
                "rouse_proxy_wake_duration_seconds",
                "",
            ),
            (
                "proxy: connection held → dialled",
                "rouse_proxy_hold_duration_seconds",
                "",
            ),
            (
                "store: patch (incl. commit)",
                "rouse_store_operation_duration_seconds",
                "op=\"patch\"",
            ),
            (
                "store: patch_status (incl. commit)",
                "rouse_store_operation_duration_seconds",
                "op=\"patch_status\"",
            ),
        ];
        let value = |name: &str, filter: &str| {
            text.lines()
                .filter(|l| l.starts_with(name) && l.contains(filter))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        wanted
            .into_iter()
            .filter_map(|(label, base, filter)| {
                let count = value(&format!("{base}_count"), filter);
                (count > 0.0).then(|| (label, value(&format!("{base}_sum"), filter) / count))
            })
            .collect()
    }

    /// Polls until the sandbox's condition `kind` has `status`.
    fn wait_condition(&self, kind: &str, status: &str) -> anyhow::Result<()> {
        let path = format!("/v1/namespaces/default/sandboxes/{NAME}");
        let until = Instant::now() + DEADLINE;
        loop {
            let (_, sandbox) = self.api("GET", &path, None)?;
            let holds = sandbox["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == status));
            if holds {
                return Ok(());
            }
            if Instant::now() > until {
                bail!("{NAME}: not {kind}={status} within {DEADLINE:?}: {sandbox}");
            }
            std::thread::sleep(POLL);
        }
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = i32::try_from(child.id()).map(nix::unistd::Pid::from_raw);
        if let Ok(pid) = pid
            && nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).is_ok()
        {
            let until = Instant::now() + DEADLINE;
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for RouseUp {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The text of `/metrics` on the admin listener.
fn metrics_text(admin: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(admin).ok()?;
    stream.set_read_timeout(Some(DEADLINE)).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nhost: localhost\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

fn banner_addr(line: &str, prefix: &str) -> Option<SocketAddr> {
    line.strip_prefix(prefix)?
        .split([' ', '/'])
        .next()?
        .parse()
        .ok()
}

/// Prints the three sides and the overhead per percentile.
pub fn print(report: &WakeReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for side in [&report.backend, &report.wake, &report.warm] {
        println!(
            "{:<38} n {:>4}  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            side.name,
            side.samples.len(),
            ms(side.quantile(0.5)),
            ms(side.quantile(0.99)),
            ms(side.quantile(1.0)),
        );
    }
    let overhead = |q| ms(report.wake.quantile(q)) - ms(report.backend.quantile(q));
    println!(
        "overhead (wake − backend start): p50 {:.2} ms  p99 {:.2} ms  (goal p99 ≤ 5 ms)",
        overhead(0.5),
        overhead(0.99)
    );
    for (name, mean) in &report.means {
        println!("mean {name:<34} {:>8.2} ms", mean * 1e3);
    }
}
