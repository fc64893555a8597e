//! [`WakeGate`]: the per-sandbox part of hold-and-wake — how many connections are held, the
//! wake cycle (the pure machine of `crate::hold` behind a mutex: one wake per observed
//! suspension), and the bounded release when the sandbox comes up.
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
use crate::hold::{Cycle, CycleAction, CycleEvent, Suspension, step_cycle};
use crate::metrics as m;

/// Hold-and-wake state of one sandbox: its held count and its wake [`Cycle`].
#[derive(Debug)]
pub struct WakeGate {
    held: AtomicUsize,
    cycle: Mutex<Cycle>,
    /// When the wake of the last ended cycle was sent, until the sandbox is seen running
    /// (for `rouse_proxy_wake_duration_seconds`: wake sent → running).
    resumed: Mutex<Option<Instant>>,
    release: Arc<Semaphore>,
}

impl WakeGate {
    /// A gate letting `release_concurrency` held connections dial at once.
    pub fn new(release_concurrency: usize) -> Self {
        Self {
            held: AtomicUsize::new(0),
            cycle: Mutex::new(Cycle::NEW),
            resumed: Mutex::new(None),
            release: Arc::new(Semaphore::new(release_concurrency.max(1))),
        }
    }

    /// Connections held for this sandbox now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Feeds one event to the cycle machine.
    fn step(&self, event: CycleEvent) -> Option<CycleAction> {
        // The lock guards a few words and is never held across an await.
        let mut cycle = self.cycle.lock().unwrap_or_else(|e| e.into_inner());
        let (next, action) = step_cycle(*cycle, event);
        *cycle = next;
        action
    }

    /// A held connection wants `suspension` ended: true when this caller sends the wake (the
    /// first for this suspension, or again after `deadline` without effect).
    pub fn want(&self, suspension: Suspension, now: Instant, deadline: Duration) -> bool {
        matches!(
            self.step(CycleEvent::Want {
                suspension,
                now,
                deadline,
            }),
            Some(CycleAction::SendWake(_))
        )
    }

    /// The wake of `suspension` failed and nobody waits for it: the next connection sends again.
    pub fn give_up(&self, suspension: Suspension) {
        self.step(CycleEvent::GaveUp { suspension });
    }

    /// The routing table saw a new state: `suspension` is the slot's suspension number now,
    /// `suspended` whether the desired mode is Suspended (and wakeable), `running` whether it
    /// is Ready with an endpoint. Returns how long the wake took to get the sandbox running
    /// when this is the first running state seen since a wake.
    pub fn observed(
        &self,
        suspension: Suspension,
        suspended: bool,
        running: bool,
        now: Instant,
    ) -> Option<Duration> {
        let ended = self.step(CycleEvent::Observed {
            suspension,
            suspended,
            now,
        });
        let mut resumed = self.resumed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(CycleAction::Ended(took)) = ended {
            *resumed = now.checked_sub(took);
        }
        if suspended {
            // Suspended again before it ran: that wake's latency is not measured.
            *resumed = None;
        }
        if running {
            return resumed
                .take()
                .map(|sent| now.saturating_duration_since(sent));
        }
        None
    }

    /// Whether the cycle still waits on the wake of `suspension` (a retry is still wanted).
    pub fn is_waking(&self, suspension: Suspension) -> bool {
        matches!(
            *self.cycle.lock().unwrap_or_else(|e| e.into_inner()),
            Cycle::Waking { suspension: s, .. } if s == suspension
        )
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
    gate: Arc<WakeGate>,
    totals: Arc<HeldTotals>,
}

/// Counts a connection as held, unless a limit is reached.
pub(crate) fn hold(
    key: &SandboxKey,
    gate: &Arc<WakeGate>,
    totals: &Arc<HeldTotals>,
    per_sandbox: usize,
    total: usize,
) -> Result<HeldGuard, ProxyError> {
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
        gate: Arc::clone(gate),
        totals: Arc::clone(totals),
    })
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        self.gate.held.fetch_sub(1, Ordering::AcqRel);
        self.totals.total.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(m::HELD_CONNECTIONS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wake_per_suspension_and_again_after_the_deadline() {
        let gate = WakeGate::new(4);
        let t0 = Instant::now();
        let deadline = Duration::from_secs(60);
        assert!(gate.want(1, t0, deadline));
        for i in 1..100 {
            assert!(!gate.want(1, t0 + Duration::from_millis(i), deadline));
        }
        assert!(
            gate.want(1, t0 + deadline, deadline),
            "a wake past its deadline is lost"
        );
        assert_eq!(
            gate.observed(1, false, true, t0 + deadline + Duration::from_secs(1)),
            Some(Duration::from_secs(1)),
            "wake latency: sent → running"
        );
        assert!(
            !gate.want(1, t0, deadline),
            "a view read before the resume was observed sends nothing"
        );
        assert!(
            gate.want(2, t0, deadline),
            "a new cycle for a new suspension"
        );
        gate.give_up(2);
        assert!(gate.want(2, t0, deadline), "a failed wake is sent again");
    }

    #[test]
    fn a_suspend_before_ready_starts_a_new_cycle() {
        let gate = WakeGate::new(4);
        let t0 = Instant::now();
        let deadline = Duration::from_secs(60);
        assert!(gate.want(1, t0, deadline));
        // Suspended again while the woken sandbox was still starting, the resume unseen.
        assert!(gate.observed(2, true, false, t0).is_none());
        assert!(
            gate.want(2, t0, deadline),
            "the new suspension gets its own wake"
        );
        assert!(!gate.want(1, t0, deadline), "a stale view sends nothing");
    }
}
