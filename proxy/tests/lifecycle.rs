//! Lifecycle: admin endpoints, hot reload (and a bad reload keeping the old config), and
//! graceful drain with and without a deadline hit.

mod support;

use std::io::Write;

use http::StatusCode;
use rouse_proxy::RouteState;
use rouse_proxy::directory::SandboxKey;
use support::backend::Backend;
use support::client::get;
use support::{DEADLINE, TestDirectory, config, host, start, wait_for, wait_held};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn admin_serves_health_readiness_and_metrics() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    let admin = proxy.addrs().admin.expect("admin listener");

    assert_eq!(get(http, &host("alice"), "/").await.status, StatusCode::OK);
    assert_eq!(get(admin, "admin", "/healthz").await.status, StatusCode::OK);
    assert_eq!(get(admin, "admin", "/readyz").await.status, StatusCode::OK);
    let metrics = get(admin, "admin", "/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    for name in [
        "rouse_proxy_requests_total",
        "rouse_proxy_connections_open",
        "rouse_proxy_bytes_total",
    ] {
        assert!(
            metrics.body.contains(name),
            "{name} missing:\n{}",
            metrics.body
        );
    }
    assert!(metrics.body.contains("code=\"200\""), "{}", metrics.body);
    proxy.shutdown().await;
}

/// The status of `GET /` to `host`, sent on an open client connection.
async fn status_on(
    sender: &mut hyper::client::conn::http1::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    host: &str,
) -> StatusCode {
    use http_body_util::BodyExt;

    sender.ready().await.expect("client connection ready");
    let req = http::Request::get("/")
        .header("host", host)
        .body(http_body_util::Empty::new())
        .expect("request");
    let response = sender.send_request(req).await.expect("response");
    let status = response.status();
    response.into_body().collect().await.expect("body");
    status
}

/// A keep-alive connection reuses its last route only while the config and the routing
/// table's slots stay: after a reload its host is resolved under the new domains, and a
/// sandbox that left the table (and came back) is looked up again.
#[tokio::test]
async fn a_kept_client_connection_follows_reloads_and_route_changes() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    let stream = TcpStream::connect(http).await.expect("connect proxy");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    let driver = tokio::spawn(conn);
    assert_eq!(status_on(&mut sender, &host("alice")).await, StatusCode::OK);

    let mut new = (*proxy.config()).clone();
    new.routing.domains = vec!["apps.test".to_owned()];
    proxy.reload(new).expect("valid reload");
    let moved = "alice.default.apps.test";
    assert_eq!(
        status_on(&mut sender, &host("alice")).await,
        StatusCode::NOT_FOUND,
        "the old domain is gone"
    );
    assert_eq!(status_on(&mut sender, moved).await, StatusCode::OK);

    let key = SandboxKey::new("default", "alice");
    directory.set("alice", RouteState::Missing);
    wait_for("alice to leave the table", || {
        let gone = proxy.router().route_state(&key).is_none();
        async move { gone }
    })
    .await;
    assert_eq!(status_on(&mut sender, moved).await, StatusCode::NOT_FOUND);
    directory.running("alice", backend.addr);
    wait_for("alice to come back", || {
        let back = proxy.router().route_state(&key).is_some();
        async move { back }
    })
    .await;
    assert_eq!(status_on(&mut sender, moved).await, StatusCode::OK);
    drop(sender);
    driver.abort();
    proxy.shutdown().await;
}

#[tokio::test]
async fn reload_swaps_the_config_and_a_bad_file_keeps_the_old_one() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    assert_eq!(get(http, &host("alice"), "/").await.status, StatusCode::OK);

    let mut new = (*proxy.config()).clone();
    new.routing.domains = vec!["apps.test".to_owned()];
    proxy.reload(new).expect("valid reload");
    assert_eq!(
        get(http, "alice.default.apps.test", "/").await.status,
        StatusCode::OK
    );
    assert_eq!(
        get(http, &host("alice"), "/").await.status,
        StatusCode::NOT_FOUND
    );

    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        file,
        "[routing]\ndomains = [\"bad..domain\"]\n[wake]\ndeadline = \"soon\"\n"
    )
    .expect("write");
    let err = proxy
        .reload_file(file.path())
        .expect_err("bad config rejected");
    let text = err.to_string();
    assert!(text.contains("line 4: wake.deadline"), "{text}");
    assert_eq!(proxy.config().routing.domains, vec!["apps.test".to_owned()]);
    assert_eq!(
        get(http, "alice.default.apps.test", "/").await.status,
        StatusCode::OK
    );
    proxy.shutdown().await;
}

#[tokio::test]
async fn drain_finishes_in_flight_requests_and_refuses_new_ones() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config(""), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();
    let key = SandboxKey::new("default", "alice");

    let in_flight = tokio::spawn(async move { get(http, &host("alice"), "/slow").await });
    wait_for("the slow request in flight", || {
        let router = router.clone();
        let key = key.clone();
        async move { router.open_connections(&key) == 1 }
    })
    .await;
    let shutdown = tokio::spawn(proxy.shutdown());
    wait_for("new connections refused", || async move {
        TcpStream::connect(http).await.is_err()
    })
    .await;
    assert!(!router.is_ready());
    backend.release_slow();
    let reply = tokio::time::timeout(DEADLINE, in_flight)
        .await
        .expect("in-flight request finishes")
        .expect("client task");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "slow done");
    tokio::time::timeout(DEADLINE, shutdown)
        .await
        .expect("drain ends")
        .expect("shutdown task");
}

#[tokio::test]
async fn drain_deadline_closes_what_is_left() {
    let backend = Backend::start().await;
    let directory = TestDirectory::new();
    directory.running("alice", backend.addr);
    let proxy = start(config("[drain]\ntimeout = \"200ms\"\n"), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();
    let key = SandboxKey::new("default", "alice");

    let mut stream = TcpStream::connect(http).await.expect("connect");
    let request = format!("GET /slow HTTP/1.1\r\nHost: {}\r\n\r\n", host("alice"));
    stream.write_all(request.as_bytes()).await.expect("write");
    wait_for("the slow request in flight", || {
        let router = router.clone();
        let key = key.clone();
        async move { router.open_connections(&key) == 1 }
    })
    .await;
    tokio::time::timeout(DEADLINE, proxy.shutdown())
        .await
        .expect("drain ends at its deadline");
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut rest))
        .await
        .expect("the proxy closed the connection");
    assert!(rest.is_empty(), "no response for the cut request");
}

/// A request held for a sandbox that is still waking when the proxy drains gets 503 with
/// `Retry-After` at once, and the drain does not wait for it.
#[tokio::test]
async fn drain_answers_held_requests_with_503() {
    let directory = TestDirectory::new();
    directory.set("sleepy", RouteState::suspended(true));
    let proxy = start(config("[drain]\ntimeout = \"60s\"\n"), &directory).await;
    let http = proxy.addrs().http.expect("http listener");
    let router = proxy.router().clone();

    let held = tokio::spawn(async move { get(http, &host("sleepy"), "/").await });
    wait_held(&router, 1).await;
    let started = std::time::Instant::now();
    tokio::time::timeout(DEADLINE, proxy.shutdown())
        .await
        .expect("drain ends without waiting for the held request");
    let reply = tokio::time::timeout(DEADLINE, held)
        .await
        .expect("held request answered")
        .expect("client task");
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        reply.headers.contains_key("retry-after"),
        "{:?}",
        reply.headers
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "drain waited {:?}",
        started.elapsed()
    );
}
