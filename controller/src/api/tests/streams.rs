//! Streams and connections: watch events, the stream budget, log tail and follow, slow and
//! departing clients.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{DEADLINE, SANDBOXES, Server, TOKEN, assert_status, labelled, sandbox};

#[tokio::test]
async fn watch_streams_events_from_a_version() {
    let server = Server::start().await;
    let c = &server.client;
    c.post(SANDBOXES, &sandbox("before")).await;
    let (_, list) = c.get(SANDBOXES).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();

    let mut from_version = c
        .stream(&format!("{SANDBOXES}?watch=true&resourceVersion={rv}"))
        .await;
    let mut from_start = c.stream(&format!("{SANDBOXES}?watch=1")).await;
    let mut one = c
        .stream(&format!(
            "/v1/sandboxes?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dweb"
        ))
        .await;
    c.post(SANDBOXES, &sandbox("other")).await;
    c.post(SANDBOXES, &sandbox("web")).await;
    c.raw_json("POST", &format!("{SANDBOXES}/web/suspend"))
        .await;
    c.delete(&format!("{SANDBOXES}/web")).await;

    let events = |lines: Vec<Value>| -> Vec<(String, String)> {
        lines
            .iter()
            .map(|l| {
                (
                    l["type"].as_str().expect("type").to_owned(),
                    l["object"]["metadata"]["name"]
                        .as_str()
                        .expect("name")
                        .to_owned(),
                )
            })
            .collect()
    };
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert_eq!(
        events(from_version.json_lines(4, DEADLINE).await),
        pairs(&[
            ("ADDED", "other"),
            ("ADDED", "web"),
            ("MODIFIED", "web"),
            ("DELETED", "web")
        ])
    );
    assert_eq!(
        events(from_start.json_lines(5, DEADLINE).await),
        pairs(&[
            ("ADDED", "before"),
            ("ADDED", "other"),
            ("ADDED", "web"),
            ("MODIFIED", "web"),
            ("DELETED", "web"),
        ])
    );
    let only_web = one.json_lines(3, DEADLINE).await;
    assert_eq!(
        events(only_web.clone()),
        pairs(&[("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")])
    );
    assert_eq!(only_web[1]["object"]["spec"]["operatingMode"], "Suspended");

    // A label selector narrows the watch.
    let (_, list) = c.get(SANDBOXES).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let mut selected = c
        .stream(&format!(
            "{SANDBOXES}?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb"
        ))
        .await;
    c.post(SANDBOXES, &labelled("db", json!({"app": "db"})))
        .await;
    c.post(SANDBOXES, &labelled("front", json!({"app": "web"})))
        .await;
    assert_eq!(
        events(selected.json_lines(1, DEADLINE).await),
        pairs(&[("ADDED", "front")])
    );

    // A version the store forgot ends the stream with a 410 ERROR event.
    server.store.compact();
    let mut expired = c
        .stream(&format!("{SANDBOXES}?watch=true&resourceVersion={rv}"))
        .await;
    let lines = expired.json_lines(1, DEADLINE).await;
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 410);
    assert_eq!(lines[0]["object"]["reason"], "Expired");
    expired.end(DEADLINE).await;

    // timeoutSeconds ends a quiet stream; shutdown ends the others.
    let mut short = c
        .stream(&format!(
            "{SANDBOXES}?watch=true&resourceVersion={rv}&timeoutSeconds=0"
        ))
        .await;
    short.end(DEADLINE).await;
    let mut open = c.stream(&format!("{SANDBOXES}?watch=true")).await;
    open.json_lines(4, DEADLINE).await;
    server.shutdown.cancel();
    open.end(DEADLINE).await;
    for mut stream in [from_version, from_start, one, selected] {
        stream.end(DEADLINE).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn stream_budget_is_enforced() {
    let server = Server::start_with(|c| c.max_streams = 1).await;
    let c = &server.client;
    let mut first = c.stream(&format!("{SANDBOXES}?watch=true")).await;
    let second = c.get(&format!("{SANDBOXES}?watch=true")).await;
    assert_status(&second, 503, "ServiceUnavailable");
    // A plain list is not a stream and still works.
    assert_eq!(c.get(SANDBOXES).await.0, StatusCode::OK);
    server.shutdown.cancel();
    first.end(DEADLINE).await;
    server.stop().await;
}

#[tokio::test]
async fn logs_tail_and_follow() {
    let server = Server::start().await;
    let c = &server.client;
    assert_status(
        &c.get(&format!("{SANDBOXES}/web/log")).await,
        404,
        "NotFound",
    );
    let climbing = c
        .get("/v1/namespaces/..%2F..%2Fetc/sandboxes/passwd/log")
        .await;
    assert_status(&climbing, 404, "NotFound");
    c.post(SANDBOXES, &sandbox("web")).await;
    // No output yet: an empty log.
    let (status, text) = c.raw_text("GET", &format!("{SANDBOXES}/web/log")).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, ""));

    let path = rouse_shared::datadir::log_file(server.data.path(), "default", "web");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, "one\ntwo\nthree\n").expect("write");
    let (_, all) = c.raw_text("GET", &format!("{SANDBOXES}/web/log")).await;
    assert_eq!(all, "one\ntwo\nthree\n");
    let (_, tail) = c
        .raw_text("GET", &format!("{SANDBOXES}/web/log?tailLines=2"))
        .await;
    assert_eq!(tail, "two\nthree\n");
    assert_status(
        &c.get(&format!("{SANDBOXES}/web/log?tailLines=-1")).await,
        400,
        "BadRequest",
    );

    let mut follow = c
        .stream(&format!("{SANDBOXES}/web/log?follow=true&tailLines=1"))
        .await;
    assert_eq!(follow.text_until("three\n", DEADLINE).await, "three\n");
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        file.write_all(b"four\n").expect("append");
    }
    assert_eq!(follow.text_until("four\n", DEADLINE).await, "four\n");

    // Following a sandbox that is deleted ends with it.
    c.post(SANDBOXES, &sandbox("brief")).await;
    let mut brief = c
        .stream(&format!("{SANDBOXES}/brief/log?follow=true"))
        .await;
    c.delete(&format!("{SANDBOXES}/brief")).await;
    brief.end(DEADLINE).await;

    server.shutdown.cancel();
    follow.end(DEADLINE).await;
    server.stop().await;
}

#[tokio::test]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start_with(|c| {
        c.body_read_timeout = Duration::from_millis(200);
        c.header_read_timeout = Duration::from_millis(200);
    })
    .await;
    let addr = server.client.addr();

    // A body that never completes: 408 with a Status.
    let mut slow_body = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {SANDBOXES} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    slow_body.write_all(head.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = slow_body.read(&mut buf).await.expect("read");
            response.extend_from_slice(&buf[..n]);
            if n == 0 || String::from_utf8_lossy(&response).contains("\"code\":408") {
                break;
            }
        }
    };
    tokio::time::timeout(DEADLINE, read)
        .await
        .expect("408 in time");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"reason\":\"Timeout\""), "{text}");

    // Headers that never complete: the connection is closed.
    let mut slow_head = tokio::net::TcpStream::connect(addr).await.expect("connect");
    slow_head
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .expect("write");
    let closed = async {
        loop {
            match slow_head.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(DEADLINE, closed)
        .await
        .expect("closed in time");
    server.stop().await;
}

#[tokio::test]
async fn a_client_leaving_frees_its_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start_with(|c| c.max_streams = 1).await;
    let addr = server.client.addr();
    let mut raw = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET {SANDBOXES}?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    raw.write_all(request.as_bytes()).await.expect("write");
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(DEADLINE, raw.read(&mut buf))
        .await
        .expect("response head in time")
        .expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert_status(
        &server.client.get(&format!("{SANDBOXES}?watch=true")).await,
        503,
        "ServiceUnavailable",
    );
    drop(raw);
    // The server notices the closed connection and releases the stream's permit.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (status, _) = server
            .client
            .raw_text("GET", &format!("{SANDBOXES}?watch=true&timeoutSeconds=0"))
            .await;
        if status == StatusCode::OK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream of a closed connection was never released"
        );
        tokio::task::yield_now().await;
    }
    server.stop().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_a_bad_version_is_a_bad_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start().await;
    let addr = server.client.addr();
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "GET {SANDBOXES} HTTP/1.1\r\nHost: x\r\nAuthorization: {scheme} {TOKEN}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        tokio::time::timeout(DEADLINE, stream.read_to_string(&mut response))
            .await
            .expect("response in time")
            .expect("read");
        assert!(response.starts_with("HTTP/1.1 200"), "{scheme}: {response}");
    }
    for path in [
        format!("{SANDBOXES}?resourceVersion=abc"),
        format!("{SANDBOXES}?watch=true&resourceVersion=abc"),
    ] {
        let got = server.client.get(&path).await;
        assert_status(&got, 400, "BadRequest");
        let body = got.1;
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("resourceVersion")),
            "{body}"
        );
    }
}

/// A watch from a version the store has not reached is answered as kube-apiserver does: 504
/// `Timeout`, "Too large resource version", with the cause and a retry hint, not a hang.
#[tokio::test]
async fn a_watch_from_a_future_version_is_too_large() {
    let server = Server::embedded().await;
    let got = tokio::time::timeout(
        DEADLINE,
        server
            .client
            .get(&format!("{SANDBOXES}?watch=true&resourceVersion=99999")),
    )
    .await
    .expect("answered, not hung");
    assert_status(&got, 504, "Timeout");
    let body = got.1;
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Too large resource version: 99999")),
        "{body}"
    );
    assert_eq!(
        body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}
