//! Requests and responses whose headers or framing are wrong, on the relay and on the full
//! path: the sandbox always gets a `Host`, ambiguous router headers are refused, a client's
//! broken chunked body is the client's error (400) and a sandbox's broken one a 502 when the
//! client got nothing yet.

mod support;

use support::scripted::{Answer, Scripted, read_to_close, read_until, send};
use support::{TestDirectory, config, config_with_http, host, start};
use tokio::net::TcpStream;

/// The `[http]` section of a proxy with the relay on or off.
fn http(relay: bool) -> String {
    format!("[http]\nlisten = \"127.0.0.1:0\"\nrelay = {relay}\n")
}

/// A proxy (relay on or off) in front of `backend` as sandbox `alice`.
async fn proxy_with_relay(backend: &Scripted, relay: bool) -> rouse_proxy::Proxy {
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    start(config_with_http(&http(relay)), &directory).await
}

/// A new raw client connection to the proxy's plain HTTP listener.
async fn connect(proxy: &rouse_proxy::Proxy) -> TcpStream {
    let addr = proxy.addrs().http.expect("http listener");
    TcpStream::connect(addr).await.expect("connect")
}

#[tokio::test]
async fn a_connection_option_naming_host_does_not_take_the_host_away() {
    for relay in [true, false] {
        let backend =
            Scripted::start(|_, _| Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
                .await;
        let proxy = proxy_with_relay(&backend, relay).await;
        let mut client = connect(&proxy).await;
        let mut buf = Vec::new();
        for option in ["Host", "keep-alive, host"] {
            let request = format!(
                "GET /{relay} HTTP/1.1\r\nHost: {}\r\nConnection: {option}\r\n\r\n",
                host("alice")
            );
            send(&mut client, &request).await;
            read_until(&mut client, &mut buf, "\r\n\r\nok").await;
            buf.clear();
        }
        let want = format!("\r\nhost: {}\r\n", host("alice"));
        for seen in backend.seen() {
            let head = seen.head.to_ascii_lowercase();
            assert!(head.contains(&want), "relay {relay}: no host in {head:?}");
        }
        assert_eq!(backend.seen().len(), 2);
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn repeated_router_headers_are_refused() {
    let backend =
        Scripted::start(|_, _| Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            .await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    directory.running("bob", backend.addr);
    let proxy = start(config("[routing]\nupstream_headers = true\n"), &directory).await;
    let cases = [
        (
            "X-Sandbox-ID: alice\r\nX-Sandbox-ID: bob\r\n",
            "x-sandbox-id",
        ),
        (
            "X-Sandbox-ID: alice\r\nX-Sandbox-Namespace: default\r\nX-Sandbox-Namespace: other\r\n",
            "x-sandbox-namespace",
        ),
        (
            "X-Sandbox-ID: alice\r\nX-Sandbox-Port: 80\r\nX-Sandbox-Port: 81\r\n",
            "x-sandbox-port",
        ),
    ];
    for (headers, name) in cases {
        let mut client = connect(&proxy).await;
        let request =
            format!("GET / HTTP/1.1\r\nHost: proxy.example\r\n{headers}Connection: close\r\n\r\n");
        send(&mut client, &request).await;
        let answer = read_to_close(&mut client).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 "),
            "{headers:?}: {answer:?}"
        );
        assert!(
            answer.contains(&format!("more than one {name} header")),
            "{headers:?}: {answer:?}"
        );
    }
    assert!(backend.seen().is_empty(), "{:?}", backend.seen());
    // One of each still routes.
    let mut client = connect(&proxy).await;
    let request = "GET / HTTP/1.1\r\nHost: proxy.example\r\nX-Sandbox-ID: bob\r\n\
                   X-Sandbox-Namespace: default\r\nConnection: close\r\n\r\n";
    send(&mut client, request).await;
    assert!(read_to_close(&mut client).await.ends_with("\r\n\r\nok"));
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_broken_chunked_request_body_is_the_clients_error() {
    let backend =
        Scripted::start(|_, _| Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            .await;
    for relay in [true, false] {
        let proxy = proxy_with_relay(&backend, relay).await;
        let bodies = [
            "zz\r\nabc\r\n0\r\n\r\n",
            "0x3\r\nabc\r\n0\r\n\r\n",
            "fffffffffffffffff1\r\nabc\r\n0\r\n\r\n",
            "3\nabc\n0\n\n",
        ];
        for body in bodies {
            let mut client = connect(&proxy).await;
            let request = format!(
                "POST /up HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n{body}",
                host("alice")
            );
            send(&mut client, &request).await;
            let answer = read_to_close(&mut client).await;
            assert!(
                answer.starts_with("HTTP/1.1 400 "),
                "relay {relay}, {body:?}: {answer:?}"
            );
            assert!(
                answer.contains("request body"),
                "relay {relay}, {body:?}: {answer:?}"
            );
        }
        proxy.shutdown().await;
    }
}

#[tokio::test]
async fn a_broken_chunk_size_from_the_sandbox_is_a_502_when_nothing_was_sent() {
    for relay in [true, false] {
        let backend = Scripted::start(|n, _| match n {
            0 => Answer::keep(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            ),
            _ => Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        })
        .await;
        let proxy = proxy_with_relay(&backend, relay).await;
        let mut client = connect(&proxy).await;
        let mut buf = Vec::new();
        let request = format!("GET / HTTP/1.1\r\nHost: {}\r\n\r\n", host("alice"));
        send(&mut client, &request).await;
        read_until(&mut client, &mut buf, "502 Bad Gateway").await;
        read_until(&mut client, &mut buf, "chunk").await;
        // The client connection goes on, on a new upstream connection.
        buf.clear();
        send(&mut client, &request).await;
        read_until(&mut client, &mut buf, "\r\n\r\nok").await;
        let conns: Vec<usize> = backend.seen().iter().map(|s| s.conn).collect();
        assert_eq!(conns, [1, 2], "relay {relay}");
        proxy.shutdown().await;
    }
}
