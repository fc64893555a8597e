//! The HTTP/1.1 keep-alive load generator: N connections, each sending one small GET after
//! another for a fixed time, timing each request. It speaks just enough HTTP/1.1 (a
//! `Content-Length` body) to stay cheap, so it measures the servers rather than itself; the
//! same generator drives every target, so they are measured identically.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Most latency samples kept per run (the rest still count towards throughput).
const MAX_SAMPLES: usize = 4_000_000;

/// What one load run did.
#[derive(Debug, Default, Clone)]
pub struct LoadResult {
    /// Requests answered with 200.
    pub ok: u64,
    /// Requests that failed or got another status.
    pub errors: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Request latencies in microseconds (up to [`MAX_SAMPLES`]).
    pub latencies_us: Vec<u32>,
}

impl LoadResult {
    /// Adds another run's results.
    pub fn merge(&mut self, other: LoadResult) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        let room = MAX_SAMPLES.saturating_sub(self.latencies_us.len());
        self.latencies_us
            .extend(other.latencies_us.into_iter().take(room));
    }

    /// Successful requests per second.
    pub fn rps(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency at quantile `q` (0..=1), in microseconds.
    pub fn quantile_us(&mut self, q: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() - 1) as f64 * q).round() as usize;
        f64::from(self.latencies_us[i])
    }
}

/// Runs `connections` keep-alive connections against `addr` for `duration`, each sending
/// `GET /` with `Host: host` in a loop.
pub async fn run(
    addr: SocketAddr,
    host: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<LoadResult> {
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: rouse-loadtest\r\n\r\n");
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let request = request.clone();
        tasks.spawn(async move { connection(addr, request.into_bytes(), deadline).await });
    }
    let mut total = LoadResult::default();
    while let Some(joined) = tasks.join_next().await {
        let result = joined.context("load connection panicked")??;
        total.ok += result.ok;
        total.errors += result.errors;
        let room = MAX_SAMPLES.saturating_sub(total.latencies_us.len());
        total
            .latencies_us
            .extend(result.latencies_us.into_iter().take(room));
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

async fn connection(
    addr: SocketAddr,
    request: Vec<u8>,
    deadline: Instant,
) -> anyhow::Result<LoadResult> {
    let mut result = LoadResult::default();
    let mut stream = TcpStream::connect(addr).await.context("connect")?;
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 16 * 1024];
    while Instant::now() < deadline {
        let sent = Instant::now();
        stream.write_all(&request).await.context("send request")?;
        match read_response(&mut stream, &mut buf).await {
            Ok(200) => {
                result.ok += 1;
                if result.latencies_us.len() < MAX_SAMPLES / 64 {
                    let us = sent.elapsed().as_micros();
                    result
                        .latencies_us
                        .push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
            Ok(_) => result.errors += 1,
            Err(err) => {
                result.errors += 1;
                return Err(err.context(format!("after {} responses", result.ok)));
            }
        }
    }
    Ok(result)
}

/// Reads one response with a `Content-Length` body; returns its status.
async fn read_response(stream: &mut TcpStream, buf: &mut [u8]) -> anyhow::Result<u16> {
    let mut filled = 0;
    let head_end = loop {
        if filled == buf.len() {
            bail!("response head larger than {} bytes", buf.len());
        }
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            bail!("connection closed mid-response");
        }
        filled += n;
        if let Some(at) = find(&buf[..filled], b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("response head is not text")?;
    let status: u16 = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .context("no status code")?;
    let length: usize = head
        .split("\r\n")
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .context("response without content-length")?;
    let mut body_read = filled - head_end;
    while body_read < length {
        let want = (length - body_read).min(buf.len());
        let n = stream.read(&mut buf[..want]).await?;
        if n == 0 {
            bail!("connection closed mid-body");
        }
        body_read += n;
    }
    if body_read > length {
        bail!("more bytes than the response holds (pipelining is not used)");
    }
    Ok(status)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
