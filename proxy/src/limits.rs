//! Limits on clients: the connection cap (shed at accept), the per-client-IP rate limit
//! (`pingora-limits`, a fixed-memory estimator, so hostile IP churn cannot grow it), and an
//! idle timeout wrapper for client streams.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use pingora_limits::rate::Rate;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::deadline::Deadline;
use crate::error::ProxyError;
use crate::metrics as m;

/// Proxy-wide client limits.
pub(crate) struct Limits {
    rate: Rate,
    open: Arc<AtomicUsize>,
}

impl Limits {
    pub(crate) fn new() -> Self {
        Self {
            rate: Rate::new(Duration::from_secs(1)),
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Counts a new client connection unless `max` are open (0 = no limit).
    pub(crate) fn admit(&self, max: usize) -> Result<Admission, ProxyError> {
        let admitted = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (max == 0 || n < max).then_some(n + 1)
            })
            .is_ok();
        if !admitted {
            metrics::counter!(m::CONNECTIONS_REJECTED_TOTAL, "reason" => "max_connections")
                .increment(1);
            return Err(ProxyError::ConnectionLimit { limit: max });
        }
        metrics::gauge!(m::DOWNSTREAM_CONNECTIONS_OPEN).increment(1.0);
        Ok(Admission {
            open: Arc::clone(&self.open),
        })
    }

    /// Counts one event from `ip`; an error once more than `limit` arrived this second.
    pub(crate) fn check_rate(&self, ip: IpAddr, limit: u32) -> Result<(), ProxyError> {
        if limit == 0 {
            return Ok(());
        }
        let seen = self.rate.observe(&ip, 1);
        if seen > isize::try_from(limit).unwrap_or(isize::MAX) {
            metrics::counter!(m::CONNECTIONS_REJECTED_TOTAL, "reason" => "rate_limited")
                .increment(1);
            return Err(ProxyError::RateLimited { limit });
        }
        Ok(())
    }
}

/// One admitted client connection; dropping it frees its place.
#[derive(Debug)]
pub struct Admission {
    open: Arc<AtomicUsize>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(m::DOWNSTREAM_CONNECTIONS_OPEN).decrement(1.0);
    }
}

/// The idle limit of one client connection, changeable while it runs (an upgrade switches a
/// connection to `limits.upgraded_idle_timeout`).
#[derive(Debug, Clone, Default)]
pub struct IdleControl {
    /// Milliseconds; 0 = no limit.
    millis: Arc<AtomicU64>,
}

impl IdleControl {
    /// A control starting at `timeout` (`None` = no limit).
    pub fn new(timeout: Option<Duration>) -> Self {
        let control = Self::default();
        control.set(timeout);
        control
    }

    /// Changes the limit; it counts from the last byte moved.
    pub fn set(&self, timeout: Option<Duration>) {
        let millis = timeout.map_or(0, |t| {
            u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        self.millis.store(millis, Ordering::Relaxed);
    }

    fn get(&self) -> Option<Duration> {
        match self.millis.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }
}

/// A stream that fails with `TimedOut` once no byte moved either way for the limit its
/// [`IdleControl`] holds.
///
/// The timer is only checked while the owner polls for reading, which hyper and the copy
/// loops always do on an open connection.
#[derive(Debug)]
pub struct IdleTimeout<T> {
    inner: T,
    control: IdleControl,
    last: Instant,
    deadline: Deadline,
}

impl<T> IdleTimeout<T> {
    /// Wraps `inner`, limited by `control`.
    pub fn new(inner: T, control: IdleControl) -> Self {
        Self {
            inner,
            deadline: Deadline::after(control.get()),
            control,
            last: Instant::now(),
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    fn touch(&mut self) {
        self.last = Instant::now();
    }

    /// True once the limit passed since the last byte; arms the timer otherwise.
    ///
    /// While bytes keep moving the timer stays at its earlier deadline and is moved only when
    /// it fires (or the limit shrinks below it, see [`Deadline::set`]): one timer update per
    /// idle period instead of one per read, which on a keep-alive connection is one per
    /// request.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        // Without a limit, nothing to arm; a limit set later is seen at the next poll.
        let Some(limit) = self.control.get() else {
            return false;
        };
        self.deadline.set(self.last + limit);
        self.deadline.poll_passed(cx)
    }
}

fn idle_error() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.touch();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                if self.expired(cx) {
                    metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "idle").increment(1);
                    Poll::Ready(Err(idle_error()))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = result
            && n > 0
        {
            self.touch();
        }
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = result
            && n > 0
        {
            self.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes every 200 ms keep a stream with a 300 ms limit open well past the limit (the
    /// timer is moved when it fires, not per read); 300 ms of silence then end it.
    #[tokio::test(start_paused = true)]
    async fn traffic_keeps_the_stream_and_silence_ends_it() {
        let (client, server) = tokio::io::duplex(64);
        let control = IdleControl::new(Some(Duration::from_millis(300)));
        let mut stream = IdleTimeout::new(server, control);
        let mut client = client;
        let started = Instant::now();
        let mut byte = [0_u8; 1];
        for _ in 0..10 {
            let (read, ()) = tokio::join!(stream.read(&mut byte), async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                client.write_all(b"x").await.expect("write");
            });
            assert_eq!(read.expect("traffic keeps the stream"), 1);
        }
        assert!(started.elapsed() >= Duration::from_secs(2));
        let quiet = Instant::now();
        let err = stream.read(&mut byte).await.expect_err("silence ends it");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let waited = quiet.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(400),
            "{waited:?}"
        );
    }
}
