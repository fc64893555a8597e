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
