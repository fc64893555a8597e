//! `/readyz`: whether the API can serve writes now. `/healthz` only says the process serves
//! (liveness); readiness asks the checks the embedding gives (in `rouse up`, the store's
//! health), so a store that cannot write is reported for as long as it cannot.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::state::{ApiState, ApiStore};

/// `GET /readyz`: `ok`, or `503` and why not.
pub(super) async fn readyz<S: ApiStore>(State(state): State<ApiState<S>>) -> Response {
    match state.readiness.as_ref().map_or(Ok(()), |check| check()) {
        Ok(()) => "ok".into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}
