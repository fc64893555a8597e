//! The upstream agent-sandbox router protocol through the proxy: `X-Sandbox-ID`,
//! `-Namespace` and `-Port` route, `X-Sandbox-Timeout` bounds the hold and the wait for an
//! answer, `X-Sandbox-Pod-IP` is ignored.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use rouse_proxy::RouteState;
use rouse_proxy::directory::{Endpoint, PortMapping};
use support::backend::Backend;
use support::client::send;
use support::{TestDirectory, config, start};

const ROUTER_HEADERS: &str = "[routing]\nupstream_headers = true\n";

fn routed(path: &str, sandbox: &str) -> http::request::Builder {
    Request::get(path)
        .header("host", "router.example.com")
        .header("x-sandbox-id", sandbox)
        .header("x-sandbox-namespace", "default")
}

#[tokio::test]
async fn pod_ip_header_is_ignored() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(ROUTER_HEADERS), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    // 192.0.2.1 (TEST-NET-1) is never dialled: the directory's address is.
    let req = routed("/execute", "alice")
        .header("x-sandbox-pod-ip", "192.0.2.1")
        .header("x-sandbox-timeout", "5")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "hello /execute");
    proxy.shutdown().await;
}

#[tokio::test]
async fn timeout_header_bounds_the_hold() {
    let directory = TestDirectory::new();
    directory.set("sleepy", RouteState::suspended(true));
    let proxy = start(
        config(&format!("{ROUTER_HEADERS}[wake]\ndeadline = \"30s\"\n")),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");

    let started = Instant::now();
    let req = routed("/", "sleepy")
        .header("x-sandbox-timeout", "0.3")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT, "{}", reply.body);
    assert!(reply.body.contains("X-Sandbox-Timeout"), "{}", reply.body);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 30 s wake deadline was not shortened: {:?}",
        started.elapsed()
    );
    assert_eq!(directory.wakes(), 1, "the hold asked for the wake");
    assert_eq!(
        proxy.router().held_connections(),
        0,
        "the hold was released"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn timeout_header_bounds_a_slow_answer_and_bad_values_are_ignored() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("slowpoke", backend.addr);
    let proxy = start(config(ROUTER_HEADERS), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let req = routed("/slow", "slowpoke")
        .header("x-sandbox-timeout", "0.2")
        .body(Full::new(Bytes::new()))
        .expect("request");
    assert_eq!(send(addr, req).await.status, StatusCode::GATEWAY_TIMEOUT);

    // Not a positive finite number: no bound of its own, as the upstream router.
    backend.release_slow();
    for value in ["0", "-3", "inf", "soon"] {
        let req = routed("/slow", "slowpoke")
            .header("x-sandbox-timeout", value)
            .body(Full::new(Bytes::new()))
            .expect("request");
        let reply = send(addr, req).await;
        assert_eq!(reply.status, StatusCode::OK, "{value}: {}", reply.body);
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn port_header_picks_the_sandbox_port() {
    let first = Backend::start().await;
    let second = Backend::start().await;
    let directory = TestDirectory::new();
    // The SDK's default port 8888 is the second declared one, not the default port.
    let ports = [(80, first.addr.port()), (8888, second.addr.port())]
        .map(|(container_port, port)| PortMapping {
            container_port,
            port,
        })
        .to_vec();
    directory.set(
        "two-ports",
        RouteState::Running {
            endpoint: Endpoint {
                address: "127.0.0.1".to_owned(),
                ports,
            },
        },
    );
    let proxy = start(config(ROUTER_HEADERS), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let req = routed("/", "two-ports")
        .header("x-sandbox-port", "8888")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(
        reply.headers["x-backend-port"],
        second.addr.port().to_string()
    );
    proxy.shutdown().await;
}
