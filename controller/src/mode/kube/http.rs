//! `/healthz`, `/readyz` and `/metrics` of the controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Health state shared by the controller and its probe server.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    ready: Arc<AtomicBool>,
    leader: Arc<AtomicBool>,
}

impl Probes {
    /// True once the caches are synced (leader) or the replica stands by.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// True while this replica holds the lease (or runs without leader election).
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Release);
        metrics::gauge!("rouse_controller_leader").set(if leader { 1.0 } else { 0.0 });
    }
}

#[derive(Clone)]
struct AppState {
    probes: Probes,
    metrics: Option<PrometheusHandle>,
}

/// Serves the probes and metrics on `listener` until `shutdown`.
pub async fn serve_probes(
    listener: TcpListener,
    probes: Probes,
    metrics: Option<PrometheusHandle>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(AppState { probes, metrics });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.probes.is_ready() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced\n")
    }
}

/// Installs the process-wide Prometheus recorder, with histogram buckets for reconcile
/// latency (1 ms to 10 s); call once, from the binary.
pub fn install_metrics() -> Result<PrometheusHandle, metrics_exporter_prometheus::BuildError> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&[
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ])?
        .install_recorder()
}

async fn render_metrics(State(state): State<AppState>) -> (StatusCode, String) {
    match &state.metrics {
        Some(handle) => {
            // Upkeep drains histogram buffers; doing it per scrape bounds them by the scrape
            // interval.
            handle.run_upkeep();
            (StatusCode::OK, handle.render())
        }
        None => (
            StatusCode::NOT_FOUND,
            "metrics are not enabled\n".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        response
    }

    #[tokio::test]
    async fn probes_follow_the_controller_state() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let probes = Probes::default();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve_probes(
            listener,
            probes.clone(),
            None,
            shutdown.clone(),
        ));

        assert!(get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 503"));
        probes.set_ready(true);
        assert!(get(addr, "/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/metrics").await.starts_with("HTTP/1.1 404"));

        shutdown.cancel();
        server.await.expect("join").expect("serve");
    }
}
