//! Limits and bad input: rate limit, connection cap, garbage bytes, oversized headers and
//! slowloris clients never disturb other connections.

mod support;

use http::StatusCode;
use support::backend::Backend;
use support::client::get;
use support::{DEADLINE, TestDirectory, config, host, start, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the proxy closes the connection; returns what it sent.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut bytes)).await;
    match read {
        Ok(Ok(_)) | Ok(Err(_)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => panic!("the proxy did not close the connection"),
    }
}

#[tokio::test]
async fn requests_over_the_per_ip_rate_get_429() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config("[limits]\nrate_limit_per_ip = 5\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let (mut ok, mut limited) = (0, 0);
    for _ in 0..50 {
        let reply = get(addr, &host("alice"), "/").await;
        match reply.status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(reply.headers.contains_key("retry-after"));
                limited += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(ok >= 5, "the first requests of a second pass ({ok} ok)");
    assert!(limited >= 1, "some requests are limited ({limited})");
    proxy.shutdown().await;
}

#[tokio::test]
async fn connections_over_the_cap_are_shed_at_accept() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config("[limits]\nmax_connections = 2\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let first = TcpStream::connect(addr).await.expect("first");
    let second = TcpStream::connect(addr).await.expect("second");
    let mut third = TcpStream::connect(addr)
        .await
        .expect("third connects at TCP level");
    let shed = read_until_closed(&mut third).await;
    assert!(shed.is_empty(), "a shed connection gets no bytes: {shed:?}");

    drop((first, second));
    wait_for("a place frees up", || async move {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            host("alice")
        );
        stream.write_all(request.as_bytes()).await.is_ok()
            && read_until_closed(&mut stream)
                .await
                .starts_with("HTTP/1.1 200")
    })
    .await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn bad_clients_do_not_disturb_others() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(
        config("[limits]\nheader_read_timeout = \"500ms\"\nmax_header_bytes = 8192\n"),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");

    // Slowloris: a request head that never ends.
    let mut slow = TcpStream::connect(addr).await.expect("slow");
    slow.write_all(b"GET / HTTP/1.1\r\nHost: ")
        .await
        .expect("write");

    // Garbage bytes.
    let mut garbage = TcpStream::connect(addr).await.expect("garbage");
    garbage
        .write_all(b"\x16\x03\x01\x00\xff\x00garbage\r\n\r\n")
        .await
        .expect("write");

    // A request head larger than the limit.
    let mut large = TcpStream::connect(addr).await.expect("large");
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nX-Big: {}\r\n\r\n",
        host("alice"),
        "a".repeat(32 * 1024)
    );
    let _ = large.write_all(head.as_bytes()).await;

    // Meanwhile others are served.
    for _ in 0..3 {
        assert_eq!(get(addr, &host("alice"), "/").await.status, StatusCode::OK);
    }

    let answer = read_until_closed(&mut garbage).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer:?}"
    );
    let answer = read_until_closed(&mut large).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer:?}"
    );
    let started = tokio::time::Instant::now();
    let answer = read_until_closed(&mut slow).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer:?}"
    );
    assert!(started.elapsed() < DEADLINE);
    assert_eq!(get(addr, &host("alice"), "/").await.status, StatusCode::OK);
    proxy.shutdown().await;
}

#[tokio::test]
async fn idle_client_connections_are_closed() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(
        config("[limits]\nidle_timeout = \"300ms\"\nheader_read_timeout = \"60s\"\n"),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", host("alice"));
    stream.write_all(request.as_bytes()).await.expect("write");
    // Keep-alive: the response comes, then the idle connection is closed by the proxy (the
    // header read timeout is longer than the wait's deadline, so only the idle limit can).
    let answer = read_until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn two_host_headers_or_a_non_ascii_host_are_bad_requests() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let cases: [(&[u8], &str); 2] = [
        (
            b"GET / HTTP/1.1\r\nHost: alice.default.sandbox.localhost\r\nHost: bob.default.sandbox.localhost\r\nConnection: close\r\n\r\n",
            "more than one Host header",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: \xc3\xa9t\xc3\xa9.default.sandbox.localhost\r\nConnection: close\r\n\r\n",
            "not ASCII",
        ),
    ];
    for (request, reason) in cases {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request).await.expect("write");
        let answer = read_until_closed(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
        assert!(answer.contains(reason), "{answer:?}");
    }
    proxy.shutdown().await;
}
