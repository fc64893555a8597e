//! gRPC through the proxy: an HTTP/2 client's gRPC request reaches the sandbox over h2c, and
//! the response's body and trailers (`grpc-status`) come back, also when the sandbox first
//! has to wake. The sandbox is a hand-rolled gRPC-style echo on hyper's HTTP/2 server.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rouse_proxy::RouteState;
use support::{TestDirectory, config, host, start};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One length-prefixed gRPC message (uncompressed).
fn grpc_frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(message.len()).expect("small message"));
    out.put_slice(message);
    out.freeze()
}

/// The message of one gRPC frame.
fn grpc_message(mut frame: Bytes) -> Bytes {
    assert!(frame.len() >= 5, "short gRPC frame: {frame:?}");
    assert_eq!(frame.get_u8(), 0, "compressed flag");
    let len = frame.get_u32() as usize;
    assert_eq!(frame.len(), len, "gRPC length prefix");
    frame
}

/// An h2c-only echo service: answers `echo: <message>` as a gRPC response with trailers
/// `grpc-status: 0`, and reports the `:authority` and `te` it saw in response headers.
async fn grpc_echo() -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|req: Request<Incoming>| async move {
                    let authority = req.uri().authority().map(|a| a.to_string());
                    let te = req.headers().get("te").cloned();
                    let body = req.into_body().collect().await.expect("request body");
                    let message = grpc_message(body.to_bytes());
                    let mut reply = b"echo: ".to_vec();
                    reply.extend_from_slice(&message);
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", "0".parse().expect("value"));
                    trailers.insert("grpc-message", "fine".parse().expect("value"));
                    let frames = futures::stream::iter([
                        Ok::<_, Infallible>(Frame::data(grpc_frame(&reply))),
                        Ok(Frame::trailers(trailers)),
                    ]);
                    let mut response = Response::new(StreamBody::new(frames));
                    let headers = response.headers_mut();
                    headers.insert("content-type", "application/grpc".parse().expect("value"));
                    headers.insert(
                        "x-seen-authority",
                        authority.unwrap_or_default().parse().expect("value"),
                    );
                    if let Some(te) = te {
                        headers.insert("x-seen-te", te);
                    }
                    Ok::<_, Infallible>(response)
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, task)
}

/// What a gRPC call through the proxy returned.
struct Call {
    status: StatusCode,
    headers: HeaderMap,
    message: Bytes,
    trailers: Option<HeaderMap>,
}

/// One unary gRPC call over a new h2c connection to the proxy.
async fn call(proxy: SocketAddr, sandbox: &str, message: &[u8]) -> Call {
    let stream = TcpStream::connect(proxy).await.expect("connect to proxy");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let req = Request::post(format!("http://{}/echo.Echo/Say", host(sandbox)))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(grpc_frame(message)))
        .expect("request");
    let response = sender.send_request(req).await.expect("response");
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.expect("response body");
    let trailers = collected.trailers().cloned();
    let body = collected.to_bytes();
    let message = if parts.status == StatusCode::OK {
        grpc_message(body)
    } else {
        body
    };
    Call {
        status: parts.status,
        headers: parts.headers,
        message,
        trailers,
    }
}

#[tokio::test]
async fn grpc_call_keeps_its_trailers_end_to_end() {
    let (backend, _task) = grpc_echo().await;
    let directory = TestDirectory::new();
    directory.running("grpc", backend);
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    for i in 0..3 {
        let reply = call(addr, "grpc", format!("hi {i}").as_bytes()).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "{:?}",
            String::from_utf8_lossy(&reply.message)
        );
        assert_eq!(reply.message, format!("echo: hi {i}"));
        let trailers = reply.trailers.expect("trailers reach the client");
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(trailers["grpc-message"], "fine");
        assert_eq!(reply.headers["x-seen-authority"], host("grpc").as_str());
        assert_eq!(reply.headers["x-seen-te"], "trailers");
    }
    proxy.shutdown().await;
}

#[tokio::test]
async fn grpc_call_to_a_suspended_sandbox_is_held_until_it_wakes() {
    let (backend, _task) = grpc_echo().await;
    let directory = TestDirectory::new();
    directory.set("sleepy", RouteState::suspended(true));
    let proxy = start(config(""), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    let pending = tokio::spawn(async move { call(addr, "sleepy", b"wake up").await });
    directory.wait_wakes(1).await;
    directory.running("sleepy", backend);
    let reply = pending.await.expect("call task");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.message, "echo: wake up");
    assert_eq!(reply.trailers.expect("trailers")["grpc-status"], "0");
    proxy.shutdown().await;
}

#[tokio::test]
async fn http2_to_the_sandbox_can_be_turned_off() {
    let (backend, _task) = grpc_echo().await;
    let directory = TestDirectory::new();
    directory.running("grpc", backend);
    let proxy = start(config("[upstream]\nhttp2 = \"never\"\n"), &directory).await;
    let addr = proxy.addrs().http.expect("http listener");

    // The h2c-only sandbox cannot answer HTTP/1.1: the proxy reports a bad gateway.
    let reply = call(addr, "grpc", b"hi").await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    proxy.shutdown().await;
}
