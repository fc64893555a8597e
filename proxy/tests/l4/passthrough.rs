//! TLS passthrough: routed by SNI, never terminated, waking suspended sandboxes; bad
//! ClientHellos are closed and counted without disturbing others.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

const PASSTHROUGH: &str = "[tls_passthrough]\nlisten = \"127.0.0.1:0\"\n";

#[tokio::test]
async fn sni_picks_the_sandbox_and_the_sandbox_terminates_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let alice = cert(dir.path(), "alice", &[&host("alice")]);
    let bob = cert(dir.path(), "bob", &[&host("bob")]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "alice", 443, tls_backend(&alice, "alice").await);
    running(&directory, "bob", 443, tls_backend(&bob, "bob").await);
    let proxy = start(PASSTHROUGH, &directory).await;
    let addr = proxy.addrs().tls_passthrough.expect("passthrough listener");

    // Each client trusts only its sandbox's own certificate: the handshake succeeding proves
    // the sandbox, not the proxy, terminated TLS.
    let answer = tls_exchange(
        addr,
        &host("alice"),
        client_config(&[&alice.der], &[]),
        "hi",
    )
    .await
    .expect("alice exchange");
    assert_eq!(answer, "alice: hi");
    let answer = tls_exchange(addr, &host("bob"), client_config(&[&bob.der], &[]), "yo")
        .await
        .expect("bob exchange");
    assert_eq!(answer, "bob: yo");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_suspended_sandbox_is_woken_and_the_handshake_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let carol = cert(dir.path(), "carol", &[&host("carol")]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    suspended(&directory, "carol");
    let proxy = start(PASSTHROUGH, &directory).await;
    let addr = proxy.addrs().tls_passthrough.expect("passthrough listener");

    let config = client_config(&[&carol.der], &[]);
    let clients: Vec<_> = (0..5)
        .map(|i| {
            let config = config.clone();
            tokio::spawn(async move {
                tls_exchange(addr, &host("carol"), config, &format!("n{i}")).await
            })
        })
        .collect();
    wait_for("the sandbox is woken", || directory.wake_count() >= 1).await;
    running(&directory, "carol", 443, tls_backend(&carol, "carol").await);
    for (i, client) in clients.into_iter().enumerate() {
        let answer = tokio::time::timeout(PATIENCE, client)
            .await
            .expect("held client finishes")
            .expect("join")
            .expect("exchange");
        assert_eq!(answer, format!("carol: n{i}"));
    }
    assert_eq!(
        directory.wake_count(),
        1,
        "one wake for all held connections"
    );
    proxy.shutdown().await;
}

/// Sends `bytes`, then expects the proxy to close the connection without answering.
async fn assert_closed_after(addr: std::net::SocketAddr, bytes: &[u8]) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
        .await
        .expect("the proxy closes the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "got an answer: {read:?}");
}

#[tokio::test]
async fn bad_client_hellos_are_closed_and_counted_while_others_are_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let alice = cert(dir.path(), "alice", &[&host("alice")]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "alice", 443, tls_backend(&alice, "alice").await);
    let proxy = start(PASSTHROUGH, &directory).await;
    let addr = proxy.addrs().tls_passthrough.expect("passthrough listener");
    let good = client_config(&[&alice.der], &[]);

    // A slow client that stalls mid-hello must not block others meanwhile.
    let mut stalled = TcpStream::connect(addr).await.expect("connect");
    stalled
        .write_all(&[22, 3, 1, 0, 200, 1])
        .await
        .expect("write");

    assert_closed_after(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_closed_after(addr, &[0x80, 0x2e, 0x01, 0x03, 0x01, 0, 0]).await;
    assert_closed_after(addr, &[22, 3, 1, 0x7f, 0xff]).await;
    // No SNI (an IP address as server name) and a name outside our domains.
    let no_sni = tls_exchange(addr, "127.0.0.1", good.clone(), "x").await;
    assert!(no_sni.is_err(), "{no_sni:?}");
    let foreign = tls_exchange(addr, "example.com", good.clone(), "x").await;
    assert!(foreign.is_err(), "{foreign:?}");

    let answer = tls_exchange(addr, &host("alice"), good, "still here")
        .await
        .expect("a good client is served");
    assert_eq!(answer, "alice: still here");
    let metrics = metrics_text();
    for reason in [
        "not_tls",
        "sslv2",
        "malformed",
        "missing_sni",
        "unknown_host",
    ] {
        let series = format!("rouse_proxy_tls_rejected_total{{reason=\"{reason}\"}}");
        assert!(metrics.contains(&series), "no {series} in\n{metrics}");
    }
    drop(stalled);
    proxy.shutdown().await;
}
