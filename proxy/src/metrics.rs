//! Metric names of the proxy and the process-wide Prometheus recorder.
//!
//! Labels are bounded: `code`, `kind`, `result`, `direction`, `reason` — never a sandbox name,
//! an IP or a path. `docs/proxy.md` lists every metric.

use std::sync::{LazyLock, OnceLock};

use metrics::{Counter, Gauge};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests answered at L7, by status `code`.
pub const REQUESTS_TOTAL: &str = "rouse_proxy_requests_total";
/// Connections open now, by `kind` (http, upgrade, tls_passthrough, connect, tcp).
pub const CONNECTIONS_OPEN: &str = "rouse_proxy_connections_open";
/// Client connections accepted and open now, over all listeners.
pub const DOWNSTREAM_CONNECTIONS_OPEN: &str = "rouse_proxy_downstream_connections_open";
/// Connections refused at accept, by `reason` (max_connections, max_connections_per_ip,
/// rate_limited).
pub const CONNECTIONS_REJECTED_TOTAL: &str = "rouse_proxy_connections_rejected_total";
/// Connections held for a sandbox to wake.
pub const HELD_CONNECTIONS: &str = "rouse_proxy_held_connections";
/// Wakes sent, by `result` (ok, error).
pub const WAKES_TOTAL: &str = "rouse_proxy_wakes_total";
/// Wakes sent to a runtime in the same process, by `result` (`started`, `fallback`,
/// `refused`).
pub const DIRECT_WAKES_TOTAL: &str = "rouse_proxy_direct_wakes_total";
/// Time from a wake to the sandbox running.
pub const WAKE_DURATION_SECONDS: &str = "rouse_proxy_wake_duration_seconds";
/// Time a connection spent held before it was dialled or refused.
pub const HOLD_DURATION_SECONDS: &str = "rouse_proxy_hold_duration_seconds";
/// Failures to proxy, by `kind` (the error's metric label).
pub const UPSTREAM_ERRORS_TOTAL: &str = "rouse_proxy_upstream_errors_total";
/// Dial attempts retried after a dial-class error.
pub const DIAL_RETRIES_TOTAL: &str = "rouse_proxy_dial_retries_total";
/// Bytes proxied, by `direction` (to_upstream, to_client).
pub const BYTES_TOTAL: &str = "rouse_proxy_bytes_total";
/// Of the bytes proxied, those moved through a kernel pipe (`splice(2)`) without being copied
/// into the proxy.
pub const ZERO_COPY_BYTES_TOTAL: &str = "rouse_proxy_zero_copy_bytes_total";
/// Activity reports sent to the directory, by `result` (ok, error).
pub const ACTIVITY_REPORTS_TOTAL: &str = "rouse_proxy_activity_reports_total";
/// Route updates applied from the directory.
pub const ROUTE_UPDATES_TOTAL: &str = "rouse_proxy_route_updates_total";
/// Sandboxes in the routing table.
pub const ROUTES: &str = "rouse_proxy_routes";
/// Bodiless GET/HEAD/OPTIONS requests sent again after the upstream connection was lost
/// before any response (the workload was being stopped under them).
pub const REQUEST_RETRIES_TOTAL: &str = "rouse_proxy_request_retries_total";
/// Plain HTTP/1.1 connections the relay handed to the full HTTP path, by `reason` (the first
/// request it does not cover: malformed, version, target, framing, large_body, expect,
/// upgrade, router_headers, host, too_large).
pub const HTTP_RELAY_HANDOVERS_TOTAL: &str = "rouse_proxy_http_relay_handovers_total";
/// Config reloads, by `result` (ok, error).
pub const CONFIG_RELOADS_TOTAL: &str = "rouse_proxy_config_reloads_total";
/// Client connections closed for a bad request head, by `reason` (header_timeout, too_large, malformed, idle).
pub const DOWNSTREAM_ERRORS_TOTAL: &str = "rouse_proxy_downstream_errors_total";

/// Buckets of the latency histograms, in seconds: 1 ms to 2 minutes.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder for this process (once; later calls reuse it) and returns
/// the handle that renders it, or `None` when another recorder was installed first.
pub fn install_recorder() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &LATENCY_BUCKETS);
            let builder = match builder {
                Ok(builder) => builder,
                Err(err) => {
                    tracing::warn!(error = %err, "histogram buckets rejected; using summaries");
                    PrometheusBuilder::new()
                }
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => Some(handle),
                Err(err) => {
                    tracing::warn!(error = %err, "a metrics recorder is installed already; /metrics stays empty");
                    None
                }
            }
        })
        .clone()
}

/// Renders every metric in the Prometheus text format.
pub fn render() -> String {
    match install_recorder() {
        Some(handle) => {
            handle.run_upkeep();
            handle.render()
        }
        None => String::new(),
    }
}

/// Handles of the metrics touched for every frame or connection, resolved once so the data
/// path skips the registry lookup. The recorder is installed by `Proxy::start`, before any
/// traffic resolves these.
pub(crate) mod hot {
    use super::*;

    /// `rouse_proxy_bytes_total{direction="to_upstream"}`.
    pub(crate) static BYTES_TO_UPSTREAM: LazyLock<Counter> =
        LazyLock::new(|| metrics::counter!(BYTES_TOTAL, "direction" => "to_upstream"));
    /// `rouse_proxy_bytes_total{direction="to_client"}`.
    pub(crate) static BYTES_TO_CLIENT: LazyLock<Counter> =
        LazyLock::new(|| metrics::counter!(BYTES_TOTAL, "direction" => "to_client"));
    /// `rouse_proxy_zero_copy_bytes_total`.
    pub(crate) static ZERO_COPY_BYTES: LazyLock<Counter> =
        LazyLock::new(|| metrics::counter!(ZERO_COPY_BYTES_TOTAL));
    /// The `code` labels of `rouse_proxy_requests_total`: common codes by number, the rest
    /// by class.
    pub(crate) const REQUEST_CODE_LABELS: [&str; 23] = [
        "101", "200", "201", "204", "301", "302", "304", "400", "401", "403", "404", "429", "431",
        "500", "501", "502", "503", "504", "1xx", "2xx", "3xx", "4xx", "5xx",
    ];
    /// `rouse_proxy_requests_total{code}`, in [`REQUEST_CODE_LABELS`] order.
    pub(crate) static REQUESTS_BY_CODE: LazyLock<[Counter; 23]> = LazyLock::new(|| {
        REQUEST_CODE_LABELS.map(|code| metrics::counter!(REQUESTS_TOTAL, "code" => code))
    });
    /// `rouse_proxy_connections_open{kind}`, in `ConnKind` order.
    pub(crate) static CONNECTIONS_OPEN_BY_KIND: LazyLock<[Gauge; 5]> = LazyLock::new(|| {
        crate::kind::CONN_KIND_LABELS.map(|kind| metrics::gauge!(CONNECTIONS_OPEN, "kind" => kind))
    });
}
