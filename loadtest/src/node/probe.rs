//! First response byte of an HTTP server, from the host or from inside the node's network
//! namespace (pod IPs are reachable only there): a thread of its own joins the namespace with
//! `setns(2)` and serves probe requests, so no other thread of the benchmark changes namespace.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sched::{CloneFlags, setns};
use tokio::sync::oneshot;

/// How long one connect attempt to a starting pod may take before it is retried: a SYN that
/// a sandbox's network stack drops while it starts would otherwise wait out the kernel's 1 s
/// retransmission.
const ATTEMPT: Duration = Duration::from_millis(100);
/// First pause between attempts while nothing listens; it doubles up to [`MAX_RETRY`]. The
/// proxy's default dial backoff (`dial_backoff_initial`, `dial_backoff_max`): the baseline
/// probes a starting pod as often as the wake's dial does, so neither side loads it more
/// (a fixed 1 ms retry sends some 1000 SYNs a second into a starting gVisor sandbox, whose
/// network stack shares the sandbox's CPU with the start being measured).
const RETRY: Duration = Duration::from_millis(1);
/// Longest pause between attempts.
const MAX_RETRY: Duration = Duration::from_millis(50);
/// Bounds the answer's bytes read (only the status line matters).
const MAX_ANSWER: u64 = 64 * 1024;

/// Connects to `addr`, sends `GET /` with `host`, waits at most `deadline` for the answer;
/// the instant the first response byte arrived, once the status line says 200.
pub fn first_byte(
    addr: SocketAddr,
    host: &str,
    connect: Duration,
    deadline: Duration,
) -> Result<Instant> {
    let mut stream =
        TcpStream::connect_timeout(&addr, connect).with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(deadline))?;
    stream.set_nodelay(true)?;
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut first = [0u8; 1];
    if stream.read(&mut first)? == 0 {
        bail!("{addr} closed without answering");
    }
    let at = Instant::now();
    let mut rest = Vec::new();
    let _ = (&mut stream).take(MAX_ANSWER).read_to_end(&mut rest);
    let text = String::from_utf8_lossy(&first).into_owned() + &String::from_utf8_lossy(&rest);
    let status = text.lines().next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200") && !status.starts_with("HTTP/1.0 200") {
        bail!("{addr} answered {status:?}");
    }
    Ok(at)
}

/// [`first_byte`] retried (each connect bounded by [`ATTEMPT`], the pause between attempts
/// doubling from [`RETRY`] to [`MAX_RETRY`]) until `until`: a server that is still starting.
pub fn first_byte_retrying(addr: SocketAddr, host: &str, until: Instant) -> Result<Instant> {
    let mut pause = RETRY;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match first_byte(addr, host, ATTEMPT.min(left.max(RETRY)), left.max(RETRY)) {
            Ok(at) => return Ok(at),
            Err(e) if Instant::now() >= until => {
                return Err(e.context(format!("no answer from {addr} in time")));
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_RETRY);
            }
        }
    }
}

/// One probe for the namespace's thread.
struct Job {
    addr: SocketAddr,
    until: Instant,
    reply: oneshot::Sender<Result<Instant>>,
}

/// A thread inside a network namespace that answers [`NetnsProber::first_byte`].
#[derive(Debug)]
pub struct NetnsProber {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NetnsProber {
    /// Starts the thread and moves it into the namespace at `netns` (`/run/netns/NAME`).
    pub fn start(netns: &str) -> Result<Self> {
        let file = File::open(netns).with_context(|| format!("open {netns}"))?;
        let (jobs, receiver) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("netns-prober".into())
            .spawn(move || {
                // Only this thread changes namespace; its sockets are the namespace's.
                if let Err(e) = setns(&file, CloneFlags::CLONE_NEWNET) {
                    let _ = ready_tx.send(Err(anyhow::anyhow!("setns into the node: {e}")));
                    return;
                }
                let _ = ready_tx.send(Ok(()));
                for job in receiver {
                    let _ = job
                        .reply
                        .send(first_byte_retrying(job.addr, "bare", job.until));
                }
            })
            .context("spawn the prober thread")?;
        ready_rx
            .recv()
            .context("the prober thread ended before joining the namespace")??;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// The instant of the first `200` byte from `addr` inside the namespace, retrying until
    /// `until` while nothing answers.
    pub async fn first_byte(&self, addr: SocketAddr, until: Instant) -> Result<Instant> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .as_ref()
            .context("the prober is stopped")?
            .send(Job { addr, until, reply })
            .ok()
            .context("the prober thread is gone")?;
        answer
            .await
            .context("the prober thread dropped the probe")?
    }
}

impl Drop for NetnsProber {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
