//! [`Exchange`]: one HTTP request's context, made once by its route phase and carried through
//! the phases after it (hold/wake → connect → forward → account) by whichever codec forwards
//! the request — the compact hold, the byte relay or hyper (the phase list is in `l7/mod.rs`).
//!
//! A request routed early (a compactly read first head: `park.rs`) keeps its exchange when
//! its connection moves on to a codec, so it is never routed, counted against the rate limit,
//! counted open or held a second time.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::activity::ConnectionGuard;
use crate::error::ProxyError;
use crate::kind::ConnKind;
use crate::route::{RouteTarget, Router, Slot};

/// A routed request: where it goes, and what it holds while it goes there.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The sandbox port it goes to.
    pub(crate) target: Arc<RouteTarget>,
    /// The sandbox's address epoch when it was routed (or, with `upstream`, dialled).
    pub(crate) epoch: u64,
    /// Counts it as open to its sandbox (activity) until it is answered.
    pub(crate) guard: ConnectionGuard,
    /// A connection its hold/wake phase dialled already (a compactly held request): the
    /// forward phase sends the request on it rather than dialling.
    pub(crate) upstream: Option<TcpStream>,
}

/// The route phase's outcome for a request routed before its codec saw it: the exchange, or
/// the error it is answered with (its per-IP rate limit was reached).
pub(crate) type Routed = Result<Exchange, ProxyError>;

impl Exchange {
    /// The end of the route phase: `target` (rate limit counted, host resolved) on `slot`,
    /// counted as open from now on.
    pub(crate) fn open(router: &Router, target: Arc<RouteTarget>, slot: &Slot) -> Self {
        Self {
            epoch: slot.epoch(),
            guard: router.guard_of(slot, ConnKind::Http),
            target,
            upstream: None,
        }
    }
}
