//! A small HTTP client for tests: one request per connection (HTTP/1.1 or h2c), the whole
//! response read as text.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

/// A response read whole.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as text.
    pub body: String,
}

/// GETs `path` from the proxy at `addr` with `Host: host` over HTTP/1.1.
pub async fn get(addr: SocketAddr, host: &str, path: &str) -> Reply {
    let req = Request::get(path)
        .header("host", host)
        .body(Full::new(Bytes::new()))
        .expect("request");
    send(addr, req).await
}

/// Sends one request over a new HTTP/1.1 connection.
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect to proxy");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("http1 handshake");
    tokio::spawn(conn);
    let response = sender.send_request(req).await.expect("response");
    read(response).await
}

/// Sends one request over a new h2c (prior knowledge) connection.
pub async fn send_h2(addr: SocketAddr, req: Request<Full<Bytes>>) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect to proxy");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let response = sender.send_request(req).await.expect("response");
    read(response).await
}

async fn read(response: http::Response<hyper::body::Incoming>) -> Reply {
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}
