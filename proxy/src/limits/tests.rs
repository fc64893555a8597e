//! The per-address connection cap and the idle timeout of client streams.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn connections_are_capped_per_client_address_and_entries_go_with_the_last() {
    let limits = Limits::new();
    let caps = Caps {
        total: 10,
        per_client: 2,
    };
    let one: IpAddr = "10.0.0.1".parse().expect("ip");
    let other: IpAddr = "10.0.0.2".parse().expect("ip");
    let a = limits.admit(one, caps).expect("first");
    let b = limits.admit(one, caps).expect("second");
    let err = limits.admit(one, caps).expect_err("third from one address");
    assert!(
        matches!(err, ProxyError::ClientConnectionLimit { limit: 2 }),
        "{err}"
    );
    let c = limits.admit(other, caps).expect("another address");
    assert_eq!(limits.client_addresses(), 2);
    drop(a);
    let a = limits.admit(one, caps).expect("a place freed up");
    drop((a, b, c));
    assert_eq!(
        limits.client_addresses(),
        0,
        "no entry outlives its connections"
    );
    assert_eq!(limits.open.load(Ordering::Acquire), 0);
    // Refused for the total: the address's place is given back.
    let full = Caps {
        total: 1,
        per_client: 5,
    };
    let only = limits.admit(one, full).expect("first");
    let err = limits.admit(other, full).expect_err("total");
    assert!(
        matches!(err, ProxyError::ConnectionLimit { limit: 1 }),
        "{err}"
    );
    drop(only);
    assert_eq!(limits.client_addresses(), 0);
    // No cap: nothing is counted per address.
    let uncapped = Caps {
        total: 0,
        per_client: 0,
    };
    let held: Vec<_> = (0..100)
        .map(|_| limits.admit(one, uncapped).expect("no cap"))
        .collect();
    assert_eq!(limits.client_addresses(), 0);
    drop(held);
}

#[test]
fn ipv6_clients_are_counted_by_their_64_network_and_mapped_ipv4_as_itself() {
    let key = |text: &str| client_key(text.parse().expect("ip"));
    assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff::9"));
    assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
    assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
}

/// Bytes every 200 ms keep a stream with a 300 ms limit open well past the limit (the
/// timer is moved when it fires, not per read); 300 ms of silence then end it.
#[tokio::test(start_paused = true)]
async fn traffic_keeps_the_stream_and_silence_ends_it() {
    let (client, server) = tokio::io::duplex(64);
    let control = IdleControl::new(Some(Duration::from_millis(300)));
    let mut stream = IdleTimeout::new(server, control);
    let mut client = client;
    let started = Instant::now();
    let mut byte = [0_u8; 1];
    for _ in 0..10 {
        let (read, ()) = tokio::join!(stream.read(&mut byte), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            client.write_all(b"x").await.expect("write");
        });
        assert_eq!(read.expect("traffic keeps the stream"), 1);
    }
    assert!(started.elapsed() >= Duration::from_secs(2));
    let quiet = Instant::now();
    let err = stream.read(&mut byte).await.expect_err("silence ends it");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    let waited = quiet.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(400),
        "{waited:?}"
    );
}
