//! Hold and wake end to end: the wake storm, the deadline, the held limits and dial retries
//! while a sandbox's port is not listening yet.

mod support;

use std::net::SocketAddr;

use http::StatusCode;
use rouse_proxy::RouteState;
use rouse_proxy::directory::Endpoint;
use support::backend::Backend;
use support::client::get;
use support::directory::running;
use support::{DEADLINE, TestDirectory, config, host, start, wait_for, wait_held};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// A socket bound to a port but not listening: dials to it are refused until `listen`.
fn reserved_port() -> (TcpSocket, SocketAddr) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let addr = socket.local_addr().expect("addr");
    (socket, addr)
}

/// One raw HTTP/1.1 request on its own connection; returns the status line.
async fn raw_get(stream: &mut TcpStream, host: &str) -> String {
    let request = format!("GET /storm HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8_lossy(&response);
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_storm_sends_one_wake_and_every_connection_completes() {
    const CONNECTIONS: usize = 1000;
    const CHUNK: usize = 100;
    let (socket, backend_addr) = reserved_port();
    let directory = TestDirectory::new();
    directory.set("storm", RouteState::suspended(true));
    let proxy = start(
        config(
            "[wake]\nmax_held_per_sandbox = 1024\nmax_held_total = 2048\nrelease_concurrency = 64\n\
             [limits]\nmax_connections = 4096\n",
        ),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let mut clients = JoinSet::new();
    for _ in 0..CONNECTIONS / CHUNK {
        for _ in 0..CHUNK {
            let host = host("storm");
            clients.spawn(async move {
                let mut stream = TcpStream::connect(addr).await.expect("connect");
                raw_get(&mut stream, &host).await
            });
        }
        // Pace the connects so the accept backlog never overflows.
        let target = clients.len();
        wait_for("a chunk of clients held", || {
            let router = router.clone();
            async move { router.held_connections() >= target }
        })
        .await;
    }
    assert_eq!(router.held_connections(), CONNECTIONS);
    directory.wait_wakes(1).await;

    // The sandbox comes up: its address is known before its port listens.
    directory.set("storm", running(backend_addr));
    let listener = socket.listen(1024).expect("listen");
    let _backend = Backend::serve(listener);

    let mut ok = 0;
    let all = async {
        while let Some(result) = clients.join_next().await {
            let status = result.expect("client task");
            assert!(status.starts_with("HTTP/1.1 200"), "got {status:?}");
            ok += 1;
        }
    };
    tokio::time::timeout(DEADLINE * 2, all)
        .await
        .expect("every held connection completes");
    assert_eq!(ok, CONNECTIONS);
    assert_eq!(directory.wakes(), 1, "exactly one wake for the whole storm");
    // Dials the pooled client started for requests another connection served finish on
    // their own; none stays held.
    wait_held(&router, 0).await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_sandbox_that_does_not_wake_in_time_gets_503_with_retry_after() {
    let directory = TestDirectory::new();
    directory.set("sleepy", RouteState::suspended(true));
    let proxy = start(config("[wake]\ndeadline = \"300ms\"\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let reply = get(addr, &host("sleepy"), "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        reply.headers.contains_key("retry-after"),
        "{:?}",
        reply.headers
    );
    assert!(
        reply.body.contains("did not become ready"),
        "{}",
        reply.body
    );
    assert_eq!(directory.wakes(), 1);
    assert_eq!(proxy.router().held_connections(), 0);
    proxy.shutdown().await;
}

#[tokio::test]
async fn connections_beyond_the_held_limit_get_503() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("busy", RouteState::suspended(true));
    let proxy = start(config("[wake]\nmax_held_per_sandbox = 2\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let mut held = JoinSet::new();
    for _ in 0..2 {
        held.spawn(async move { get(addr, &host("busy"), "/held").await });
    }
    wait_held(&router, 2).await;
    let reply = get(addr, &host("busy"), "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.headers.contains_key("retry-after"));
    assert!(
        reply.body.contains("too many connections"),
        "{}",
        reply.body
    );

    directory.running("busy", backend.addr);
    while let Some(reply) = held.join_next().await {
        assert_eq!(reply.expect("held client").status, StatusCode::OK);
    }
    assert_eq!(directory.wakes(), 1);
    proxy.shutdown().await;
}

#[tokio::test]
async fn refused_dials_are_retried_until_the_port_listens() {
    let (socket, backend_addr) = reserved_port();
    let directory = TestDirectory::new();
    directory.set(
        "late",
        RouteState::Starting {
            endpoint: Some(Endpoint {
                address: backend_addr.ip().to_string(),
                ports: vec![rouse_proxy::directory::PortMapping {
                    container_port: 80,
                    port: backend_addr.port(),
                }],
            }),
        },
    );
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let request = tokio::spawn(async move { get(addr, &host("late"), "/late").await });
    // A refused dial makes the connection a held one while it retries.
    wait_held(&router, 1).await;
    let _backend = Backend::serve(socket.listen(16).expect("listen"));
    let reply = tokio::time::timeout(DEADLINE, request)
        .await
        .expect("request completes")
        .expect("client task");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "hello /late");
    assert_eq!(
        directory.wakes(),
        0,
        "a starting sandbox is not woken again"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_failed_wake_is_retried_while_connections_wait() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("flaky", RouteState::suspended(true));
    directory.fail_wakes(2);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let request = tokio::spawn(async move { get(addr, &host("flaky"), "/").await });
    directory.wait_wakes(3).await;
    directory.running("flaky", backend.addr);
    let reply = tokio::time::timeout(DEADLINE, request)
        .await
        .expect("request completes")
        .expect("client task");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        directory.wakes(),
        3,
        "two failures, then one wake that worked"
    );
    proxy.shutdown().await;
}

/// The endpoint of a sandbox at `addr`, port 80 mapped to it.
fn endpoint_at(addr: SocketAddr) -> Endpoint {
    Endpoint {
        address: addr.ip().to_string(),
        ports: vec![rouse_proxy::directory::PortMapping {
            container_port: 80,
            port: addr.port(),
        }],
    }
}

#[tokio::test]
async fn a_woken_workload_that_never_listens_gets_its_held_requests_503_with_retry_after() {
    // Woken to an address nobody listens on: starting (not ready yet), or ready.
    for ready in [false, true] {
        let (_socket, closed) = reserved_port();
        let directory = TestDirectory::new();
        directory.set("mute", RouteState::suspended(true));
        let proxy = start(config("[wake]\ndeadline = \"1s\"\n"), &directory).await;
        let addr = proxy.addrs().http.expect("http listener");
        let router = proxy.router().clone();

        let request = tokio::spawn(async move { get(addr, &host("mute"), "/").await });
        wait_held(&router, 1).await;
        directory.wait_wakes(1).await;
        let endpoint = endpoint_at(closed);
        directory.set(
            "mute",
            if ready {
                RouteState::Running { endpoint }
            } else {
                RouteState::Starting {
                    endpoint: Some(endpoint),
                }
            },
        );
        let reply = tokio::time::timeout(DEADLINE, request)
            .await
            .expect("the held request is answered")
            .expect("client task");
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "ready {ready}: {reply:?}"
        );
        assert!(
            reply.headers.contains_key("retry-after"),
            "ready {ready}: {reply:?}"
        );
        assert!(
            reply.body.contains("did not become ready within 1s"),
            "ready {ready}: {}",
            reply.body
        );
        wait_held(&router, 0).await;
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_ready_sandbox_whose_port_is_closed_gets_502_at_once() {
    let (_socket, closed) = reserved_port();
    let directory = TestDirectory::new();
    directory.set(
        "closed",
        RouteState::Running {
            endpoint: endpoint_at(closed),
        },
    );
    // A wake deadline far beyond the test's bound: only a fast answer passes.
    let proxy = start(config("[wake]\ndeadline = \"10m\"\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    for path in ["/", "/again"] {
        let reply = tokio::time::timeout(DEADLINE, get(addr, &host("closed"), path))
            .await
            .expect("a closed port is answered without waiting for the wake deadline");
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{reply:?}");
        assert!(reply.body.contains("refused"), "{}", reply.body);
        assert!(!reply.headers.contains_key("retry-after"), "{reply:?}");
    }
    assert_eq!(directory.wakes(), 0);
    assert_eq!(proxy.router().held_connections(), 0);
    proxy.shutdown().await;
}
