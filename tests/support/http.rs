//! A minimal HTTP/1.1 client for the tests: one request per connection, bounded in time.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::DEADLINE;

/// One HTTP/1.1 request on a fresh connection; the status and the body as text.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, String)],
    body: String,
) -> Result<(u16, String), String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    let response = tokio::time::timeout(DEADLINE, sender.send_request(request))
        .await
        .map_err(|_| format!("{method} {path}: no response within {DEADLINE:?}"))?
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let code = response.status().as_u16();
    let bytes = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .map_err(|_| format!("{method} {path}: body not complete within {DEADLINE:?}"))?
        .map_err(|e| format!("{method} {path}: body: {e}"))?
        .to_bytes();
    Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
}
