//! Real backends on 127.0.0.1: an HTTP/1.1 server with a few behaviours by path, and a
//! WebSocket echo server. Each stops when its handle is dropped.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{Request, Response};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

type Body = BoxBody<Bytes, hyper::Error>;

/// A running backend.
pub struct Backend {
    /// Where it listens.
    pub addr: SocketAddr,
    release: Arc<watch::Sender<bool>>,
    task: JoinHandle<()>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Backend {
    /// An HTTP backend on a fresh port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        Self::serve(listener)
    }

    /// An HTTP backend on `listener`.
    ///
    /// Paths: `/headers` lists the request headers; `/echo` streams the request body back;
    /// `/slow` answers once [`Backend::release_slow`] is called; others say hello. Every
    /// response names the backend's port in `x-backend-port`.
    pub fn serve(listener: TcpListener) -> Self {
        let addr = listener.local_addr().expect("backend addr");
        let release = Arc::new(watch::channel(false).0);
        let gate = Arc::clone(&release);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let gate = Arc::clone(&gate);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |req| answer(req, Arc::clone(&gate), addr.port()));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            release,
            task,
        }
    }

    /// Lets `/slow` requests answer.
    pub fn release_slow(&self) {
        self.release.send_replace(true);
    }
}

fn full(text: String) -> Body {
    Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed()
}

async fn answer(
    req: Request<Incoming>,
    gate: Arc<watch::Sender<bool>>,
    port: u16,
) -> Result<Response<Body>, Infallible> {
    let mut response = match req.uri().path() {
        "/headers" => {
            let mut text = String::new();
            for (name, value) in req.headers() {
                text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
            }
            Response::new(full(text))
        }
        "/echo" => Response::new(req.into_body().boxed()),
        "/slow" => {
            let mut rx = gate.subscribe();
            let _ = rx.wait_for(|open| *open).await;
            Response::new(full("slow done".to_owned()))
        }
        path => Response::new(full(format!("hello {path}"))),
    };
    let headers = response.headers_mut();
    headers.insert("x-backend", "1".parse().expect("header"));
    headers.insert("x-backend-port", port.into());
    headers.insert("connection", "x-hop".parse().expect("header"));
    headers.insert("x-hop", "secret".parse().expect("header"));
    headers.insert("keep-alive", "timeout=5".parse().expect("header"));
    Ok(response)
}

/// A WebSocket echo server; returns its address and the task serving it.
pub async fn websocket_echo() -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind ws");
    let addr = listener.local_addr().expect("ws addr");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() {
                        break;
                    }
                    if ws.send(message).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, task)
}
