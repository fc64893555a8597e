//! A bound on the writes in progress at once, so that the memory of all writes together is
//! bounded, not only each one's (kube-apiserver bounds them with
//! `--max-mutating-requests-inflight`). A write past the bound waits for a turn, at most
//! [`ApiConfig::write_wait`](super::ApiConfig::write_wait), before its body is read; then it
//! gets `429 TooManyRequests` with `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::status::Failure;

/// The turns of writes in progress.
#[derive(Clone)]
pub(super) struct WriteLimit {
    turns: Arc<Semaphore>,
    limit: usize,
    wait: Duration,
}

impl WriteLimit {
    /// At most `limit` writes at once; one more waits at most `wait` for its turn.
    pub(super) fn new(limit: usize, wait: Duration) -> Self {
        Self {
            turns: Arc::new(Semaphore::new(limit.max(1))),
            limit: limit.max(1),
            wait,
        }
    }
}

/// Holds a turn for every `POST`, `PUT`, `PATCH` and `DELETE` until its response is made.
pub(super) async fn limit_writes(
    State(limit): State<WriteLimit>,
    request: Request,
    next: Next,
) -> Response {
    if !matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return next.run(request).await;
    }
    let turn = match limit.turns.clone().try_acquire_owned() {
        Ok(turn) => Some(turn),
        Err(_) => tokio::time::timeout(limit.wait, limit.turns.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok),
    };
    let Some(turn) = turn else {
        metrics::counter!("rouse_controller_api_writes_rejected_total").increment(1);
        return Failure::too_many_requests(format!(
            "too many writes in progress (at most {}); try again later",
            limit.limit
        ))
        .into_response();
    };
    let gauge = metrics::gauge!("rouse_controller_api_writes_in_flight");
    gauge.increment(1.0);
    let response = next.run(request).await;
    gauge.decrement(1.0);
    drop(turn);
    response
}
