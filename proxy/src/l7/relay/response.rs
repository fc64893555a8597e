//! The response side of the relay: a sandbox's response head parsed, its body's framing
//! found (RFC 9112 §6.3), and the head rewritten for the client in one pass.

use super::names::{self, Name};

/// Most headers of a response (hyper's limit on the full path too).
const MAX_HEADERS: usize = 100;

/// Largest response head accepted from a sandbox.
pub const HEAD_LIMIT: usize = 64 * 1024;

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (`HEAD`, 1xx, 204, 304).
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`, passed through as it is.
    Chunked,
    /// Until the sandbox closes the connection: the client's connection closes after it.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head in the sandbox's buffer.
    pub len: usize,
    /// The status code.
    pub status: u16,
    /// How its body is delimited.
    pub framing: Framing,
    /// The upstream connection cannot carry another request after this response.
    pub upstream_closes: bool,
}

/// A response head the relay does not forward: the client gets a 502.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Not a valid HTTP/1 response head.
    #[error("malformed response head: {0}")]
    Malformed(httparse::Error),
    /// Larger than [`HEAD_LIMIT`].
    #[error("response head larger than {HEAD_LIMIT} bytes")]
    TooLarge,
    /// `Content-Length` invalid or repeated with different values.
    #[error("invalid Content-Length")]
    Length,
    /// `101 Switching Protocols` to a request that asked for no upgrade.
    #[error("101 Switching Protocols to a request that asked for no upgrade")]
    Upgrade,
}

/// Parses the response head at the start of `buf`; when complete, writes its rewritten form
/// to `out` (cleared first). `head_method`: the request was `HEAD`; `close`: the client's
/// connection closes after this response (said in the rewritten head).
pub fn prepare(
    buf: &[u8],
    head_method: bool,
    close: bool,
    out: &mut Vec<u8>,
) -> Result<Option<Head>, Invalid> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len > HEAD_LIMIT => return Err(Invalid::TooLarge),
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= HEAD_LIMIT => return Err(Invalid::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(err) => return Err(Invalid::Malformed(err)),
    };
    // A complete parse always has these.
    let (Some(status), Some(version)) = (resp.code, resp.version) else {
        return Err(Invalid::Malformed(httparse::Error::Status));
    };
    if status == 101 {
        return Err(Invalid::Upgrade);
    }
    let found = scan(resp.headers)?;
    let framing = if head_method || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if let Some(chunked) = found.chunked {
        // A transfer coding that does not end in chunked is delimited by the close.
        if chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if let Some(length) = found.length {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    let persistent = if version == 0 {
        found.options.keep_alive && !found.options.close
    } else {
        !found.options.close
    };
    // An informational response says nothing of the connection; the final one does.
    let informational = (100..200).contains(&status);
    let close = (close || framing == Framing::UntilClose) && !informational;
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status_digits(status).as_slice());
    out.push(b' ');
    out.extend_from_slice(resp.reason.unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for header in resp.headers.iter() {
        let forward = match names::classify(header.name) {
            Name::Connection | Name::HopByHop | Name::Upgrade => false,
            // Passed on with the body it describes, which goes through unchanged.
            Name::TransferEncoding => true,
            // Ignored when a transfer coding delimits the body (RFC 9112 §6.3).
            Name::ContentLength => found.chunked.is_none(),
            _ => !found.options.other || !named_by_connection(resp.headers, header.name),
        };
        if forward {
            names::write_header(out, header.name.as_bytes(), header.value);
        }
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(Some(Head {
        len,
        status,
        framing,
        // A transfer coding on an HTTP/1.0 response, or with a Content-Length, is framing
        // that cannot be trusted for the next message (RFC 9112 §6.1): close after it.
        upstream_closes: !persistent
            || framing == Framing::UntilClose
            || (found.chunked.is_some() && (version == 0 || found.length.is_some())),
    }))
}

/// What one pass over a response's headers found.
struct Found {
    /// `Some(ends in chunked)` when a transfer coding is present.
    chunked: Option<bool>,
    length: Option<u64>,
    options: names::ConnectionOptions,
}

/// Reads the framing and connection headers.
fn scan(headers: &[httparse::Header<'_>]) -> Result<Found, Invalid> {
    let mut found = Found {
        chunked: None,
        length: None,
        options: names::ConnectionOptions::default(),
    };
    for header in headers {
        match names::classify(header.name) {
            Name::TransferEncoding => {
                // The last coding of the last header is what delimits the body.
                let last = header
                    .value
                    .rsplit(|b| *b == b',')
                    .next()
                    .unwrap_or_default()
                    .trim_ascii();
                found.chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
            }
            Name::ContentLength => {
                let length = names::content_length(header.value).ok_or(Invalid::Length)?;
                if found.length.is_some_and(|seen| seen != length) {
                    return Err(Invalid::Length);
                }
                found.length = Some(length);
            }
            Name::Connection => {
                let options = names::connection_options(header.value);
                found.options.close |= options.close;
                found.options.keep_alive |= options.keep_alive;
                found.options.other |= options.other;
            }
            _ => {}
        }
    }
    Ok(found)
}

/// Whether a `Connection` header among `headers` names `name`.
fn named_by_connection(headers: &[httparse::Header<'_>], name: &str) -> bool {
    headers.iter().any(|header| {
        names::classify(header.name) == Name::Connection && names::names_header(header.value, name)
    })
}

/// The three digits of a status code (httparse accepts only three-digit codes).
fn status_digits(status: u16) -> [u8; 3] {
    // Each digit is below 10, so the casts cannot truncate.
    [
        b'0' + (status / 100 % 10) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(
        head: &str,
        head_method: bool,
        close: bool,
    ) -> (Result<Option<Head>, Invalid>, String) {
        let mut out = Vec::new();
        let parsed = prepare(head.as_bytes(), head_method, close, &mut out);
        (parsed, String::from_utf8(out).expect("ascii"))
    }

    fn framing(head: &str) -> Framing {
        rewrite(head, false, false)
            .0
            .expect("valid")
            .expect("complete")
            .framing
    }

    #[test]
    fn rewrites_a_response_head_for_the_client() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive, x-hop\r\n\
                    Keep-Alive: timeout=5\r\nX-Hop: 1\r\nX-Kept: 2\r\n\r\nhello";
        let (parsed, out) = rewrite(head, false, false);
        let parsed = parsed.expect("valid").expect("complete");
        assert_eq!(parsed.len, head.len() - 5);
        assert_eq!(parsed.framing, Framing::Length(5));
        assert!(!parsed.upstream_closes);
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Kept: 2\r\n\r\n"
        );
        let (_, out) = rewrite(
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            false,
            true,
        );
        assert_eq!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nconnection: close\r\n\r\n"
        );
        assert_eq!(rewrite("HTTP/1.1 200 OK\r\n", false, false).0, Ok(None));
    }

    #[test]
    fn finds_how_the_body_is_delimited() {
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n"),
            Framing::Length(7)
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n"),
            Framing::Chunked
        );
        assert_eq!(
            framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            Framing::UntilClose
        );
        assert_eq!(framing("HTTP/1.1 200 OK\r\n\r\n"), Framing::UntilClose);
        assert_eq!(
            framing("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"),
            Framing::Empty
        );
        assert_eq!(framing("HTTP/1.1 304 Not Modified\r\n\r\n"), Framing::Empty);
        assert_eq!(
            framing("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"),
            Framing::Empty
        );
        let head = rewrite("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, false).0;
        assert_eq!(
            head.expect("valid").expect("complete").framing,
            Framing::Empty
        );
        // A chunked response passes on with its coding, without a Content-Length.
        let (_, out) = rewrite(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n",
            false,
            false,
        );
        assert_eq!(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    }

    /// Whether the upstream connection ends after a response with this head.
    fn closes(head: &str) -> bool {
        rewrite(head, false, false)
            .0
            .expect("valid")
            .expect("complete")
            .upstream_closes
    }

    #[test]
    fn knows_when_the_upstream_connection_ends() {
        assert!(closes(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(closes("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!closes(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(closes("HTTP/1.1 200 OK\r\n\r\n"));
        let (_, out) = rewrite("HTTP/1.1 200 OK\r\n\r\n", false, false);
        assert_eq!(out, "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
    }

    #[test]
    fn doubtful_framing_ends_the_upstream_connection_and_hints_never_close() {
        assert!(closes(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        ));
        assert!(closes(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(!closes(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        let (_, out) = rewrite(
            "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
            false,
            true,
        );
        assert!(!out.contains("connection: close"), "{out}");
    }

    #[test]
    fn refuses_what_it_cannot_forward() {
        assert_eq!(
            rewrite(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false,
                false
            )
            .0,
            Err(Invalid::Length)
        );
        assert_eq!(
            rewrite(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
                false,
                false
            )
            .0
            .expect("valid")
            .expect("complete")
            .framing,
            Framing::Length(1)
        );
        assert_eq!(
            rewrite("HTTP/1.1 101 Switching Protocols\r\n\r\n", false, false).0,
            Err(Invalid::Upgrade)
        );
        assert!(matches!(
            rewrite("HTTP/1.1 2000 OK\r\n\r\n", false, false).0,
            Err(Invalid::Malformed(_))
        ));
        let huge = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n", "a".repeat(HEAD_LIMIT));
        assert_eq!(rewrite(&huge, false, false).0, Err(Invalid::TooLarge));
    }
}
