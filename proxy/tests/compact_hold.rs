//! The compact hold of plain HTTP/1 requests: a held request keeps every byte its client sent,
//! a client that resets while held is no longer held, a half-closed one still gets its
//! response, heads too large for the compact buffer are held on the full path, and the rate
//! limit refuses before anything is held.

mod support;

use rouse_proxy::{RouteState, SandboxKey};
use support::backend::Backend;
use support::{
    DEADLINE, TestDirectory, config, config_with_http, host, start, wait_for, wait_held,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads a whole `Connection: close` response.
async fn read_all(stream: &mut TcpStream) -> String {
    let mut response = Vec::new();
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut response))
        .await
        .expect("response within the deadline")
        .expect("read");
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn a_held_request_keeps_every_byte_of_its_body() {
    for compact in [true, false] {
        let backend = Backend::start().await;
        let directory = TestDirectory::new();
        directory.set("echo", RouteState::suspended(true));
        let extra = format!("[http]\nlisten = \"127.0.0.1:0\"\ncompact_hold = {compact}\n");
        let proxy = start(config_with_http(&extra), &directory).await;
        let addr = proxy.addrs().http.expect("http listener");

        // Larger than what the compact hold keeps: part is read while held, the rest waits in
        // the socket.
        let body: String = (0..20_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST /echo HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            host("echo"),
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("write head");
        let writer = {
            let body = body.clone();
            let (read_half, mut write_half) = stream.into_split();
            let task = tokio::spawn(async move {
                write_half
                    .write_all(body.as_bytes())
                    .await
                    .expect("write body");
                write_half
            });
            (read_half, task)
        };
        wait_held(proxy.router(), 1).await;
        directory.running("echo", backend.addr);
        let (read_half, task) = writer;
        let write_half = task.await.expect("body written");
        let mut stream = read_half.reunite(write_half).expect("one stream");
        let response = read_all(&mut stream).await;
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "compact {compact}: {response:.200}"
        );
        assert!(
            response.ends_with(&body),
            "compact {compact}: the body arrives whole"
        );
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_client_that_resets_while_held_is_no_longer_held() {
    let directory = TestDirectory::new();
    directory.set("gone", RouteState::suspended(true));
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();
    let key = SandboxKey::new("default", "gone");

    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", host("gone"));
    stream.write_all(head.as_bytes()).await.expect("write");
    wait_held(&router, 1).await;
    assert_eq!(
        router.open_connections(&key),
        1,
        "a held request is activity"
    );
    // A zero linger makes the close a reset.
    stream.set_zero_linger().expect("linger");
    drop(stream);
    wait_held(&router, 0).await;
    wait_for("the held request's activity ends", || {
        let router = router.clone();
        let key = key.clone();
        async move { router.open_connections(&key) == 0 }
    })
    .await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_half_closed_held_client_gets_its_response() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("half", RouteState::suspended(true));
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "GET /half HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        host("half")
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.shutdown().await.expect("half-close");
    wait_held(proxy.router(), 1).await;
    directory.running("half", backend.addr);
    let response = read_all(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response:.200}");
    assert!(response.ends_with("hello /half"), "{response:.200}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_head_too_large_for_the_compact_buffer_is_held_and_served() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("big", RouteState::suspended(true));
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "GET /big HTTP/1.1\r\nHost: {}\r\nX-Large: {}\r\nConnection: close\r\n\r\n",
        host("big"),
        "x".repeat(6000)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    wait_held(proxy.router(), 1).await;
    directory.running("big", backend.addr);
    let response = read_all(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response:.200}");
    assert!(response.ends_with("hello /big"), "{response:.200}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_rate_limited_client_is_answered_at_once_not_held() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("limited", RouteState::suspended(true));
    let proxy = start(config("[limits]\nrate_limit_per_ip = 2\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        host("limited")
    );
    let (answered_tx, answered) = tokio::sync::watch::channel(0_usize);
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(head.as_bytes()).await.expect("write");
        let answered_tx = answered_tx.clone();
        clients.spawn(async move {
            let response = read_all(&mut stream).await;
            answered_tx.send_modify(|n| *n += 1);
            response.lines().next().unwrap_or_default().to_owned()
        });
    }
    // The sandbox is still suspended: only refusals can be answered now.
    wait_for("a refusal while the sandbox sleeps", || {
        let answered = answered.clone();
        async move { *answered.borrow() > 0 }
    })
    .await;
    directory.running("limited", backend.addr);
    let mut statuses = Vec::new();
    while let Some(status) = clients.join_next().await {
        statuses.push(status.expect("client"));
    }
    let limited = statuses
        .iter()
        .filter(|s| s.starts_with("HTTP/1.1 429"))
        .count();
    let served = statuses
        .iter()
        .filter(|s| s.starts_with("HTTP/1.1 200"))
        .count();
    assert!(limited >= 1, "{statuses:?}");
    assert_eq!(limited + served, statuses.len(), "{statuses:?}");
    proxy.shutdown().await;
}

/// More compactly held requests than `release_concurrency`, released to an endpoint that does
/// not listen yet (a process just started): every one is served once it listens. Each
/// handed-over request dials with the place in the release semaphore it already has; taking a
/// second one waited forever while all places were kept so (`tests/standalone.rs` saw 200
/// clients time out behind a Python server that took a moment to listen).
#[tokio::test]
async fn held_requests_released_before_the_workload_listens_are_all_served() {
    const CLIENTS: usize = 12;
    let directory = TestDirectory::new();
    directory.set("slow", RouteState::suspended(true));
    let proxy = start(
        config("[wake]\nrelease_concurrency = 4\ndeadline = \"20s\"\n"),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        clients.spawn(async move {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            let head = format!(
                "GET / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                host("slow")
            );
            stream.write_all(head.as_bytes()).await.expect("write");
            read_all(&mut stream).await
        });
    }
    wait_held(proxy.router(), CLIENTS).await;

    // The endpoint is published before anything listens on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("reserve a port");
    let backend_addr = listener.local_addr().expect("addr");
    drop(listener);
    let admin = proxy.addrs().admin.expect("admin listener");
    let retries_before = dial_retries(admin).await;
    directory.running("slow", backend_addr);
    // Refused dials first: the released requests fail and retry before anything listens.
    // (The counter is process-wide: another test's retries may end this wait early, which
    // only makes this run weaker, never wrong.)
    wait_for("the released requests retry their dials", || async move {
        dial_retries(admin).await > retries_before
    })
    .await;
    let listener = tokio::net::TcpListener::bind(backend_addr)
        .await
        .expect("listen on the published port");
    let _backend = Backend::serve(listener);

    while let Some(response) = clients.join_next().await {
        let response = response.expect("client task");
        assert!(response.starts_with("HTTP/1.1 200"), "{response:.200}");
    }
    proxy.shutdown().await;
}

/// `rouse_proxy_dial_retries_total` from the admin listener's `/metrics` (0 when absent).
async fn dial_retries(admin: std::net::SocketAddr) -> f64 {
    let mut stream = TcpStream::connect(admin).await.expect("connect admin");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let text = read_all(&mut stream).await;
    text.lines()
        .filter(|line| line.starts_with("rouse_proxy_dial_retries_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A compactly held request is one request to its sandbox's activity, on the relay and on
/// the full path alike: it is counted open once, from its hold to its response, and its
/// connection is the one the hold dialled (its route, rate limit and guard are not taken a
/// second time by the codec that forwards it).
#[tokio::test]
async fn a_held_request_is_counted_as_one_connection_opened() {
    for relay in [true, false] {
        let backend = Backend::start().await;
        let directory = TestDirectory::new();
        directory.set("once", RouteState::suspended(true));
        let http = format!(
            "[http]\nlisten = \"127.0.0.1:0\"\nrelay = {relay}\n[activity]\nreport_interval = \"50ms\"\n"
        );
        let proxy = start(config_with_http(&http), &directory).await;
        let addr = proxy.addrs().http.expect("http listener");
        let key = SandboxKey::new("default", "once");

        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "GET /once HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host("once")
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        wait_held(proxy.router(), 1).await;
        directory.running("once", backend.addr);
        let response = read_all(&mut stream).await;
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "relay {relay}: {response:.200}"
        );
        let reports_of = |directory: &TestDirectory| {
            directory
                .reports()
                .into_iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, report)| report)
                .collect::<Vec<_>>()
        };
        wait_for("a report after the request closed", || {
            let reports = reports_of(&directory);
            async move {
                reports
                    .last()
                    .is_some_and(|last| last.connections_open == 0)
                    && reports.iter().any(|r| r.bytes_to_client > 0)
            }
        })
        .await;
        let opened: u64 = reports_of(&directory)
            .iter()
            .map(|r| r.connections_opened)
            .sum();
        assert_eq!(opened, 1, "relay {relay}: {:?}", reports_of(&directory));
        proxy.shutdown().await;
    }
}
