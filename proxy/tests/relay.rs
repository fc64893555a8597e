//! The HTTP/1.1 relay end to end, against scripted backends that answer with exact bytes:
//! response framings (length, chunked with trailers, until close, none), informational
//! responses, pipelining, upstream connections closed while idle, broken responses, and the
//! hand-over to the full HTTP path in the middle of a connection.

mod support;

use std::net::SocketAddr;

use support::scripted::{Answer, Scripted, read_to_close, read_until, send};
use support::{DEADLINE, TestDirectory, config, host, start};
use tokio::net::TcpStream;

/// A proxy in front of `backend` as sandbox `alice`, and a raw client connection to it.
async fn proxy_to(backend: SocketAddr) -> (rouse_proxy::Proxy, TcpStream) {
    let directory = TestDirectory::new();
    directory.running("alice", backend);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let client = TcpStream::connect(addr).await.expect("connect");
    (proxy, client)
}

/// A `GET` of `path` for sandbox `alice`, with `extra` header lines.
fn get(path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
        host("alice")
    )
}

#[tokio::test]
async fn length_and_chunked_responses_keep_one_connection_each_side() {
    let backend = Scripted::start(|n, _| {
        if n % 2 == 0 {
            Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
        } else {
            Answer::keep(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n\
                 3\r\nsec\r\n3;ext=1\r\nond\r\n0\r\nx-sum: 6\r\n\r\n",
            )
        }
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let mut buf = Vec::new();
    for round in 0..2 {
        send(&mut client, &get("/", "")).await;
        read_until(&mut client, &mut buf, "first").await;
        send(&mut client, &get("/", "")).await;
        read_until(&mut client, &mut buf, "x-sum: 6\r\n\r\n").await;
        let text = String::from_utf8_lossy(&buf).into_owned();
        assert!(
            text.contains("Transfer-Encoding: chunked\r\n\r\n3\r\nsec\r\n3;ext=1\r\nond\r\n0\r\n"),
            "round {round}: {text:?}"
        );
        assert!(!text.contains("Trailer:"), "{text:?}");
        buf.clear();
    }
    let seen = backend.seen();
    assert_eq!(seen.len(), 4);
    assert!(seen.iter().all(|s| s.conn == 1), "{seen:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn headers_are_rewritten_for_the_sandbox() {
    let backend = Scripted::start(|_, _| Answer::keep("HTTP/1.1 204 No Content\r\n\r\n")).await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let request = format!(
        "POST /up?x=1 HTTP/1.1\r\nHost: {}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\
         TE: trailers\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Host: spoofed\r\n\
         Content-Length: 4\r\nX-Kept: yes\r\n\r\nbody",
        host("alice")
    );
    send(&mut client, &request).await;
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "204 No Content\r\n\r\n").await;
    let seen = backend.seen();
    let head = seen[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /up?x=1 http/1.1\r\n"), "{head}");
    assert!(head.contains("x-kept: yes\r\n"), "{head}");
    assert!(
        head.contains("x-forwarded-for: 10.0.0.1, 127.0.0.1\r\n"),
        "{head}"
    );
    assert!(
        head.contains(&format!("x-forwarded-host: {}\r\n", host("alice"))),
        "{head}"
    );
    assert!(head.contains("x-forwarded-proto: http\r\n"), "{head}");
    for gone in ["keep-alive", "\r\nte:", "spoofed", "connection:"] {
        assert!(!head.contains(gone), "{gone} in {head}");
    }
    assert_eq!(seen[0].body, b"body");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_body_delimited_by_the_close_closes_the_client_connection() {
    let backend =
        Scripted::start(|_, _| Answer::close("HTTP/1.1 200 OK\r\n\r\nuntil the end")).await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    send(&mut client, &get("/", "")).await;
    let text = read_to_close(&mut client).await;
    assert!(text.contains("connection: close\r\n"), "{text:?}");
    assert!(text.ends_with("\r\n\r\nuntil the end"), "{text:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn bodiless_responses_and_early_hints_keep_the_connection() {
    let backend = Scripted::start(|n, _| match n {
        0 => Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"),
        1 => Answer::keep("HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n"),
        2 => Answer::keep(
            "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone",
        ),
        _ => Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlast"),
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let head = format!("HEAD / HTTP/1.1\r\nHost: {}\r\n\r\n", host("alice"));
    send(&mut client, &head).await;
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "Content-Length: 9\r\n\r\n").await;
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "304 Not Modified").await;
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "done").await;
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "last").await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(
        text.contains("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK"),
        "{text:?}"
    );
    assert!(backend.seen().iter().all(|s| s.conn == 1));
    proxy.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let backend = Scripted::start(|n, _| {
        let body = format!("reply{n}");
        Answer {
            bytes: format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            close: false,
        }
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let three = [get("/a", ""), get("/b", ""), get("/c", "")].concat();
    send(&mut client, &three).await;
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "reply2").await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (a, b) = (text.find("reply0"), text.find("reply1"));
    assert!(a < b && b < text.find("reply2"), "{text:?}");
    let paths: Vec<String> = backend
        .seen()
        .iter()
        .map(|s| s.head.split(' ').nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(paths, ["/a", "/b", "/c"]);
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_connection_the_sandbox_closed_while_idle_is_replaced() {
    // Every answer closes the backend connection without saying so.
    let backend = Scripted::start(|n, _| {
        Answer::close(&format!("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nr{n}"))
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let mut buf = Vec::new();
    for n in 0..3 {
        send(&mut client, &get("/", "")).await;
        read_until(&mut client, &mut buf, &format!("r{n}")).await;
    }
    let conns: Vec<usize> = backend.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [1, 2, 3]);
    proxy.shutdown().await;
}

#[tokio::test]
async fn broken_responses_get_502_or_a_close_and_other_requests_go_on() {
    let backend = Scripted::start(|n, _| match n {
        0 => Answer::close("NOT HTTP AT ALL\r\n\r\n"),
        1 => Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        _ => Answer::close("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let mut buf = Vec::new();
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "502 Bad Gateway").await;
    read_until(&mut client, &mut buf, "malformed response head").await;
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "\r\n\r\nok").await;
    // A body cut short: the client sees the connection close, never a whole response.
    send(&mut client, &get("/", "")).await;
    let rest = read_to_close(&mut client).await;
    assert!(rest.ends_with("\r\n\r\nabc"), "{rest:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_request_the_relay_does_not_cover_moves_the_connection_to_the_full_path() {
    let backend = Scripted::numbered().await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let mut buf = Vec::new();
    send(&mut client, &get("/relayed", "")).await;
    read_until(&mut client, &mut buf, "r0").await;
    // A chunked upload is the full path's: it reaches the sandbox with its body whole.
    let upload = format!(
        "POST /upload HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n\
         4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n",
        host("alice")
    );
    send(&mut client, &upload).await;
    read_until(&mut client, &mut buf, "r1").await;
    send(&mut client, &get("/after", "")).await;
    read_until(&mut client, &mut buf, "r2").await;
    let seen = backend.seen();
    assert_eq!(seen[1].body, b"wikipedia", "{seen:?}");
    assert!(seen[2].head.starts_with("GET /after "), "{seen:?}");
    let metrics = rouse_proxy::metrics::render();
    assert!(
        metrics.contains("rouse_proxy_http_relay_handovers_total{reason=\"framing\"}"),
        "{metrics}"
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn with_the_relay_off_every_request_takes_the_full_path() {
    let backend =
        Scripted::start(|_, _| Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
            .await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let http = "[http]\nlisten = \"127.0.0.1:0\"\nrelay = false\n";
    let proxy = start(support::config_with_http(http), &directory).await;
    assert!(!proxy.router().config().http.relay);
    let addr = proxy.addrs().http.expect("http listener");
    let mut client = TcpStream::connect(addr).await.expect("connect");
    send(&mut client, &get("/", "")).await;
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "\r\n\r\nok").await;
    // The full path (hyper) writes header names in lower case and adds a date.
    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    assert!(text.contains("date: "), "{text:?}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn only_a_safe_request_goes_again_after_the_sandbox_hung_up_on_it() {
    // The sandbox takes the first two requests and closes without an answer (a workload
    // stopped under them), then answers.
    let backend = Scripted::start(|n, _| match n {
        0 | 1 => Answer::close(""),
        _ => Answer::keep("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
    })
    .await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let post = format!(
        "POST /pay HTTP/1.1\r\nHost: {}\r\nContent-Length: 3\r\n\r\none",
        host("alice")
    );
    send(&mut client, &post).await;
    let mut buf = Vec::new();
    read_until(&mut client, &mut buf, "502 Bad Gateway").await;
    assert_eq!(backend.seen().len(), 1, "a POST is never sent twice");
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "\r\n\r\nok").await;
    let seen = backend.seen();
    let paths: Vec<&str> = seen
        .iter()
        .map(|s| s.head.split(' ').nth(1).unwrap_or_default())
        .collect();
    assert_eq!(paths, ["/pay", "/", "/"], "the GET went again");
    proxy.shutdown().await;
}

#[tokio::test]
async fn large_bodies_pass_whole_both_ways_on_a_kept_connection() {
    let mut big: String = (0..1_000_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    big.push_str("--end--");
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{big}",
        big.len()
    );
    let backend = Scripted::start(move |_, _| Answer::keep(&answer)).await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    // The largest body the relay carries itself, then a download of 1 MB, twice.
    let upload: String = (0..65_536)
        .map(|i| char::from(b'A' + (i % 26) as u8))
        .collect();
    for _ in 0..2 {
        let post = format!(
            "POST /up HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{upload}",
            host("alice"),
            upload.len()
        );
        send(&mut client, &post).await;
        let mut buf = Vec::new();
        read_until(&mut client, &mut buf, "--end--").await;
        let text = String::from_utf8_lossy(&buf);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        assert_eq!(body.len(), big.len());
        assert!(body == big, "the body arrives unchanged");
    }
    let seen = backend.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|s| s.conn == 1 && s.body == upload.as_bytes())
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_quiesce_resets_the_kept_connection_of_an_idle_client_at_once() {
    let backend = Scripted::numbered().await;
    let (proxy, mut client) = proxy_to(backend.addr).await;
    let mut buf = Vec::new();
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "r0").await;
    // The client stays connected and silent; its kept upstream connection must not make a
    // checkpoint of the sandbox wait.
    let key = rouse_proxy::SandboxKey::new("default", "alice");
    let quiet = proxy.router().quiescer().quiesce(&key, DEADLINE).await;
    assert!(quiet, "every upstream connection was closed");
    proxy.router().quiescer().release(&key);
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "r1").await;
    let conns: Vec<usize> = backend.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [1, 2], "the next request dialled anew");
    proxy.shutdown().await;
}

#[tokio::test]
async fn a_drain_closes_an_idle_relayed_connection_at_once() {
    let backend = Scripted::numbered().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    // A drain deadline far beyond the test's: only closing the idle connection ends it.
    let proxy = start(config("[drain]\ntimeout = \"10m\"\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let mut client = TcpStream::connect(addr).await.expect("connect");
    let mut buf = Vec::new();
    send(&mut client, &get("/", "")).await;
    read_until(&mut client, &mut buf, "r0").await;
    let drained = tokio::time::timeout(DEADLINE, proxy.shutdown()).await;
    assert!(drained.is_ok(), "the drain waited for an idle client");
    let rest = read_to_close(&mut client).await;
    assert!(rest.is_empty(), "{rest:?}");
}
