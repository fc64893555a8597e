//! CONNECT tunnels and static TCP listeners: to running and suspended sandboxes, and refused
//! outside our domains.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Sends a CONNECT for `authority`; returns the stream and the response head and body read so
/// far (the whole response when it is not a 200).
async fn connect(addr: SocketAddr, authority: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut byte))
            .await
            .expect("a response")
            .expect("read");
        assert!(n == 1, "closed before a response head: {head:?}");
        head.push(byte[0]);
    }
    let mut text = String::from_utf8(head).expect("text head");
    if !text.starts_with("HTTP/1.1 200") {
        let length: usize = text
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().expect("length"))
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.expect("body");
        text.push_str(&String::from_utf8_lossy(&body));
    }
    (stream, text)
}

/// Writes `message` through the tunnel, half-closes, and expects the echo and then EOF.
async fn assert_echo(stream: &mut TcpStream, message: &[u8]) {
    stream.write_all(message).await.expect("write");
    stream.shutdown().await.expect("half-close");
    let mut echoed = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut echoed))
        .await
        .expect("echo and EOF")
        .expect("read");
    assert_eq!(echoed, message);
}

#[tokio::test]
async fn connect_tunnels_to_the_sandbox_port_named_in_the_authority() {
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "dave", 7000, echo_backend().await);
    let proxy = start("", &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let (mut tunnel, head) = connect(addr, &format!("{}:7000", host("dave"))).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("content-length"),
        "{head}"
    );
    assert_echo(&mut tunnel, b"raw bytes through the tunnel").await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn connect_is_refused_outside_our_domains_and_to_unknown_targets() {
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "dave", 7000, echo_backend().await);
    let proxy = start("", &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let cases = [
        (
            "example.com:443".to_owned(),
            "HTTP/1.1 403",
            "sandbox hosts",
        ),
        ("127.0.0.1:22".to_owned(), "HTTP/1.1 403", "sandbox hosts"),
        (format!("{}:7000", host("nobody")), "HTTP/1.1 404", ""),
        (format!("{}:7001", host("dave")), "HTTP/1.1 404", ""),
        (
            format!("7001-{}:7000", host("dave")),
            "HTTP/1.1 400",
            "port",
        ),
        (host("dave"), "HTTP/1.1 400", "no port"),
    ];
    for (authority, status, body) in cases {
        let (_, response) = connect(addr, &authority).await;
        assert!(response.starts_with(status), "{authority}: {response}");
        assert!(response.contains(body), "{authority}: {response}");
    }
    // The listener still tunnels afterwards.
    let (mut tunnel, head) = connect(addr, &format!("{}:7000", host("dave"))).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_echo(&mut tunnel, b"ok").await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn connect_wakes_a_suspended_sandbox_before_answering() {
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    suspended(&directory, "erin");
    let proxy = start("", &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let client =
        tokio::spawn(async move { connect(addr, &format!("{}:6000", host("erin"))).await });
    wait_for("the sandbox is woken", || directory.wake_count() >= 1).await;
    running(&directory, "erin", 6000, echo_backend().await);
    let (mut tunnel, head) = tokio::time::timeout(PATIENCE, client)
        .await
        .expect("held CONNECT answered")
        .expect("join");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_echo(&mut tunnel, b"after the wake").await;
    proxy.shutdown().await;
}

const TCP: &str = "[[tcp]]\nlisten = \"127.0.0.1:0\"\nsandbox = \"default/frank\"\nport = 5432\n";

#[tokio::test]
async fn static_tcp_holds_early_bytes_while_the_sandbox_wakes() {
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    suspended(&directory, "frank");
    let proxy = start(TCP, &directory).await;
    let addr = proxy.addrs().tcp[0];

    let mut client = TcpStream::connect(addr).await.expect("connect");
    client.write_all(b"sent while held").await.expect("write");
    wait_for("the sandbox is woken", || directory.wake_count() >= 1).await;
    wait_for("the connection is held", || {
        proxy.router().held_connections() == 1
    })
    .await;
    assert_eq!(
        proxy.router().open_connections(&key("frank")),
        1,
        "a held TCP connection counts as activity, as a held HTTP request does"
    );
    running(&directory, "frank", 5432, echo_backend().await);
    // A half-close with the request queued is not a hang-up: the bytes still get through.
    client.shutdown().await.expect("half-close");
    let mut echoed = Vec::new();
    tokio::time::timeout(PATIENCE, client.read_to_end(&mut echoed))
        .await
        .expect("echo and EOF")
        .expect("read");
    assert_eq!(echoed, b"sent while held");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_client_hanging_up_while_held_leaves_no_hold_behind() {
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    suspended(&directory, "frank");
    let proxy = start(TCP, &directory).await;
    let addr = proxy.addrs().tcp[0];

    let clients: Vec<TcpStream> =
        futures::future::join_all((0..20).map(|_| TcpStream::connect(addr)))
            .await
            .into_iter()
            .map(|c| c.expect("connect"))
            .collect();
    wait_for("20 connections are held", || {
        proxy.router().held_connections() == 20
    })
    .await;
    drop(clients);
    wait_for("no connection is held", || {
        proxy.router().held_connections() == 0
    })
    .await;
    wait_for("no connection is open", || {
        proxy.router().open_connections(&key("frank")) == 0
    })
    .await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_bulk_static_tcp_stream_goes_through_the_pipe_and_is_counted() {
    const LEN: usize = 16 << 20;
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "frank", 5432, echo_backend().await);
    let proxy = start(TCP, &directory).await;
    let before = zero_copy_bytes();

    let client = TcpStream::connect(proxy.addrs().tcp[0])
        .await
        .expect("connect");
    let (mut reader, mut writer) = client.into_split();
    let block: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    let upload = async move {
        for _ in 0..LEN / block.len() {
            writer.write_all(&block).await.expect("write");
        }
        writer.shutdown().await.expect("half-close");
    };
    let download = async move {
        let mut echoed = Vec::with_capacity(LEN);
        reader.read_to_end(&mut echoed).await.expect("read");
        echoed
    };
    let ((), echoed) = tokio::time::timeout(PATIENCE, async { tokio::join!(upload, download) })
        .await
        .expect("the echo ends in time");
    assert_eq!(echoed.len(), LEN);
    assert!(
        echoed
            .iter()
            .enumerate()
            .all(|(i, byte)| *byte == ((i % (64 * 1024)) % 251) as u8),
        "the echo is intact"
    );
    // Bulk directions move through a kernel pipe once their buffer is at its largest size.
    let after = zero_copy_bytes();
    assert!(
        after > before,
        "zero-copy bytes went from {before} to {after}"
    );
    assert!(after - before <= 2 * LEN as u64, "{before} -> {after}");
    proxy.shutdown().await;
}

/// The value of `rouse_proxy_zero_copy_bytes_total` now (0 before the first pipe).
fn zero_copy_bytes() -> u64 {
    metrics_text()
        .lines()
        .find_map(|line| line.strip_prefix("rouse_proxy_zero_copy_bytes_total "))
        .map_or(0, |value| value.trim().parse().expect("a counter value"))
}
