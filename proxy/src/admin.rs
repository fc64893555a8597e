//! The admin listener: `/metrics` (Prometheus text), `/healthz` (the process serves) and
//! `/readyz` (routes synced from the directory, not draining, and the embedding's check: in
//! `rouse up`, the store can write).

use std::convert::Infallible;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::route::Router;

/// Time an admin client has to send its request head.
const ADMIN_HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the admin endpoints until the hard stop (metrics stay readable while draining).
pub(crate) async fn accept_loop(router: Router, listener: TcpListener) {
    let stop = router.hard_stop();
    let tasks = router.background_tasks();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return,
        };
        let Ok((stream, _peer)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let router = router.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let service = service_fn(move |req| answer(router.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(ADMIN_HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

async fn answer(
    router: Router,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(content_type),
        );
        response
    };
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "use GET\n".into(),
        ));
    }
    Ok(match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            crate::metrics::render(),
        ),
        "/healthz" => reply(StatusCode::OK, TEXT, "ok\n".into()),
        "/readyz" => match router.not_ready() {
            None => reply(StatusCode::OK, TEXT, "ready\n".into()),
            Some(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                format!("not ready: {why}\n"),
            ),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found; try /metrics, /healthz, /readyz\n".into(),
        ),
    })
}
