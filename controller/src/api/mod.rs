//! The REST API: the sandbox kinds over HTTP with Kubernetes semantics, on any [`Store`](rouse_shared::store::Store).
//!
//! Routes (all but `/healthz` and `/readyz` need `Authorization: Bearer <token>` when a token is set):
//! `/v1/namespaces/{ns}/{plural}` (list, watch, create), `/v1/{plural}` (all namespaces),
//! `/v1/namespaces/{ns}/{plural}/{name}` (get, replace, merge patch, delete) with the `status`,
//! `suspend`, `resume` and `log` subresources, and `/openapi.json`. The same routes answer under
//! the Kubernetes prefix `/apis/{group}/{version}`, so Kubernetes client libraries work too.
//! Errors are Kubernetes `Status` objects; `docs/rest-api.md` describes every route.

mod apply;
mod auth;
mod body;
mod bounds;
mod check;
mod config;
mod delete;
mod discovery;
mod freshness;
mod health;
mod inflight;
mod kinds;
mod kubeconfig;
mod logs;
mod merge;
mod openapi;
mod openapi_v3;
mod page;
mod patch;
mod query;
mod routes;
mod scale;
mod selector;
mod state;
mod status;
mod table;
mod target;
#[cfg(test)]
mod tests;
mod tls;
mod update;
mod watch;
mod write;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use auth::load_or_create_token;
pub use config::ApiConfig;
pub use kinds::Kind;
pub use kubeconfig::{KUBECONFIG_CONTEXT, kubeconfig, write_kubeconfig};
pub use merge::merge_patch;
pub use selector::{FieldSelector, parse_field_selector, parse_label_selector};
pub use state::{ApiState, ApiStore, Error, ReadinessCheck, Result};
pub use status::{Failure, Reply, Subject};
pub use tls::{ApiTls, TlsError, load_or_create_tls};

/// The API as an axum router; streams end when `shutdown` is cancelled.
pub fn router<S: ApiStore>(mut state: ApiState<S>, shutdown: CancellationToken) -> Router {
    state.shutdown = shutdown;
    let token = Arc::new(state.config.token.clone());
    let mut api = Router::new()
        .route("/openapi.json", get(openapi::serve))
        .route("/version", get(discovery::version))
        .route("/openapi/v3", get(openapi_v3::index))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(openapi_v3::group_version),
        )
        .route("/api", get(discovery::core_versions))
        .route("/apis", get(discovery::groups))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::resources));
    // The same routes under Rouse's short prefix and under the Kubernetes path of each group
    // and version, so Kubernetes clients given this server's address work unchanged.
    for prefix in ["/v1", "/apis/{group}/{version}"] {
        let one = format!("{prefix}/namespaces/{{ns}}/{{plural}}/{{name}}");
        api = api
            .route(&format!("{prefix}/{{plural}}"), get(routes::list::<S>))
            .route(
                &format!("{prefix}/namespaces/{{ns}}/{{plural}}"),
                get(routes::list::<S>).post(routes::create::<S>),
            )
            .route(
                &one,
                get(routes::get::<S>)
                    .put(update::replace::<S>)
                    .patch(update::patch::<S>)
                    .delete(delete::delete::<S>),
            )
            .route(
                &format!("{one}/status"),
                get(routes::get_status::<S>)
                    .put(update::replace_status::<S>)
                    .patch(update::patch_status::<S>),
            )
            .route(
                &format!("{one}/scale"),
                get(scale::get::<S>)
                    .put(scale::update::<S>)
                    .patch(scale::update::<S>),
            )
            .route(&format!("{one}/suspend"), post(update::suspend::<S>))
            .route(&format!("{one}/resume"), post(update::resume::<S>))
            .route(&format!("{one}/log"), get(logs::log::<S>));
    }
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(health::readyz::<S>))
        .merge(api)
        .fallback(|request: Request| async move {
            Failure::no_route(request.uri().path()).into_response()
        })
        .method_not_allowed_fallback(|request: Request| async move {
            Failure::method_not_allowed(request.method().as_str()).into_response()
        })
        // Inside authentication: an unauthenticated client takes no write's turn.
        .layer(middleware::from_fn_with_state(
            inflight::WriteLimit::new(state.config.max_writes_in_flight, state.config.write_wait),
            inflight::limit_writes,
        ))
        // Authentication wraps routing, so an unauthenticated client gets 401 for every path
        // and cannot probe which paths exist.
        .layer(middleware::from_fn_with_state(token, auth::require_token))
        .layer(middleware::from_fn(count_requests))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` is cancelled, then drains open requests for
/// at most [`ApiConfig::drain_timeout`] (open watches and log follows end at once).
///
/// # Example
/// ```no_run
/// # async fn run(store: impl rouse_controller::api::ApiStore) -> Result<(), rouse_controller::api::Error> {
/// use rouse_controller::api::{ApiConfig, ApiState, Error, serve};
/// let config = ApiConfig::new(Some("secret".into()), "/var/lib/rouse");
/// let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(Error::Serve)?;
/// serve(listener, ApiState::new(store, config), tokio_util::sync::CancellationToken::new()).await
/// # }
/// ```
pub async fn serve<S: ApiStore>(
    listener: TcpListener,
    state: ApiState<S>,
    shutdown: CancellationToken,
) -> Result<()> {
    let config = state.config.clone();
    let app = router(state, shutdown.clone());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout);
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let tls = config
        .tls
        .as_ref()
        .map(|tls| tokio_rustls::TlsAcceptor::from(tls.server.clone()));
    let mut connections = JoinSet::new();
    tracing::info!(api.addr = ?listener.local_addr().ok(), api.tls = tls.is_some(), "rest api listening");
    loop {
        // Reap finished connections so the set stays as small as the open ones.
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            () = shutdown.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: count, back off briefly, go on.
                    metrics::counter!("rouse_controller_api_accept_errors_total").increment(1);
                    tracing::warn!(error = %e, "accepting an api connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(app.clone());
        let (builder, shutdown) = (builder.clone(), shutdown.clone());
        let header_timeout = config.header_read_timeout;
        let tls = tls.clone();
        let span = tracing::debug_span!("api_connection", client.addr = %peer);
        connections.spawn(
            async move {
                // hyper's header timeout starts with the first byte (the protocol detection
                // waits before it), so a client that sends nothing would hold its slot for
                // ever: the timeout runs from accept.
                if !first_byte(&stream, header_timeout).await {
                    metrics::counter!("rouse_controller_api_silent_connections_closed_total")
                        .increment(1);
                    drop(slot);
                    return;
                }
                match tls {
                    None => serve_connection(&builder, stream, service, &shutdown).await,
                    Some(acceptor) => {
                        // The handshake shares the header deadline: a client that stalls in
                        // it frees its slot as one that sends no headers does.
                        let handshake =
                            tokio::time::timeout(header_timeout, acceptor.accept(stream)).await;
                        match handshake {
                            Ok(Ok(stream)) => {
                                serve_connection(&builder, stream, service, &shutdown).await;
                            }
                            Ok(Err(e)) => {
                                metrics::counter!(
                                    "rouse_controller_api_tls_handshake_errors_total"
                                )
                                .increment(1);
                                tracing::debug!(error = %e, "api tls handshake failed");
                            }
                            Err(_) => {
                                metrics::counter!(
                                    "rouse_controller_api_tls_handshake_errors_total"
                                )
                                .increment(1);
                                tracing::debug!("api tls handshake timed out");
                            }
                        }
                    }
                }
                drop(slot);
            }
            .instrument(span),
        );
    }
    drop(listener);
    let drained = async { while connections.join_next().await.is_some() {} };
    tokio::select! {
        () = drained => {}
        () = tokio::time::sleep(config.drain_timeout) => {
            tracing::warn!(api.open_connections = connections.len(), "api connections still open after the drain timeout; closing them");
        }
    }
    connections.shutdown().await;
    Ok(())
}

/// Serves one connection (plain or TLS) until it ends, draining it gracefully on shutdown.
async fn serve_connection<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    service: TowerToHyperService<Router>,
    shutdown: &CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "api connection ended with an error");
    }
}

/// Waits until the client sent its first byte (or closed), at most `timeout`; false when it
/// stayed silent.
async fn first_byte(stream: &tokio::net::TcpStream, timeout: Duration) -> bool {
    let mut byte = [0_u8; 1];
    matches!(
        tokio::time::timeout(timeout, stream.peek(&mut byte)).await,
        Ok(Ok(_))
    )
}

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

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
    let status = response.status();
    if status.is_server_error() {
        tracing::warn!(
            http.method = method,
            http.status = status.as_u16(),
            "api request failed"
        );
    }
    let code = status.as_u16().to_string();
    metrics::counter!("rouse_controller_api_requests_total", "method" => method, "code" => code)
        .increment(1);
    metrics::histogram!("rouse_controller_api_request_duration_seconds", "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}
