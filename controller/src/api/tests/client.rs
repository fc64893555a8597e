//! A small HTTP client for the API tests: JSON requests with the bearer token and readers of
//! streamed responses that wait with a deadline.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{Method, Request, StatusCode, header};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client as Http;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

type Body = BoxBody<Bytes, Infallible>;

/// A client of one API server.
pub struct Client {
    addr: SocketAddr,
    token: Option<String>,
    http: Http<HttpConnector, Body>,
}

impl Client {
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Self {
        Self {
            addr,
            token: token.map(str::to_owned),
            http: Http::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Body,
    ) -> hyper::Response<Incoming> {
        let mut request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("method"))
            .uri(format!("http://{}{path}", self.addr));
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let request = request.body(body).expect("request");
        tokio::time::timeout(super::DEADLINE, self.http.request(request))
            .await
            .expect("response in time")
            .expect("response")
    }

    async fn read(response: hyper::Response<Incoming>) -> (StatusCode, Bytes) {
        let status = response.status();
        let body = tokio::time::timeout(super::DEADLINE, response.into_body().collect())
            .await
            .expect("body in time")
            .expect("body")
            .to_bytes();
        (status, body)
    }

    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let response = self
            .send(
                method,
                path,
                content_type,
                Full::new(Bytes::from(body)).boxed(),
            )
            .await;
        let (status, bytes) = Self::read(response).await;
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!("{method} {path}: {status} body is not JSON ({e}): {bytes:?}")
        });
        (status, value)
    }

    /// Sends the body in chunks without a content length.
    pub async fn chunked(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (StatusCode, Value) {
        let chunks: Vec<Result<Frame<Bytes>, Infallible>> = body
            .chunks(1024)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let body = BodyExt::boxed(StreamBody::new(futures::stream::iter(chunks)));
        let response = self.send(method, path, Some(content_type), body).await;
        let (status, bytes) = Self::read(response).await;
        (status, serde_json::from_slice(&bytes).expect("JSON body"))
    }

    pub async fn raw_json(&self, method: &str, path: &str) -> (StatusCode, Value) {
        self.raw(method, path, None, Vec::new()).await
    }

    pub async fn raw_text(&self, method: &str, path: &str) -> (StatusCode, String) {
        let response = self
            .send(method, path, None, Full::new(Bytes::new()).boxed())
            .await;
        let (status, bytes) = Self::read(response).await;
        (status, String::from_utf8(bytes.to_vec()).expect("utf-8"))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.raw_json("GET", path).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.raw_json("DELETE", path).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.raw(
            "POST",
            path,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.raw(
            "PUT",
            path,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> (StatusCode, Value) {
        self.raw(
            "PATCH",
            path,
            Some(content_type),
            body.to_string().into_bytes(),
        )
        .await
    }

    /// Starts a streamed GET that must answer 200.
    pub async fn stream(&self, path: &str) -> Lines {
        let response = self
            .send("GET", path, None, Full::new(Bytes::new()).boxed())
            .await;
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        Lines {
            body: response.into_body(),
            buffer: Vec::new(),
        }
    }
}

/// A streamed response read as it arrives.
pub struct Lines {
    body: Incoming,
    buffer: Vec<u8>,
}

impl Lines {
    /// Reads one more frame into the buffer; false at the end of the body.
    async fn fill(&mut self, deadline: tokio::time::Instant, waiting_for: &str) -> bool {
        let frame = tokio::time::timeout_at(deadline, self.body.frame())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "timed out waiting for {waiting_for}; got so far: {:?}",
                    String::from_utf8_lossy(&self.buffer)
                )
            });
        match frame {
            None => false,
            Some(frame) => {
                if let Ok(data) = frame.expect("frame").into_data() {
                    self.buffer.extend_from_slice(&data);
                }
                true
            }
        }
    }

    /// The next `n` lines, parsed as JSON.
    pub async fn json_lines(&mut self, n: usize, within: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + within;
        let mut out = Vec::new();
        while out.len() < n {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                out.push(serde_json::from_slice(&line).expect("JSON line"));
                continue;
            }
            let what = format!("{n} lines (have {})", out.len());
            assert!(
                self.fill(deadline, &what).await,
                "stream ended before {what}"
            );
        }
        out
    }

    /// The text up to and including `needle`.
    pub async fn text_until(&mut self, needle: &str, within: Duration) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let text = String::from_utf8_lossy(&self.buffer).into_owned();
            if let Some(at) = text.find(needle) {
                let end = at + needle.len();
                self.buffer.drain(..end);
                return text[..end].to_owned();
            }
            assert!(
                self.fill(deadline, needle).await,
                "stream ended before {needle:?}"
            );
        }
    }

    /// Waits for the stream to end.
    pub async fn end(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.fill(deadline, "the end of the stream").await {}
    }
}
