//! Routing: the [`Router`] every listener shares, in three parts (after linkerd2-proxy's
//! `Inbound { config, runtime, stack }`):
//!
//! - `settings.rs` — the config in force as one [`Snapshot`] a request reads once, and reloads;
//! - `runtime.rs` — lifecycle (drain, hard stop, readiness, task trackers), admission limits,
//!   held totals, the background reporter and the quiescer;
//! - `routes.rs` — the routing table (`table.rs`, one [`Slot`] per sandbox in `slot.rs`) and
//!   the start barrier.
//!
//! `connect.rs` drives the hold/wake and connect phases for one connection. The `Router`
//! methods are the one facade over the three parts: hostname → sandbox
//! ([`Router::resolve_host`]), hold-and-wake and dial ([`Router::connect`]), limits, activity
//! and the config in force. The phases of the request path are listed in the `l7` module (HTTP)
//! and `docs/architecture.md`.

mod connect;
mod routes;
mod runtime;
mod settings;
mod slot;
mod table;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::SystemTime;

use rouse_shared::names::split_host_port;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::routes::Routes;
pub use self::runtime::ReadinessCheck;
use self::runtime::Runtime;
use self::settings::Settings;
pub(crate) use self::settings::Snapshot;
pub use self::slot::RouteTarget;
pub(crate) use self::slot::Slot;
#[cfg(test)]
use self::table::RouteTable;
pub use crate::activity::ConnectionGuard;
use crate::config::{Config, ConfigError};
use crate::directory::{Directory, RouteState, RouteUpdate, SandboxKey};
use crate::error::ProxyError;
pub use crate::kind::ConnKind;
use crate::limits::Admission;
use crate::metrics as m;
use crate::reporter::Reporter;

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

/// The three parts of the router (after linkerd2-proxy's `Inbound { config, runtime, stack }`).
struct Inner {
    /// The config in force and its reloads.
    settings: Settings,
    /// Lifecycle, limits, held totals, background work and the quiescer.
    runtime: Runtime,
    /// The routing table and its start barrier.
    routes: Routes,
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
            .field("routes", &self.inner.routes.table.len())
            .finish_non_exhaustive()
    }
}

impl Router {
    /// A router for `config`, fed by `directory` once [`Router::start_updates`] runs.
    pub fn new(config: Config, directory: impl Directory) -> Result<Self, ConfigError> {
        let settings = Settings::new(config)?;
        let interval = settings.current().config.activity.report_interval;
        let reporter = Reporter::new(Arc::new(directory), interval);
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                runtime: Runtime::new(reporter),
                routes: Routes::default(),
            }),
        })
    }

    /// Adds `check` to what `/readyz` asks (once; a second call is ignored and returns
    /// false): `rouse up` reports its store's health there.
    pub fn set_readiness_check(&self, check: ReadinessCheck) -> bool {
        self.inner.runtime.set_readiness_check(check)
    }

    /// Why `/readyz` fails now, if it does: routes not synced, draining, or the embedding's
    /// check.
    pub fn not_ready(&self) -> Option<String> {
        if !self.is_ready() {
            return Some("routes not synced yet, or draining".to_owned());
        }
        self.inner.runtime.embedding_ready().err()
    }

    /// Resets and holds upstream connections around a checkpoint of a sandbox (see
    /// [`crate::quiesce`]).
    pub fn quiescer(&self) -> &crate::quiesce::Quiescer {
        &self.inner.runtime.quiescer
    }

    /// The config in force.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.snapshot().config)
    }

    /// The config in force with what is derived from it; a request reads it once.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.settings.current()
    }

    /// Puts a new config in force at once; connections in flight keep the values they read.
    /// Listener addresses are not rebound (see `Proxy::reload`).
    pub fn reload(&self, config: Config) -> Result<(), ConfigError> {
        let snapshot = self.inner.settings.reload(config)?;
        self.inner
            .runtime
            .reporter
            .set_report_interval(snapshot.config.activity.report_interval);
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
        if self.inner.routes.is_synced() {
            return;
        }
        let deadline = self.config().wake.deadline;
        self.inner.routes.wait_synced(deadline).await;
    }

    /// The current route state of a sandbox (`None` when it is not in the table).
    pub fn route_state(&self, key: &SandboxKey) -> Option<RouteState> {
        self.slot(key).map(|slot| slot.state.borrow().route.clone())
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
        self.inner.runtime.limits.admit(ip, caps)
    }

    /// Client addresses (IPv6: /64 networks) with a connection open now, while
    /// `limits.max_connections_per_ip` counts them.
    pub fn client_addresses(&self) -> usize {
        self.inner.runtime.limits.client_addresses()
    }

    /// Client connections admitted and open now, over all listeners.
    pub fn client_connections(&self) -> usize {
        self.inner.runtime.limits.client_connections()
    }

    /// Counts one request (L7) or connection (L4) from `ip` against `limits.rate_limit_per_ip`.
    pub fn check_rate(&self, ip: IpAddr) -> Result<(), ProxyError> {
        self.check_rate_under(&self.snapshot().config, ip)
    }

    /// [`Router::check_rate`] under the given config.
    pub(crate) fn check_rate_under(&self, config: &Config, ip: IpAddr) -> Result<(), ProxyError> {
        self.inner
            .runtime
            .limits
            .check_rate(ip, config.limits.rate_limit_per_ip)
    }

    /// True once the directory has sent its first full list and until draining starts.
    pub fn is_ready(&self) -> bool {
        self.inner.routes.is_synced() && !self.inner.runtime.draining()
    }

    /// Connections (and L7 requests) open to a sandbox now.
    pub fn open_connections(&self, key: &SandboxKey) -> u64 {
        self.slot(key).map_or(0, |slot| slot.activity.open())
    }

    /// Connections held for a wake now, over all sandboxes.
    pub fn held_connections(&self) -> usize {
        self.inner.runtime.held.total()
    }

    /// The live view of a sandbox's traffic: now while a connection to it is open, else when
    /// its last connection opened or closed; `None` when never (or not in the table).
    pub fn last_activity(&self, key: &SandboxKey) -> Option<SystemTime> {
        self.slot(key)?.activity.last_activity()
    }

    /// Spawns the task applying the directory's route updates to the table.
    pub fn start_updates(&self) {
        let router = self.clone();
        let mut updates = self.inner.runtime.reporter.directory().updates();
        let stop = self.inner.runtime.reporter.stop_signal().clone();
        self.inner.runtime.reporter.spawn(async move {
            use futures::StreamExt;
            loop {
                let update = tokio::select! {
                    update = updates.next() => update,
                    () = stop.cancelled() => return,
                };
                match update {
                    Some(RouteUpdate::Synced) => {
                        router.inner.routes.mark_synced();
                    }
                    Some(RouteUpdate::Set { key, state }) => {
                        let rc = router.config().wake.release_concurrency;
                        let table = &router.inner.routes.table;
                        table.apply(key, state, rc);
                        metrics::counter!(m::ROUTE_UPDATES_TOTAL).increment(1);
                        metrics::gauge!(m::ROUTES).set(table.len() as f64);
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
        self.inner.runtime.start_drain();
    }

    /// Ends the drain: connections still open are closed.
    pub fn stop_now(&self) {
        self.inner.runtime.stop_now();
    }

    /// Cancelled when draining starts: stop accepting, finish in-flight work.
    pub fn drain_signal(&self) -> CancellationToken {
        self.inner.runtime.drain.clone()
    }

    /// Cancelled when the drain deadline passes: close every connection now.
    pub fn hard_stop(&self) -> CancellationToken {
        self.inner.runtime.hard_stop.clone()
    }

    /// Stops background work (route updates, activity reporters) and waits for it.
    pub async fn stop_background(&self) {
        self.inner.runtime.reporter.stop().await;
    }

    /// The tracker owning accept loops and per-connection tasks; a drain waits for them.
    pub fn tasks(&self) -> TaskTracker {
        self.inner.runtime.tasks.clone()
    }

    /// The tracker owning background work (route updates, wakes, activity, admin).
    pub(crate) fn background_tasks(&self) -> TaskTracker {
        self.inner.runtime.reporter.tasks().clone()
    }

    /// Cancelled when background work must stop.
    pub fn background_stop(&self) -> CancellationToken {
        self.inner.runtime.reporter.stop_signal().clone()
    }

    /// The directory routes come from.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        self.inner.runtime.reporter.directory()
    }

    /// Hold/wake and connect without counting a connection (the L7 codecs count requests).
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

    /// What the hold/wake and connect phases use, under the config in force.
    fn phases<'a>(&'a self, config: &'a Config) -> connect::Phases<'a> {
        connect::Phases {
            wake: &config.wake,
            held: &self.inner.runtime.held,
            reporter: &self.inner.runtime.reporter,
            drain: &self.inner.runtime.drain,
            quiescer: &self.inner.runtime.quiescer,
        }
    }

    /// Hold/wake and connect to a sandbox whose slot is known.
    async fn connect_slot(
        &self,
        target: &RouteTarget,
        slot: &Arc<Slot>,
    ) -> Result<(tokio::net::TcpStream, SocketAddr), ProxyError> {
        let config = self.config();
        connect::connect_slot(self.phases(&config), target, slot)
            .await
            .inspect_err(count_error)
    }

    /// The slot of `key` once the routes are loaded (`None` before the directory's first full
    /// list, or when the sandbox is not in the table): what a connection that must not wait
    /// for the start barrier may route by.
    pub(crate) fn loaded_slot(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        if !self.inner.routes.is_synced() {
            return None;
        }
        self.slot(key)
    }

    /// The hold/wake phase, and the connect phase when `dial`: waits until the slot's
    /// sandbox is dialable (waking it if suspended), counted as held while it waits, then
    /// dials it (`Some`) or returns without dialling (`None`, the caller dials later).
    pub(crate) async fn hold(
        &self,
        target: &RouteTarget,
        slot: &Arc<Slot>,
        dial: bool,
    ) -> Result<Option<(tokio::net::TcpStream, SocketAddr)>, ProxyError> {
        let config = self.config();
        let until = if dial {
            connect::Until::Dialled
        } else {
            connect::Until::Dialable
        };
        match connect::drive(self.phases(&config), target, slot, until).await {
            Ok(connect::Reached::Dialled(stream, addr)) => Ok(Some((stream, addr))),
            Ok(connect::Reached::Dialable) => Ok(None),
            Err(err) => {
                count_error(&err);
                Err(err)
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn table_for_tests(&self) -> &RouteTable {
        &self.inner.routes.table
    }

    pub(crate) fn slot(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.inner.routes.slot(key)
    }

    /// Changes whenever a slot enters or leaves the routing table: a slot looked up at the
    /// same version is still the table's slot for its sandbox.
    pub(crate) fn table_version(&self) -> u64 {
        self.inner.routes.table.version()
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
            Arc::clone(&self.inner.runtime.reporter),
            kind,
        )
    }
}

/// Counts a connection that could not be proxied, by cause.
fn count_error(err: &ProxyError) {
    metrics::counter!(m::UPSTREAM_ERRORS_TOTAL, "kind" => err.metric_label()).increment(1);
}
