//! What every handler shares ([`ApiState`]: the store, the config, the stream budget), the
//! store the API needs ([`ApiStore`]) and the errors of the API's setup calls: the leaf the
//! handlers, the router and the server all import.

use std::path::PathBuf;
use std::sync::Arc;

use rouse_shared::api::{Sandbox, SandboxClaim, SandboxSnapshot, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::Store;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::config::ApiConfig;

/// A readiness check: `Ok` when ready, else why not.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A store holding every kind the API serves.
pub trait ApiStore:
    Store<Sandbox>
    + Store<SandboxTemplate>
    + Store<SandboxWarmPool>
    + Store<SandboxClaim>
    + Store<SandboxSnapshot>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> ApiStore for S where
    S: Store<Sandbox>
        + Store<SandboxTemplate>
        + Store<SandboxWarmPool>
        + Store<SandboxClaim>
        + Store<SandboxSnapshot>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Why serving the API or handling its token failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Accepting or serving connections failed.
    #[error("serving the REST API failed")]
    Serve(#[source] std::io::Error),
    /// The token file exists but cannot be read.
    #[error("cannot read the API token file {}", path.display())]
    ReadToken {
        /// The token file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The token file cannot be created or written.
    #[error("cannot write the API token file {}", path.display())]
    WriteToken {
        /// The token file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The token file is empty.
    #[error("the API token file {} is empty; delete it to make a new token", path.display())]
    EmptyToken {
        /// The token file.
        path: PathBuf,
    },
}

impl Error {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Serve(_) => "serve",
            Error::ReadToken { .. } => "read_token",
            Error::WriteToken { .. } => "write_token",
            Error::EmptyToken { .. } => "empty_token",
        }
    }
}

/// Result of the API's setup calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What every handler shares: the store, the config and the stream budget.
#[derive(Clone)]
pub struct ApiState<S> {
    pub(super) store: S,
    pub(super) config: Arc<ApiConfig>,
    pub(super) streams: Arc<Semaphore>,
    pub(super) shutdown: CancellationToken,
    pub(super) readiness: Option<ReadinessCheck>,
}

impl<S: ApiStore> ApiState<S> {
    /// State serving `store` with `config`.
    pub fn new(store: S, config: ApiConfig) -> Self {
        Self {
            store,
            streams: Arc::new(Semaphore::new(config.max_streams)),
            config: Arc::new(config),
            shutdown: CancellationToken::new(),
            readiness: None,
        }
    }

    /// `/readyz` answers `503` with the reason while `check` fails (e.g. the store's health);
    /// without a check it answers `200` whenever the API serves.
    #[must_use]
    pub fn with_readiness(mut self, check: ReadinessCheck) -> Self {
        self.readiness = Some(check);
        self
    }

    /// The config in force.
    pub fn config(&self) -> &ApiConfig {
        &self.config
    }
}
