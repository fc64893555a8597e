//! The hold-and-wake state machines, pure: no clock, no I/O, no locks. The route path
//! (`route::connect`) drives them and performs their actions; the model tests drive them
//! through random interleavings of sandbox and directory events.
//!
//! Two machines, both `step(state, event) -> (state, actions)`:
//!
//! - [`Hold`]: one client connection (L7 request or L4 connection alike) from arrival to
//!   served or refused.
//! - [`Cycle`]: one sandbox's wake cycle. A cycle is tied to one observed *suspension* — the
//!   route state's [`Suspension`] number, which the routing table bumps every time it sees the
//!   sandbox's desired mode become Suspended (a new `metadata.generation` included). It ends as
//!   soon as any state whose desired mode is not Suspended is observed, whatever it is, so a
//!   suspend landing before the woken sandbox is Ready starts a fresh cycle instead of leaving
//!   one open (the lost wake of issue 9). An ended suspension stays settled: a connection that
//!   read it just before the change asks for no second wake. See `docs/proxy.md`, "Hold and
//!   wake".

use std::time::{Duration, Instant};

use crate::directory::RouteState;

/// Numbers the suspensions of one sandbox as the proxy saw them; 0 = never suspended.
pub type Suspension = u64;

/// The suspension number after the routing table replaces route state `old` with `new`
/// (`current` before): a change into a wakeable `Suspended` (a new generation included) is a
/// new suspension; anything else keeps the number.
pub fn number_suspension(current: Suspension, old: &RouteState, new: &RouteState) -> Suspension {
    if new.is_wakeable() && old != new {
        current + 1
    } else {
        current
    }
}

/// What a connection sees of its sandbox's route: the part of the route state the hold
/// machine acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// Not in the table (unknown, or deleted).
    Missing,
    /// It cannot serve (workload failed or expired).
    Failed,
    /// Desired mode Suspended and wake-on-connect off.
    SuspendedNoWake,
    /// Desired mode Suspended: wake it. The number tells this suspension from later ones.
    Suspended(Suspension),
    /// Desired mode Running, not dialable yet.
    Starting,
    /// Dialable; `has_port` says whether the requested port is declared.
    Dialable {
        /// Whether the requested port is declared.
        has_port: bool,
    },
}

/// Where one connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Arrived; the route not looked at yet; not counted as held.
    Arrived,
    /// Counted as held; waiting for the route state to change.
    Held,
    /// Dialling the endpoint.
    Dialing {
        /// Counted as held.
        held: bool,
        /// It waited for a wake or a start on its way (decides the deadline's error).
        waited: bool,
    },
    /// Counted as held; pausing after a refused dial (a route change ends the pause early).
    Backoff {
        /// It waited for a wake or a start on its way.
        waited: bool,
    },
    /// Served or refused; nothing more happens.
    Done,
}

/// What happens to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEvent {
    /// The route as it is now: on arrival, on every change while held, after a pause.
    Route(Observed),
    /// The dial succeeded.
    Dialed,
    /// The dial failed; `retryable` for errors a starting sandbox gives (refused, reset...).
    DialFailed {
        /// Worth another dial.
        retryable: bool,
    },
    /// The connection's wake deadline passed.
    Deadline,
    /// The client went away or the proxy stops.
    Cancelled,
}

/// How a connection ends when it is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 404: no such sandbox (or it was deleted while held).
    NotFound,
    /// 404: the sandbox declares no such port.
    UnknownPort,
    /// 502: the sandbox failed.
    Failed,
    /// 503: suspended with wake-on-connect off.
    Suspended,
    /// 503 + Retry-After: it did not come up by the deadline.
    Deadline {
        /// It waited for a wake or a start (else the last dial error is reported).
        waited: bool,
    },
    /// 502: the dial failed with an error a starting sandbox does not give.
    Upstream,
    /// The client left; nothing is sent.
    Cancelled,
}

/// What the driver of a [`Hold`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldAction {
    /// Count the connection as held (a held limit may refuse it: the driver ends it then).
    Hold,
    /// Ask the sandbox's [`Cycle`] for the wake of this suspension.
    Wake(Suspension),
    /// Wait for the next route change, bounded by the deadline.
    Wait,
    /// Dial the endpoint.
    Dial,
    /// Pause (backoff) before looking at the route again; a route change ends it early.
    Pause,
    /// Hand the dialled stream over.
    Serve,
    /// End the connection so.
    Refuse(Refusal),
}

impl Hold {
    /// Whether the connection is counted as held in this state.
    pub fn is_held(self) -> bool {
        matches!(
            self,
            Hold::Held | Hold::Backoff { .. } | Hold::Dialing { held: true, .. }
        )
    }

    fn waited(self) -> bool {
        match self {
            Hold::Held => true,
            Hold::Dialing { waited, .. } | Hold::Backoff { waited } => waited,
            Hold::Arrived | Hold::Done => false,
        }
    }
}

/// The actions of one step, in order: at most three, so a step allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions<T: Copy> {
    items: [Option<T>; 3],
}

impl<T: Copy> Actions<T> {
    fn new() -> Self {
        Self { items: [None; 3] }
    }

    /// Appends; no step produces more than three actions (a stated invariant).
    fn push(&mut self, item: T) {
        if let Some(free) = self.items.iter_mut().find(|slot| slot.is_none()) {
            *free = Some(item);
        } else {
            debug_assert!(false, "more than three actions in one step");
        }
    }

    /// The actions in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.items.iter().flatten().copied()
    }
}

/// One step of a connection's machine.
pub fn step(state: Hold, event: HoldEvent) -> (Hold, Actions<HoldAction>) {
    use HoldAction as A;
    let mut out = Actions::new();
    let held = state.is_held();
    let next = match (state, event) {
        (Hold::Done, _) => Hold::Done,
        (_, HoldEvent::Cancelled) => {
            out.push(A::Refuse(Refusal::Cancelled));
            Hold::Done
        }
        (_, HoldEvent::Deadline) => {
            out.push(A::Refuse(Refusal::Deadline {
                waited: state.waited(),
            }));
            Hold::Done
        }
        // A route event while dialling is stale (the driver looks again after the dial).
        (Hold::Dialing { .. }, HoldEvent::Route(_)) => state,
        (_, HoldEvent::Route(observed)) => match observed {
            Observed::Missing => refuse(&mut out, Refusal::NotFound),
            Observed::Failed => refuse(&mut out, Refusal::Failed),
            Observed::SuspendedNoWake => refuse(&mut out, Refusal::Suspended),
            Observed::Dialable { has_port: false } => refuse(&mut out, Refusal::UnknownPort),
            Observed::Suspended(suspension) => {
                if !held {
                    out.push(A::Hold);
                }
                out.push(A::Wake(suspension));
                out.push(A::Wait);
                Hold::Held
            }
            Observed::Starting => {
                if !held {
                    out.push(A::Hold);
                }
                out.push(A::Wait);
                Hold::Held
            }
            Observed::Dialable { has_port: true } => {
                out.push(A::Dial);
                Hold::Dialing {
                    held,
                    waited: state.waited(),
                }
            }
        },
        (Hold::Dialing { .. }, HoldEvent::Dialed) => {
            out.push(A::Serve);
            Hold::Done
        }
        (Hold::Dialing { held, waited }, HoldEvent::DialFailed { retryable: true }) => {
            if !held {
                out.push(A::Hold);
            }
            out.push(A::Pause);
            Hold::Backoff { waited }
        }
        (Hold::Dialing { .. }, HoldEvent::DialFailed { retryable: false }) => {
            refuse(&mut out, Refusal::Upstream)
        }
        // Dial results only come while dialling.
        (other, HoldEvent::Dialed | HoldEvent::DialFailed { .. }) => other,
    };
    (next, out)
}

fn refuse(out: &mut Actions<HoldAction>, why: Refusal) -> Hold {
    out.push(HoldAction::Refuse(why));
    Hold::Done
}

/// One sandbox's wake cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// No wake wanted or under way.
    Idle {
        /// Every suspension up to this number is over: a state whose desired mode is not
        /// Suspended was observed after it. A connection that read such a suspension before
        /// the change asks for nothing (it sees the newer state when it looks again).
        settled: Suspension,
    },
    /// The wake of `suspension` was sent at `since`; waiting to observe the sandbox's desired
    /// mode leave Suspended.
    Waking {
        /// The suspension it ends.
        suspension: Suspension,
        /// When the wake was sent.
        since: Instant,
    },
}

impl Cycle {
    /// A new slot's cycle: nothing settled, nothing under way.
    pub const NEW: Cycle = Cycle::Idle { settled: 0 };
}

/// What happens to a sandbox's wake cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleEvent {
    /// A held connection wants `suspension` ended.
    Want {
        /// The suspension it saw.
        suspension: Suspension,
        /// Now.
        now: Instant,
        /// How long a sent wake may take before it counts as lost and is sent again.
        deadline: Duration,
    },
    /// The wake of `suspension` failed and nobody waits for it any more.
    GaveUp {
        /// The suspension whose wake failed.
        suspension: Suspension,
    },
    /// The routing table saw a new state.
    Observed {
        /// The slot's suspension number after the change (the latest suspension seen).
        suspension: Suspension,
        /// Whether the desired mode is Suspended and wakeable; `false` for anything else
        /// (running, starting, failed, deleted, not wakeable), which settles every
        /// suspension up to `suspension`.
        suspended: bool,
        /// Now.
        now: Instant,
    },
}

/// What the driver of a [`Cycle`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleAction {
    /// Send the wake of this suspension (retrying a failed call while connections are held).
    SendWake(Suspension),
    /// The cycle ended after this long since its wake was sent.
    Ended(Duration),
}

/// One step of a sandbox's wake cycle; time is only read from the event.
pub fn step_cycle(state: Cycle, event: CycleEvent) -> (Cycle, Option<CycleAction>) {
    match (state, event) {
        (
            Cycle::Idle { settled },
            CycleEvent::Want {
                suspension, now, ..
            },
        ) if suspension > settled => (
            Cycle::Waking {
                suspension,
                since: now,
            },
            Some(CycleAction::SendWake(suspension)),
        ),
        (
            Cycle::Waking {
                suspension: current,
                since,
            },
            CycleEvent::Want {
                suspension,
                now,
                deadline,
            },
        ) => {
            let fresh = suspension > current;
            let lost = suspension == current && now.saturating_duration_since(since) >= deadline;
            if fresh || lost {
                (
                    Cycle::Waking {
                        suspension,
                        since: now,
                    },
                    Some(CycleAction::SendWake(suspension)),
                )
            } else {
                // The wake of this suspension is on its way (or the connection read a state
                // older than the cycle's).
                (state, None)
            }
        }
        (
            Cycle::Waking { suspension, .. },
            CycleEvent::GaveUp {
                suspension: gave_up,
            },
        ) if suspension == gave_up => (
            // The suspensions before it were superseded by it; it is not over itself, so the
            // next connection that sees it sends its wake again.
            Cycle::Idle {
                settled: suspension.saturating_sub(1),
            },
            None,
        ),
        (
            Cycle::Waking { since, .. },
            CycleEvent::Observed {
                suspension,
                suspended: false,
                now,
            },
        ) => (
            Cycle::Idle {
                settled: suspension,
            },
            Some(CycleAction::Ended(now.saturating_duration_since(since))),
        ),
        (
            Cycle::Idle { settled },
            CycleEvent::Observed {
                suspension,
                suspended: false,
                ..
            },
        ) => (
            Cycle::Idle {
                settled: settled.max(suspension),
            },
            None,
        ),
        // A new suspension observed while waking: the held connections see it too and ask
        // for its wake; the old one is superseded then. A want of a settled suspension is a
        // stale view.
        (state, _) => (state, None),
    }
}

#[cfg(test)]
mod tests;
