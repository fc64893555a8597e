//! Routing: the [`Router`] every listener shares — hostname → sandbox ([`Router::resolve_host`]),
//! hold-and-wake and dial ([`Router::connect`]), limits, activity and the config in force.
//!
//! The phases of the request path (see `docs/proxy.md`): accept → classify → **route** →
//! **hold/wake** → **connect** → splice/proxy → account.

mod connect;
mod table;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use rouse_shared::names::{SandboxDomains, split_host_port};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::activity::ConnectionGuard;
use crate::activity::SandboxActivity;
use crate::config::{Config, ConfigError, ConfigIssue};
use crate::directory::{Directory, RouteState, RouteUpdate, SandboxKey};
use crate::error::ProxyError;
use crate::limits::{Admission, Limits};
use crate::metrics as m;
use crate::wake::{HeldTotals, WakeGate};
pub(crate) use table::RouteTable;

/// The error of routing calls; the same type as every proxy error.
pub type RouteError = ProxyError;

/// Which sandbox, and which of its ports, a connection goes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteTarget {
    /// The sandbox.
    pub key: SandboxKey,
    /// Container port; `None` = the sandbox's first (default) port.
    pub port: Option<u16>,
}

/// The kind of a proxied connection (the `kind` label of `rouse_proxy_connections_open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnKind {
    /// An HTTP request/response exchange.
    Http,
    /// An upgraded HTTP connection (WebSocket and others).
    Upgrade,
    /// A TLS connection passed through by SNI.
    TlsPassthrough,
    /// An HTTP CONNECT tunnel.
    Connect,
    /// A static TCP listener's connection.
    Tcp,
}

impl ConnKind {
    /// Position in `metrics::hot::CONNECTIONS_OPEN_BY_KIND`.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        CONN_KIND_LABELS[self.index()]
    }
}

/// Labels of [`ConnKind`], in declaration order.
pub(crate) const CONN_KIND_LABELS: [&str; 5] =
    ["http", "upgrade", "tls_passthrough", "connect", "tcp"];

/// A dialled connection to a sandbox, counted as open while `guard` lives.
#[derive(Debug)]
pub struct Upstream {
    /// The connection.
    pub stream: tokio::net::TcpStream,
    /// The address it goes to.
    pub addr: SocketAddr,
    /// Counts the connection and its bytes as the sandbox's activity.
    pub guard: ConnectionGuard,
}

/// One sandbox's entry in the routing table: its state channel, wake gate and activity.
#[derive(Debug)]
pub struct Slot {
    /// The sandbox.
    pub(crate) key: SandboxKey,
    /// Its route state and suspension number; held connections wait on changes of it.
    pub(crate) state: watch::Sender<SlotState>,
    /// Hold-and-wake state.
    pub(crate) gate: WakeGate,
    /// Activity counters.
    pub(crate) activity: SandboxActivity,
    /// Bumped whenever the address to dial changes (or goes away), so pooled upstream
    /// connections to an old address are never reused: the L7 pool key includes it.
    pub(crate) epoch: std::sync::atomic::AtomicU64,
}

/// What a slot's watch channel carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotState {
    /// The route state last applied (`Missing` once removed from the table).
    pub(crate) route: RouteState,
    /// Numbers the suspensions seen so far (see `crate::hold::Suspension`).
    pub(crate) suspension: crate::hold::Suspension,
}

impl Slot {
    /// The current address epoch (see `epoch`).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The config in force and what is derived from it.
#[derive(Debug)]
struct Snapshot {
    config: Arc<Config>,
    domains: SandboxDomains,
}

impl Snapshot {
    fn new(config: Config) -> Result<Self, ConfigError> {
        let routing = &config.routing;
        let default_ns =
            (!routing.default_namespace.is_empty()).then_some(&*routing.default_namespace);
        let domains = SandboxDomains::new(&routing.domains, default_ns).map_err(|err| {
            ConfigError::Invalid(vec![ConfigIssue {
                path: "routing.domains".to_owned(),
                line: None,
                message: err.to_string(),
            }])
        })?;
        Ok(Self {
            config: Arc::new(config),
            domains,
        })
    }
}

pub(crate) struct Inner {
    snapshot: RwLock<Arc<Snapshot>>,
    table: RouteTable,
    directory: Arc<dyn Directory>,
    held: Arc<HeldTotals>,
    limits: Limits,
    tasks: TaskTracker,
    background_tasks: TaskTracker,
    background: CancellationToken,
    drain: CancellationToken,
    hard_stop: CancellationToken,
    /// Cancelled once the directory has sent its first full list (a one-shot start barrier).
    synced: CancellationToken,
    draining: AtomicBool,
    l7_client: OnceLock<crate::l7::client::UpstreamClient>,
    quiescer: crate::quiesce::Quiescer,
}

/// The state every listener shares: routing table, wake gates, limits, activity and config.
///
/// Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.inner.table.len())
            .finish_non_exhaustive()
    }
}

impl Router {
    /// A router for `config`, fed by `directory` once [`Router::start_updates`] runs.
    pub fn new(config: Config, directory: impl Directory) -> Result<Self, ConfigError> {
        let snapshot = Snapshot::new(config)?;
        Ok(Self {
            inner: Arc::new(Inner {
                snapshot: RwLock::new(Arc::new(snapshot)),
                table: RouteTable::default(),
                directory: Arc::new(directory),
                held: Arc::new(HeldTotals::default()),
                limits: Limits::new(),
                tasks: TaskTracker::new(),
                background_tasks: TaskTracker::new(),
                background: CancellationToken::new(),
                drain: CancellationToken::new(),
                hard_stop: CancellationToken::new(),
                synced: CancellationToken::new(),
                draining: AtomicBool::new(false),
                l7_client: OnceLock::new(),
                quiescer: crate::quiesce::Quiescer::default(),
            }),
        })
    }

    /// Resets and holds upstream connections around a checkpoint of a sandbox (see
    /// [`crate::quiesce`]).
    pub fn quiescer(&self) -> &crate::quiesce::Quiescer {
        &self.inner.quiescer
    }

    /// The config in force.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.snapshot().config)
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        // Writers only swap the Arc, so a poisoned lock still holds a whole snapshot.
        Arc::clone(
            &self
                .inner
                .snapshot
                .read()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Puts a new config in force at once; connections in flight keep the values they read.
    /// Listener addresses are not rebound (see `Proxy::reload`).
    pub fn reload(&self, config: Config) -> Result<(), ConfigError> {
        let snapshot = Arc::new(Snapshot::new(config)?);
        *self
            .inner
            .snapshot
            .write()
            .unwrap_or_else(|e| e.into_inner()) = snapshot;
        Ok(())
    }

    /// The sandbox and port a host (Host header, SNI or CONNECT authority; `:port` ignored)
    /// addresses.
    pub fn resolve_host(&self, host: &str) -> Result<RouteTarget, RouteError> {
        let (host, _listener_port) = split_host_port(host)?;
        let parsed = self.snapshot().domains.parse(host)?;
        Ok(RouteTarget {
            key: SandboxKey::new(parsed.namespace, parsed.name),
            port: parsed.port,
        })
    }

    /// Holds until the sandbox can take the connection (waking it if suspended), then dials it.
    ///
    /// Errors: `UnknownSandbox`/`UnknownPort` (404), `Suspended` (503), `Failed` (502),
    /// `WakeDeadline` and `HeldLimit` (503 + Retry-After), `UpstreamConnect` (502).
    pub async fn connect(
        &self,
        target: &RouteTarget,
        kind: ConnKind,
    ) -> Result<Upstream, ProxyError> {
        self.wait_synced().await;
        let slot = self.slot(&target.key).ok_or_else(|| {
            let err = ProxyError::UnknownSandbox {
                key: target.key.clone(),
            };
            count_error(&err);
            err
        })?;
        // Counted as open (activity) from now on, held or not: a held TCP connection keeps
        // its sandbox's activity alive the same way a held HTTP request does.
        let guard = ConnectionGuard::new(self.clone(), Arc::clone(&slot), kind);
        let (stream, addr) = self.connect_slot(target, &slot).await?;
        Ok(Upstream {
            stream,
            addr,
            guard,
        })
    }

    /// Waits, at most the wake deadline, for the directory's first full list: a connection
    /// that arrives while the proxy starts must not be told that its sandbox does not exist.
    /// Returns at once after the first sync.
    pub async fn wait_synced(&self) {
        if self.inner.synced.is_cancelled() {
            return;
        }
        let deadline = self.config().wake.deadline;
        let _ = tokio::time::timeout(deadline, self.inner.synced.cancelled()).await;
    }

    /// The current route state of a sandbox (`None` when it is not in the table).
    pub fn route_state(&self, key: &SandboxKey) -> Option<RouteState> {
        self.inner
            .table
            .get(key)
            .map(|slot| slot.state.borrow().route.clone())
    }

    /// Admits a new client connection unless the proxy is at `limits.max_connections`; the
    /// returned value counts it until dropped.
    pub fn admit(&self) -> Result<Admission, ProxyError> {
        self.inner
            .limits
            .admit(self.snapshot().config.limits.max_connections)
    }

    /// Counts one request (L7) or connection (L4) from `ip` against `limits.rate_limit_per_ip`.
    pub fn check_rate(&self, ip: IpAddr) -> Result<(), ProxyError> {
        self.inner
            .limits
            .check_rate(ip, self.snapshot().config.limits.rate_limit_per_ip)
    }

    /// True once the directory has sent its first full list and until draining starts.
    pub fn is_ready(&self) -> bool {
        self.inner.synced.is_cancelled() && !self.inner.draining.load(Ordering::Acquire)
    }

    /// Connections (and L7 requests) open to a sandbox now.
    pub fn open_connections(&self, key: &SandboxKey) -> u64 {
        self.inner
            .table
            .get(key)
            .map_or(0, |slot| slot.activity.open())
    }

    /// Connections held for a wake now, over all sandboxes.
    pub fn held_connections(&self) -> usize {
        self.inner.held.total()
    }

    /// Spawns the task applying the directory's route updates to the table.
    pub fn start_updates(&self) {
        let router = self.clone();
        let mut updates = self.inner.directory.updates();
        let stop = self.inner.background.clone();
        self.inner.background_tasks.spawn(async move {
            use futures::StreamExt;
            loop {
                let update = tokio::select! {
                    update = updates.next() => update,
                    () = stop.cancelled() => return,
                };
                match update {
                    Some(RouteUpdate::Synced) => {
                        router.inner.synced.cancel();
                    }
                    Some(RouteUpdate::Set { key, state }) => {
                        let rc = router.config().wake.release_concurrency;
                        router.inner.table.apply(key, state, rc);
                        metrics::counter!(m::ROUTE_UPDATES_TOTAL).increment(1);
                        metrics::gauge!(m::ROUTES).set(router.inner.table.len() as f64);
                    }
                    None => {
                        tracing::warn!(
                            "the directory's update stream ended; routes stay as they are"
                        );
                        return;
                    }
                }
            }
        });
    }

    /// Starts draining: `/readyz` fails, listeners stop accepting and client connections
    /// finish their in-flight work.
    pub fn start_drain(&self) {
        self.inner.draining.store(true, Ordering::Release);
        self.inner.drain.cancel();
    }

    /// Ends the drain: connections still open are closed.
    pub fn stop_now(&self) {
        self.start_drain();
        self.inner.hard_stop.cancel();
    }

    /// Cancelled when draining starts: stop accepting, finish in-flight work.
    pub fn drain_signal(&self) -> CancellationToken {
        self.inner.drain.clone()
    }

    /// Cancelled when the drain deadline passes: close every connection now.
    pub fn hard_stop(&self) -> CancellationToken {
        self.inner.hard_stop.clone()
    }

    /// Stops background work (route updates, activity reporters) and waits for it.
    pub async fn stop_background(&self) {
        self.inner.background.cancel();
        self.inner.background_tasks.close();
        self.inner.background_tasks.wait().await;
    }

    /// The tracker owning accept loops and per-connection tasks; a drain waits for them.
    pub fn tasks(&self) -> TaskTracker {
        self.inner.tasks.clone()
    }

    /// The tracker owning background work (route updates, wakes, activity, admin).
    pub(crate) fn background_tasks(&self) -> TaskTracker {
        self.inner.background_tasks.clone()
    }

    /// Cancelled when background work must stop.
    pub fn background_stop(&self) -> CancellationToken {
        self.inner.background.clone()
    }

    /// The directory routes come from.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        &self.inner.directory
    }

    /// Hold/wake and connect without counting a connection (the L7 pool counts requests).
    pub(crate) async fn connect_stream(
        &self,
        target: &RouteTarget,
    ) -> Result<(tokio::net::TcpStream, SocketAddr, Arc<Slot>), ProxyError> {
        self.wait_synced().await;
        let slot = self
            .slot(&target.key)
            .ok_or_else(|| ProxyError::UnknownSandbox {
                key: target.key.clone(),
            });
        let slot = slot.inspect_err(count_error)?;
        let (stream, addr) = self.connect_slot(target, &slot).await?;
        Ok((stream, addr, slot))
    }

    /// Hold/wake and connect to a sandbox whose slot is known.
    async fn connect_slot(
        &self,
        target: &RouteTarget,
        slot: &Arc<Slot>,
    ) -> Result<(tokio::net::TcpStream, SocketAddr), ProxyError> {
        connect::connect_slot(self, target, slot)
            .await
            .inspect_err(count_error)
    }

    #[cfg(test)]
    pub(crate) fn table_for_tests(&self) -> &RouteTable {
        &self.inner.table
    }

    pub(crate) fn slot(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.inner.table.get(key)
    }

    pub(crate) fn held_totals(&self) -> &Arc<HeldTotals> {
        &self.inner.held
    }

    /// A guard counting an open connection to a sandbox without dialing (L7 requests ride on
    /// pooled connections); `None` when the sandbox is not in the table.
    pub(crate) fn guard(&self, key: &SandboxKey, kind: ConnKind) -> Option<ConnectionGuard> {
        let slot = self.slot(key)?;
        Some(ConnectionGuard::new(self.clone(), slot, kind))
    }

    pub(crate) fn l7_client(&self) -> &crate::l7::client::UpstreamClient {
        self.inner
            .l7_client
            .get_or_init(|| crate::l7::client::UpstreamClient::new(Arc::downgrade(&self.inner)))
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Self {
        Self { inner }
    }
}

pub(crate) use self::Inner as RouterInner;

/// Counts a connection that could not be proxied, by cause.
fn count_error(err: &ProxyError) {
    metrics::counter!(m::UPSTREAM_ERRORS_TOTAL, "kind" => err.metric_label()).increment(1);
}
