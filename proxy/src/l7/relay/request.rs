//! The request side of the relay: a client's request head parsed, checked against what the
//! relay covers, and rewritten for the sandbox in one pass — hop-by-hop headers dropped,
//! `X-Forwarded-For/-Proto/-Host` set — without building a header map.

use std::ops::Range;

use super::names::{self, Name};

/// Most headers of a request (hyper's limit on the full path too).
pub(crate) const MAX_HEADERS: usize = 100;

/// Largest request body the relay carries; a longer one goes to the full path, which streams
/// it. The relay writes a request and its body at once, which a socket buffer takes whole.
pub const BODY_LIMIT: u64 = 64 * 1024;

/// Why a request goes to the full HTTP path instead of the relay (a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// Not a valid HTTP/1 request head: the full path answers 400.
    Malformed,
    /// Not HTTP/1.1.
    Version,
    /// `CONNECT`, or a request target that is not origin-form.
    Target,
    /// A request body in a transfer coding, or an invalid or repeated `Content-Length`.
    Framing,
    /// A body longer than [`BODY_LIMIT`].
    LargeBody,
    /// `Expect` (`100-continue`).
    Expect,
    /// An upgrade, or `Connection` options beyond `keep-alive` and `close`.
    Upgrade,
    /// Upstream router headers (`X-Sandbox-ID`, `X-Sandbox-Timeout`) while they are honoured.
    RouterHeaders,
    /// No `Host`, more than one, or one that is not visible ASCII.
    Host,
}

impl Unsupported {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Unsupported::Malformed => "malformed",
            Unsupported::Version => "version",
            Unsupported::Target => "target",
            Unsupported::Framing => "framing",
            Unsupported::LargeBody => "large_body",
            Unsupported::Expect => "expect",
            Unsupported::Upgrade => "upgrade",
            Unsupported::RouterHeaders => "router_headers",
            Unsupported::Host => "host",
        }
    }
}

/// A request head the relay forwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head in the client's buffer.
    pub len: usize,
    /// Bytes of its body (`Content-Length`).
    pub body: u64,
    /// Where its host is in the client's buffer.
    pub host: Range<usize>,
    /// The client asked to close the connection after the response.
    pub close: bool,
    /// `HEAD`: the response has no body whatever its headers say.
    pub head_method: bool,
    /// Safe to send again after the upstream connection was lost before any response: a safe
    /// method without a body (RFC 9110 §9.2.1).
    pub replayable: bool,
}

/// What a client's buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole head yet.
    Partial,
    /// A head the relay forwards; its rewritten form was written out.
    Ready(Head),
    /// A request for the full path.
    Unsupported(Unsupported),
}

/// What the relay adds to every request of one client connection.
#[derive(Debug)]
pub struct Forwarded {
    /// The client's IP address as text.
    pub client: String,
    /// `http` or `https`.
    pub proto: &'static str,
    /// Whether upstream router headers are honoured (then they route, on the full path).
    pub router_headers: bool,
}

/// Parses the request head at the start of `buf` and, when the relay covers it, writes its
/// rewritten head to `out` (cleared first).
pub fn prepare(buf: &[u8], forwarded: &Forwarded, out: &mut Vec<u8>) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Unsupported(Unsupported::Malformed),
    };
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Unsupported(Unsupported::Malformed);
    };
    if version != 1 {
        return Parsed::Unsupported(Unsupported::Version);
    }
    if method == "CONNECT" || !path.starts_with('/') {
        return Parsed::Unsupported(Unsupported::Target);
    }
    out.clear();
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let checked = match check_and_write(req.headers, forwarded.router_headers, out) {
        Ok(checked) => checked,
        Err(reason) => return Parsed::Unsupported(reason),
    };
    let Some(host) = checked.host else {
        return Parsed::Unsupported(Unsupported::Host);
    };
    if host.is_empty() || !host.iter().all(|b| (0x21..0x7f).contains(b)) {
        return Parsed::Unsupported(Unsupported::Host);
    }
    write_forwarded(out, req.headers, forwarded, host, checked.forwarded_for);
    let body = checked.length.unwrap_or(0);
    Parsed::Ready(Head {
        len,
        body,
        host: offset_in(buf, host),
        close: checked.close,
        head_method: method == "HEAD",
        replayable: body == 0 && matches!(method, "GET" | "HEAD" | "OPTIONS"),
    })
}

/// What the pass over the headers found.
struct Checked<'b> {
    host: Option<&'b [u8]>,
    length: Option<u64>,
    close: bool,
    forwarded_for: bool,
}

/// Checks the headers against what the relay covers and, in the same pass, writes the
/// end-to-end ones to `out` as the client sent them (what was written is discarded when a
/// header is not covered).
fn check_and_write<'b>(
    headers: &[httparse::Header<'b>],
    router_headers: bool,
    out: &mut Vec<u8>,
) -> Result<Checked<'b>, Unsupported> {
    let mut checked = Checked {
        host: None,
        length: None,
        close: false,
        forwarded_for: false,
    };
    for header in headers {
        match names::classify(header.name) {
            Name::Host if checked.host.is_some() => return Err(Unsupported::Host),
            Name::Host => checked.host = Some(header.value),
            Name::ContentLength => {
                if checked.length.is_some() {
                    return Err(Unsupported::Framing);
                }
                let length = names::content_length(header.value).ok_or(Unsupported::Framing)?;
                if length > BODY_LIMIT {
                    return Err(Unsupported::LargeBody);
                }
                checked.length = Some(length);
            }
            Name::TransferEncoding => return Err(Unsupported::Framing),
            Name::Expect => return Err(Unsupported::Expect),
            Name::Upgrade => return Err(Unsupported::Upgrade),
            Name::Connection => {
                let options = names::connection_options(header.value);
                if options.other {
                    return Err(Unsupported::Upgrade);
                }
                checked.close |= options.close;
                continue;
            }
            Name::RouterHeader if router_headers => return Err(Unsupported::RouterHeaders),
            Name::ForwardedFor => {
                checked.forwarded_for = true;
                continue;
            }
            // Replaced by the proxy's own, or hop-by-hop.
            Name::ForwardedProto | Name::ForwardedHost | Name::HopByHop => continue,
            Name::RouterHeader | Name::Other => {}
        }
        names::write_header(out, header.name.as_bytes(), header.value);
    }
    Ok(checked)
}

/// Writes the forwarding headers and the end of the head.
fn write_forwarded(
    out: &mut Vec<u8>,
    headers: &[httparse::Header<'_>],
    forwarded: &Forwarded,
    host: &[u8],
    prior: bool,
) {
    out.extend_from_slice(b"x-forwarded-for: ");
    if prior {
        // Earlier hops' values, in order, joined into one list before the client's address.
        for header in headers {
            if names::classify(header.name) == Name::ForwardedFor {
                out.extend_from_slice(header.value);
                out.extend_from_slice(b", ");
            }
        }
    }
    out.extend_from_slice(forwarded.client.as_bytes());
    out.extend_from_slice(b"\r\nx-forwarded-proto: ");
    out.extend_from_slice(forwarded.proto.as_bytes());
    out.extend_from_slice(b"\r\nx-forwarded-host: ");
    out.extend_from_slice(host);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Where `part`, a slice of `buf`, lies in it.
fn offset_in(buf: &[u8], part: &[u8]) -> Range<usize> {
    // `part` was parsed out of `buf`, so it lies inside it.
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    start..start + part.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(router_headers: bool) -> Forwarded {
        Forwarded {
            client: "127.0.0.9".to_owned(),
            proto: "http",
            router_headers,
        }
    }

    fn rewrite(head: &str) -> (Parsed, String) {
        let mut out = Vec::new();
        let parsed = prepare(head.as_bytes(), &forwarded(true), &mut out);
        (parsed, String::from_utf8(out).expect("ascii"))
    }

    #[test]
    fn rewrites_a_request_head_for_the_sandbox() {
        let head = "POST /a?b=1 HTTP/1.1\r\nHost: app.default.sandbox.localhost\r\n\
                    Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n\
                    Proxy-Authorization: secret\r\nX-Forwarded-For: 10.0.0.1\r\n\
                    x-forwarded-for: 10.0.0.2\r\nX-Forwarded-Proto: https\r\n\
                    Content-Length: 3\r\nX-Kept: 1\r\n\r\nabc";
        let (parsed, out) = rewrite(head);
        let Parsed::Ready(ready) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(ready.len, head.len() - 3);
        assert_eq!(ready.body, 3);
        assert_eq!(
            &head[ready.host.clone()],
            "app.default.sandbox.localhost",
            "{ready:?}"
        );
        assert!(!ready.close && !ready.replayable && !ready.head_method);
        assert_eq!(
            out,
            "POST /a?b=1 HTTP/1.1\r\nHost: app.default.sandbox.localhost\r\n\
             Content-Length: 3\r\nX-Kept: 1\r\n\
             x-forwarded-for: 10.0.0.1, 10.0.0.2, 127.0.0.9\r\nx-forwarded-proto: http\r\n\
             x-forwarded-host: app.default.sandbox.localhost\r\n\r\n"
        );
    }

    #[test]
    fn notes_close_and_replayable_requests() {
        let (parsed, _) = rewrite("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n");
        let Parsed::Ready(ready) = parsed else {
            panic!("{parsed:?}");
        };
        assert!(ready.close && ready.replayable);
        let (parsed, _) = rewrite("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(matches!(
            parsed,
            Parsed::Ready(Head {
                head_method: true,
                ..
            })
        ));
        assert_eq!(rewrite("GET / HTTP/1.1\r\nHost: h\r\n").0, Parsed::Partial);
    }

    #[test]
    fn leaves_what_it_does_not_cover_to_the_full_path() {
        let cases = [
            ("GET / HTTP/1.0\r\nHost: h\r\n\r\n", Unsupported::Version),
            (
                "CONNECT h:1 HTTP/1.1\r\nHost: h\r\n\r\n",
                Unsupported::Target,
            ),
            (
                "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
                Unsupported::Target,
            ),
            ("GET / HTTP/1.1\r\n\r\n", Unsupported::Host),
            (
                "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                Unsupported::Host,
            ),
            ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Unsupported::Host),
            (
                "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
                Unsupported::Framing,
            ),
            (
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
                Unsupported::Framing,
            ),
            (
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n",
                Unsupported::Framing,
            ),
            (
                "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65537\r\n\r\n",
                Unsupported::LargeBody,
            ),
            (
                "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n",
                Unsupported::Expect,
            ),
            (
                "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
                Unsupported::Upgrade,
            ),
            (
                "GET / HTTP/1.1\r\nHost: h\r\nConnection: x-private\r\n\r\n",
                Unsupported::Upgrade,
            ),
            (
                "GET / HTTP/1.1\r\nHost: h\r\nX-Sandbox-ID: app\r\n\r\n",
                Unsupported::RouterHeaders,
            ),
            ("GET / HTTP/1.1\r\nHo st: h\r\n\r\n", Unsupported::Malformed),
        ];
        for (head, reason) in cases {
            assert_eq!(rewrite(head).0, Parsed::Unsupported(reason), "{head:?}");
        }
        // Router headers are plain headers when the proxy does not honour them.
        let mut out = Vec::new();
        let head = b"GET / HTTP/1.1\r\nHost: h\r\nX-Sandbox-ID: app\r\n\r\n";
        assert!(matches!(
            prepare(head, &forwarded(false), &mut out),
            Parsed::Ready(_)
        ));
    }
}
