//! L7 end to end: HTTP/1.1, h2c, streamed bodies, header rules, error statuses, WebSocket and
//! activity accounting, against real backends on 127.0.0.1.

mod support;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode};
use http_body_util::Full;
use rouse_proxy::RouteState;
use support::backend::{Backend, websocket_echo};
use support::client::{get, send, send_h2};
use support::{TestDirectory, config, host, start, wait_for};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn http1_request_reaches_the_sandbox() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let reply = get(addr, &host("alice"), "/hi?x=1").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "hello /hi");
    assert_eq!(reply.headers["x-backend"], "1");
    proxy.shutdown().await;
}

/// A client that half-closes after sending its request (`nc -N`, `shutdown(SHUT_WR)`) still
/// gets the whole response.
#[tokio::test]
async fn half_closed_clients_get_their_response() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET /half HTTP/1.1\r\nHost: {}\r\n\r\n", host("alice"));
    stream.write_all(request.as_bytes()).await.expect("write");
    stream.shutdown().await.expect("half-close");
    let mut reply = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut reply),
    )
    .await
    .expect("the proxy answers and closes within 10 s")
    .expect("read");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "reply: {reply}");
    assert!(reply.ends_with("hello /half"), "reply: {reply}");
    proxy.shutdown().await;
}

#[tokio::test]
async fn h2c_request_reaches_the_sandbox() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let uri = format!("http://{}/h2", host("alice"));
    let req = Request::get(uri)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send_h2(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "hello /h2");
    proxy.shutdown().await;
}

#[tokio::test]
async fn bodies_stream_both_ways() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let payload = "x".repeat(1 << 20);
    let req = Request::post("/echo")
        .header("host", host("alice"))
        .body(Full::new(Bytes::from(payload.clone())))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body.len(), payload.len());
    assert!(reply.body == payload, "echoed body differs");
    proxy.shutdown().await;
}

#[tokio::test]
async fn hop_by_hop_headers_are_stripped_and_forwarded_headers_set() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let req = Request::get("/headers")
        .header("host", format!("{}:8080", host("alice")))
        .header("connection", "keep-alive, x-private")
        .header("keep-alive", "timeout=5")
        .header("x-private", "1")
        .header("te", "trailers")
        .header("proxy-authorization", "Basic eA==")
        .header("x-forwarded-for", "203.0.113.9")
        .header("x-kept", "yes")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = reply.body.to_ascii_lowercase();
    for gone in ["x-private", "keep-alive", "te:", "proxy-authorization"] {
        assert!(!seen.contains(gone), "{gone} reached the backend:\n{seen}");
    }
    assert!(seen.contains("x-kept: yes"), "{seen}");
    assert!(
        seen.contains("x-forwarded-for: 203.0.113.9, 127.0.0.1"),
        "{seen}"
    );
    assert!(seen.contains("x-forwarded-proto: http"), "{seen}");
    assert!(
        seen.contains(&format!("x-forwarded-host: {}:8080", host("alice"))),
        "{seen}"
    );
    // The backend's own hop-by-hop headers stay on its side too.
    assert!(!reply.headers.contains_key("x-hop"), "{:?}", reply.headers);
    assert!(
        !reply.headers.contains_key("keep-alive"),
        "{:?}",
        reply.headers
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn unknown_hosts_and_sandboxes_get_404() {
    let directory = TestDirectory::new();
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let reply = get(addr, "example.com", "/").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(
        reply.body.contains("not under a configured sandbox domain"),
        "{}",
        reply.body
    );

    let reply = get(addr, &host("nobody"), "/").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(
        reply.body.contains("no sandbox default/nobody"),
        "{}",
        reply.body
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn failed_and_unwakeable_sandboxes_name_the_reason() {
    let directory = TestDirectory::new();
    directory.set(
        "broken",
        RouteState::Failed {
            reason: "PodFailed: exit code 3".to_owned(),
        },
    );
    directory.set("asleep", RouteState::suspended(false));
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let reply = get(addr, &host("broken"), "/").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert!(
        reply.body.contains("PodFailed: exit code 3"),
        "{}",
        reply.body
    );

    let reply = get(addr, &host("asleep"), "/").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        reply.body.contains("wakeOnConnect is false"),
        "{}",
        reply.body
    );
    assert_eq!(directory.wakes(), 0);
    proxy.shutdown().await;
}

#[tokio::test]
async fn upstream_router_headers_route_when_enabled() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config("[routing]\nupstream_headers = true\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let req = Request::get("/via-header")
        .header("host", "front.example.com")
        .header("x-sandbox-id", "alice")
        .header("x-sandbox-namespace", "default")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let reply = send(addr, req).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body, "hello /via-header");

    let req = Request::get("/")
        .header("host", "front.example.com")
        .header("x-sandbox-id", "Not_A_Name")
        .body(Full::new(Bytes::new()))
        .expect("request");
    assert_eq!(send(addr, req).await.status, StatusCode::BAD_REQUEST);
    proxy.shutdown().await;
}

#[tokio::test]
async fn websocket_echo_through_upgrade_is_accounted() {
    let (ws_addr, _ws) = websocket_echo().await;
    let directory = TestDirectory::new();
    directory.running("chat", ws_addr);
    let proxy = start(
        config("[activity]\nreport_interval = \"50ms\"\n"),
        &directory,
    )
    .await;
    let addr = proxy.addrs().http.expect("http listener");

    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let url = format!("ws://{}/socket", host("chat"));
    let (mut ws, response) = tokio_tungstenite::client_async(url, stream)
        .await
        .expect("websocket handshake through the proxy");
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    for i in 0..10 {
        let text = format!("message {i}");
        ws.send(Message::text(text.clone())).await.expect("send");
        let echoed = ws.next().await.expect("echo").expect("frame");
        assert_eq!(echoed.into_text().expect("text").as_str(), text);
    }
    ws.close(None).await.expect("close");
    // Tunnels are in-flight work a drain waits for; the client ends its side first.
    drop(ws);

    wait_for("activity with bytes both ways", || {
        let reports = directory.reports();
        async move {
            let up: u64 = reports.iter().map(|(_, r)| r.bytes_to_upstream).sum();
            let down: u64 = reports.iter().map(|(_, r)| r.bytes_to_client).sum();
            up > 100 && down > 100
        }
    })
    .await;
    assert!(
        directory
            .reports()
            .iter()
            .all(|(key, _)| key.to_string() == "default/chat")
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn upgraded_streams_outlive_the_idle_timeout() {
    let (ws_addr, _ws) = websocket_echo().await;
    let directory = TestDirectory::new();
    directory.running("chat", ws_addr);
    let proxy = start(config("[limits]\nidle_timeout = \"200ms\"\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let url = format!("ws://{}/socket", host("chat"));
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .expect("websocket handshake through the proxy");
    // Longer than the idle timeout of plain connections; upgraded ones have none by default.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    ws.send(Message::text("still here")).await.expect("send");
    let echoed = ws.next().await.expect("echo").expect("frame");
    assert_eq!(echoed.into_text().expect("text").as_str(), "still here");
    drop(ws);
    proxy.shutdown().await;
}

#[tokio::test]
async fn port_prefixes_pick_the_declared_port() {
    let first = Backend::start().await;
    let second = Backend::start().await;
    let directory = TestDirectory::new();
    directory.set(
        "multi",
        RouteState::Running {
            endpoint: rouse_proxy::directory::Endpoint {
                address: "127.0.0.1".to_owned(),
                ports: vec![
                    rouse_proxy::directory::PortMapping {
                        container_port: 80,
                        port: first.addr.port(),
                    },
                    rouse_proxy::directory::PortMapping {
                        container_port: 8080,
                        port: second.addr.port(),
                    },
                ],
            },
        },
    );
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let req = |host: String| {
        Request::get("/headers")
            .header("host", host)
            .body(Full::new(Bytes::new()))
            .expect("request")
    };
    // The pool is per sandbox port: alternating requests each reach their port's backend.
    for _ in 0..2 {
        let default = send(addr, req(host("multi"))).await;
        assert_eq!(
            default.headers["x-backend-port"],
            first.addr.port().to_string().as_str()
        );
        let other = send(addr, req(format!("8080-{}", host("multi")))).await;
        assert_eq!(
            other.headers["x-backend-port"],
            second.addr.port().to_string().as_str()
        );
    }

    let missing = get(addr, &format!("9999-{}", host("multi")), "/").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.body.contains("has no port 9999"),
        "{}",
        missing.body
    );
    proxy.shutdown().await;
}

/// An HTTP/1.1 backend answering every request with its `name` and the number of the
/// connection it came on (`a1`, `a2`, …), so a test can see which requests shared an upstream
/// connection.
async fn numbering_backend(name: &'static str) -> std::net::SocketAddr {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind backend");
    let addr = listener.local_addr().expect("backend addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        // Ends with the test's runtime.
        while let Ok((stream, _)) = listener.accept().await {
            let n = accepted.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| async move {
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(
                        format!("{name}{n}"),
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// Sends `GET /` on an open client connection and returns the body.
async fn get_on(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: &str,
) -> String {
    use http_body_util::BodyExt;

    sender.ready().await.expect("client connection ready");
    let req = Request::get("/")
        .header("host", host)
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = sender.send_request(req).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.expect("body");
    String::from_utf8(body.to_bytes().to_vec()).expect("utf-8")
}

#[tokio::test]
async fn http1_requests_of_one_client_connection_reuse_one_upstream_connection() {
    let first = numbering_backend("a").await;
    let second = numbering_backend("b").await;
    let directory = TestDirectory::new();
    directory.running("alice", first);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect proxy");
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("handshake");
    let driver = tokio::spawn(conn);

    for round in 0..3 {
        assert_eq!(
            get_on(&mut sender, &host("alice")).await,
            "a1",
            "request {round} on the first upstream connection"
        );
    }
    // The sandbox moves: the kept connection goes to the old address and must not be used.
    directory.running("alice", second);
    let key = rouse_proxy::SandboxKey::new("default", "alice");
    wait_for("the route to follow the move", || {
        let state = proxy.router().route_state(&key);
        async move { state == Some(support::directory::running(second)) }
    })
    .await;
    assert_eq!(
        get_on(&mut sender, &host("alice")).await,
        "b1",
        "the first connection of the new address"
    );
    drop(sender);
    driver.abort();
    proxy.shutdown().await;
}
