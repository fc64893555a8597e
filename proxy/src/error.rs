//! [`ProxyError`]: why a connection or request could not be proxied, which side failed, and
//! how an L7 listener answers it.

use std::time::Duration;

use http::StatusCode;

use crate::directory::SandboxKey;

/// Result of a proxy operation.
pub type Result<T, E = ProxyError> = std::result::Result<T, E>;

/// Which side of the proxy a failure is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client: bad request, unknown host, rate limit.
    Downstream,
    /// The sandbox: not running, refused, failed.
    Upstream,
    /// The proxy itself: its own limits.
    Internal,
}

impl Side {
    /// A fixed label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
            Side::Internal => "internal",
        }
    }
}

/// Why a connection or request could not be proxied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProxyError {
    /// The host addresses no sandbox (not under our domains, or malformed).
    #[error("{0}")]
    UnknownHost(#[from] rouse_shared::names::HostnameError),
    /// No request host at all.
    #[error("the request names no host")]
    NoHost,
    /// The directory has no such sandbox.
    #[error("no sandbox {key}")]
    UnknownSandbox {
        /// The sandbox.
        key: SandboxKey,
    },
    /// The sandbox declares no such port (or no port at all).
    #[error("sandbox {key} has no port {}", port.map_or("(default)".to_owned(), |p| p.to_string()))]
    UnknownPort {
        /// The sandbox.
        key: SandboxKey,
        /// The port asked for.
        port: Option<u16>,
    },
    /// The sandbox is suspended and does not wake on connect.
    #[error("sandbox {key} is suspended: {reason}")]
    Suspended {
        /// The sandbox.
        key: SandboxKey,
        /// Why it does not wake.
        reason: String,
    },
    /// The sandbox failed.
    #[error("sandbox {key} failed: {reason}")]
    Failed {
        /// The sandbox.
        key: SandboxKey,
        /// Why.
        reason: String,
    },
    /// The sandbox did not come up (or accept the connection) before the wake deadline.
    #[error("sandbox {key} did not become ready within {deadline:?}")]
    WakeDeadline {
        /// The sandbox.
        key: SandboxKey,
        /// The deadline that passed.
        deadline: Duration,
    },
    /// Too many connections are held for this sandbox or in total.
    #[error("too many connections are waiting for sandbox {key} ({scope} limit {limit})")]
    HeldLimit {
        /// The sandbox.
        key: SandboxKey,
        /// `sandbox` or `total`.
        scope: &'static str,
        /// The limit reached.
        limit: usize,
    },
    /// Dialing the sandbox failed with an error that retrying does not fix, or kept failing
    /// until the deadline.
    #[error("connecting to sandbox {key} at {address} failed: {source}")]
    UpstreamConnect {
        /// The sandbox.
        key: SandboxKey,
        /// What was dialled.
        address: String,
        /// The last dial error (shared, so the error can be cloned).
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// The request's own bound (`X-Sandbox-Timeout`) passed before the sandbox answered,
    /// holding included.
    #[error("sandbox {key} did not answer within the request's X-Sandbox-Timeout of {timeout:?}")]
    RequestTimeout {
        /// The sandbox.
        key: SandboxKey,
        /// The bound the request asked for.
        timeout: Duration,
    },
    /// The sandbox's response or stream failed.
    #[error("sandbox {key} failed the request: {message}")]
    UpstreamProtocol {
        /// The sandbox.
        key: SandboxKey,
        /// What failed.
        message: String,
    },
    /// The client sent more requests or connections per second than allowed.
    #[error("rate limit of {limit} per second exceeded")]
    RateLimited {
        /// The limit.
        limit: u32,
    },
    /// The proxy is at its connection limit.
    #[error("connection limit of {limit} reached")]
    ConnectionLimit {
        /// The limit.
        limit: usize,
    },
    /// The client's address has as many connections open as one address may.
    #[error("connection limit of {limit} per client address reached")]
    ClientConnectionLimit {
        /// The limit.
        limit: usize,
    },
    /// The request is malformed (e.g. conflicting routing headers).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The proxy is shutting down.
    #[error("the proxy is shutting down")]
    ShuttingDown,
}

impl ProxyError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ProxyError::UnknownHost(_) | ProxyError::NoHost => "unknown_host",
            ProxyError::UnknownSandbox { .. } => "unknown_sandbox",
            ProxyError::UnknownPort { .. } => "unknown_port",
            ProxyError::Suspended { .. } => "suspended",
            ProxyError::Failed { .. } => "failed",
            ProxyError::WakeDeadline { .. } => "wake_deadline",
            ProxyError::RequestTimeout { .. } => "request_timeout",
            ProxyError::HeldLimit { .. } => "held_limit",
            ProxyError::UpstreamConnect { .. } => "upstream_connect",
            ProxyError::UpstreamProtocol { .. } => "upstream_protocol",
            ProxyError::RateLimited { .. } => "rate_limited",
            ProxyError::ConnectionLimit { .. } => "connection_limit",
            ProxyError::ClientConnectionLimit { .. } => "client_connection_limit",
            ProxyError::BadRequest(_) => "bad_request",
            ProxyError::ShuttingDown => "shutting_down",
        }
    }

    /// Which side failed.
    pub fn side(&self) -> Side {
        match self {
            ProxyError::UnknownHost(_)
            | ProxyError::NoHost
            | ProxyError::UnknownSandbox { .. }
            | ProxyError::UnknownPort { .. }
            | ProxyError::RateLimited { .. }
            | ProxyError::ClientConnectionLimit { .. }
            | ProxyError::BadRequest(_) => Side::Downstream,
            ProxyError::Suspended { .. }
            | ProxyError::Failed { .. }
            | ProxyError::WakeDeadline { .. }
            | ProxyError::RequestTimeout { .. }
            | ProxyError::UpstreamConnect { .. }
            | ProxyError::UpstreamProtocol { .. } => Side::Upstream,
            ProxyError::HeldLimit { .. }
            | ProxyError::ConnectionLimit { .. }
            | ProxyError::ShuttingDown => Side::Internal,
        }
    }

    /// True when the client may retry the same request later and expect it to work.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ProxyError::WakeDeadline { .. }
                | ProxyError::HeldLimit { .. }
                | ProxyError::RateLimited { .. }
                | ProxyError::ConnectionLimit { .. }
                | ProxyError::ClientConnectionLimit { .. }
                | ProxyError::ShuttingDown
        )
    }

    /// The HTTP status an L7 listener answers with.
    pub fn status_code(&self) -> StatusCode {
        match self {
            ProxyError::UnknownHost(_)
            | ProxyError::NoHost
            | ProxyError::UnknownSandbox { .. }
            | ProxyError::UnknownPort { .. } => StatusCode::NOT_FOUND,
            ProxyError::Suspended { .. }
            | ProxyError::WakeDeadline { .. }
            | ProxyError::HeldLimit { .. }
            | ProxyError::ConnectionLimit { .. }
            | ProxyError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::ClientConnectionLimit { .. } => StatusCode::TOO_MANY_REQUESTS,
            ProxyError::Failed { .. }
            | ProxyError::UpstreamConnect { .. }
            | ProxyError::UpstreamProtocol { .. } => StatusCode::BAD_GATEWAY,
            ProxyError::RequestTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ProxyError::BadRequest(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// Seconds for a `Retry-After` header, for errors a later retry may clear.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ProxyError::WakeDeadline { .. } => Some(5),
            ProxyError::HeldLimit { .. }
            | ProxyError::ConnectionLimit { .. }
            | ProxyError::ClientConnectionLimit { .. }
            | ProxyError::RateLimited { .. }
            | ProxyError::ShuttingDown => Some(1),
            _ => None,
        }
    }
}
