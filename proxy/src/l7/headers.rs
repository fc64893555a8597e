//! Header rules of the proxy phase: hop-by-hop headers are removed both ways (RFC 9110 §7.6.1),
//! `X-Forwarded-For/-Proto/-Host` are set, and the upstream router headers are read.

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The scheme clients used to reach the proxy (for `X-Forwarded-Proto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS terminated by the proxy.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Headers that describe one hop, never forwarded.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];
/// Non-standard but widespread hop-by-hop header.
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// `X-Forwarded-For`.
pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `X-Forwarded-Proto`.
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `X-Forwarded-Host`.
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// Sandbox name set by a trusted router in front.
pub(crate) const X_SANDBOX_ID: HeaderName = HeaderName::from_static("x-sandbox-id");
/// Sandbox namespace set by a trusted router in front.
pub(crate) const X_SANDBOX_NAMESPACE: HeaderName = HeaderName::from_static("x-sandbox-namespace");
/// Sandbox port set by a trusted router in front.
pub(crate) const X_SANDBOX_PORT: HeaderName = HeaderName::from_static("x-sandbox-port");

/// The `Upgrade` protocol a request asks for, if it is an HTTP/1.1 upgrade request.
pub fn upgrade_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
}

/// Removes hop-by-hop headers, including those the `Connection` header names; with
/// `keep_upgrade`, puts back `Connection: upgrade` and the `Upgrade` value.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: Option<HeaderValue>) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(PROXY_CONNECTION);
    if let Some(protocol) = keep_upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
}

/// Appends the client to `X-Forwarded-For` and sets `X-Forwarded-Proto` and `-Host`.
pub fn set_forwarded(headers: &mut HeaderMap, client: IpAddr, proto: &str, host: &str) {
    let prior = headers
        .get_all(&X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ");
    let value = if prior.is_empty() {
        client.to_string()
    } else {
        format!("{prior}, {client}")
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(X_FORWARDED_FOR, value);
    }
    headers.insert(
        X_FORWARDED_PROTO,
        HeaderValue::from_static(if proto == "https" { "https" } else { "http" }),
    );
    if let Ok(value) = HeaderValue::from_str(host) {
        headers.insert(X_FORWARDED_HOST, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_listed_and_named_hop_by_hop_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        headers.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut headers, None);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key("x-kept"));
    }

    #[test]
    fn keeps_the_upgrade_pair_when_asked() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        let protocol = upgrade_protocol(&headers);
        assert_eq!(protocol, Some(HeaderValue::from_static("websocket")));
        strip_hop_by_hop(&mut headers, protocol);
        assert_eq!(headers[header::CONNECTION], "upgrade");
        assert_eq!(headers[header::UPGRADE], "websocket");
    }

    #[test]
    fn appends_to_forwarded_for() {
        let mut headers = HeaderMap::new();
        headers.insert(X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.1"));
        set_forwarded(
            &mut headers,
            IpAddr::from([127, 0, 0, 1]),
            "http",
            "a.b.sandbox.localhost",
        );
        assert_eq!(headers[X_FORWARDED_FOR], "10.0.0.1, 127.0.0.1");
        assert_eq!(headers[X_FORWARDED_PROTO], "http");
        assert_eq!(headers[X_FORWARDED_HOST], "a.b.sandbox.localhost");
    }
}
