//! [`WakeGate`]: the per-sandbox part of hold-and-wake — how many connections are held, the
//! single-flight wake of each cycle, and the bounded release when the sandbox comes up.
//!
//! There is one gate per sandbox (inside its routing-table slot) and no global notifier: held
//! connections wait on the slot's `watch` channel of route states, so a state change wakes
//! exactly the connections of that sandbox.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::metrics as m;
use crate::route::Slot;

/// Hold-and-wake state of one sandbox.
#[derive(Debug)]
pub struct WakeGate {
    held: AtomicUsize,
    cycle: Mutex<Option<Instant>>,
    release: Arc<Semaphore>,
}

/// What [`WakeGate::begin_wake`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeDecision {
    /// This caller sends the wake for the cycle.
    Send,
    /// A wake of this cycle is already on its way.
    InFlight,
}

impl WakeGate {
    /// A gate letting `release_concurrency` held connections dial at once.
    pub fn new(release_concurrency: usize) -> Self {
        Self {
            held: AtomicUsize::new(0),
            cycle: Mutex::new(None),
            release: Arc::new(Semaphore::new(release_concurrency.max(1))),
        }
    }

    /// Connections held for this sandbox now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Starts a wake cycle unless one is under way. A cycle older than `deadline` counts as
    /// lost (its wake had no effect), so a new one starts.
    pub fn begin_wake(&self, now: Instant, deadline: Duration) -> WakeDecision {
        // The lock guards two words and is never held across an await.
        let mut cycle = self.cycle.lock().unwrap_or_else(|e| e.into_inner());
        match *cycle {
            Some(started) if now.saturating_duration_since(started) < deadline => {
                WakeDecision::InFlight
            }
            _ => {
                *cycle = Some(now);
                WakeDecision::Send
            }
        }
    }

    /// Forgets a cycle whose wake call failed, so the next connection tries again.
    pub fn abort_wake(&self) {
        *self.cycle.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Ends the cycle because the sandbox left `Suspended`; returns when the wake started.
    pub fn end_cycle(&self) -> Option<Instant> {
        self.cycle.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The semaphore bounding how many held connections dial at once.
    pub fn release(&self) -> &Arc<Semaphore> {
        &self.release
    }
}

/// Counts of held connections across all sandboxes, with their limits.
#[derive(Debug, Default)]
pub struct HeldTotals {
    total: AtomicUsize,
}

impl HeldTotals {
    /// Connections held now, over all sandboxes.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// One held connection; dropping it releases the counts.
#[derive(Debug)]
pub struct HeldGuard {
    slot: Arc<Slot>,
    totals: Arc<HeldTotals>,
}

/// Counts a connection as held, unless a limit is reached.
pub(crate) fn hold(
    key: &SandboxKey,
    slot: &Arc<Slot>,
    totals: &Arc<HeldTotals>,
    per_sandbox: usize,
    total: usize,
) -> Result<HeldGuard, ProxyError> {
    let gate = &slot.gate;
    if gate
        .held
        .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
            (n < per_sandbox).then_some(n + 1)
        })
        .is_err()
    {
        return Err(ProxyError::HeldLimit {
            key: key.clone(),
            scope: "sandbox",
            limit: per_sandbox,
        });
    }
    if totals
        .total
        .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
            (n < total).then_some(n + 1)
        })
        .is_err()
    {
        gate.held.fetch_sub(1, Ordering::AcqRel);
        return Err(ProxyError::HeldLimit {
            key: key.clone(),
            scope: "total",
            limit: total,
        });
    }
    metrics::gauge!(m::HELD_CONNECTIONS).increment(1.0);
    Ok(HeldGuard {
        slot: Arc::clone(slot),
        totals: Arc::clone(totals),
    })
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        self.slot.gate.held.fetch_sub(1, Ordering::AcqRel);
        self.totals.total.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(m::HELD_CONNECTIONS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wake_per_cycle_and_a_new_cycle_after_the_deadline() {
        let gate = WakeGate::new(4);
        let t0 = Instant::now();
        let deadline = Duration::from_secs(60);
        assert_eq!(gate.begin_wake(t0, deadline), WakeDecision::Send);
        for i in 1..100 {
            let now = t0 + Duration::from_millis(i);
            assert_eq!(gate.begin_wake(now, deadline), WakeDecision::InFlight);
        }
        assert_eq!(
            gate.begin_wake(t0 + deadline, deadline),
            WakeDecision::Send,
            "a cycle past its deadline is lost"
        );
        assert!(gate.end_cycle().is_some());
        assert_eq!(gate.begin_wake(t0, deadline), WakeDecision::Send);
        gate.abort_wake();
        assert_eq!(gate.begin_wake(t0, deadline), WakeDecision::Send);
    }
}
