//! The serving loop: one task answers UDP queries as they come and serves at most
//! [`DnsConfig::tcp_connections`] TCP connections, polled on the same task, each within
//! [`DnsConfig::tcp_deadline`]. Every buffer is fixed: [`MAX_UDP`] bytes per datagram,
//! [`MAX_TCP`] per TCP message.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Ports tried when the kernel picks one (port 0) before the bind gives up.
const BIND_ATTEMPTS: usize = 16;

use super::codec::{self, MAX_TCP, MAX_UDP, Rcode, Unreadable};
use super::{DnsConfig, Error, Records, Result, resolve};

/// How long [`DnsServer::stop`] waits for the task.
const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// Counts of what the server did, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DnsCounts {
    /// Answers with addresses or NODATA.
    pub no_error: u64,
    /// NXDOMAIN answers.
    pub nx_domain: u64,
    /// REFUSED answers (outside the domain, not class IN).
    pub refused: u64,
    /// SERVFAIL answers (records not loaded yet).
    pub serv_fail: u64,
    /// FORMERR and NOTIMP answers (unreadable queries).
    pub bad_query: u64,
    /// Messages dropped without an answer (too short, responses).
    pub dropped: u64,
    /// TCP connections closed at accept because the limit was reached.
    pub tcp_shed: u64,
    /// TCP connections closed at their deadline.
    pub tcp_timeouts: u64,
}

#[derive(Debug, Default)]
struct Counters {
    no_error: AtomicU64,
    nx_domain: AtomicU64,
    refused: AtomicU64,
    serv_fail: AtomicU64,
    bad_query: AtomicU64,
    dropped: AtomicU64,
    tcp_shed: AtomicU64,
    tcp_timeouts: AtomicU64,
}

impl Counters {
    fn count(&self, rcode: Rcode) {
        let counter = match rcode {
            Rcode::NoError => &self.no_error,
            Rcode::NxDomain => &self.nx_domain,
            Rcode::Refused => &self.refused,
            Rcode::ServFail => &self.serv_fail,
            Rcode::FormErr | Rcode::NotImp => &self.bad_query,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> DnsCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DnsCounts {
            no_error: get(&self.no_error),
            nx_domain: get(&self.nx_domain),
            refused: get(&self.refused),
            serv_fail: get(&self.serv_fail),
            bad_query: get(&self.bad_query),
            dropped: get(&self.dropped),
            tcp_shed: get(&self.tcp_shed),
            tcp_timeouts: get(&self.tcp_timeouts),
        }
    }
}

/// What every query is answered from.
struct Shared {
    records: Arc<dyn Records>,
    config: DnsConfig,
    counters: Counters,
}

impl Shared {
    /// The answer to one message (at most `limit` bytes), or `None` to drop it.
    fn handle(&self, message: &[u8], limit: usize) -> Option<Vec<u8>> {
        match codec::parse_query(message) {
            Ok(query) => {
                let (rcode, addresses) =
                    resolve(&query, self.records.as_ref(), &self.config.domain);
                self.counters.count(rcode);
                tracing::trace!(name = %query.labels.join("."), qtype = query.qtype, ?rcode, "dns query");
                Some(codec::answer(
                    &query,
                    rcode,
                    &addresses,
                    self.config.ttl,
                    limit,
                ))
            }
            Err(Unreadable::Reply {
                id,
                recursion_desired,
                rcode,
            }) => {
                self.counters.count(rcode);
                Some(codec::error_reply(id, recursion_desired, rcode))
            }
            Err(Unreadable::Drop) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// A running DNS server; [`stop`](Self::stop) ends it (dropping it stops it too, without
/// waiting).
pub struct DnsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl DnsServer {
    /// Binds UDP and TCP on `addr` (port 0: one free port for both).
    pub fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener)> {
        // With port 0 the kernel picks a port free for UDP only: the same TCP port may be in
        // use (any TCP socket of this machine, e.g. a client's ephemeral port), so pick again
        // a bounded number of times rather than fail.
        let attempts = if addr.port() == 0 { BIND_ATTEMPTS } else { 1 };
        let mut last = None;
        for _ in 0..attempts {
            let udp = UdpSocket::bind(addr).map_err(Error::Bind)?;
            match TcpListener::bind(udp.local_addr().map_err(Error::Bind)?) {
                Ok(tcp) => return Ok((udp, tcp)),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
                Err(e) => return Err(Error::Bind(e)),
            }
        }
        Err(Error::Bind(last.unwrap_or_else(|| {
            std::io::Error::from(std::io::ErrorKind::AddrInUse)
        })))
    }

    /// Serves `records` on the bound sockets (from [`bind`](Self::bind) or made elsewhere, in
    /// another network namespace) on a task of the current tokio runtime.
    pub fn start(
        udp: UdpSocket,
        tcp: TcpListener,
        records: Arc<dyn Records>,
        config: DnsConfig,
    ) -> Result<Self> {
        udp.set_nonblocking(true).map_err(Error::Bind)?;
        tcp.set_nonblocking(true).map_err(Error::Bind)?;
        let addr = udp.local_addr().map_err(Error::Bind)?;
        let udp = tokio::net::UdpSocket::from_std(udp).map_err(Error::Bind)?;
        let tcp = tokio::net::TcpListener::from_std(tcp).map_err(Error::Bind)?;
        let shared = Arc::new(Shared {
            records,
            config,
            counters: Counters::default(),
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve(udp, tcp, shared.clone(), stop.clone()));
        Ok(Self {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// The address served (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the server did so far.
    pub fn counts(&self) -> DnsCounts {
        self.shared.counters.snapshot()
    }

    /// Stops serving and waits (at most 5 s, then aborts) until the task has ended.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_DEADLINE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

type Connection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The one task: UDP queries, TCP accepts and the open TCP connections, until `stop`.
async fn serve(
    udp: tokio::net::UdpSocket,
    tcp: tokio::net::TcpListener,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    let mut buffer = [0u8; MAX_UDP];
    let mut connections: FuturesUnordered<Connection> = FuturesUnordered::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            received = udp.recv_from(&mut buffer) => match received {
                Ok((len, peer)) => {
                    if let Some(reply) = shared.handle(&buffer[..len], MAX_UDP) {
                        // A full socket buffer drops the answer; the client asks again.
                        if let Err(error) = udp.try_send_to(&reply, peer) {
                            tracing::debug!(%peer, %error, "dns answer not sent");
                        }
                    }
                }
                // ICMP errors of earlier answers surface here; the socket still works.
                Err(error) => tracing::debug!(%error, "dns receive"),
            },
            accepted = tcp.accept() => match accepted {
                Ok((stream, _)) if connections.len() < shared.config.tcp_connections => {
                    connections.push(Box::pin(serve_tcp(stream, shared.clone())));
                }
                Ok(_) => {
                    shared.counters.tcp_shed.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => tracing::debug!(%error, "dns accept"),
            },
            Some(()) = connections.next(), if !connections.is_empty() => {}
        }
    }
}

/// One TCP connection: length-prefixed queries, answered in order, until the client closes,
/// sends a message over [`MAX_TCP`], or the connection's deadline or query count is reached.
async fn serve_tcp(mut stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let config = &shared.config;
    let exchange = async {
        let mut buffer = [0u8; MAX_TCP];
        for _ in 0..config.tcp_queries {
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await?;
            let len = usize::from(u16::from_be_bytes(len));
            if len > MAX_TCP {
                return Ok(());
            }
            stream.read_exact(&mut buffer[..len]).await?;
            if let Some(reply) = shared.handle(&buffer[..len], MAX_TCP) {
                let prefix = u16::try_from(reply.len()).unwrap_or(u16::MAX).to_be_bytes();
                stream.write_all(&prefix).await?;
                stream.write_all(&reply).await?;
            }
        }
        std::io::Result::Ok(())
    };
    if tokio::time::timeout(config.tcp_deadline, exchange)
        .await
        .is_err()
    {
        shared.counters.tcp_timeouts.fetch_add(1, Ordering::Relaxed);
    }
}
