//! Tests of the ClientHello parser against real ClientHellos from rustls, their truncations,
//! re-fragmentations and corruptions, and hand-built edge cases.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::*;

/// A real ClientHello as rustls sends it for `name` offering `alpn`.
fn real_hello(name: &str, alpn: &[&str], tls12_only: bool) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider);
    let builder = if tls12_only {
        builder.with_protocol_versions(&[&rustls::version::TLS12])
    } else {
        builder.with_safe_default_protocol_versions()
    }
    .expect("protocol versions");
    let mut config = builder
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let server_name = ServerName::try_from(name.to_owned()).expect("server name");
    let mut conn = ClientConnection::new(Arc::new(config), server_name).expect("client");
    let mut out = Vec::new();
    conn.write_tls(&mut out).expect("client hello");
    out
}

/// Re-frames the handshake bytes of single-record `hello` into records of `size` bytes.
fn refragment(hello: &[u8], size: usize) -> Vec<u8> {
    let payload = &hello[RECORD_HEADER_LEN..];
    let mut out = Vec::new();
    for chunk in payload.chunks(size) {
        out.extend_from_slice(&[CONTENT_HANDSHAKE, 3, 1]);
        out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

fn complete(bytes: &[u8]) -> ClientHello {
    match parse_client_hello(bytes) {
        Ok(Progress::Complete(hello)) => hello,
        other => panic!("expected a complete client hello, got {other:?}"),
    }
}

fn error(bytes: &[u8]) -> ClientHelloError {
    match parse_client_hello(bytes) {
        Err(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A hand-built ClientHello record with the given extensions (type, data).
fn built_hello(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
    body.extend_from_slice(&[1, 0]); // null compression
    let mut exts = Vec::new();
    for (kind, data) in extensions {
        exts.extend_from_slice(&kind.to_be_bytes());
        exts.extend_from_slice(&(data.len() as u16).to_be_bytes());
        exts.extend_from_slice(data);
    }
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut message = vec![HANDSHAKE_CLIENT_HELLO];
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    let mut record = vec![CONTENT_HANDSHAKE, 3, 1];
    record.extend_from_slice(&(message.len() as u16).to_be_bytes());
    record.extend_from_slice(&message);
    record
}

fn sni_ext(entries: &[(u8, &[u8])]) -> (u16, Vec<u8>) {
    let mut list = Vec::new();
    for (kind, name) in entries {
        list.push(*kind);
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name);
    }
    let mut data = (list.len() as u16).to_be_bytes().to_vec();
    data.extend_from_slice(&list);
    (EXT_SERVER_NAME, data)
}

/// A small deterministic generator, so failures reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What any successful parse must satisfy, whatever the input.
fn assert_sane(input: &[u8], result: &Result<Progress>) {
    match result {
        Ok(Progress::Complete(hello)) => {
            assert!(hello.len <= input.len(), "consumed more than given");
            if let Some(name) = &hello.sni {
                assert!(validate_host_name(name.as_bytes()).is_ok(), "{name}");
                assert_eq!(name, &name.to_ascii_lowercase());
            }
            assert!(hello.alpn.iter().all(|p| !p.is_empty()));
        }
        Ok(Progress::Incomplete { at_least }) => {
            assert!(
                *at_least > input.len(),
                "incomplete yet needs no more bytes"
            );
        }
        Err(_) => {}
    }
}

#[test]
fn real_hellos_give_name_and_alpn() {
    for tls12_only in [false, true] {
        let hello = real_hello(
            "Alice.Team-A.sandbox.example.com",
            &["h2", "http/1.1"],
            tls12_only,
        );
        let parsed = complete(&hello);
        assert_eq!(
            parsed.sni.as_deref(),
            Some("alice.team-a.sandbox.example.com")
        );
        assert_eq!(parsed.alpn, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(parsed.len, hello.len());
    }
}

#[test]
fn ip_server_name_sends_no_sni() {
    let parsed = complete(&real_hello("127.0.0.1", &[], false));
    assert_eq!(parsed.sni, None);
    assert!(parsed.alpn.is_empty());
}

#[test]
fn bytes_after_the_hello_are_left_alone() {
    let mut bytes = real_hello("a.example.com", &[], false);
    let len = bytes.len();
    bytes.extend_from_slice(&[23, 3, 3, 0, 2, 0xde, 0xad]);
    assert_eq!(complete(&bytes).len, len);
}

#[test]
fn every_truncation_is_incomplete() {
    for hello in [
        real_hello("a.example.com", &["h2"], false),
        refragment(&real_hello("b.example.com", &[], true), 50),
    ] {
        let full = complete(&hello);
        for cut in 0..hello.len() {
            match parse_client_hello(&hello[..cut]) {
                Ok(Progress::Incomplete { at_least }) => {
                    assert!(
                        at_least > cut && at_least <= hello.len(),
                        "cut {cut}: {at_least}"
                    );
                }
                other => panic!("cut {cut} of {}: {other:?}", hello.len()),
            }
        }
        assert_eq!(complete(&hello), full);
    }
}

#[test]
fn hellos_split_across_records_parse_alike() {
    let hello = real_hello("split.example.com", &["h2"], false);
    let want = complete(&hello);
    for size in [1, 2, 3, 4, 5, 7, 100, 511] {
        let split = refragment(&hello, size);
        let got = complete(&split);
        assert_eq!(got.sni, want.sni, "size {size}");
        assert_eq!(got.alpn, want.alpn, "size {size}");
        assert_eq!(got.len, split.len(), "size {size}");
        for cut in (0..split.len()).step_by(size.max(3)) {
            assert!(
                matches!(
                    parse_client_hello(&split[..cut]),
                    Ok(Progress::Incomplete { .. })
                ),
                "size {size} cut {cut}"
            );
        }
    }
}

#[test]
fn bit_flips_never_panic_and_results_stay_sane() {
    let hello = real_hello("flip.example.com", &["h2", "http/1.1"], false);
    let mut errors = 0;
    for i in 0..hello.len() {
        for bit in [0, 3, 7] {
            let mut bytes = hello.clone();
            bytes[i] ^= 1 << bit;
            let result = parse_client_hello(&bytes);
            assert_sane(&bytes, &result);
            errors += usize::from(result.is_err());
        }
    }
    // Header, length and name flips must be caught; most flips in random and key bytes are not.
    assert!(errors > 20, "only {errors} flips detected");
}

#[test]
fn random_garbage_never_panics() {
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    let hello = real_hello("g.example.com", &[], false);
    for round in 0..20_000 {
        let len = (rng.next() % 600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if round % 2 == 0 && len > 9 {
            // Keep a plausible prefix so the parser gets deep into the message.
            let keep = (rng.next() as usize % hello.len()).min(len);
            bytes[..keep].copy_from_slice(&hello[..keep]);
        }
        let result = parse_client_hello(&bytes);
        assert_sane(&bytes, &result);
        if bytes
            .first()
            .is_some_and(|b| *b != CONTENT_HANDSHAKE && *b & 0x80 == 0)
        {
            assert!(result.is_err(), "round {round}");
        }
    }
}

#[test]
fn non_tls_and_sslv2_are_named() {
    assert!(matches!(
        error(b"GET / HTTP/1.1\r\n"),
        ClientHelloError::NotTls { first: b'G' }
    ));
    assert!(matches!(
        error(&[0x80, 0x2e, 0x01, 0x00, 0x02]),
        ClientHelloError::Sslv2
    ));
    assert!(matches!(
        error(&[22, 2, 0]),
        ClientHelloError::RecordVersion { major: 2, .. }
    ));
    assert!(matches!(
        error(&[22, 3, 1, 0x40, 0x01]),
        ClientHelloError::RecordTooLarge { len: 16385 }
    ));
    assert!(matches!(
        error(&[22, 3, 1, 0, 0]),
        ClientHelloError::Malformed { .. }
    ));
    assert!(matches!(
        error(&[22, 3, 1, 0, 4, 2, 0]),
        ClientHelloError::NotClientHello { handshake_type: 2 }
    ));
    for bad in [&[][..], &[22], &[22, 3], &[0x80, 0x2e]] {
        assert!(matches!(
            parse_client_hello(bad),
            Ok(Progress::Incomplete { .. })
        ));
    }
}

#[test]
fn another_record_type_inside_the_hello_is_rejected() {
    let mut bytes = refragment(&real_hello("a.example.com", &[], false), 100);
    bytes[105] = 21; // the second record becomes an alert
    assert!(matches!(
        error(&bytes),
        ClientHelloError::UnexpectedRecord { content_type: 21 }
    ));
}

#[test]
fn server_name_rules() {
    let ok = complete(&built_hello(&[sni_ext(&[(0, b"x-1.Example.COM")])]));
    assert_eq!(ok.sni.as_deref(), Some("x-1.example.com"));
    assert_eq!(complete(&built_hello(&[])).sni, None);

    let long_label = "a".repeat(64);
    let long_name = vec!["abcdefghi"; 26].join(".");
    let cases: &[(&str, &[u8], &str)] = &[
        ("underscore", b"a_b.example.com", "invalid_sni"),
        ("trailing dot", b"a.example.com.", "invalid_sni"),
        ("empty label", b"a..example.com", "invalid_sni"),
        ("leading hyphen", b"-a.example.com", "invalid_sni"),
        ("ip literal", b"10.0.0.1", "invalid_sni"),
        ("non-ascii", "ä.example.com".as_bytes(), "invalid_sni"),
        ("nul", b"a\0.example.com", "invalid_sni"),
        ("empty", b"", "invalid_sni"),
        ("long label", long_label.as_bytes(), "invalid_sni"),
        ("long name", long_name.as_bytes(), "invalid_sni"),
    ];
    for (what, name, label) in cases {
        let err = error(&built_hello(&[sni_ext(&[(0, name)])]));
        assert_eq!(err.metric_label(), *label, "{what}: {err}");
    }
    assert!(matches!(
        error(&built_hello(&[sni_ext(&[(1, b"a.example.com")])])),
        ClientHelloError::NameNotHostname { name_type: 1 }
    ));
    assert!(matches!(
        error(&built_hello(&[sni_ext(&[
            (0, b"a.example.com"),
            (0, b"b.example.com")
        ])])),
        ClientHelloError::Malformed { .. }
    ));
    let dup = sni_ext(&[(0, b"a.example.com")]);
    assert!(matches!(
        error(&built_hello(&[dup.clone(), dup])),
        ClientHelloError::Malformed {
            what: "duplicate server name extension"
        }
    ));
    assert!(matches!(
        error(&built_hello(&[(EXT_SERVER_NAME, vec![0, 0])])),
        ClientHelloError::Malformed { .. }
    ));
}

#[test]
fn alpn_rules() {
    let alpn = (EXT_ALPN, vec![0, 6, 2, b'h', b'2', 2, b'h', b'3']);
    assert_eq!(
        complete(&built_hello(&[alpn])).alpn,
        vec![b"h2".to_vec(), b"h3".to_vec()]
    );
    for data in [vec![0, 0], vec![0, 1, 0], vec![0, 3, 5, b'h', b'2']] {
        assert!(matches!(
            error(&built_hello(&[(EXT_ALPN, data)])),
            ClientHelloError::Malformed { .. }
        ));
    }
}

#[test]
fn lengths_that_disagree_are_malformed() {
    let mut bytes = built_hello(&[sni_ext(&[(0, b"a.example.com")])]);
    // The extension block claims one byte more than there is.
    let ext_len_at = RECORD_HEADER_LEN + 4 + 2 + 32 + 1 + 4 + 2;
    bytes[ext_len_at + 1] += 1;
    assert!(matches!(error(&bytes), ClientHelloError::Malformed { .. }));
    // A handshake message shorter than its record leaves stray handshake bytes.
    let mut bytes = built_hello(&[]);
    bytes[RECORD_HEADER_LEN + 3] -= 1;
    assert!(matches!(error(&bytes), ClientHelloError::Malformed { .. }));
}

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.expect("connect"), accepted.expect("accept").0)
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

#[tokio::test]
async fn peek_waits_for_bytes_dribbled_in_and_consumes_none() {
    let hello = refragment(&real_hello("slow.example.com", &["h2"], false), 300);
    let (mut client, server) = pair().await;
    let sent = hello.clone();
    let writer = tokio::spawn(async move {
        for chunk in sent.chunks(97) {
            client.write_all(chunk).await.expect("write");
            client.flush().await.expect("flush");
            tokio::task::yield_now().await;
        }
        client
    });
    let parsed = peek_client_hello(&server, 16 * 1024, deadline())
        .await
        .expect("client hello");
    assert_eq!(parsed.sni.as_deref(), Some("slow.example.com"));
    let _client = writer.await.expect("writer");
    let mut server = server;
    let mut again = vec![0; hello.len()];
    server
        .read_exact(&mut again)
        .await
        .expect("bytes still there");
    assert_eq!(again, hello);
}

#[tokio::test]
async fn peek_rejects_oversized_closed_and_garbage() {
    let hello = real_hello("big.example.com", &[], false);
    let (mut client, server) = pair().await;
    client.write_all(&hello).await.expect("write");
    let err = peek_client_hello(&server, 100, deadline())
        .await
        .expect_err("too large");
    assert!(
        matches!(err, ClientHelloError::TooLarge { max: 100 }),
        "{err}"
    );

    let (mut client, server) = pair().await;
    client.write_all(&hello[..50]).await.expect("write");
    client.shutdown().await.expect("shutdown");
    let err = peek_client_hello(&server, 16 * 1024, deadline())
        .await
        .expect_err("closed");
    assert!(matches!(err, ClientHelloError::Closed), "{err}");

    let (mut client, server) = pair().await;
    client.write_all(b"\x00\x01garbage").await.expect("write");
    let err = peek_client_hello(&server, 16 * 1024, deadline())
        .await
        .expect_err("garbage");
    assert_eq!(err.metric_label(), "not_tls");
}

#[tokio::test(start_paused = true)]
async fn peek_gives_up_at_the_deadline() {
    let hello = real_hello("stall.example.com", &[], false);
    let (mut client, server) = pair().await;
    client
        .write_all(&hello[..hello.len() / 2])
        .await
        .expect("write");
    let started = Instant::now();
    let err = peek_client_hello(&server, 16 * 1024, started + Duration::from_secs(10))
        .await
        .expect_err("timeout");
    assert!(matches!(err, ClientHelloError::Timeout), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(10));
}
