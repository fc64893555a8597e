//! Helpers of the Kubernetes-mode proxy tests: a real HTTP backend, raw HTTP/1.1 requests,
//! Sandbox manifests and condition waits.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rouse_shared::api::Sandbox;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bounds every wait; only reached when something is broken.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Starts an HTTP/1.1 backend on 127.0.0.1 answering every request `200 backend {name}`.
pub async fn backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind backend");
    let addr = listener.local_addr().expect("backend addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(move |_req| async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(
                        format!("backend {name}"),
                    ))))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// One `GET /` with `Host: host` through the proxy at `proxy`: the status code and the body.
pub async fn get(proxy: SocketAddr, host: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = TcpStream::connect(proxy).await.expect("connect to proxy");
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("write request");
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .expect("read response");
        String::from_utf8_lossy(&response).into_owned()
    };
    let response = tokio::time::timeout(DEADLINE, exchange)
        .await
        .unwrap_or_else(|_| panic!("no response for {host} within {DEADLINE:?}"));
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// A Sandbox whose one container declares `port`, with the top-level keys of `spec` added.
pub fn sandbox(namespace: &str, name: &str, port: u16, spec: Value) -> Sandbox {
    let mut value = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podTemplate": {"spec": {"containers": [{
            "name": "main",
            "image": "busybox:1.36",
            "ports": [{"containerPort": port}],
        }]}}},
    });
    if let (Some(target), Value::Object(extra)) = (value["spec"].as_object_mut(), spec) {
        target.extend(extra);
    }
    serde_json::from_value(value).expect("a valid Sandbox")
}

/// Polls `check` until it gives a value; panics naming `what` and the last state at the
/// deadline.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let end = Instant::now() + DEADLINE;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) => assert!(
                Instant::now() < end,
                "{what}: not reached within {DEADLINE:?}; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
