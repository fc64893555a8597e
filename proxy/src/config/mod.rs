//! The proxy's configuration: one typed [`Config`] read from one TOML file.
//!
//! Every key has its default here, in the `Default` impls, and nowhere else; `docs/proxy-config.md`
//! documents each one. Durations are written like `250ms` or `5s`; a few may be `"off"`.
//! [`Config::from_toml`] reports every bad key at once, each with its path and line, and then
//! checks the values that types alone cannot (see [`validate`]).

mod de;
mod load;
mod parse;
mod validate;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use parse::{ConfigError, ConfigIssue};

use rouse_shared::store::ObjectKey as SandboxKey;

/// The whole proxy configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Which hostnames address which sandbox.
    pub routing: RoutingConfig,
    /// The plain HTTP listener (HTTP/1.1 and h2c).
    pub http: HttpConfig,
    /// The TLS-terminating HTTPS listener.
    pub https: HttpsConfig,
    /// The TLS passthrough listener, routed by SNI.
    pub tls_passthrough: TlsPassthroughConfig,
    /// Static TCP listeners, each mapped to one sandbox port.
    pub tcp: Vec<TcpListenerConfig>,
    /// The admin listener: metrics and health.
    pub admin: AdminConfig,
    /// Holding connections while a sandbox wakes.
    pub wake: WakeConfig,
    /// Timeouts and limits protecting the proxy.
    pub limits: LimitsConfig,
    /// Activity reports to the directory.
    pub activity: ActivityConfig,
    /// Graceful shutdown.
    pub drain: DrainConfig,
    /// Where routes come from.
    pub directory: DirectoryConfig,
    /// How requests are sent on to sandboxes.
    pub upstream: UpstreamConfig,
}

/// `[routing]`: hostnames and upstream router headers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// Sandbox domains; hosts under them address sandboxes. Default `["sandbox.localhost"]`.
    pub domains: Vec<String>,
    /// Namespace of `{name}.{domain}` hosts; `""` disables that form. Default `"default"`.
    pub default_namespace: String,
    /// Honour `X-Sandbox-ID`, `X-Sandbox-Namespace` and `X-Sandbox-Port` request headers set by
    /// a trusted router in front. Default `false`.
    pub upstream_headers: bool,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            domains: vec!["sandbox.localhost".to_owned()],
            default_namespace: "default".to_owned(),
            upstream_headers: false,
        }
    }
}

/// `[http]`: the plain HTTP listener.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Address to listen on, or `"off"`. Default `127.0.0.1:8080`.
    #[serde(deserialize_with = "de::listen")]
    pub listen: Option<SocketAddr>,
    /// Park a plain HTTP/1 request that must wait for its sandbox in a compact state (its
    /// head bytes, the socket and one small future) instead of a full HTTP connection.
    /// Default `true`.
    pub compact_hold: bool,
    /// Forward plain HTTP/1.1 keep-alive requests as bytes (the head rewritten in one pass,
    /// the body passed through) instead of through a full HTTP server and client; a request
    /// it does not cover moves the connection to the full path. Needs `compact_hold`.
    /// Default `true`.
    pub relay: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            compact_hold: true,
            relay: true,
        }
    }
}

/// `[https]`: the TLS-terminating listener and its certificates.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpsConfig {
    /// Address to listen on, or `"off"`. Default off.
    #[serde(deserialize_with = "de::listen")]
    pub listen: Option<SocketAddr>,
    /// Certificate chains and keys (PEM files); the one matching the SNI name is served.
    pub certificates: Vec<CertificateConfig>,
}

/// One certificate chain and its private key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// PEM file with the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM file with the private key.
    pub key: PathBuf,
}

/// `[tls_passthrough]`: TLS connections routed by SNI without terminating them.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsPassthroughConfig {
    /// Address to listen on, or `"off"`. Default off.
    #[serde(deserialize_with = "de::listen")]
    pub listen: Option<SocketAddr>,
}

/// One `[[tcp]]` entry: a listener whose connections all go to one sandbox port.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpListenerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The sandbox, as `namespace/name`.
    #[serde(deserialize_with = "de::sandbox_key")]
    pub sandbox: SandboxKey,
    /// Container port of the sandbox; default its first port.
    #[serde(default)]
    pub port: Option<u16>,
}

/// `[admin]`: metrics and health endpoints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Address to listen on, or `"off"`. Default `127.0.0.1:9090`.
    #[serde(deserialize_with = "de::listen")]
    pub listen: Option<SocketAddr>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9090))),
        }
    }
}

/// `[wake]`: holding connections to sandboxes that are not running yet.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WakeConfig {
    /// How long a connection is held for a sandbox to wake and accept it. Default `60s`.
    #[serde(deserialize_with = "de::duration")]
    pub deadline: Duration,
    /// Most connections held for one sandbox. Default 1024.
    pub max_held_per_sandbox: usize,
    /// Most connections held in total. Default 8192.
    pub max_held_total: usize,
    /// Most held connections dialing one sandbox at once when it comes up. Default 32.
    pub release_concurrency: usize,
    /// First wait after a refused dial. Default `1ms`.
    #[serde(deserialize_with = "de::duration")]
    pub dial_backoff_initial: Duration,
    /// Longest wait between dials (the wait doubles up to it). Default `50ms`.
    #[serde(deserialize_with = "de::duration")]
    pub dial_backoff_max: Duration,
    /// Longest single dial attempt. Default `5s`.
    #[serde(deserialize_with = "de::duration")]
    pub dial_timeout: Duration,
}

impl Default for WakeConfig {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(60),
            max_held_per_sandbox: 1024,
            max_held_total: 8192,
            release_concurrency: 32,
            dial_backoff_initial: Duration::from_millis(1),
            dial_backoff_max: Duration::from_millis(50),
            dial_timeout: Duration::from_secs(5),
        }
    }
}

/// `[limits]`: timeouts and limits.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Time a client has to send a request's headers. Default `10s`.
    #[serde(deserialize_with = "de::duration")]
    pub header_read_timeout: Duration,
    /// Largest request head (request line and headers), in bytes; at least 8192. Default 65536.
    pub max_header_bytes: usize,
    /// Close a client connection after this long without a byte either way, or `"off"`.
    /// Default `5m`.
    #[serde(deserialize_with = "de::optional_duration")]
    pub idle_timeout: Option<Duration>,
    /// The same for upgraded (WebSocket) and tunnelled streams. Default `"off"`.
    #[serde(deserialize_with = "de::optional_duration")]
    pub upgraded_idle_timeout: Option<Duration>,
    /// Most client connections open at once; more are closed at accept. 0 = no limit.
    /// Default 10000.
    pub max_connections: usize,
    /// Most client connections open at once from one client address (IPv6: one /64); more
    /// are closed at accept. 0 = no limit. Default 1024.
    pub max_connections_per_ip: usize,
    /// Most requests (L7) or connections (L4) per second from one client IP; 0 = off.
    /// Default 0.
    pub rate_limit_per_ip: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
            idle_timeout: Some(Duration::from_secs(300)),
            upgraded_idle_timeout: None,
            max_connections: 10_000,
            max_connections_per_ip: 1024,
            rate_limit_per_ip: 0,
        }
    }
}

/// `[activity]`: reports of traffic to the directory.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ActivityConfig {
    /// At most one report per sandbox per interval; also the heartbeat while connections are
    /// open. Default `10s`.
    #[serde(deserialize_with = "de::duration")]
    pub report_interval: Duration,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        Self {
            report_interval: Duration::from_secs(10),
        }
    }
}

/// `[drain]`: graceful shutdown.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrainConfig {
    /// How long in-flight work may finish after shutdown starts. Default `30s`.
    #[serde(deserialize_with = "de::duration")]
    pub timeout: Duration,
}

impl Default for DrainConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
        }
    }
}

/// `[upstream]`: how traffic is sent on to sandboxes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Which requests of HTTP/2 clients go to the sandbox over HTTP/2 (h2c). Default `grpc`.
    pub http2: UpstreamHttp2,
    /// Whether bulk L4 streams (static TCP, TLS passthrough) move through a kernel pipe
    /// (`splice(2)`) instead of a user-space copy. Default true.
    pub zero_copy: bool,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            http2: UpstreamHttp2::default(),
            zero_copy: true,
        }
    }
}

/// Which requests of HTTP/2 clients are sent to the sandbox over HTTP/2 (h2c, prior
/// knowledge); all others go over HTTP/1.1, which every HTTP server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamHttp2 {
    /// gRPC requests (`content-type: application/grpc...`), which need HTTP/2 trailers and
    /// cannot work over HTTP/1.1 anyway.
    #[default]
    Grpc,
    /// Every request of an HTTP/2 client: for sandboxes known to speak h2c.
    Always,
    /// None: HTTP/1.1 to every sandbox.
    Never,
}

/// `[directory]`: where routes come from.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectoryConfig {
    /// `"store"` (Sandbox objects) or `"static"` (the routes below). Default `"store"`.
    pub kind: DirectoryKind,
    /// For `kind = "store"`: route the Sandboxes of this namespace only (all when unset).
    pub namespace: Option<String>,
    /// Fixed routes, for `kind = "static"`.
    pub routes: Vec<StaticRouteConfig>,
}

/// Which directory implementation feeds the routing table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirectoryKind {
    /// Sandbox objects in the store.
    #[default]
    Store,
    /// Fixed routes from this file.
    Static,
}

/// One `[[directory.routes]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticRouteConfig {
    /// The sandbox, as `namespace/name`.
    #[serde(deserialize_with = "de::sandbox_key")]
    pub sandbox: SandboxKey,
    /// IP address or host name to dial.
    #[serde(default)]
    pub address: String,
    /// Ports to dial; the first is the default port.
    #[serde(default)]
    pub ports: Vec<u16>,
    /// The route's state. Default `"running"`.
    #[serde(default)]
    pub state: StaticRouteState,
    /// Why, for `state = "failed"` or a suspended sandbox that does not wake.
    #[serde(default)]
    pub reason: Option<String>,
}

/// State of a static route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StaticRouteState {
    /// Dial it.
    #[default]
    Running,
    /// Held connections wait (a wake does nothing by itself).
    Suspended,
    /// Suspended with wake-on-connect off: 503.
    Disabled,
    /// Failed: 502.
    Failed,
}

#[cfg(test)]
mod tests;
