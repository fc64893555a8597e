//! Limits on clients: the connection caps (in total and per client address, shed at accept),
//! the per-client-IP rate limit (`pingora-limits`, a fixed-memory estimator, so hostile IP
//! churn cannot grow it), and an idle timeout wrapper for client streams.

use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use pingora_limits::rate::Rate;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::deadline::Deadline;
use crate::error::ProxyError;
use crate::metrics as m;

/// Open client connections per client address (see [`client_key`]). An address has an
/// entry only while it has a connection open, so the map holds at most as many entries as
/// connections are open, whatever addresses connect.
type PerClient = Arc<DashMap<IpAddr, usize>>;

/// Proxy-wide client limits.
pub(crate) struct Limits {
    rate: Rate,
    open: Arc<AtomicUsize>,
    per_client: PerClient,
}

/// The caps a new client connection is admitted under (0 = no limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    /// `limits.max_connections`.
    pub(crate) total: usize,
    /// `limits.max_connections_per_ip`.
    pub(crate) per_client: usize,
}

impl Limits {
    pub(crate) fn new() -> Self {
        Self {
            rate: Rate::new(Duration::from_secs(1)),
            open: Arc::new(AtomicUsize::new(0)),
            per_client: Arc::new(DashMap::new()),
        }
    }

    /// Counts a new client connection from `ip` unless its address has `caps.per_client`
    /// open, or the proxy `caps.total`.
    pub(crate) fn admit(&self, ip: IpAddr, caps: Caps) -> Result<Admission, ProxyError> {
        // Per address first: a connection refused for its address takes no place in the
        // total, even for an instant.
        let client = if caps.per_client == 0 {
            None
        } else {
            Some(ClientPlace::take(&self.per_client, ip, caps.per_client)?)
        };
        let max = caps.total;
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
            _client: client,
        })
    }

    /// Client addresses with a connection open now.
    pub(crate) fn client_addresses(&self) -> usize {
        self.per_client.len()
    }

    /// Client connections admitted and open now.
    pub(crate) fn client_connections(&self) -> usize {
        self.open.load(Ordering::Acquire)
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
    /// Its place among its address's connections, when they are capped.
    _client: Option<ClientPlace>,
}

/// One connection counted for its client address; dropping it frees the place (and the
/// address's entry with its last one).
#[derive(Debug)]
struct ClientPlace {
    map: PerClient,
    key: IpAddr,
}

impl ClientPlace {
    /// Counts a connection from `ip` unless its address has `max` (at least 1) open.
    fn take(map: &PerClient, ip: IpAddr, max: usize) -> Result<Self, ProxyError> {
        let key = client_key(ip);
        let mut open = map.entry(key).or_insert(0);
        // A new entry starts at 0, below any cap: it is never left behind empty.
        if *open >= max {
            drop(open);
            metrics::counter!(m::CONNECTIONS_REJECTED_TOTAL, "reason" => "max_connections_per_ip")
                .increment(1);
            return Err(ProxyError::ClientConnectionLimit { limit: max });
        }
        *open += 1;
        drop(open);
        Ok(Self {
            map: Arc::clone(map),
            key,
        })
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        if let Entry::Occupied(mut open) = self.map.entry(self.key) {
            if *open.get() <= 1 {
                open.remove();
            } else {
                *open.get_mut() -= 1;
            }
        }
    }
}

/// The address a client's connections are counted under: an IPv4 address (also when mapped
/// into IPv6), or the /64 network of an IPv6 address — one host commonly has a whole /64,
/// and could otherwise open connections without bound by changing its address.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::from(u64::MAX)))),
        },
    }
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
mod tests;
