//! HTTPS: TLS terminated with the certificate for the SNI name, ALPN h2 end to end to a real
//! HTTP backend.

use std::convert::Infallible;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

use crate::support::*;

/// An HTTP/1.1 backend answering with the forwarded scheme and host it saw.
async fn http_backend() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let header = |name: &str| {
                        req.headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_owned()
                    };
                    let body = format!(
                        "proto={} host={} path={}",
                        header("x-forwarded-proto"),
                        header("host"),
                        req.uri().path()
                    );
                    Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// A response's body as text.
async fn body_of(response: hyper::Response<hyper::body::Incoming>) -> String {
    let body = response.into_body().collect().await.expect("body");
    String::from_utf8_lossy(&body.to_bytes()).into_owned()
}

/// `rouse_proxy_http_relay_handovers_total{reason="framing"}` now.
fn framing_handovers() -> u64 {
    let metrics = rouse_proxy::metrics::render();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("rouse_proxy_http_relay_handovers_total{reason=\"framing\"} "))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test]
async fn https_with_alpn_h2_reaches_the_sandbox_with_the_certificate_for_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fallback = cert(dir.path(), "fallback", &["proxy.example.com"]);
    let wildcard = cert(dir.path(), "wildcard", &["*.default.sandbox.localhost"]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "gina", 80, http_backend().await);
    let extra = format!(
        "[https]\nlisten = \"127.0.0.1:0\"\n\
         [[https.certificates]]\ncert = {:?}\nkey = {:?}\n\
         [[https.certificates]]\ncert = {:?}\nkey = {:?}\n",
        fallback.cert_path, fallback.key_path, wildcard.cert_path, wildcard.key_path
    );
    let proxy = start(&extra, &directory).await;
    let addr = proxy.addrs().https.expect("https listener");

    // Trusting only the wildcard certificate: the handshake verifies only if SNI chose it.
    let config = client_config(&[&wildcard.der], &[b"h2", b"http/1.1"]);
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(host("gina")).expect("name");
    let tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake with the wildcard certificate");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));

    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let req = Request::get(format!("https://{}/over-h2", host("gina")))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = tokio::time::timeout(PATIENCE, sender.send_request(req))
        .await
        .expect("a response")
        .expect("response");
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(
        body_of(response).await,
        format!("proto=https host={} path=/over-h2", host("gina"))
    );

    // An unknown name gets the first (default) certificate.
    let config = client_config(&[&fallback.der], &[]);
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("proxy.example.com").expect("name");
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake with the default certificate");
    proxy.shutdown().await;
}

#[tokio::test]
async fn https_http1_keep_alive_requests_and_a_chunked_upload_share_one_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wildcard = cert(dir.path(), "wildcard", &["*.default.sandbox.localhost"]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "hana", 80, http_backend().await);
    let extra = format!(
        "[https]\nlisten = \"127.0.0.1:0\"\n[[https.certificates]]\ncert = {:?}\nkey = {:?}\n",
        wildcard.cert_path, wildcard.key_path
    );
    let proxy = start(&extra, &directory).await;
    let addr = proxy.addrs().https.expect("https listener");
    let config = client_config(&[&wildcard.der], &[b"http/1.1"]);
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(host("hana")).expect("name");
    let tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http/1.1 handshake");
    tokio::spawn(conn);
    let before = framing_handovers();
    // Two relayed requests, then a chunked upload (the full path's), then one more: all on
    // the one client connection.
    for (path, chunked) in [("/a", false), ("/b", false), ("/up", true), ("/c", false)] {
        sender.ready().await.expect("connection stays open");
        let body = http_body_util::StreamBody::new(futures::stream::iter(
            chunked
                .then(|| Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from("data"))))
                .into_iter(),
        ));
        let req = Request::post(path)
            .header("host", host("hana"))
            .body(body)
            .expect("request");
        let response = tokio::time::timeout(PATIENCE, sender.send_request(req))
            .await
            .expect("a response")
            .expect("response");
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            body_of(response).await,
            format!("proto=https host={} path={path}", host("hana"))
        );
    }
    // The chunked upload was handed from the relay to the full path: the relay served the
    // connection before it.
    assert!(
        framing_handovers() > before,
        "the relay served the connection"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn the_tls_handshake_and_the_first_head_share_the_header_timeout_from_accept() {
    // `start` sets `limits.header_read_timeout = "5s"`.
    const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
    let dir = tempfile::tempdir().expect("tempdir");
    let wildcard = cert(dir.path(), "wildcard", &["*.default.sandbox.localhost"]);
    let directory = rouse_proxy::StaticDirectory::new(&[]);
    running(&directory, "ines", 80, http_backend().await);
    let extra = format!(
        "[https]\nlisten = \"127.0.0.1:0\"\n[[https.certificates]]\ncert = {:?}\nkey = {:?}\n",
        wildcard.cert_path, wildcard.key_path
    );
    let proxy = start(&extra, &directory).await;
    let addr = proxy.addrs().https.expect("https listener");
    let config = client_config(&[&wildcard.der], &[b"http/1.1"]);

    let started = tokio::time::Instant::now();
    let tcp = TcpStream::connect(addr).await.expect("connect");
    // The handshake late, then the head a byte at a time: a head timer that starts after
    // the handshake would keep the connection open past the timeout from accept.
    tokio::time::sleep(TIMEOUT * 3 / 5).await;
    let name = ServerName::try_from(host("ines")).expect("name");
    let mut tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("handshake within the timeout");
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Pad: ", host("ines"));
    let mut closed = None;
    let mut byte = [0_u8; 64];
    // Bounded: one byte per round, at most the head's length.
    for b in head.as_bytes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let written = async {
            tls.write_all(&[*b]).await?;
            tls.flush().await
        };
        if written.await.is_err() {
            closed = Some(started.elapsed());
            break;
        }
        let pace = std::time::Duration::from_millis(250);
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(pace, tls.read(&mut byte)).await {
            closed = Some(started.elapsed());
            break;
        }
    }
    let closed = closed.expect("the dripping TLS client is closed");
    assert!(
        closed >= TIMEOUT && closed < TIMEOUT * 7 / 5,
        "closed after {closed:?}, the timeout is {TIMEOUT:?} from accept"
    );
    proxy.shutdown().await;
}
