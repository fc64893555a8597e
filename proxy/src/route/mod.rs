//! Routing: the [`Router`] every listener shares — hostname → sandbox ([`Router::resolve_host`]),
//! hold-and-wake and dial ([`Router::connect`]), limits, activity and the config in force.
//!
//! The phases of the request path (see `docs/proxy.md`): accept → classify → **route** →
//! **hold/wake** → **connect** → splice/proxy → account.

mod connect;
mod slot;
mod table;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rouse_shared::names::{SandboxDomains, split_host_port};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use self::connect::Place;
pub use self::slot::RouteTarget;
pub(crate) use self::slot::Slot;
use self::table::RouteTable;
pub use crate::activity::ConnectionGuard;
use crate::config::{Config, ConfigError, ConfigIssue};
use crate::directory::{Directory, RouteState, RouteUpdate, SandboxKey};
use crate::error::ProxyError;
pub use crate::kind::ConnKind;
use crate::limits::{Admission, Limits};
use crate::metrics as m;
use crate::reporter::Reporter;
use crate::wake::HeldTotals;

/// The error of routing calls; the same type as every proxy error.
pub type RouteError = ProxyError;

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

/// The config in force and what is derived from it.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The config.
    pub(crate) config: Arc<Config>,
    domains: SandboxDomains,
    /// Counts reloads, so what was derived from an older config can be told apart.
    pub(crate) generation: u64,
}

impl Snapshot {
    fn new(config: Config, generation: u64) -> Result<Self, ConfigError> {
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
            generation,
        })
    }
}

struct Inner {
    snapshot: RwLock<Arc<Snapshot>>,
    table: RouteTable,
    /// The directory, background tasks and report interval, shared with connection guards.
    reporter: Arc<Reporter>,
    held: Arc<HeldTotals>,
    limits: Limits,
    tasks: TaskTracker,
    drain: CancellationToken,
    hard_stop: CancellationToken,
    /// Cancelled once the directory has sent its first full list (a one-shot start barrier).
    synced: CancellationToken,
    /// `synced` is cancelled: read on every request without the token's lock.
    synced_flag: AtomicBool,
    /// Reloads so far (the generation of the next snapshot).
    reloads: AtomicU64,
    draining: AtomicBool,
    quiescer: crate::quiesce::Quiescer,
    /// What else `/readyz` asks (set once by the embedding, e.g. its store's health).
    readiness: std::sync::OnceLock<ReadinessCheck>,
}

/// A readiness check `/readyz` asks besides the proxy's own: `Ok`, or why not ready.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

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
        let snapshot = Snapshot::new(config, 0)?;
        let reporter = Reporter::new(
            Arc::new(directory),
            snapshot.config.activity.report_interval,
        );
        Ok(Self {
            inner: Arc::new(Inner {
                snapshot: RwLock::new(Arc::new(snapshot)),
                table: RouteTable::default(),
                reporter: Arc::new(reporter),
                held: Arc::new(HeldTotals::default()),
                limits: Limits::new(),
                tasks: TaskTracker::new(),
                drain: CancellationToken::new(),
                hard_stop: CancellationToken::new(),
                synced: CancellationToken::new(),
                synced_flag: AtomicBool::new(false),
                reloads: AtomicU64::new(0),
                draining: AtomicBool::new(false),
                quiescer: crate::quiesce::Quiescer::default(),
                readiness: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Adds `check` to what `/readyz` asks (once; a second call is ignored and returns
    /// false): `rouse up` reports its store's health there.
    pub fn set_readiness_check(&self, check: ReadinessCheck) -> bool {
        self.inner.readiness.set(check).is_ok()
    }

    /// Why `/readyz` fails now, if it does: routes not synced, draining, or the embedding's
    /// check.
    pub fn not_ready(&self) -> Option<String> {
        if !self.is_ready() {
            return Some("routes not synced yet, or draining".to_owned());
        }
        self.inner.readiness.get().and_then(|check| check().err())
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

    /// The config in force with what is derived from it; a request reads it once.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
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
        let generation = self.inner.reloads.fetch_add(1, Ordering::AcqRel) + 1;
        let snapshot = Arc::new(Snapshot::new(config, generation)?);
        self.inner
            .reporter
            .set_report_interval(snapshot.config.activity.report_interval);
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
        Self::resolve_host_in(&self.snapshot(), host)
    }

    /// [`Router::resolve_host`] under the given snapshot.
    pub(crate) fn resolve_host_in(
        snapshot: &Snapshot,
        host: &str,
    ) -> Result<RouteTarget, RouteError> {
        let (host, _listener_port) = split_host_port(host)?;
        let parsed = snapshot.domains.parse(host)?;
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
        let guard = self.guard_of(&slot, kind);
        let (stream, addr) = self.connect_slot(target, &slot, None).await?;
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
        if self.inner.synced_flag.load(Ordering::Acquire) {
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

    /// Admits a new client connection from `ip` unless the proxy is at
    /// `limits.max_connections` or the client's address at `limits.max_connections_per_ip`;
    /// the returned value counts it until dropped.
    pub fn admit(&self, ip: IpAddr) -> Result<Admission, ProxyError> {
        let snapshot = self.snapshot();
        let limits = &snapshot.config.limits;
        let caps = crate::limits::Caps {
            total: limits.max_connections,
            per_client: limits.max_connections_per_ip,
        };
        self.inner.limits.admit(ip, caps)
    }

    /// Client addresses (IPv6: /64 networks) with a connection open now, while
    /// `limits.max_connections_per_ip` counts them.
    pub fn client_addresses(&self) -> usize {
        self.inner.limits.client_addresses()
    }

    /// Client connections admitted and open now, over all listeners.
    pub fn client_connections(&self) -> usize {
        self.inner.limits.client_connections()
    }

    /// Counts one request (L7) or connection (L4) from `ip` against `limits.rate_limit_per_ip`.
    pub fn check_rate(&self, ip: IpAddr) -> Result<(), ProxyError> {
        self.check_rate_under(&self.snapshot().config, ip)
    }

    /// [`Router::check_rate`] under the given config.
    pub(crate) fn check_rate_under(&self, config: &Config, ip: IpAddr) -> Result<(), ProxyError> {
        self.inner
            .limits
            .check_rate(ip, config.limits.rate_limit_per_ip)
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

    /// The live view of a sandbox's traffic: now while a connection to it is open, else when
    /// its last connection opened or closed; `None` when never (or not in the table).
    pub fn last_activity(&self, key: &SandboxKey) -> Option<SystemTime> {
        self.slot(key)?.activity.last_activity()
    }

    /// Spawns the task applying the directory's route updates to the table.
    pub fn start_updates(&self) {
        let router = self.clone();
        let mut updates = self.inner.reporter.directory().updates();
        let stop = self.inner.reporter.stop_signal().clone();
        self.inner.reporter.spawn(async move {
            use futures::StreamExt;
            loop {
                let update = tokio::select! {
                    update = updates.next() => update,
                    () = stop.cancelled() => return,
                };
                match update {
                    Some(RouteUpdate::Synced) => {
                        router.inner.synced.cancel();
                        router.inner.synced_flag.store(true, Ordering::Release);
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
        self.inner.reporter.stop().await;
    }

    /// The tracker owning accept loops and per-connection tasks; a drain waits for them.
    pub fn tasks(&self) -> TaskTracker {
        self.inner.tasks.clone()
    }

    /// The tracker owning background work (route updates, wakes, activity, admin).
    pub(crate) fn background_tasks(&self) -> TaskTracker {
        self.inner.reporter.tasks().clone()
    }

    /// Cancelled when background work must stop.
    pub fn background_stop(&self) -> CancellationToken {
        self.inner.reporter.stop_signal().clone()
    }

    /// The directory routes come from.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        self.inner.reporter.directory()
    }

    /// Hold/wake and connect without counting a connection (the L7 pool counts requests).
    pub(crate) async fn connect_stream(
        &self,
        target: &RouteTarget,
    ) -> Result<(tokio::net::TcpStream, SocketAddr, Arc<Slot>), ProxyError> {
        self.connect_stream_in_place(target, None).await
    }

    /// [`Router::connect_stream`] for a connection that already has `place` in the
    /// sandbox's release semaphore (a compactly held request): its first dial uses it.
    pub(crate) async fn connect_stream_in_place(
        &self,
        target: &RouteTarget,
        place: Option<Place>,
    ) -> Result<(tokio::net::TcpStream, SocketAddr, Arc<Slot>), ProxyError> {
        self.wait_synced().await;
        let slot = self
            .slot(&target.key)
            .ok_or_else(|| ProxyError::UnknownSandbox {
                key: target.key.clone(),
            });
        let slot = slot.inspect_err(count_error)?;
        let (stream, addr) = self.connect_slot(target, &slot, place).await?;
        Ok((stream, addr, slot))
    }

    /// What the hold/wake and connect phases use, under the config in force.
    fn phases<'a>(&'a self, config: &'a Config) -> connect::Phases<'a> {
        connect::Phases {
            wake: &config.wake,
            held: &self.inner.held,
            reporter: &self.inner.reporter,
            drain: &self.inner.drain,
            quiescer: &self.inner.quiescer,
            place: None,
        }
    }

    /// Hold/wake and connect to a sandbox whose slot is known.
    async fn connect_slot(
        &self,
        target: &RouteTarget,
        slot: &Arc<Slot>,
        place: Option<Place>,
    ) -> Result<(tokio::net::TcpStream, SocketAddr), ProxyError> {
        let config = self.config();
        let mut phases = self.phases(&config);
        phases.place = place;
        connect::connect_slot(phases, target, slot)
            .await
            .inspect_err(count_error)
    }

    /// The slot of `target`'s sandbox when a request to it would be held now: the routes are
    /// loaded and it is suspended with wake-on-connect, or starting without an address.
    pub(crate) fn slot_to_hold(&self, target: &RouteTarget) -> Option<Arc<Slot>> {
        if !self.inner.synced_flag.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.slot(&target.key)?;
        let held = matches!(
            slot.state.borrow().route,
            RouteState::Suspended {
                wake_on_connect: true,
                ..
            } | RouteState::Starting { endpoint: None }
        );
        held.then_some(slot)
    }

    /// Hold/wake without dialling: returns once the slot's sandbox is dialable (or with the
    /// error its connection gets), counted as held while it waits. A connection that was
    /// held gets its place in the sandbox's release semaphore: keep it until the dial is done.
    pub(crate) async fn hold_until_dialable(
        &self,
        target: &RouteTarget,
        slot: &Arc<Slot>,
    ) -> Result<Option<Place>, ProxyError> {
        let config = self.config();
        let phases = self.phases(&config);
        match connect::drive(phases, target, slot, connect::Until::Dialable).await {
            Ok(connect::Reached::Dialable(permit)) => Ok(permit),
            // `Until::Dialable` returns before any dial; a dialled stream is closed unused.
            Ok(connect::Reached::Dialled(..)) => Ok(None),
            Err(err) => {
                count_error(&err);
                Err(err)
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn table_for_tests(&self) -> &RouteTable {
        &self.inner.table
    }

    pub(crate) fn slot(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.inner.table.get(key)
    }

    /// Changes whenever a slot enters or leaves the routing table: a slot looked up at the
    /// same version is still the table's slot for its sandbox.
    pub(crate) fn table_version(&self) -> u64 {
        self.inner.table.version()
    }

    /// A guard counting an open connection to a sandbox without dialing (L7 requests ride on
    /// pooled connections); `None` when the sandbox is not in the table.
    pub(crate) fn guard(&self, key: &SandboxKey, kind: ConnKind) -> Option<ConnectionGuard> {
        let slot = self.slot(key)?;
        Some(self.guard_of(&slot, kind))
    }

    /// A guard counting an open connection of `kind` to the slot's sandbox.
    pub(crate) fn guard_of(&self, slot: &Slot, kind: ConnKind) -> ConnectionGuard {
        ConnectionGuard::new(
            Arc::clone(&slot.activity),
            Arc::clone(&self.inner.reporter),
            kind,
        )
    }
}

/// Counts a connection that could not be proxied, by cause.
fn count_error(err: &ProxyError) {
    metrics::counter!(m::UPSTREAM_ERRORS_TOTAL, "kind" => err.metric_label()).increment(1);
}
