//! [`StaticDirectory`]: fixed routes from the config file, replaceable on reload.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::{self, BoxFuture, FutureExt};
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::watch;

use super::contract::{
    ActivityReport, Directory, Endpoint, PortMapping, Result, RouteState, RouteUpdate, SandboxKey,
};
use crate::config::{StaticRouteConfig, StaticRouteState};

type Routes = Arc<BTreeMap<SandboxKey, RouteState>>;

/// Routes to fixed addresses, from `[[directory.routes]]`.
///
/// Waking does nothing by itself: a `suspended` route holds connections until the routes are
/// replaced (a config reload) or the wake deadline passes.
///
/// The directory numbers suspensions itself (the `generation` of `Suspended`): a route that
/// becomes suspended gets a new number, so the proxy tells a new suspension from an old one
/// even when it never saw the states in between (updates coalesce when it lags).
#[derive(Debug, Clone)]
pub struct StaticDirectory {
    routes: Arc<watch::Sender<Routes>>,
    wakes: Arc<AtomicU64>,
    generations: Arc<AtomicU64>,
}

impl StaticDirectory {
    /// A directory serving these routes.
    pub fn new(routes: &[StaticRouteConfig]) -> Self {
        let (tx, _) = watch::channel(Arc::new(BTreeMap::new()));
        let directory = Self {
            routes: Arc::new(tx),
            wakes: Arc::new(AtomicU64::new(0)),
            generations: Arc::new(AtomicU64::new(0)),
        };
        directory.replace(routes);
        directory
    }

    /// Replaces the routes; subscribers get the differences.
    pub fn replace(&self, routes: &[StaticRouteConfig]) {
        self.routes.send_modify(|current| {
            let next = to_states(routes)
                .into_iter()
                .map(|(key, state)| {
                    let state = self.numbered(current.get(&key), state);
                    (key, state)
                })
                .collect();
            *current = Arc::new(next);
        });
    }

    /// Sets one sandbox's state (`Missing` removes it).
    pub fn set(&self, key: SandboxKey, state: RouteState) {
        self.routes.send_modify(|routes| {
            let map = Arc::make_mut(routes);
            if state == RouteState::Missing {
                map.remove(&key);
            } else {
                let state = self.numbered(map.get(&key), state);
                map.insert(key, state);
            }
        });
    }

    /// `new` with its suspension numbered: the old number when the route was already so
    /// suspended, else the next one.
    fn numbered(&self, old: Option<&RouteState>, new: RouteState) -> RouteState {
        let RouteState::Suspended {
            wake_on_connect, ..
        } = new
        else {
            return new;
        };
        let generation = match old {
            Some(RouteState::Suspended {
                wake_on_connect: was,
                generation,
                ..
            }) if *was == wake_on_connect => *generation,
            _ => self.generations.fetch_add(1, Ordering::Relaxed) + 1,
        };
        RouteState::Suspended {
            wake_on_connect,
            generation,
            uid: String::new(),
        }
    }

    /// How many wakes were asked for.
    pub fn wake_count(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// The route state of each configured route.
fn to_states(routes: &[StaticRouteConfig]) -> BTreeMap<SandboxKey, RouteState> {
    routes
        .iter()
        .map(|route| {
            let state = match route.state {
                StaticRouteState::Running => RouteState::Running {
                    endpoint: Endpoint {
                        address: route.address.clone(),
                        ports: route
                            .ports
                            .iter()
                            .map(|&port| PortMapping {
                                container_port: port,
                                port,
                            })
                            .collect(),
                    },
                },
                StaticRouteState::Suspended => RouteState::suspended(true),
                StaticRouteState::Disabled => RouteState::suspended(false),
                StaticRouteState::Failed => RouteState::Failed {
                    reason: route
                        .reason
                        .clone()
                        .unwrap_or_else(|| "marked failed in the proxy config".to_owned()),
                },
            };
            (route.sandbox.clone(), state)
        })
        .collect()
}

/// The updates that turn `old` into `new`.
pub(crate) fn diff(
    old: &BTreeMap<SandboxKey, RouteState>,
    new: &BTreeMap<SandboxKey, RouteState>,
) -> Vec<RouteUpdate> {
    let gone = old
        .keys()
        .filter(|key| !new.contains_key(*key))
        .map(|key| RouteUpdate::Set {
            key: key.clone(),
            state: RouteState::Missing,
        });
    let changed = new
        .iter()
        .filter(|(key, state)| old.get(*key) != Some(*state))
        .map(|(key, state)| RouteUpdate::Set {
            key: key.clone(),
            state: state.clone(),
        });
    gone.chain(changed).collect()
}

impl Directory for StaticDirectory {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        let rx = self.routes.subscribe();
        let state = (rx, Arc::new(BTreeMap::new()), true);
        stream::unfold(
            state,
            |(mut rx, last, first): (_, Routes, bool)| async move {
                if !first && rx.changed().await.is_err() {
                    return None;
                }
                let now = rx.borrow_and_update().clone();
                let mut batch = diff(&last, &now);
                if first {
                    batch.push(RouteUpdate::Synced);
                }
                Some((stream::iter(batch), (rx, now, false)))
            },
        )
        .flatten()
        .boxed()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(sandbox.key = %key, "wake asked of a static route; it changes on reload only");
        future::ready(Ok(())).boxed()
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        tracing::trace!(sandbox.key = %key, activity.open = report.connections_open, "activity");
        future::ready(Ok(())).boxed()
    }
}
