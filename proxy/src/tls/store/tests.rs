//! Certificate store tests with rcgen certificates on disk and real rustls handshakes.

use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;
use crate::tls::server_config;

/// A self-signed certificate for `names`, written as `{stem}.crt` / `{stem}.key` in `dir`.
fn write_cert(dir: &Path, stem: &str, names: &[&str]) -> (CertSource, CertificateDer<'static>) {
    let generated = rcgen::generate_simple_self_signed(
        names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
    )
    .expect("generate certificate");
    let source = CertSource {
        cert: dir.join(format!("{stem}.crt")),
        key: dir.join(format!("{stem}.key")),
    };
    replace_file(&source.cert, generated.cert.pem().as_bytes());
    replace_file(
        &source.key,
        generated.signing_key.serialize_pem().as_bytes(),
    );
    (source, generated.cert.der().clone())
}

/// Writes `path` atomically (new inode), as certificate managers do.
fn replace_file(path: &Path, contents: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn leaf(store: &CertStore, sni: Option<&str>) -> CertificateDer<'static> {
    store.pick(sni).cert[0].clone()
}

#[test]
fn names_pick_their_certificates_and_others_get_the_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, a_der) = write_cert(dir.path(), "a", &["a.example.com"]);
    let (b, b_der) = write_cert(dir.path(), "b", &["b.example.com", "*.wild.example.com"]);
    let (c, c_der) = write_cert(dir.path(), "c", &["x.wild.example.com", "a.example.com"]);
    let store = CertStore::load(vec![a, b, c]).expect("load");
    let cases = [
        (
            Some("a.example.com"),
            &a_der,
            "exact, first configured wins",
        ),
        (Some("B.Example.Com"), &b_der, "case-insensitive"),
        (Some("y.wild.example.com"), &b_der, "wildcard"),
        (Some("x.wild.example.com"), &c_der, "exact beats wildcard"),
        (
            Some("z.y.wild.example.com"),
            &a_der,
            "wildcard covers one label only",
        ),
        (
            Some("wild.example.com"),
            &a_der,
            "wildcard does not cover the parent",
        ),
        (Some("unknown.test"), &a_der, "unknown gets the default"),
        (None, &a_der, "no sni gets the default"),
    ];
    for (sni, want, what) in cases {
        assert!(leaf(&store, sni) == *want, "{what}");
    }
}

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _) = write_cert(dir.path(), "a", &["a.example.com"]);
    let (b, _) = write_cert(dir.path(), "b", &["b.example.com"]);
    let missing = CertSource {
        cert: dir.path().join("missing.crt"),
        key: a.key.clone(),
    };
    let err = CertStore::load(vec![missing]).expect_err("missing file");
    assert_eq!(err.metric_label(), "read_cert");
    assert!(err.to_string().contains("missing.crt"), "{err}");

    let mismatched = CertSource {
        cert: a.cert.clone(),
        key: b.key.clone(),
    };
    let err = CertStore::load(vec![mismatched]).expect_err("wrong key");
    assert_eq!(err.metric_label(), "key");

    let garbage = dir.path().join("garbage.key");
    std::fs::write(&garbage, "not a key").expect("write");
    let err = CertStore::load(vec![CertSource {
        cert: a.cert.clone(),
        key: garbage,
    }])
    .expect_err("garbage key");
    assert_eq!(err.metric_label(), "read_key");
    assert_eq!(
        CertStore::load(Vec::new())
            .expect_err("none")
            .metric_label(),
        "no_certificates"
    );
}

#[test]
fn reload_picks_up_new_files_and_keeps_the_old_on_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, old) = write_cert(dir.path(), "a", &["a.example.com"]);
    let store = CertStore::load(vec![a.clone()]).expect("load");
    assert!(!store.reload_if_changed().expect("unchanged"));

    let (_, new) = write_cert(dir.path(), "a", &["a.example.com"]);
    assert!(new != old);
    assert!(store.reload_if_changed().expect("reload"));
    assert!(leaf(&store, Some("a.example.com")) == new);

    replace_file(&a.cert, b"-----BEGIN CERTIFICATE-----\nbroken\n");
    let err = store.reload_if_changed().expect_err("bad file");
    assert_eq!(err.metric_label(), "read_cert");
    assert!(leaf(&store, Some("a.example.com")) == new, "old cert stays");
    // Reported once per change, not on every poll.
    assert!(!store.reload_if_changed().expect("same bad file"));

    let (_, newer) = write_cert(dir.path(), "a", &["a.example.com"]);
    assert!(store.reload_if_changed().expect("fixed"));
    assert!(leaf(&store, Some("a.example.com")) == newer);
}

#[tokio::test]
async fn watch_reloads_on_change_until_shutdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, old) = write_cert(dir.path(), "a", &["a.example.com"]);
    let store = Arc::new(CertStore::load(vec![a.clone()]).expect("load"));
    let shutdown = CancellationToken::new();
    let watcher = tokio::spawn(store.clone().watch(
        Duration::from_millis(20),
        shutdown.clone(),
        move || vec![a.clone()],
    ));
    let (_, new) = write_cert(dir.path(), "a", &["a.example.com"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let current = leaf(&store, Some("a.example.com"));
        if current == new {
            break;
        }
        assert!(current == old, "an unexpected certificate");
        assert!(
            tokio::time::Instant::now() < deadline,
            "certificate not reloaded within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), watcher)
        .await
        .expect("watcher stops on shutdown")
        .expect("join");
}

/// Handshakes with `sni`, trusting `roots`; returns the server's leaf and the ALPN chosen.
async fn handshake(
    addr: std::net::SocketAddr,
    sni: &str,
    roots: &[CertificateDer<'static>],
) -> (CertificateDer<'static>, Option<Vec<u8>>) {
    let mut root_store = RootCertStore::empty();
    for root in roots {
        root_store.add(root.clone()).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(root_store)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).expect("name");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake verifies");
    tls.write_all(b"ping").await.expect("write");
    let mut buf = [0u8; 4];
    tls.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"pong");
    let (_, conn) = tls.get_ref();
    let leaf = conn.peer_certificates().expect("server certificate")[0].clone();
    (leaf, conn.alpn_protocol().map(<[u8]>::to_vec))
}

#[tokio::test]
async fn handshakes_get_the_certificate_for_their_name_and_h2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, a_der) = write_cert(dir.path(), "a", &["a.example.com"]);
    let (b, b_der) = write_cert(dir.path(), "b", &["*.b.example.com"]);
    let store = Arc::new(CertStore::load(vec![a, b]).expect("load"));
    let acceptor = TlsAcceptor::from(server_config(store).expect("config"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(tcp).await.expect("server handshake");
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.expect("read");
            tls.write_all(b"pong").await.expect("write");
            tls.shutdown().await.expect("close");
        }
    });
    let roots = [a_der.clone(), b_der.clone()];
    let (leaf_a, alpn) = handshake(addr, "a.example.com", &roots).await;
    assert!(leaf_a == a_der);
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    let (leaf_b, _) = handshake(addr, "x.b.example.com", &roots).await;
    assert!(leaf_b == b_der);
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("server done")
        .expect("join");
}
