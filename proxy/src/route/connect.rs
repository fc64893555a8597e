//! The hold/wake and connect phases: the driver of a connection's [`Hold`] machine. It waits
//! for a sandbox to be dialable (asking for the wake of every suspension it sees), then dials,
//! retrying dial-class errors with fast backoff until the wake deadline.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::time::timeout_at;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::slot::{RouteTarget, Slot, SlotState};
use crate::config::WakeConfig;
use crate::directory::RouteState;
use crate::error::ProxyError;
use crate::hold::{self, Hold, HoldAction, HoldEvent, Observed, Refusal, Suspension};
use crate::metrics as m;
use crate::reporter::Reporter;
use crate::wake::{HeldGuard, HeldTotals, hold};

/// What the hold/wake and connect phases use besides the slot: the wake settings in force,
/// the proxy-wide held count and the handle that sends wakes.
pub(super) struct Phases<'a> {
    /// `[wake]` of the config in force.
    pub(super) wake: &'a WakeConfig,
    /// Held connections over all sandboxes.
    pub(super) held: &'a Arc<HeldTotals>,
    /// Sends wakes in the background.
    pub(super) reporter: &'a Arc<Reporter>,
    /// Cancelled when the proxy drains: held clients are answered at once.
    pub(super) drain: &'a CancellationToken,
    /// Holds dials to sandboxes being checkpointed.
    pub(super) quiescer: &'a crate::quiesce::Quiescer,
}

/// Where a dialable sandbox is dialled.
#[derive(Debug, Clone)]
struct DialTo {
    address: String,
    port: u16,
    /// The sandbox is ready (`Running`), not starting: a refused dial means a closed port,
    /// not a workload that does not listen yet.
    ready: bool,
}

/// What a connection sees in its slot's state now: the machine's view of it and, when
/// dialable, where to dial.
fn look(state: &SlotState, port: Option<u16>) -> (Observed, Option<DialTo>) {
    match &state.route {
        RouteState::Missing => (Observed::Missing, None),
        RouteState::Failed { .. } => (Observed::Failed, None),
        RouteState::Suspended {
            wake_on_connect: false,
            ..
        } => (Observed::SuspendedNoWake, None),
        RouteState::Suspended { .. } => (Observed::Suspended(state.suspension), None),
        RouteState::Starting { endpoint: None } => (Observed::Starting, None),
        RouteState::Running { endpoint }
        | RouteState::Starting {
            endpoint: Some(endpoint),
        } => match endpoint.dial_port(port) {
            Some(port) => (
                Observed::Dialable { has_port: true },
                Some(DialTo {
                    address: endpoint.address.clone(),
                    port,
                    ready: matches!(state.route, RouteState::Running { .. }),
                }),
            ),
            None => (Observed::Dialable { has_port: false }, None),
        },
    }
}

/// Reads the slot's state as a machine event, remembering where to dial.
fn route_event(
    rx: &mut watch::Receiver<SlotState>,
    port: Option<u16>,
    dial_to: &mut Option<DialTo>,
) -> HoldEvent {
    let (observed, to) = look(&rx.borrow_and_update(), port);
    *dial_to = to;
    HoldEvent::Route(observed)
}

/// How [`drive`] ended well.
#[derive(Debug)]
pub(super) enum Reached {
    /// Dialled (`Until::Dialled`).
    Dialled(TcpStream, SocketAddr),
    /// Dialable (`Until::Dialable`).
    Dialable,
}

/// What the driver does once the sandbox is dialable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// Dial it and return the stream.
    Dialled,
    /// Return at once without dialling: the caller (a compactly held upgrade request, which
    /// the pooled client sends) dials later.
    Dialable,
}

/// Holds until `target` can be dialled, dials it and returns the stream: drives one
/// connection's [`Hold`] machine, performing its actions.
pub(super) async fn connect_slot(
    phases: Phases<'_>,
    target: &RouteTarget,
    slot: &Arc<Slot>,
) -> Result<(TcpStream, SocketAddr), ProxyError> {
    let key = &target.key;
    let deadline = phases.wake.deadline;
    match drive(phases, target, slot, Until::Dialled).await? {
        Reached::Dialled(stream, addr) => Ok((stream, addr)),
        // `Until::Dialled` returns only after a successful dial (or an error); anything else
        // would be a driver bug, reported like a deadline rather than a panic.
        Reached::Dialable => Err(ProxyError::WakeDeadline {
            key: key.clone(),
            deadline,
        }),
    }
}

/// Drives one connection's [`Hold`] machine, performing its actions, until the sandbox is
/// dialable (`Until::Dialable`) or dialled (`Until::Dialled`).
pub(super) async fn drive(
    phases: Phases<'_>,
    target: &RouteTarget,
    slot: &Arc<Slot>,
    until: Until,
) -> Result<Reached, ProxyError> {
    let wake = phases.wake;
    let key = &target.key;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + wake.deadline;
    let mut rx = slot.state.subscribe();
    let mut held: Option<HeldGuard> = None;
    let mut backoff = wake.dial_backoff_initial;
    let mut attempt = HELD_DIAL_FIRST.min(wake.dial_timeout);
    let mut last_error: Option<(String, io::Error)> = None;
    let mut dial_to: Option<DialTo> = None;
    let mut dialled: Option<(TcpStream, SocketAddr)> = None;
    let mut state = Hold::Arrived;
    let mut event = route_event(&mut rx, target.port, &mut dial_to);
    // The last dial error when there is one, else the wake deadline.
    let deadline_error = |last: Option<(String, io::Error)>| match last {
        Some((address, source)) => ProxyError::UpstreamConnect {
            key: key.clone(),
            address,
            source: Arc::new(source),
        },
        None => ProxyError::WakeDeadline {
            key: key.clone(),
            deadline: wake.deadline,
        },
    };
    loop {
        let (next, actions) = hold::step(state, event);
        state = next;
        let mut next_event = None;
        for action in actions.iter() {
            match action {
                HoldAction::Hold => {
                    held = Some(hold(
                        key,
                        &slot.gate,
                        phases.held,
                        wake.max_held_per_sandbox,
                        wake.max_held_total,
                    )?);
                }
                HoldAction::Wake(suspension) => {
                    maybe_wake(phases.reporter, slot, suspension, wake.deadline);
                }
                HoldAction::Wait => {
                    // A held client is answered at once when the proxy drains (503 with
                    // Retry-After), not left waiting out the drain for a sandbox that may
                    // never come up in time.
                    let drain = phases.drain;
                    next_event = Some(tokio::select! {
                        changed = timeout_at(deadline, rx.changed()) => match changed {
                            Err(_) => HoldEvent::Deadline,
                            Ok(Err(_)) => HoldEvent::Route(Observed::Missing),
                            Ok(Ok(())) => route_event(&mut rx, target.port, &mut dial_to),
                        },
                        () = drain.cancelled() => return Err(ProxyError::ShuttingDown),
                    });
                }
                HoldAction::Dial if phases.quiescer.is_held(key) => {
                    // Being checkpointed: no connection may reach it until it is saved. Then as a
                    // retryable dial failure: pause, look at the route again, dial.
                    next_event = Some(if phases.quiescer.wait_released(key, deadline).await {
                        HoldEvent::DialFailed { retryable: true }
                    } else {
                        HoldEvent::Deadline
                    });
                }
                HoldAction::Dial if until == Until::Dialable => {
                    if held.is_some() {
                        metrics::histogram!(m::HOLD_DURATION_SECONDS)
                            .record(started.elapsed().as_secs_f64());
                    }
                    return Ok(Reached::Dialable);
                }
                HoldAction::Dial => {
                    let Some(DialTo {
                        address,
                        port,
                        ready,
                    }) = dial_to.clone()
                    else {
                        // `Dial` follows a dialable observation, which sets `dial_to`.
                        next_event = Some(HoldEvent::Deadline);
                        continue;
                    };
                    // Boxed: the dial's futures (name lookup, connect) would otherwise size every
                    // held connection's driver, compactly parked ones included.
                    // A held connection's sandbox is still coming up: a SYN it drops (a gVisor
                    // restore takes the address over before its stack runs) would wait for the
                    // kernel's 1 s retransmit, so a short attempt is cut and sent afresh.
                    let limit = if held.is_some() {
                        attempt
                    } else {
                        wake.dial_timeout
                    };
                    // The first dial of a connection that never waited, to a ready sandbox.
                    let first_to_ready = ready && held.is_none();
                    let dialling = dial_held(slot, held.is_some(), deadline, &address, port, limit);
                    next_event = Some(
                        Box::pin(dialling)
                            .await
                            .map_or(HoldEvent::Deadline, |result| match result {
                                Ok(stream) => {
                                    dialled = Some(stream);
                                    HoldEvent::Dialed
                                }
                                Err(err) => {
                                    if err.kind() == io::ErrorKind::TimedOut {
                                        attempt = (attempt * 2).min(wake.dial_timeout);
                                    }
                                    // A ready sandbox whose port refuses has it closed: a 502
                                    // at once, as any proxy answers, not a wait for the wake
                                    // deadline. Unless its route changed meanwhile (a suspend
                                    // seen just now), or a request's connection to this
                                    // address was just lost before any response (its
                                    // workload is being stopped, and the suspend is not seen
                                    // yet): then it is looked at again.
                                    let closed_port = first_to_ready
                                        && err.kind() == io::ErrorKind::ConnectionRefused
                                        && !rx.has_changed().unwrap_or(true)
                                        && !slot.lost_here();
                                    let retryable = is_dial_retryable(&err) && !closed_port;
                                    if retryable {
                                        tracing::trace!(sandbox.key = %key, error = %err, "dial failed; retrying");
                                        metrics::counter!(m::DIAL_RETRIES_TOTAL).increment(1);
                                    }
                                    last_error = Some((format!("{address}:{port}"), err));
                                    HoldEvent::DialFailed { retryable }
                                }
                            }),
                    );
                }
                HoldAction::Pause => {
                    let drain = phases.drain;
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = rx.changed() => {}
                        () = drain.cancelled() => return Err(ProxyError::ShuttingDown),
                    }
                    backoff = (backoff * 2).min(wake.dial_backoff_max);
                    next_event = Some(if tokio::time::Instant::now() >= deadline {
                        HoldEvent::Deadline
                    } else {
                        route_event(&mut rx, target.port, &mut dial_to)
                    });
                }
                HoldAction::Serve => {
                    if let Some((stream, addr)) = dialled.take() {
                        if held.is_some() {
                            metrics::histogram!(m::HOLD_DURATION_SECONDS)
                                .record(started.elapsed().as_secs_f64());
                        }
                        return Ok(Reached::Dialled(stream, addr));
                    }
                }
                HoldAction::Refuse(refusal) => {
                    return Err(match refusal {
                        Refusal::NotFound => ProxyError::UnknownSandbox { key: key.clone() },
                        Refusal::UnknownPort => ProxyError::UnknownPort {
                            key: key.clone(),
                            port: target.port,
                        },
                        Refusal::Failed => ProxyError::Failed {
                            key: key.clone(),
                            reason: failure_reason(&rx.borrow().route),
                        },
                        Refusal::Suspended => ProxyError::Suspended {
                            key: key.clone(),
                            reason: "it is suspended and spec.suspension.wakeOnConnect is false"
                                .to_owned(),
                        },
                        // The driver is dropped when its client leaves; `Cancelled` only comes
                        // from the model tests.
                        Refusal::Deadline { waited: true } | Refusal::Cancelled => {
                            deadline_error(None)
                        }
                        Refusal::Deadline { waited: false } | Refusal::Upstream => {
                            deadline_error(last_error.take())
                        }
                    });
                }
            }
        }
        // Every step that does not end the connection waits on something (Wait, Dial or
        // Pause), which yields the next event; the model tests check it.
        event = next_event.unwrap_or(HoldEvent::Deadline);
    }
}

/// Why a failed sandbox cannot serve, for the client.
fn failure_reason(route: &RouteState) -> String {
    match route {
        RouteState::Failed { reason } => reason.clone(),
        _ => "it failed".to_owned(),
    }
}

/// Dials, through the release semaphore when `held` (held connections dial a just-woken
/// sandbox a bounded number at a time). `None` when the deadline passed first.
async fn dial_held(
    slot: &Slot,
    held: bool,
    deadline: tokio::time::Instant,
    address: &str,
    port: u16,
    limit: Duration,
) -> Option<io::Result<(TcpStream, SocketAddr)>> {
    let permit = if held {
        let release = Arc::clone(slot.gate.release());
        match timeout_at(deadline, release.acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            Ok(Err(_)) => None,
            Err(_) => return None,
        }
    } else {
        None
    };
    let result = timeout_at(deadline, dial(address, port, limit)).await.ok();
    drop(permit);
    result
}

/// The first dial attempt of a held connection; each that times out doubles the next, up to
/// `wake.dial_timeout`.
const HELD_DIAL_FIRST: Duration = Duration::from_millis(100);

/// First wait before a failed wake call is sent again.
const WAKE_RETRY_INITIAL: Duration = Duration::from_millis(100);
/// Longest wait between wake calls.
const WAKE_RETRY_MAX: Duration = Duration::from_secs(2);

/// Sends the wake of `suspension` unless another connection did. A failed call is retried
/// with backoff (100 ms doubling to 2 s) while connections are still held and the cycle still
/// waits on this suspension; each call is bounded by the wake deadline.
fn maybe_wake(
    reporter: &Arc<Reporter>,
    slot: &Arc<Slot>,
    suspension: Suspension,
    deadline: Duration,
) {
    if !slot.gate.want(suspension, Instant::now(), deadline) {
        return;
    }
    let slot = Arc::clone(slot);
    let stop = reporter.stop_signal().clone();
    let directory = Arc::clone(reporter.directory());
    reporter.spawn(async move {
        let key = &slot.key;
        let mut pause = WAKE_RETRY_INITIAL;
        tracing::info!(sandbox.key = %key, "waking sandbox");
        loop {
            let result = tokio::time::timeout(deadline, directory.wake(key)).await;
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
            // Bounded: every held connection has its own deadline.
            let still_wanted = slot.gate.held() > 0 && slot.gate.is_waking(suspension);
            if !still_wanted {
                // Let the next connection start a new cycle.
                slot.gate.give_up(suspension);
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
            if !slot.gate.is_waking(suspension) {
                // Resumed, deleted or suspended anew meanwhile: this wake is not wanted.
                return;
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
