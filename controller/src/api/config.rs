//! Settings of the REST API, with their defaults in one place (`ApiConfig::new`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::tls::ApiTls;

/// Settings of the REST API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Address to listen on; default `127.0.0.1:7070`. `serve` takes a bound listener, so this
    /// is what the caller binds.
    pub listen: SocketAddr,
    /// The bearer token every request but `/healthz` and `/readyz` must carry; `None` disables auth
    /// (`--no-auth`).
    pub token: Option<String>,
    /// The data directory; workload logs are read from `{data}/logs/`.
    pub data_dir: PathBuf,
    /// Largest request body accepted, in bytes; default 1 MiB (larger: 413).
    pub max_body_bytes: usize,
    /// Largest object a write may leave (its compact JSON), in bytes; default 1.5 MiB, etcd's
    /// request limit (larger: 413). Also bounds what a server-side apply body may expand to.
    pub max_object_bytes: usize,
    /// Most writes (`POST`, `PUT`, `PATCH`, `DELETE`) in progress at once; default 64. One more
    /// waits for a turn before its body is read.
    pub max_writes_in_flight: usize,
    /// How long a write waits for a turn; default 10s (then 429 with `Retry-After`).
    pub write_wait: Duration,
    /// Most operations in one JSON patch; default 10,000, as kube-apiserver (more: 413).
    pub max_json_patch_operations: usize,
    /// Most bytes the `copy` operations of one JSON patch may add; default 1 MiB, the body
    /// limit, as kube-apiserver's `JSONPatchMaxCopyBytes` (more: 422, before the copy).
    pub max_json_patch_copy_bytes: usize,
    /// Most watch and log-follow streams open at once; default 256 (more: 503).
    pub max_streams: usize,
    /// Longest a watch or log follow stays open; default 30 minutes (clients reconnect).
    pub max_stream_duration: Duration,
    /// How often a followed log file is checked for new output; default 200ms.
    pub log_poll_interval: Duration,
    /// Most connections open at once; default 1024 (more wait to be accepted).
    pub max_connections: usize,
    /// How long a client may take to send a request's headers; default 10s.
    pub header_read_timeout: Duration,
    /// How long a request body may take to arrive; default 30s (slower: 408).
    pub body_read_timeout: Duration,
    /// How long shutdown waits for open requests; default 10s.
    pub drain_timeout: Duration,
    /// Serve HTTPS with this certificate; `None` serves plain HTTP (default, for tests and
    /// Kubernetes mode behind a TLS-terminating Service).
    pub tls: Option<ApiTls>,
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
            max_object_bytes: 3 * 512 * 1024,
            max_writes_in_flight: 64,
            write_wait: Duration::from_secs(10),
            max_json_patch_operations: 10_000,
            max_json_patch_copy_bytes: 1024 * 1024,
            max_streams: 256,
            max_stream_duration: Duration::from_secs(30 * 60),
            log_poll_interval: Duration::from_millis(200),
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
            tls: None,
        }
    }
}
