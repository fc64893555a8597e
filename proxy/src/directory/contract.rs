//! The [`Directory`] port and the values it carries: route states and updates, endpoints,
//! activity reports and errors. A leaf of the directory module, so the implementations beside
//! it depend on it and not on each other or the facade.

use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use rouse_shared::store::{ObjectKey, StoreError};

/// A sandbox's namespace and name.
pub type SandboxKey = ObjectKey;

/// Where to dial a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// IP address or host name.
    pub address: String,
    /// Declared ports and where to dial each; the first is the default port.
    pub ports: Vec<PortMapping>,
}

/// One declared container port and the port to dial for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMapping {
    /// The port clients name (`{port}-name...` hosts, `X-Sandbox-Port`).
    pub container_port: u16,
    /// The port dialled at the endpoint's address.
    pub port: u16,
}

impl Endpoint {
    /// The port to dial for a requested container port (`None` = the default port), or `None`
    /// when the sandbox declares no such port.
    pub fn dial_port(&self, container_port: Option<u16>) -> Option<u16> {
        match container_port {
            None => self.ports.first().map(|p| p.port),
            Some(wanted) => self
                .ports
                .iter()
                .find(|p| p.container_port == wanted)
                .map(|p| p.port),
        }
    }
}

/// What the proxy should do with connections to a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteState {
    /// Ready: dial the endpoint.
    Running {
        /// Where to dial.
        endpoint: Endpoint,
    },
    /// Coming up: hold connections; dial as soon as the endpoint is known.
    Starting {
        /// Where to dial, once known.
        endpoint: Option<Endpoint>,
    },
    /// Suspended (its desired mode): wake it and hold connections, unless wake-on-connect is off.
    Suspended {
        /// Whether a connection may wake it.
        wake_on_connect: bool,
        /// The sandbox's `metadata.generation` as seen suspended. A later suspension differs
        /// (a wake and a new suspend each bump it), so it is told apart from this one even when
        /// the states in between were never seen (watch lag, relist, coalesced updates).
        generation: u64,
        /// The sandbox's `metadata.uid`: a sandbox deleted and created again under the same
        /// name is a new suspension even at the same generation.
        uid: String,
    },
    /// No such sandbox.
    Missing,
    /// The sandbox cannot serve (its workload failed or expired).
    Failed {
        /// Why, for the client.
        reason: String,
    },
}

impl RouteState {
    /// A suspended state of generation 0 and no uid (static routes and tests; see
    /// `Suspended`).
    pub fn suspended(wake_on_connect: bool) -> Self {
        RouteState::Suspended {
            wake_on_connect,
            generation: 0,
            uid: String::new(),
        }
    }

    /// Whether the desired mode is Suspended and a connection may wake it.
    pub fn is_wakeable(&self) -> bool {
        matches!(
            self,
            RouteState::Suspended {
                wake_on_connect: true,
                ..
            }
        )
    }
}

/// One change of the routing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteUpdate {
    /// The sandbox's state is now this (`Missing` removes it).
    Set {
        /// The sandbox.
        key: SandboxKey,
        /// Its new state.
        state: RouteState,
    },
    /// All sandboxes known at this point have been sent (after the first list and every
    /// relist); the proxy is ready once it has seen one.
    Synced,
}

/// Traffic seen for one sandbox since its previous report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityReport {
    /// When the report was made.
    pub at: SystemTime,
    /// Bytes sent to the sandbox since the previous report.
    pub bytes_to_upstream: u64,
    /// Bytes sent to clients since the previous report.
    pub bytes_to_client: u64,
    /// Connections opened since the previous report.
    pub connections_opened: u64,
    /// Connections open now.
    pub connections_open: u64,
}

/// Why a directory call failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The store refused or failed the call.
    #[error("store call for sandbox {key} failed: {source}")]
    Store {
        /// The sandbox.
        key: SandboxKey,
        /// What the store said.
        #[source]
        source: StoreError,
    },
    /// The directory has no such sandbox.
    #[error("sandbox {key} is not in the directory")]
    NotFound {
        /// The sandbox.
        key: SandboxKey,
    },
}

impl DirectoryError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            DirectoryError::Store { source, .. } => source.metric_label(),
            DirectoryError::NotFound { .. } => "not_found",
        }
    }
}

/// Result of a directory call.
pub type Result<T, E = DirectoryError> = std::result::Result<T, E>;

/// The proxy's source of routes, and where it sends wakes and activity.
pub trait Directory: Send + Sync + 'static {
    /// A stream of route updates: the current state of every sandbox, then [`RouteUpdate::Synced`],
    /// then changes. Called once per proxy; it should not end (relisting is the directory's job).
    fn updates(&self) -> BoxStream<'static, RouteUpdate>;

    /// Asks for a suspended sandbox to run.
    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>>;

    /// Records traffic for a sandbox.
    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>>;
}

impl<D: Directory + ?Sized> Directory for Arc<D> {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        (**self).updates()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        (**self).wake(key)
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        (**self).report_activity(key, report)
    }
}
