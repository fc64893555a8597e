//! [`RouteTable`]: sandbox → [`Slot`] on a `DashMap`, fed by the directory's updates.
//!
//! Lookups clone the slot's `Arc` out and release the shard lock at once, so no lock is ever
//! held across an await. A sandbox that goes `Missing` leaves the map; connections still
//! holding its slot see the `Missing` state and give up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;
use tokio::sync::watch;

use super::Slot;
use crate::activity::SandboxActivity;
use crate::directory::{Endpoint, RouteState, SandboxKey};
use crate::metrics as m;
use crate::wake::WakeGate;

/// The routing table.
#[derive(Debug, Default)]
pub struct RouteTable {
    map: DashMap<SandboxKey, Arc<Slot>>,
}

impl RouteTable {
    /// The slot of a sandbox.
    pub fn get(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.map.get(key).map(|entry| Arc::clone(entry.value()))
    }

    /// Sandboxes in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Applies one update; a new slot's wake gate releases `release_concurrency` at once.
    pub fn apply(&self, key: SandboxKey, state: RouteState, release_concurrency: usize) {
        if state == RouteState::Missing {
            if let Some((_, slot)) = self.map.remove(&key) {
                slot.gate.end_cycle();
                slot.state.send_replace(RouteState::Missing);
            }
            return;
        }
        let slot = Arc::clone(
            self.map
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Slot {
                        key: key.clone(),
                        state: watch::Sender::new(state.clone()),
                        gate: WakeGate::new(release_concurrency),
                        activity: SandboxActivity::default(),
                        epoch: AtomicU64::new(0),
                    })
                })
                .value(),
        );
        let ends_cycle = matches!(
            state,
            RouteState::Running { .. }
                | RouteState::Failed { .. }
                | RouteState::Suspended {
                    wake_on_connect: false
                }
        );
        let running = matches!(state, RouteState::Running { .. });
        let old = slot.state.send_replace(state.clone());
        if dialable(&old) != dialable(&state) {
            slot.epoch.fetch_add(1, Ordering::AcqRel);
        }
        if ends_cycle && let Some(started) = slot.gate.end_cycle() {
            let elapsed = started.elapsed();
            if running {
                metrics::histogram!(m::WAKE_DURATION_SECONDS).record(elapsed.as_secs_f64());
                tracing::info!(sandbox.key = %key, wake.elapsed_ms = elapsed.as_millis() as u64, "sandbox woke");
            } else {
                tracing::info!(sandbox.key = %key, "sandbox did not wake");
            }
        }
    }
}

/// Where a route in `state` may be dialled right now, if anywhere.
fn dialable(state: &RouteState) -> Option<&Endpoint> {
    match state {
        RouteState::Running { endpoint }
        | RouteState::Starting {
            endpoint: Some(endpoint),
        } => Some(endpoint),
        _ => None,
    }
}
