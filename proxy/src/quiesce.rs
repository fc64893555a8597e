//! Quiesce: the proxy's part of a checkpoint suspend. While a sandbox is being saved no TCP
//! connection to it may be open (its runtime refuses to save one, and the sandbox dies), so
//! [`Quiescer::quiesce`] resets every pooled or active HTTP upstream connection to it (a
//! close with `SO_LINGER 0`: an RST, no FIN/TIME_WAIT on either side) and holds new dials
//! until [`Quiescer::release`]. Held connections then go on through hold-and-wake as usual.
//!
//! Each upstream stream the L7 client dials is a [`QuiesceStream`]: a `TcpStream` that also
//! watches its sandbox's cancellation token, so an idle pooled connection is reset at once
//! (hyper polls idle connections for reads, which polls the token too).

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use dashmap::DashMap;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::directory::SandboxKey;
use crate::on_wake::OnWake;

/// Per-sandbox quiesce state, created on first use.
#[derive(Debug)]
struct Entry {
    /// Cancelled (and replaced) by each quiesce: resets the streams dialled before it.
    token: Mutex<CancellationToken>,
    /// Streams open now.
    open: watch::Sender<usize>,
    /// True from quiesce to release: new dials wait.
    held: watch::Sender<bool>,
}

/// The quiesce state of every sandbox the proxy dialled or was asked to quiesce.
#[derive(Debug, Default)]
pub struct Quiescer {
    map: DashMap<SandboxKey, Arc<Entry>>,
}

impl Quiescer {
    fn entry(&self, key: &SandboxKey) -> Arc<Entry> {
        Arc::clone(
            self.map
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Entry {
                        token: Mutex::new(CancellationToken::new()),
                        open: watch::Sender::new(0),
                        held: watch::Sender::new(false),
                    })
                })
                .value(),
        )
    }

    /// Wraps a freshly dialled upstream stream of `key` so a quiesce can reset it.
    pub fn wrap(&self, key: &SandboxKey, stream: TcpStream) -> QuiesceStream {
        let entry = self.entry(key);
        let token = entry
            .token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        entry.open.send_modify(|n| *n += 1);
        QuiesceStream {
            inner: stream,
            cancelled: OnWake::new(token.cancelled_owned()),
            reset: false,
            entry,
        }
    }

    /// Holds new dials to `key`, resets its open streams and waits (at most `limit`) until
    /// none is open; `false` when some still were at the limit.
    pub async fn quiesce(&self, key: &SandboxKey, limit: Duration) -> bool {
        let entry = self.entry(key);
        entry.held.send_replace(true);
        let old = std::mem::replace(
            &mut *entry.token.lock().unwrap_or_else(PoisonError::into_inner),
            CancellationToken::new(),
        );
        old.cancel();
        let mut open = entry.open.subscribe();
        let closed = tokio::time::timeout(limit, open.wait_for(|n| *n == 0)).await;
        let quiet = matches!(closed, Ok(Ok(_)));
        tracing::debug!(sandbox.key = %key, quiesce.quiet = quiet, "upstream connections reset");
        quiet
    }

    /// Lets dials to `key` through again.
    pub fn release(&self, key: &SandboxKey) {
        if let Some(entry) = self.map.get(key) {
            entry.held.send_replace(false);
        }
    }

    /// True when `key` is quiesced now.
    pub fn is_held(&self, key: &SandboxKey) -> bool {
        self.map.get(key).is_some_and(|e| *e.held.borrow())
    }

    /// Waits until `key` is released, at most until `deadline`; `false` at the deadline.
    pub async fn wait_released(&self, key: &SandboxKey, deadline: tokio::time::Instant) -> bool {
        let Some(entry) = self.map.get(key).map(|e| Arc::clone(e.value())) else {
            return true;
        };
        let mut held = entry.held.subscribe();
        matches!(
            tokio::time::timeout_at(deadline, held.wait_for(|h| !*h)).await,
            Ok(Ok(_))
        )
    }
}

/// An upstream TCP stream that a quiesce of its sandbox resets.
pub struct QuiesceStream {
    inner: TcpStream,
    /// Polled only when the token woke the stream's task, not on every read and write.
    cancelled: OnWake<WaitForCancellationFutureOwned>,
    reset: bool,
    entry: Arc<Entry>,
}

impl std::fmt::Debug for QuiesceStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuiesceStream")
            .field("inner", &self.inner)
            .field("reset", &self.reset)
            .finish_non_exhaustive()
    }
}

impl QuiesceStream {
    /// The underlying stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }

    /// `Err` once the sandbox was quiesced: the socket is set to reset on close, which its
    /// owner does on this error.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.reset && Pin::new(&mut self.cancelled).poll(cx).is_pending() {
            return Ok(());
        }
        if !self.reset {
            self.reset = true;
            // Best effort: a failure leaves a plain close.
            let _ = self.inner.set_zero_linger();
        }
        Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "reset for a checkpoint of the sandbox",
        ))
    }
}

impl Drop for QuiesceStream {
    fn drop(&mut self) {
        self.entry.open.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl AsyncRead for QuiesceStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Err(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for QuiesceStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Err(e) = self.check(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl hyper_util::client::legacy::connect::Connection for QuiesceStream {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests;
