//! [`Slot`]: one sandbox's entry in the routing table — its state channel, wake gate and
//! activity counters — and [`RouteTarget`], which sandbox port a connection goes to.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

use crate::activity::SandboxActivity;
use crate::directory::{RouteState, SandboxKey};
use crate::hold::Suspension;
use crate::wake::WakeGate;

/// Which sandbox, and which of its ports, a connection goes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteTarget {
    /// The sandbox.
    pub key: SandboxKey,
    /// Container port; `None` = the sandbox's first (default) port.
    pub port: Option<u16>,
}

/// One sandbox's entry in the routing table: its state channel, wake gate and activity.
///
/// Gate and activity sit in their own `Arc`s so the guards of held and open connections keep
/// only the part they count on, not the slot or the router.
#[derive(Debug)]
pub struct Slot {
    /// The sandbox.
    pub(crate) key: SandboxKey,
    /// Its route state and suspension number; held connections wait on changes of it.
    pub(crate) state: watch::Sender<SlotState>,
    /// Hold-and-wake state.
    pub(crate) gate: Arc<WakeGate>,
    /// Activity counters.
    pub(crate) activity: Arc<SandboxActivity>,
    /// Bumped whenever the address to dial changes (or goes away), so pooled upstream
    /// connections to an old address are never reused: the L7 pool key includes it.
    pub(crate) epoch: AtomicU64,
    /// One more than the address epoch at which a request's upstream connection was last
    /// lost before any response (0: none; see [`Slot::note_lost`]).
    lost: AtomicU64,
}

/// What a slot's watch channel carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotState {
    /// The route state last applied (`Missing` once removed from the table).
    pub(crate) route: RouteState,
    /// Numbers the suspensions seen so far (see `crate::hold::Suspension`).
    pub(crate) suspension: Suspension,
}

impl Slot {
    /// A slot for `key` with no route yet, releasing `release_concurrency` held connections
    /// at once when it wakes.
    pub(crate) fn new(key: SandboxKey, release_concurrency: usize) -> Self {
        Self {
            activity: Arc::new(SandboxActivity::new(key.clone())),
            key,
            state: watch::Sender::new(SlotState {
                route: RouteState::Missing,
                suspension: 0,
            }),
            gate: Arc::new(WakeGate::new(release_concurrency)),
            epoch: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// The current address epoch (see `epoch`).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Records that a request's upstream connection was just lost before any response: the
    /// workload went away under it (stopped by a suspend the proxy has not seen yet), so until
    /// the address epoch changes a refused dial is the workload stopping, not a closed port.
    /// The current epoch stands for the lost connection's: they differ only when the proxy
    /// has seen the address change already, and then a refusal at the newer address at worst
    /// waits (within the wake deadline) instead of being answered 502 at once.
    pub(crate) fn note_lost(&self) {
        self.lost
            .store(self.epoch().saturating_add(1), Ordering::Release);
    }

    /// Whether a request's connection to the sandbox's current address was lost before any
    /// response ([`Slot::note_lost`]).
    pub(crate) fn lost_here(&self) -> bool {
        self.lost.load(Ordering::Acquire) == self.epoch().saturating_add(1)
    }

    /// Whether a connection to the sandbox would be held now: suspended with
    /// wake-on-connect, or starting without an address.
    pub(crate) fn needs_hold(&self) -> bool {
        matches!(
            self.state.borrow().route,
            RouteState::Suspended {
                wake_on_connect: true,
                ..
            } | RouteState::Starting { endpoint: None }
        )
    }
}
