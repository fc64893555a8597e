//! The hold/wake and connect phases: wait for a sandbox to be dialable (waking it once per
//! cycle), then dial, retrying dial-class errors with fast backoff until the wake deadline.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::time::timeout_at;

use super::{RouteTarget, Router, Slot};
use crate::directory::{Endpoint, RouteState};
use crate::error::ProxyError;
use crate::metrics as m;
use crate::wake::{HeldGuard, WakeDecision, hold};

/// Holds until `target` can be dialled, dials it and returns the stream and its slot.
pub(super) async fn connect_stream(
    router: &Router,
    target: &RouteTarget,
) -> Result<(TcpStream, SocketAddr, Arc<Slot>), ProxyError> {
    let config = router.config();
    let wake = &config.wake;
    let key = &target.key;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + wake.deadline;
    let slot = router
        .slot(key)
        .ok_or_else(|| ProxyError::UnknownSandbox { key: key.clone() })?;
    let mut rx = slot.state.subscribe();
    let mut held: Option<HeldGuard> = None;
    let mut waited_for_wake = false;
    let mut backoff = wake.dial_backoff_initial;
    let mut last_error: Option<(String, io::Error)> = None;
    let hold_once = |held: &mut Option<HeldGuard>| -> Result<(), ProxyError> {
        if held.is_none() {
            *held = Some(hold(
                key,
                &slot,
                router.held_totals(),
                wake.max_held_per_sandbox,
                wake.max_held_total,
            )?);
        }
        Ok(())
    };
    let deadline_error = |waited: bool, last: Option<(String, io::Error)>| match last {
        Some((address, source)) if !waited => ProxyError::UpstreamConnect {
            key: key.clone(),
            address,
            source: Arc::new(source),
        },
        _ => ProxyError::WakeDeadline {
            key: key.clone(),
            deadline: wake.deadline,
        },
    };
    loop {
        let state = rx.borrow_and_update().clone();
        let endpoint: Option<Endpoint> = match state {
            RouteState::Missing => return Err(ProxyError::UnknownSandbox { key: key.clone() }),
            RouteState::Failed { reason } => {
                return Err(ProxyError::Failed {
                    key: key.clone(),
                    reason,
                });
            }
            RouteState::Suspended {
                wake_on_connect: false,
            } => {
                return Err(ProxyError::Suspended {
                    key: key.clone(),
                    reason: "it is suspended and spec.suspension.wakeOnConnect is false".to_owned(),
                });
            }
            RouteState::Suspended {
                wake_on_connect: true,
            } => {
                hold_once(&mut held)?;
                waited_for_wake = true;
                maybe_wake(router, &slot, wake.deadline);
                None
            }
            RouteState::Starting { endpoint: None } => {
                hold_once(&mut held)?;
                waited_for_wake = true;
                None
            }
            RouteState::Running { endpoint }
            | RouteState::Starting {
                endpoint: Some(endpoint),
            } => Some(endpoint),
        };
        let Some(endpoint) = endpoint else {
            match timeout_at(deadline, rx.changed()).await {
                Err(_) => return Err(deadline_error(waited_for_wake, last_error)),
                Ok(Err(_)) => return Err(ProxyError::UnknownSandbox { key: key.clone() }),
                Ok(Ok(())) => continue,
            }
        };
        let port = endpoint
            .dial_port(target.port)
            .ok_or_else(|| ProxyError::UnknownPort {
                key: key.clone(),
                port: target.port,
            })?;
        // Held connections dial a just-woken sandbox a bounded number at a time.
        let permit = if held.is_some() {
            let release = Arc::clone(slot.gate.release());
            match timeout_at(deadline, release.acquire_owned()).await {
                Ok(Ok(permit)) => Some(permit),
                Ok(Err(_)) => None,
                Err(_) => return Err(deadline_error(waited_for_wake, last_error)),
            }
        } else {
            None
        };
        match timeout_at(deadline, dial(&endpoint.address, port, wake.dial_timeout)).await {
            Err(_) => return Err(deadline_error(waited_for_wake, last_error)),
            Ok(Ok((stream, addr))) => {
                if held.is_some() {
                    metrics::histogram!(m::HOLD_DURATION_SECONDS)
                        .record(started.elapsed().as_secs_f64());
                }
                drop(permit);
                return Ok((stream, addr, slot));
            }
            Ok(Err(err)) if is_dial_retryable(&err) => {
                drop(permit);
                tracing::trace!(sandbox.key = %key, error = %err, "dial failed; retrying");
                metrics::counter!(m::DIAL_RETRIES_TOTAL).increment(1);
                last_error = Some((format!("{}:{port}", endpoint.address), err));
                hold_once(&mut held)?;
                let pause = tokio::time::sleep(backoff);
                tokio::select! {
                    () = pause => {}
                    _ = rx.changed() => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(deadline_error(waited_for_wake, last_error));
                }
                backoff = (backoff * 2).min(wake.dial_backoff_max);
            }
            Ok(Err(source)) => {
                return Err(ProxyError::UpstreamConnect {
                    key: key.clone(),
                    address: format!("{}:{port}", endpoint.address),
                    source: Arc::new(source),
                });
            }
        }
    }
}

/// First wait before a failed wake call is sent again.
const WAKE_RETRY_INITIAL: Duration = Duration::from_millis(100);
/// Longest wait between wake calls.
const WAKE_RETRY_MAX: Duration = Duration::from_secs(2);

/// Sends the wake of this cycle unless another connection did. A failed call is retried with
/// backoff while connections are still held and the deadline has not passed.
fn maybe_wake(router: &Router, slot: &Arc<Slot>, deadline: Duration) {
    if slot.gate.begin_wake(Instant::now(), deadline) != WakeDecision::Send {
        return;
    }
    let router = router.clone();
    let slot = Arc::clone(slot);
    let tasks = router.background_tasks();
    let stop = router.background_stop();
    tasks.spawn(async move {
        let key = &slot.key;
        let started = Instant::now();
        let mut pause = WAKE_RETRY_INITIAL;
        tracing::info!(sandbox.key = %key, "waking sandbox");
        loop {
            let remaining = deadline.saturating_sub(started.elapsed());
            let result = tokio::time::timeout(remaining, router.directory().wake(key)).await;
            let label = match &result {
                Ok(Ok(())) => "ok",
                Ok(Err(_)) => "error",
                Err(_) => "timeout",
            };
            metrics::counter!(m::WAKES_TOTAL, "result" => label).increment(1);
            match result {
                Ok(Ok(())) => return,
                Ok(Err(err)) => {
                    tracing::warn!(sandbox.key = %key, error = %err, "wake failed");
                }
                Err(_) => tracing::warn!(sandbox.key = %key, "wake call timed out"),
            }
            let still_wanted = slot.gate.held() > 0 && started.elapsed() + pause < deadline;
            if !still_wanted {
                // Let the next connection start a new cycle.
                slot.gate.abort_wake();
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
            pause = (pause * 2).min(WAKE_RETRY_MAX);
        }
    });
}

/// Dials `address:port` (an IP, or a name resolved each time) within `limit`.
async fn dial(address: &str, port: u16, limit: Duration) -> io::Result<(TcpStream, SocketAddr)> {
    let addr = match address.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => tokio::net::lookup_host((address, port))
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "name has no address"))?,
    };
    let stream = tokio::time::timeout(limit, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "dial timed out"))??;
    stream.set_nodelay(true)?;
    Ok((stream, addr))
}

/// True for errors a sandbox that is still starting produces: worth another dial.
fn is_dial_retryable(err: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        err.kind(),
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | TimedOut
            | HostUnreachable
            | NetworkUnreachable
            | AddrNotAvailable
            | NotConnected
    )
}
