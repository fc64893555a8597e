//! [`ConnKind`]: the kinds of proxied connections, a leaf every other module may use (the
//! `kind` label of `rouse_proxy_connections_open`).

/// The kind of a proxied connection (the `kind` label of `rouse_proxy_connections_open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnKind {
    /// An HTTP request/response exchange.
    Http,
    /// An upgraded HTTP connection (WebSocket and others).
    Upgrade,
    /// A TLS connection passed through by SNI.
    TlsPassthrough,
    /// An HTTP CONNECT tunnel.
    Connect,
    /// A static TCP listener's connection.
    Tcp,
}

impl ConnKind {
    /// Position in [`CONN_KIND_LABELS`] (and in the metric handles cached per kind).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        CONN_KIND_LABELS[self.index()]
    }
}

/// Labels of [`ConnKind`], in declaration order.
pub(crate) const CONN_KIND_LABELS: [&str; 5] =
    ["http", "upgrade", "tls_passthrough", "connect", "tcp"];
