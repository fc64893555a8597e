//! Responses the proxy makes itself: short text bodies naming the reason, `Retry-After` where a
//! retry may work.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

use crate::error::ProxyError;

/// The body of every response the proxy sends.
pub type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A short text response.
pub(crate) fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The response for a proxy error: its status, `Retry-After` if retryable, and the reason.
pub(crate) fn error(err: &ProxyError) -> Response<ProxyBody> {
    let mut response = text(err.status_code(), format!("{err}\n"));
    if let Some(secs) = err.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

/// The response for a proxy error as HTTP/1.1 bytes, as [`error`] makes it; with
/// `Connection: close` when `close`.
pub(crate) fn error_bytes(err: &ProxyError, close: bool) -> Vec<u8> {
    use std::io::Write as _;
    let status = err.status_code();
    let body = format!("{err}\n");
    let mut out = Vec::with_capacity(160 + body.len());
    // Writes to a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    );
    if let Some(secs) = err.retry_after_secs() {
        let _ = write!(out, "retry-after: {secs}\r\n");
    }
    let _ = write!(out, "content-length: {}\r\n", body.len());
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bytes_say_what_the_error_response_says() {
        let err = ProxyError::Suspended {
            key: crate::directory::SandboxKey::new("default", "app"),
            reason: "wake-on-connect is off".to_owned(),
        };
        let text = String::from_utf8(error_bytes(&err, true)).expect("ascii");
        let body = format!("{err}\n");
        let status = err.status_code();
        assert!(
            text.starts_with(&format!("HTTP/1.1 {} ", status.as_str())),
            "{text}"
        );
        assert!(
            text.contains(&format!("content-length: {}\r\n", body.len())),
            "{text}"
        );
        assert!(text.contains("connection: close\r\n"), "{text}");
        assert!(text.ends_with(&format!("\r\n\r\n{body}")), "{text}");
        let kept = String::from_utf8(error_bytes(&err, false)).expect("ascii");
        assert!(!kept.contains("connection: close"), "{kept}");
        if let Some(secs) = err.retry_after_secs() {
            assert!(text.contains(&format!("retry-after: {secs}\r\n")), "{text}");
        }
    }
}
