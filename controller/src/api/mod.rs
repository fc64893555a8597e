//! The REST API: the sandbox kinds over HTTP with Kubernetes semantics, on any [`Store`].
//!
//! Routes (all but `/healthz` need `Authorization: Bearer <token>` when a token is set):
//! `/v1/namespaces/{ns}/{plural}` (list, watch, create), `/v1/{plural}` (all namespaces),
//! `/v1/namespaces/{ns}/{plural}/{name}` (get, replace, merge patch, delete) with the `status`,
//! `suspend`, `resume` and `log` subresources, and `/openapi.json`. Errors are Kubernetes
//! `Status` objects; `docs/rest-api.md` describes every route.

mod auth;
mod body;
mod check;
mod kinds;
mod logs;
mod merge;
mod openapi;
mod routes;
mod selector;
mod status;
#[cfg(test)]
mod tests;
mod update;
mod watch;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxSnapshot, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::Store;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use auth::load_or_create_token;
pub use kinds::Kind;
pub(crate) use kinds::dispatch;
pub use merge::merge_patch;
pub use selector::{FieldSelector, parse_field_selector, parse_label_selector};
pub use status::{Failure, Reply, Subject};

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

/// Settings of the REST API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Address to listen on; default `127.0.0.1:7070`. `serve` takes a bound listener, so this
    /// is what the caller binds.
    pub listen: SocketAddr,
    /// The bearer token every request but `/healthz` must carry; `None` disables auth
    /// (`--no-auth`).
    pub token: Option<String>,
    /// The data directory; workload logs are read from `{data}/logs/`.
    pub data_dir: PathBuf,
    /// Largest request body accepted, in bytes; default 1 MiB (larger: 413).
    pub max_body_bytes: usize,
    /// Most watch and log-follow streams open at once; default 256 (more: 503).
    pub max_streams: usize,
    /// Longest a watch or log follow stays open; default 30 minutes (clients reconnect).
    pub max_stream_duration: Duration,
    /// How often a followed log file is checked for new output; default 200ms.
    pub log_poll_interval: Duration,
}

impl ApiConfig {
    /// The default address: `127.0.0.1:7070`.
    pub const DEFAULT_LISTEN: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 7070);

    /// A config with the given token and data directory and defaults for the rest.
    pub fn new(token: Option<String>, data_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: Self::DEFAULT_LISTEN,
            token,
            data_dir: data_dir.into(),
            max_body_bytes: 1024 * 1024,
            max_streams: 256,
            max_stream_duration: Duration::from_secs(30 * 60),
            log_poll_interval: Duration::from_millis(200),
        }
    }
}

/// What every handler shares: the store, the config and the stream budget.
#[derive(Clone)]
pub struct ApiState<S> {
    store: S,
    config: Arc<ApiConfig>,
    streams: Arc<Semaphore>,
    shutdown: CancellationToken,
}

impl<S: ApiStore> ApiState<S> {
    /// State serving `store` with `config`.
    pub fn new(store: S, config: ApiConfig) -> Self {
        Self {
            store,
            streams: Arc::new(Semaphore::new(config.max_streams)),
            config: Arc::new(config),
            shutdown: CancellationToken::new(),
        }
    }

    /// The config in force.
    pub fn config(&self) -> &ApiConfig {
        &self.config
    }
}

/// The API as an axum router; streams end when `shutdown` is cancelled.
pub fn router<S: ApiStore>(mut state: ApiState<S>, shutdown: CancellationToken) -> Router {
    state.shutdown = shutdown;
    let token = Arc::new(state.config.token.clone());
    let one = "/v1/namespaces/{ns}/{plural}/{name}";
    let api = Router::new()
        .route("/openapi.json", get(openapi::serve))
        .route("/v1/{plural}", get(routes::list_all::<S>))
        .route(
            "/v1/namespaces/{ns}/{plural}",
            get(routes::list::<S>).post(routes::create::<S>),
        )
        .route(
            one,
            get(routes::get::<S>)
                .put(update::replace::<S>)
                .patch(update::patch::<S>)
                .delete(routes::delete::<S>),
        )
        .route(
            &format!("{one}/status"),
            get(routes::get_status::<S>).patch(update::patch_status::<S>),
        )
        .route(&format!("{one}/suspend"), post(update::suspend::<S>))
        .route(&format!("{one}/resume"), post(update::resume::<S>))
        .route(&format!("{one}/log"), get(logs::log::<S>))
        .layer(middleware::from_fn_with_state(token, auth::require_token));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(api)
        .fallback(|request: Request| async move {
            Failure::no_route(request.uri().path()).into_response()
        })
        .method_not_allowed_fallback(|request: Request| async move {
            Failure::method_not_allowed(request.method().as_str()).into_response()
        })
        .layer(middleware::from_fn(count_requests))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` is cancelled, then drains open requests
/// (open watches and log follows end at once).
///
/// # Example
/// ```no_run
/// # async fn run(store: impl rouse_controller::api::ApiStore) -> Result<(), rouse_controller::api::Error> {
/// use rouse_controller::api::{ApiConfig, ApiState, serve};
/// let config = ApiConfig::new(Some("secret".into()), "/var/lib/rouse");
/// let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(rouse_controller::api::Error::Serve)?;
/// serve(listener, ApiState::new(store, config), tokio_util::sync::CancellationToken::new()).await
/// # }
/// ```
pub async fn serve<S: ApiStore>(
    listener: TcpListener,
    state: ApiState<S>,
    shutdown: CancellationToken,
) -> Result<()> {
    let app = router(state, shutdown.clone());
    tracing::info!(api.addr = ?listener.local_addr().ok(), "rest api listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(Error::Serve)
}

/// Counts every request by method and status code and times it.
async fn count_requests(request: Request, next: Next) -> Response {
    let method = match *request.method() {
        axum::http::Method::GET => "GET",
        axum::http::Method::POST => "POST",
        axum::http::Method::PUT => "PUT",
        axum::http::Method::PATCH => "PATCH",
        axum::http::Method::DELETE => "DELETE",
        _ => "other",
    };
    let started = Instant::now();
    let response = next.run(request).await;
    let code = response.status().as_u16().to_string();
    metrics::counter!("rouse_controller_api_requests_total", "method" => method, "code" => code)
        .increment(1);
    metrics::histogram!("rouse_controller_api_request_duration_seconds", "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}
