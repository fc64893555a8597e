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
static HOP_BY_HOP: [HeaderName; 8] = [
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

/// The names of [`HOP_BY_HOP`] and `Proxy-Connection`, as text.
const HOP_NAMES: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-connection",
];

/// The names of the hop-by-hop headers, as text (lower case).
#[cfg(test)]
pub(crate) fn hop_names() -> &'static [&'static str] {
    &HOP_NAMES
}

/// Position of a hop-by-hop header in [`HOP_BY_HOP`] (`Proxy-Connection` after it): one
/// match on the (lower-case) name instead of a comparison with each.
fn hop_index(name: &str) -> Option<usize> {
    let i = match name {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-authenticate" => 2,
        "proxy-authorization" => 3,
        "te" => 4,
        "trailer" => 5,
        "transfer-encoding" => 6,
        "upgrade" => 7,
        "proxy-connection" => 8,
        _ => return None,
    };
    Some(i)
}

/// Removes hop-by-hop headers, including those the `Connection` header names; with
/// `keep_upgrade`, puts back `Connection: upgrade` and the `Upgrade` value.
///
/// One pass over the header names finds which are present, so a message without hop-by-hop
/// headers (most of them) costs no lookup, and only present ones are removed.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: Option<HeaderValue>) {
    let mut present = 0_u16;
    for name in headers.keys() {
        if let Some(i) = hop_index(name.as_str()) {
            present |= 1 << i;
        }
    }
    if present != 0 {
        let mut named: Vec<HeaderName> = Vec::new();
        if present & 1 != 0 {
            for value in &headers.get_all(header::CONNECTION) {
                let Ok(text) = value.to_str() else {
                    continue;
                };
                for token in text.split(',').map(str::trim_ascii) {
                    // Options naming a listed header (`keep-alive`, the usual one) are
                    // removed below anyway: no name to make for them.
                    if HOP_NAMES.iter().any(|n| token.eq_ignore_ascii_case(n)) {
                        continue;
                    }
                    if let Ok(name) = HeaderName::from_bytes(token.as_bytes()) {
                        named.push(name);
                    }
                }
            }
        }
        for name in named {
            headers.remove(name);
        }
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            if present & (1 << i) != 0 {
                headers.remove(name);
            }
        }
        if present & (1 << HOP_BY_HOP.len()) != 0 {
            headers.remove(PROXY_CONNECTION);
        }
    }
    if let Some(protocol) = keep_upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
}

/// Appends the client to `X-Forwarded-For` and sets `X-Forwarded-Proto` and `-Host` (removed
/// when `host` is not a valid header value).
pub fn set_forwarded(headers: &mut HeaderMap, client: IpAddr, proto: &str, host: &str) {
    let host = HeaderValue::from_str(host).ok();
    set_forwarded_values(
        headers,
        &forwarded_for_value(client),
        client,
        proto,
        host.as_ref(),
    );
}

/// [`set_forwarded`] with the values made already: `client_value` is
/// [`forwarded_for_value`] of `client` (made once per connection), `host` the request's host.
pub(crate) fn set_forwarded_values(
    headers: &mut HeaderMap,
    client_value: &HeaderValue,
    client: IpAddr,
    proto: &str,
    host: Option<&HeaderValue>,
) {
    // Room for the three at once: one growth of the table instead of one per insert.
    headers.reserve(3);
    if headers.contains_key(&X_FORWARDED_FOR) {
        append_forwarded_for(headers, client);
    } else {
        headers.insert(X_FORWARDED_FOR, client_value.clone());
    }
    headers.insert(X_FORWARDED_PROTO, proto_value(proto));
    match host {
        Some(host) => {
            headers.insert(X_FORWARDED_HOST, host.clone());
        }
        // The client's own value must not pass for the proxy's.
        None => {
            headers.remove(X_FORWARDED_HOST);
        }
    }
}

/// `client` as an `X-Forwarded-For` value.
pub(crate) fn forwarded_for_value(client: IpAddr) -> HeaderValue {
    // An IP address's text is always a valid header value; the fallback is never taken.
    HeaderValue::from_str(&client.to_string())
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// `X-Forwarded-Proto`'s value for `proto`.
fn proto_value(proto: &str) -> HeaderValue {
    HeaderValue::from_static(if proto == "https" { "https" } else { "http" })
}

/// Appends `client` to the `X-Forwarded-For` values (joined into one).
fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
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
    fn every_hop_by_hop_header_is_named_in_both_lists() {
        for (i, name) in HOP_BY_HOP.iter().chain([&PROXY_CONNECTION]).enumerate() {
            assert_eq!(hop_index(name.as_str()), Some(i), "{name}");
            assert_eq!(HOP_NAMES[i], name.as_str());
        }
        assert_eq!(hop_index("x-kept"), None);
    }

    #[test]
    fn connection_options_naming_standard_hop_headers_remove_them_once() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("Keep-Alive, TE, Close"),
        );
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert("close", HeaderValue::from_static("1"));
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

    #[test]
    fn sets_forwarded_for_alone_and_drops_a_host_that_is_no_header_value() {
        let mut headers = HeaderMap::new();
        headers.insert(
            X_FORWARDED_HOST,
            HeaderValue::from_static("spoofed.example"),
        );
        set_forwarded(
            &mut headers,
            IpAddr::from([10, 1, 2, 3]),
            "https",
            "bad\nhost",
        );
        assert_eq!(headers[X_FORWARDED_FOR], "10.1.2.3");
        assert_eq!(headers[X_FORWARDED_PROTO], "https");
        assert!(!headers.contains_key(X_FORWARDED_HOST), "{headers:?}");
    }
}
