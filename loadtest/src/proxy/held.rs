//! Memory per held connection: a child process runs the proxy with a suspended sandbox whose
//! wake never completes; this process opens N connections that stay held and reads the child's
//! resident memory (and open files) before and after, then releases them. A separate process
//! keeps the load generator's memory and file descriptors out of the measurement.
//!
//! Client sockets are bound to source addresses spread over 127.0.0.1–127.0.0.250 so that
//! 100,000 connections to one listener do not run out of ephemeral ports (about 28,000 per
//! source address with Linux's default `ip_local_port_range`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use rouse_proxy::{RouteState, SandboxKey, StaticDirectory};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use super::{rouse, system};

/// Set in the child's environment: run the held-connection proxy; the value is `compact` or
/// `full` (`[http] compact_hold` on or off).
pub const HELD_SERVER_ENV: &str = "ROUSE_LOADTEST_HELD_SERVER";

/// Connections opened at once while filling up.
const CONNECT_CONCURRENCY: usize = 128;
/// Connections opened before waiting for the proxy to hold them all: a listener's accept
/// queue that overflows drops the handshake's last ACK, and a client that sends nothing
/// would not notice.
const CHUNK: usize = 2_000;
/// Bound on opening the connections and on every wait for the held gauge.
const WAIT: Duration = Duration::from_secs(300);
/// Connections opened (and held) before the baseline is read, so first-use allocations are
/// in it.
const WARM: usize = 16;
/// Bound on the wait for the proxy to notice that the clients reset their connections.
const RELEASE_WAIT: Duration = Duration::from_secs(30);
/// Open files a process needs besides the held connections.
const SPARE_FDS: u64 = 256;

/// What is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldKind {
    /// HTTP/1.1 requests with `[http] compact_hold = true` (the default).
    HttpCompact,
    /// HTTP/1.1 requests with `compact_hold = false`: a full HTTP server connection each.
    HttpFull,
    /// Raw connections to a static TCP listener (L4).
    Tcp,
}

impl HeldKind {
    /// The label in the report.
    pub fn label(self) -> &'static str {
        match self {
            HeldKind::HttpCompact => "HTTP/1.1 request, compact hold",
            HeldKind::HttpFull => "HTTP/1.1 request, full connection (compact_hold = false)",
            HeldKind::Tcp => "static TCP (L4)",
        }
    }
}

/// One measurement.
#[derive(Debug, Clone)]
pub struct HeldResult {
    /// What was held.
    pub kind: HeldKind,
    /// How many (besides the warm-up connections).
    pub count: usize,
    /// Child RSS growth per held connection, bytes.
    pub per_connection: f64,
    /// Child RSS with everything held, bytes.
    pub rss_held: u64,
    /// Child RSS once every connection was released, bytes; `None` when the proxy did not
    /// notice the clients' resets within [`RELEASE_WAIT`] (the full HTTP path notices a
    /// hang-up only when it writes).
    pub rss_released: Option<u64>,
    /// Open files of the child with everything held.
    pub child_fds: usize,
    /// How long opening the connections until all were held took.
    pub fill: Duration,
}

/// The child: a proxy with `default/held` suspended for ever; prints its addresses and runs
/// until stdin closes.
pub fn serve_held_child() -> anyhow::Result<()> {
    system::raise_fd_limit_to(system::FD_TARGET)?;
    let mode = std::env::var(HELD_SERVER_ENV).unwrap_or_default();
    let directory = StaticDirectory::new(&[]);
    directory.set(
        SandboxKey::new("default", "held"),
        RouteState::suspended(true),
    );
    let mut config = rouse::bench_config(Some("default/held"), true)?;
    config.http.compact_hold = mode != "full";
    let proxy = rouse::RunningProxy::start(config, directory)?;
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

/// Measures the memory per held connection for the HTTP (compact, then full) and static TCP
/// paths with `count` held: the proxy scenario's memory section.
pub fn held_memory(count: usize) -> anyhow::Result<()> {
    let kinds = [HeldKind::HttpCompact, HeldKind::HttpFull, HeldKind::Tcp];
    measure(&[count], &kinds)?;
    Ok(())
}

/// Runs every kind for every count, side by side, each in a fresh child, printing a Markdown
/// table row by row.
pub fn measure(counts: &[usize], kinds: &[HeldKind]) -> anyhow::Result<Vec<HeldResult>> {
    let want = counts.iter().max().copied().unwrap_or(0) as u64 + SPARE_FDS;
    let limit = system::raise_fd_limit_to(want.max(system::FD_TARGET))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!("### Memory per held connection\n");
    println!(
        "| held | what | per connection | RSS held | RSS after release | proxy open files | fill time |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut results = Vec::new();
    for &count in counts {
        let need = count as u64 + SPARE_FDS;
        if limit < need {
            // Both this process and the proxy child hold one descriptor per connection.
            println!(
                "| {count} | skipped: needs an open-file limit of {need} per process; the hard \
                 limit is {limit} (raising it needs root with CAP_SYS_RESOURCE) | | | | | |"
            );
            continue;
        }
        for &kind in kinds {
            let result = held_once(&runtime, count, kind)
                .with_context(|| format!("{} with {count} held", kind.label()))?;
            print_row(&result);
            results.push(result);
        }
    }
    println!();
    Ok(results)
}

/// Prints one result as a row of the Markdown table [`measure`] prints.
fn print_row(r: &HeldResult) {
    let kib = |bytes: f64| bytes / 1024.0;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    {
        println!(
            "| {} | {} | {:.1} KiB | {:.0} MiB | {} | {} | {:.1} s |",
            r.count,
            r.kind.label(),
            kib(r.per_connection),
            mib(r.rss_held),
            r.rss_released.map_or_else(
                || "not released".to_owned(),
                |b| format!("{:.0} MiB", mib(b))
            ),
            r.child_fds,
            r.fill.as_secs_f64()
        );
    }
}

/// The proxy child, stopped (stdin closed, then waited for) when dropped.
struct ProxyChild {
    child: Child,
    http: SocketAddr,
    tcp: SocketAddr,
    admin: SocketAddr,
}

impl ProxyChild {
    fn start(kind: HeldKind) -> anyhow::Result<Self> {
        let mode = if kind == HeldKind::HttpFull {
            "full"
        } else {
            "compact"
        };
        let mut child = Command::new(std::env::current_exe()?)
            .env(HELD_SERVER_ENV, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the proxy child")?;
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
        Ok(Self {
            child,
            http,
            tcp,
            admin,
        })
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn held_once(
    runtime: &tokio::runtime::Runtime,
    count: usize,
    kind: HeldKind,
) -> anyhow::Result<HeldResult> {
    let child = ProxyChild::start(kind)?;
    let pid = child.pid();
    let (target, request) = match kind {
        HeldKind::Tcp => (child.tcp, None),
        HeldKind::HttpCompact | HeldKind::HttpFull => (
            child.http,
            Some(&b"GET / HTTP/1.1\r\nHost: held.default.sandbox.localhost\r\n\r\n"[..]),
        ),
    };
    let warm = runtime.block_on(open(target, request, 0, WARM))?;
    wait_held(child.admin, WARM)?;
    let before = system::rss_bytes(&pid)?;
    let started = Instant::now();
    let mut streams = Vec::with_capacity(count);
    // Bounded: `count / CHUNK + 1` rounds, each bounded by `WAIT`.
    while streams.len() < count {
        let first = WARM + streams.len();
        let n = CHUNK.min(count - streams.len());
        let opened = runtime.block_on(async {
            tokio::time::timeout(WAIT, open(target, request, first, n))
                .await
                .context("opening the connections took too long")?
        })?;
        streams.extend(opened);
        wait_held(child.admin, WARM + streams.len())?;
    }
    let fill = started.elapsed();
    let rss_held = system::rss_bytes(&pid)?;
    let child_fds = system::open_files(&pid)?;
    // Reset (zero linger), not closed: a half-closed client may still wait for its answer.
    runtime.block_on(async move {
        for stream in streams.iter().chain(&warm) {
            let _ = stream.set_zero_linger();
        }
        drop(streams);
        drop(warm);
    });
    let rss_released = match wait_gauge(child.admin, |held| held <= 0.0, "released", RELEASE_WAIT) {
        Ok(()) => Some(system::rss_bytes(&pid)?),
        Err(_) => None,
    };
    Ok(HeldResult {
        kind,
        count,
        per_connection: rss_held.saturating_sub(before) as f64 / count as f64,
        rss_held,
        rss_released,
        child_fds,
        fill,
    })
}

/// Opens connections `first..first + count` to `target` (sending `request` on each), the
/// `i`-th from source address 127.0.0.(1 + i % 250).
async fn open(
    target: SocketAddr,
    request: Option<&'static [u8]>,
    first: usize,
    count: usize,
) -> anyhow::Result<Vec<TcpStream>> {
    futures::stream::iter(first..first + count)
        .map(|i| async move {
            let source = Ipv4Addr::new(127, 0, 0, 1 + (i % 250) as u8);
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((source, 0)))?;
            let mut stream = socket
                .connect(target)
                .await
                .with_context(|| format!("connection {i} from {source}"))?;
            if let Some(request) = request {
                stream.write_all(request).await?;
            }
            anyhow::Ok(stream)
        })
        .buffer_unordered(CONNECT_CONCURRENCY)
        .try_collect()
        .await
}

/// The held-connection gauge from the admin endpoint's `/metrics`.
fn held_gauge(admin: SocketAddr) -> anyhow::Result<f64> {
    let mut stream = std::net::TcpStream::connect(admin)?;
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

/// Waits until at least `want` connections are held, at most [`WAIT`].
fn wait_held(admin: SocketAddr, want: usize) -> anyhow::Result<()> {
    wait_gauge(
        admin,
        |held| held >= want as f64,
        &format!("{want} held"),
        WAIT,
    )
}

/// Polls the held gauge until `done`, at most `wait`.
fn wait_gauge(
    admin: SocketAddr,
    done: impl Fn(f64) -> bool,
    what: &str,
    wait: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        let held = held_gauge(admin)?;
        if done(held) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("not {what} after {wait:?}: {held} held");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
