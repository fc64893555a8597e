//! The upstream agent-sandbox router protocol, beyond the routing headers themselves
//! (`X-Sandbox-ID`, `X-Sandbox-Namespace`, `X-Sandbox-Port`, read by `service::target_of`):
//! `X-Sandbox-Timeout` bounds how long one request may wait for its sandbox, holding
//! included. `X-Sandbox-Pod-IP` is never read: Rouse dials the address its own directory
//! knows, so a client cannot steer the proxy at an address of its choosing.
//!
//! The semantics follow the upstream router: the value is seconds as a decimal number (the
//! SDK sends its read timeout, e.g. `60` or `12.5`); a value that is not a positive, finite
//! number is ignored, as the upstream router ignores it.

use std::future::Future;
use std::time::Duration;

use http::HeaderMap;
use http::header::HeaderName;

use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::metrics as m;

/// Seconds one request may wait for its sandbox, set by the upstream SDK.
pub(crate) const X_SANDBOX_TIMEOUT: HeaderName = HeaderName::from_static("x-sandbox-timeout");

/// The longest bound honoured (a day): larger values mean "no bound of its own" and keep the
/// proxy's limits, and the conversion to a [`Duration`] can never overflow.
const MAX_BOUND: Duration = Duration::from_secs(24 * 60 * 60);

/// A request's own bound, started when the request arrived: every upstream exchange of the
/// request (a replay included) shares it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestBound {
    timeout: Duration,
    deadline: tokio::time::Instant,
}

impl RequestBound {
    /// The bound of a request with these headers, starting now.
    pub(crate) fn of(headers: &HeaderMap) -> Option<Self> {
        let timeout = request_timeout(headers)?;
        Some(Self {
            timeout,
            deadline: tokio::time::Instant::now() + timeout,
        })
    }
}

/// The request's own bound from `X-Sandbox-Timeout`: `None` when absent, not a number, not
/// positive, not finite, or above a day.
fn request_timeout(headers: &HeaderMap) -> Option<Duration> {
    let seconds: f64 = headers
        .get(&X_SANDBOX_TIMEOUT)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if !seconds.is_finite() || seconds <= 0.0 || seconds > MAX_BOUND.as_secs_f64() {
        return None;
    }
    Some(Duration::from_secs_f64(seconds))
}

/// Runs the upstream exchange of a request bounded by `bound` (when set): past it the request
/// ends with [`ProxyError::RequestTimeout`] (504, counted in
/// `rouse_proxy_upstream_errors_total{kind="request_timeout"}`), and the dropped exchange
/// releases its place among the held connections.
pub(crate) async fn bounded<T, E>(
    key: &SandboxKey,
    bound: Option<RequestBound>,
    exchange: impl Future<Output = Result<T, E>>,
) -> Result<Result<T, E>, ProxyError> {
    match bound {
        None => Ok(exchange.await),
        Some(bound) => tokio::time::timeout_at(bound.deadline, exchange)
            .await
            .map_err(|_| {
                let err = ProxyError::RequestTimeout {
                    key: key.clone(),
                    timeout: bound.timeout,
                };
                metrics::counter!(m::UPSTREAM_ERRORS_TOTAL, "kind" => err.metric_label())
                    .increment(1);
                err
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn timeout_header_parses_like_the_upstream_router() {
        let cases: [(&str, Option<Duration>); 9] = [
            ("60", Some(Duration::from_secs(60))),
            ("12.5", Some(Duration::from_millis(12_500))),
            (" 3 ", Some(Duration::from_secs(3))),
            ("0", None),
            ("-1", None),
            ("inf", None),
            ("NaN", None),
            ("soon", None),
            ("1e9", None),
        ];
        for (value, want) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(X_SANDBOX_TIMEOUT, HeaderValue::from_static(value));
            assert_eq!(request_timeout(&headers), want, "{value:?}");
        }
        assert_eq!(request_timeout(&HeaderMap::new()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bound_ends_a_slow_exchange_with_504() {
        let key = SandboxKey::new("default", "slow");
        let mut headers = HeaderMap::new();
        headers.insert(X_SANDBOX_TIMEOUT, HeaderValue::from_static("2"));
        let bound = RequestBound::of(&headers);
        let slow = std::future::pending::<Result<(), ()>>();
        let started = tokio::time::Instant::now();
        let err = bounded(&key, bound, slow).await.expect_err("bounded");
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(err.status_code(), http::StatusCode::GATEWAY_TIMEOUT);
        let bound = RequestBound::of(&headers);
        let quick = bounded(&key, bound, async { Ok::<_, ()>(7) }).await;
        assert_eq!(quick.expect("in time"), Ok(7));
        assert_eq!(
            bounded(&key, None, async { Ok::<_, ()>(1) })
                .await
                .expect("unbounded"),
            Ok(1)
        );
    }
}
