//! Hold and wake across lifecycle changes that land while connections are held: a suspend
//! before the woken sandbox is Ready (issue 9's lost wake), a delete, a resume from elsewhere.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http::StatusCode;
use rouse_proxy::RouteState;
use support::backend::Backend;
use support::client::get;
use support::{DEADLINE, TestDirectory, config, host, start, wait_held};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// A wake deadline far above every wait of these tests, so that a test only passes when the
/// proxy acts on what it observes, never because a cycle timed out.
const LONG_WAKE: &str = "[wake]\ndeadline = \"300s\"\n";

/// One raw HTTP/1.1 request on its own connection; the status line, or "" when the proxy
/// closed without answering.
async fn raw_get(addr: SocketAddr, host: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    // A reset counts as a close.
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response);
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_suspend_before_the_woken_sandbox_is_ready_gets_its_own_wake() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("hello", RouteState::suspended(true));
    let proxy = start(config(LONG_WAKE), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    for cycle in 1..=5u64 {
        let started = Instant::now();
        let request = tokio::spawn(async move { get(addr, &host("hello"), "/").await });
        directory.wait_wakes(2 * cycle - 1).await;
        // The wake took effect: desired Running, not Ready yet.
        directory.set("hello", RouteState::Starting { endpoint: None });
        // Suspended again at once, before Ready: the held request needs a new wake.
        directory.set("hello", RouteState::suspended(true));
        directory.wait_wakes(2 * cycle).await;
        directory.running("hello", backend.addr);
        let reply = tokio::time::timeout(DEADLINE, request)
            .await
            .expect("the request is served")
            .expect("client task");
        assert_eq!(reply.status, StatusCode::OK, "cycle {cycle}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "cycle {cycle} took {:?}",
            started.elapsed()
        );
        directory.set("hello", RouteState::suspended(true));
    }
    assert_eq!(proxy.router().held_connections(), 0);
    proxy.shutdown().await;
}

#[tokio::test]
async fn deleting_a_sandbox_ends_its_held_connections_at_once() {
    const HELD: usize = 50;
    let directory = TestDirectory::new();
    directory.set("doomed", RouteState::suspended(true));
    let proxy = start(config(LONG_WAKE), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut clients = JoinSet::new();
    for _ in 0..HELD {
        clients.spawn(async move { raw_get(addr, &host("doomed")).await });
    }
    wait_held(proxy.router(), HELD).await;
    assert_eq!(directory.wakes(), 1, "one wake for all of them");

    let deleted = Instant::now();
    directory.set("doomed", RouteState::Missing);
    let all = async {
        while let Some(status) = clients.join_next().await {
            let status = status.expect("client task");
            assert!(
                status.is_empty() || status.starts_with("HTTP/1.1 404"),
                "got {status:?}"
            );
        }
    };
    tokio::time::timeout(DEADLINE, all)
        .await
        .expect("every held connection ends once the sandbox is deleted");
    // Prompt: seconds at most on a loaded machine, against a 300 s wake deadline.
    assert!(deleted.elapsed() < DEADLINE);
    wait_held(proxy.router(), 0).await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_resume_from_elsewhere_serves_the_held_connections() {
    const HELD: usize = 20;
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("napping", RouteState::suspended(true));
    // Wake calls fail: the sandbox is resumed by someone else (the API, another proxy).
    directory.fail_wakes(u64::MAX);
    let proxy = start(config(LONG_WAKE), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut clients = JoinSet::new();
    for _ in 0..HELD {
        clients.spawn(async move { raw_get(addr, &host("napping")).await });
    }
    wait_held(proxy.router(), HELD).await;
    directory.set("napping", RouteState::Starting { endpoint: None });
    directory.running("napping", backend.addr);
    let all = async {
        while let Some(status) = clients.join_next().await {
            let status = status.expect("client task");
            assert!(status.starts_with("HTTP/1.1 200"), "got {status:?}");
        }
    };
    tokio::time::timeout(DEADLINE, all)
        .await
        .expect("every held connection is served");
    wait_held(proxy.router(), 0).await;
    assert!(
        directory.wakes() >= 1,
        "the held connections asked for a wake"
    );
    proxy.shutdown().await;
}

/// A connection that arrives while the proxy is still loading its routes (the directory's
/// first list, e.g. right after `rouse up` restarts) waits for them instead of being told
/// that its sandbox does not exist.
#[tokio::test]
async fn a_connection_before_the_routes_are_loaded_waits_for_them() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("hello", backend.addr);
    let router = rouse_proxy::Router::new(config(""), directory.clone()).expect("router");
    let target = router
        .resolve_host(&host("hello"))
        .expect("the host names a sandbox");
    let connect = router.connect(&target, rouse_proxy::ConnKind::Tcp);
    let mut connect = std::pin::pin!(connect);
    // The routes are not loaded yet: the connection must wait, not fail with 404.
    assert!(
        futures::poll!(connect.as_mut()).is_pending(),
        "a connection before the first route list must wait for it"
    );
    router.start_updates();
    let upstream = tokio::time::timeout(DEADLINE, connect)
        .await
        .expect("connected once the routes are loaded")
        .expect("the sandbox is known once the routes are loaded");
    assert_eq!(upstream.addr, backend.addr);
    router.stop_background().await;
}

/// A backend whose first `drops` connections read the request and close without answering
/// (a workload stopped under the request); later ones answer 200 "ok".
async fn dropping_backend(drops: usize) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut accepted = 0;
        while let Ok((mut stream, _)) = listener.accept().await {
            accepted += 1;
            let drop_it = accepted <= drops;
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if !drop_it {
                    let reply =
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    let _ = stream.write_all(reply).await;
                }
            });
        }
    });
    addr
}

/// A bodiless GET whose upstream connection closes before any response (the workload stopped
/// under it) is sent once more and served; a POST is not sent again (502).
#[tokio::test]
async fn a_get_whose_workload_went_away_under_it_is_sent_again() {
    let backend = dropping_backend(1).await;
    let directory = TestDirectory::new();
    directory.running("hello", backend);
    let proxy = start(config(LONG_WAKE), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let reply = get(addr, &host("hello"), "/").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "ok");

    let backend = dropping_backend(1).await;
    directory.running("other", backend);
    let post = http::Request::post("/")
        .header("host", host("other"))
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"x")))
        .expect("request");
    let reply = support::client::send(addr, post).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{}", reply.body);
}

/// A workload stopped under the proxy's first connection to it: accepts one connection, and
/// once it has read the request head closes its listening socket (so the port refuses from
/// then on) and then the connection, without answering. Fires `stopped` once both are closed.
async fn stopping_backend() -> (SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stopped, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        drop(listener);
        drop(stream);
        let _ = stopped.send(());
    });
    (addr, rx)
}

/// How a test client sends its GET.
#[derive(Debug, Clone, Copy)]
enum Client {
    /// HTTP/1.1: the compact hold, then the relay or hyper (or hyper alone).
    Http1,
    /// HTTP/2 prior knowledge: the request goes upstream through the pooled client.
    H2c,
}

/// GETs `/` from `host` through the proxy at `addr` as `client` does.
async fn client_get(client: Client, addr: SocketAddr, host: &str) -> support::client::Reply {
    match client {
        Client::Http1 => get(addr, host, "/").await,
        Client::H2c => {
            let req = http::Request::get(format!("http://{host}/"))
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .expect("request");
            support::client::send_h2(addr, req).await
        }
    }
}

/// Issue 9's cycle with the suspend landing after the proxy dialled the woken workload and
/// sent it the request: the workload is stopped under the request, its port refuses, and the
/// proxy still shows the sandbox up at that address (it has not seen the suspend yet). The
/// GET is sent again through hold-and-wake: it is held until the suspend shows, wakes the
/// sandbox again and is served — never answered 502 "Connection refused" as if the port of a
/// ready sandbox were closed; at its next address a closed port is a 502 at once again. Every
/// codec: the compact hold with the relay and with hyper, the full path (sticky connection),
/// and an HTTP/2 client (pooled connection); each both for a request that was held for a wake
/// first and for one that was not.
#[tokio::test]
async fn a_get_whose_woken_workload_is_stopped_under_it_is_held_and_woken_again() {
    let cases = [
        ("", Client::Http1),
        ("relay = false\n", Client::Http1),
        ("compact_hold = false\n", Client::Http1),
        ("", Client::H2c),
    ];
    for (http, client) in cases {
        for held_first in [true, false] {
            let case = format!("[http] {http:?}, {client:?}, held first {held_first}");
            let text = format!("[http]\nlisten = \"127.0.0.1:0\"\n{http}{LONG_WAKE}");
            let directory = TestDirectory::new();
            let (stopping, stopped) = stopping_backend().await;
            let mut wakes = 0;
            if held_first {
                directory.set("hello", RouteState::suspended(true));
            } else {
                directory.running("hello", stopping);
            }
            let proxy = start(support::config_with_http(&text), &directory).await;
            let addr = proxy.addrs().http.expect("http listener");
            let mut request =
                tokio::spawn(async move { client_get(client, addr, &host("hello")).await });
            if held_first {
                wait_held(proxy.router(), 1).await;
                wakes += 1;
                directory.wait_wakes(wakes).await;
                // Woken: Ready at an address whose workload is stopped under the request.
                directory.running("hello", stopping);
            }
            tokio::time::timeout(DEADLINE, stopped)
                .await
                .unwrap_or_else(|_| panic!("{case}: the request reached the workload"))
                .expect("backend task");
            // Its port refuses now, and the route still says Running there: the request
            // waits for the route to change instead of being answered.
            tokio::select! {
                () = wait_held(proxy.router(), 1) => {}
                reply = &mut request => {
                    let reply = reply.expect("client task");
                    panic!("{case}: answered {} before the suspend showed: {}", reply.status, reply.body);
                }
            }
            directory.set("hello", RouteState::suspended(true));
            wakes += 1;
            directory.wait_wakes(wakes).await;
            let backend = Backend::start().await;
            directory.running("hello", backend.addr);
            let reply = tokio::time::timeout(DEADLINE, request)
                .await
                .unwrap_or_else(|_| panic!("{case}: the request is served"))
                .expect("client task");
            assert_eq!(reply.status, StatusCode::OK, "{case}: {}", reply.body);
            wait_held(proxy.router(), 0).await;
            // The loss stays with the address it happened at: at the next one, a closed port
            // of the Ready sandbox is a 502 at once again (the wake deadline is 300 s).
            let closed = tokio::net::TcpSocket::new_v4().expect("socket");
            closed
                .bind("127.0.0.1:0".parse().expect("addr"))
                .expect("bind");
            directory.running("hello", closed.local_addr().expect("addr"));
            // Served by the previous address until the proxy has applied the new one.
            let until = tokio::time::Instant::now() + DEADLINE;
            let reply = loop {
                let reply =
                    tokio::time::timeout_at(until, client_get(client, addr, &host("hello")))
                        .await
                        .unwrap_or_else(|_| panic!("{case}: a closed port is answered at once"));
                if reply.status != StatusCode::OK || tokio::time::Instant::now() >= until {
                    break reply;
                }
            };
            assert_eq!(
                reply.status,
                StatusCode::BAD_GATEWAY,
                "{case}: {}",
                reply.body
            );
            proxy.shutdown().await;
        }
    }
}
