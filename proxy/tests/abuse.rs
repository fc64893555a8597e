//! The proxy's chaos and abuse suite: bounded versions of what one hostile client address
//! can do with connections — half-sent request heads, heads dripped a byte at a time, crowds
//! of them, requests held for a sandbox that does not wake — each asserting that clients at
//! other addresses are still served, that the attacker's connections end by the header
//! timeout from accept, and that nothing the proxy keeps per client (admitted connections,
//! per-address entries, held requests) outlives them.
//!
//! Clients bind their own loopback source address (127.0.0.1 attacks, 127.0.0.2.. are
//! others), so the per-address limits see them apart.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use rouse_proxy::{Proxy, RouteState, Router};
use support::backend::Backend;
use support::{DEADLINE, TestDirectory, config, host, start, wait_for, wait_held};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The attacking client's address.
const ATTACKER: [u8; 4] = [127, 0, 0, 1];

/// The address of the `n`th other client (from 1).
fn other(n: u8) -> [u8; 4] {
    [127, 0, 0, 1 + n]
}

/// A connection to `addr` from the loopback address `source`.
async fn connect_from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((source, 0)))
        .expect("bind the client's source address");
    socket.connect(addr).await.expect("connect to the proxy")
}

/// The start of a request head that never ends.
fn half_head(name: &str) -> String {
    format!("GET /slow HTTP/1.1\r\nHost: {}\r\nX-Pad: ", host(name))
}

/// A whole request from `source` on its own connection: the status line of the answer
/// (empty when the proxy closed the connection without one).
async fn request_from(source: [u8; 4], addr: SocketAddr, name: &str) -> String {
    let mut stream = connect_from(source, addr).await;
    let request = format!(
        "GET /legit HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        host(name)
    );
    // A connection shed at accept may be reset before the write.
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "no answer to a legitimate request in time");
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or_default().to_owned()
}

/// Whether the proxy closed `stream` (end of stream or reset) within `within`.
async fn closes_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0_u8; 64];
    let deadline = Instant::now() + within;
    // Bounded by the deadline; a byte from the proxy (an error response) is read past.
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut byte)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// Waits until the proxy keeps nothing for any client: no admitted connection, no
/// per-address entry, nothing held.
async fn wait_nothing_kept(router: &Router) {
    wait_for(
        "no client connection, address entry or held request left",
        || {
            let router = router.clone();
            async move {
                router.client_connections() == 0
                    && router.client_addresses() == 0
                    && router.held_connections() == 0
            }
        },
    )
    .await;
}

/// A proxy with `limits` in front of a backend as sandbox `alice`.
async fn proxy_with(limits: &str, directory: &TestDirectory, backend: &Backend) -> Proxy {
    directory.running("alice", backend.addr);
    start(config(limits), directory).await
}

#[tokio::test]
async fn half_sent_heads_from_one_address_cannot_lock_others_out() {
    const ATTACK: usize = 40;
    const PER_IP: usize = 8;
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    // Room for more than one address's share, less than the attack.
    let limits = format!(
        "[limits]\nmax_connections = 32\nmax_connections_per_ip = {PER_IP}\n\
         header_read_timeout = \"1m\"\n"
    );
    let proxy = proxy_with(&limits, &directory, &backend).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let mut attack = Vec::new();
    for _ in 0..ATTACK {
        let mut stream = connect_from(ATTACKER, addr).await;
        // A write to a connection already shed may fail; either way it is part of the attack.
        let _ = stream.write_all(half_head("alice").as_bytes()).await;
        attack.push(stream);
    }
    // Accepted in the order they connected: the proxy sheds what is over the address's
    // share at once, and keeps the rest until the header timeout.
    for (n, stream) in attack.iter_mut().enumerate().skip(PER_IP) {
        assert!(
            closes_within(stream, DEADLINE).await,
            "connection {n} was not shed"
        );
    }
    for (n, stream) in attack.iter_mut().enumerate().take(PER_IP) {
        let closed = closes_within(stream, Duration::from_millis(100)).await;
        assert!(!closed, "connection {n}, within the share, was closed");
    }
    assert_eq!(router.client_connections(), PER_IP);
    assert_eq!(router.client_addresses(), 1);

    // Others are served meanwhile, from several addresses at once.
    let mut others = JoinSet::new();
    for n in 1..=4 {
        others.spawn(async move { request_from(other(n), addr, "alice").await });
    }
    while let Some(status) = others.join_next().await {
        let status = status.expect("client task");
        assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
    }
    let metrics = rouse_proxy::metrics::render();
    assert!(
        metrics
            .contains("rouse_proxy_connections_rejected_total{reason=\"max_connections_per_ip\"}"),
        "{metrics}"
    );

    drop(attack);
    wait_nothing_kept(&router).await;
    proxy.shutdown().await;
}

/// Drips a request head into `stream` one byte every `pace`, starting after `first`, until
/// the proxy closes it (at most `bytes` bytes); the time from `connected` to the close, or
/// `None` when it never closed.
async fn drip_until_closed(
    stream: &mut TcpStream,
    connected: Instant,
    first: Duration,
    pace: Duration,
    bytes: usize,
) -> Option<Duration> {
    if closes_within(stream, first).await {
        return Some(connected.elapsed());
    }
    let head = half_head("alice");
    for byte in head.as_bytes().iter().cycle().take(bytes) {
        if stream.write_all(&[*byte]).await.is_err() || closes_within(stream, pace).await {
            return Some(connected.elapsed());
        }
    }
    None
}

#[tokio::test]
async fn a_dripped_head_is_closed_at_the_header_timeout_from_accept() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let backend = Backend::start().await;
    for compact_hold in [true, false] {
        let directory = TestDirectory::new();
        directory.running("alice", backend.addr);
        let text = format!(
            "[http]\nlisten = \"127.0.0.1:0\"\ncompact_hold = {compact_hold}\n\
             [limits]\nheader_read_timeout = \"2s\"\n"
        );
        let proxy = start(support::config_with_http(&text), &directory).await;
        let addr = proxy.addrs().http.expect("http listener");

        let started = Instant::now();
        let mut stream = connect_from(ATTACKER, addr).await;
        // The first byte late, then one byte at a time: each would restart a timer that
        // starts at the first byte or at a hand-over.
        let closed = drip_until_closed(
            &mut stream,
            started,
            TIMEOUT * 3 / 5,
            Duration::from_millis(200),
            60,
        )
        .await
        .unwrap_or_else(|| {
            panic!("compact_hold {compact_hold}: the dripping client was never closed")
        });
        assert!(
            closed >= TIMEOUT && closed < TIMEOUT * 7 / 5,
            "compact_hold {compact_hold}: closed after {closed:?}, the timeout is {TIMEOUT:?} from accept"
        );
        assert!(
            request_from(other(1), addr, "alice")
                .await
                .starts_with("HTTP/1.1 200")
        );
        wait_nothing_kept(proxy.router()).await;
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_crowd_of_dripping_clients_leaves_others_served_and_nothing_behind() {
    const CROWD: usize = 120;
    const PER_IP: usize = 40;
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    let limits = format!(
        "[limits]\nmax_connections = 64\nmax_connections_per_ip = {PER_IP}\n\
         header_read_timeout = \"2s\"\n"
    );
    let proxy = proxy_with(&limits, &directory, &backend).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let mut crowd = JoinSet::new();
    for _ in 0..CROWD {
        crowd.spawn(async move {
            let started = Instant::now();
            let mut stream = connect_from(ATTACKER, addr).await;
            drip_until_closed(
                &mut stream,
                started,
                Duration::ZERO,
                Duration::from_millis(100),
                100,
            )
            .await
        });
    }
    // While the crowd drips, four other addresses are served, request after request.
    let mut others = JoinSet::new();
    for n in 1..=4 {
        others.spawn(async move {
            for _ in 0..10 {
                let status = request_from(other(n), addr, "alice").await;
                assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
            }
        });
    }
    while let Some(done) = others.join_next().await {
        done.expect("other client");
    }
    // Every dripping connection ends: shed at accept, or closed by the header timeout.
    while let Some(closed) = crowd.join_next().await {
        let closed = closed.expect("dripping client");
        let closed = closed.expect("every dripping connection is closed");
        assert!(closed < Duration::from_secs(4), "closed after {closed:?}");
    }
    wait_nothing_kept(&router).await;
    proxy.shutdown().await;
}

#[tokio::test]
async fn requests_held_for_one_address_are_bounded_by_its_share() {
    const ATTACK: usize = 30;
    const PER_IP: usize = 10;
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set("sleepy", RouteState::suspended(true));
    let limits = format!(
        "[limits]\nmax_connections = 64\nmax_connections_per_ip = {PER_IP}\n\
         [wake]\ndeadline = \"1m\"\n"
    );
    let proxy = proxy_with(&limits, &directory, &backend).await;
    let addr = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    // Whole requests for a sandbox that does not wake: held, each on its own connection.
    let mut attack = JoinSet::new();
    for _ in 0..ATTACK {
        attack.spawn(async move { request_from(ATTACKER, addr, "sleepy").await });
    }
    wait_held(&router, PER_IP).await;
    // The rest were shed: they end without an answer.
    let mut shed = 0;
    while shed < ATTACK - PER_IP {
        let status = attack
            .join_next()
            .await
            .expect("a shed client")
            .expect("task");
        assert!(status.is_empty(), "{status:?}");
        shed += 1;
    }
    assert_eq!(router.held_connections(), PER_IP);
    assert!(
        request_from(other(1), addr, "alice")
            .await
            .starts_with("HTTP/1.1 200")
    );
    // The sandbox comes up: every held request is served.
    directory.running("sleepy", backend.addr);
    while let Some(status) = attack.join_next().await {
        let status = status.expect("held client");
        assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
    }
    wait_nothing_kept(&router).await;
    proxy.shutdown().await;
}
