//! [`RouteTable`]: sandbox → [`Slot`] on a `DashMap`, fed by the directory's updates.
//!
//! Lookups clone the slot's `Arc` out and release the shard lock at once, so no lock is ever
//! held across an await. A sandbox that goes `Missing` leaves the map; connections still
//! holding its slot see the `Missing` state and give up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dashmap::DashMap;

use super::slot::Slot;
use crate::directory::{Endpoint, RouteState, SandboxKey};
use crate::hold::number_suspension;
use crate::metrics as m;

/// The routing table.
#[derive(Debug, Default)]
pub struct RouteTable {
    map: DashMap<SandboxKey, Arc<Slot>>,
    /// Bumped when a slot enters or leaves the map (see [`RouteTable::version`]).
    version: AtomicU64,
}

impl RouteTable {
    /// The slot of a sandbox.
    pub fn get(&self, key: &SandboxKey) -> Option<Arc<Slot>> {
        self.map.get(key).map(|entry| Arc::clone(entry.value()))
    }

    /// Changes whenever a slot enters or leaves the map, so a slot cached at one version is
    /// the map's slot for its sandbox while the version stays.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Sandboxes in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Applies one update; a new slot's wake gate releases `release_concurrency` at once.
    ///
    /// Every state whose desired mode is not Suspended ends the slot's wake cycle, and every
    /// newly seen suspension (a change into a wakeable `Suspended`, a new generation included)
    /// gets the next suspension number, so held and new connections ask for its wake at once.
    pub fn apply(&self, key: SandboxKey, state: RouteState, release_concurrency: usize) {
        let now = Instant::now();
        if state == RouteState::Missing {
            if let Some((_, slot)) = self.map.remove(&key) {
                self.version.fetch_add(1, Ordering::AcqRel);
                let suspension = slot.state.borrow().suspension;
                slot.gate.observed(suspension, false, false, now);
                slot.state
                    .send_modify(|current| current.route = RouteState::Missing);
            }
            return;
        }
        let slot = Arc::clone(
            self.map
                .entry(key.clone())
                .or_insert_with(|| {
                    self.version.fetch_add(1, Ordering::AcqRel);
                    Arc::new(Slot::new(key.clone(), release_concurrency))
                })
                .value(),
        );
        let mut old = RouteState::Missing;
        let mut suspension = 0;
        slot.state.send_modify(|current| {
            current.suspension = number_suspension(current.suspension, &current.route, &state);
            suspension = current.suspension;
            old = std::mem::replace(&mut current.route, state.clone());
        });
        if dialable(&old) != dialable(&state) {
            slot.epoch.fetch_add(1, Ordering::AcqRel);
        }
        let running = matches!(state, RouteState::Running { .. });
        if let Some(took) = slot
            .gate
            .observed(suspension, state.is_wakeable(), running, now)
        {
            metrics::histogram!(m::WAKE_DURATION_SECONDS).record(took.as_secs_f64());
            tracing::info!(sandbox.key = %key, wake.elapsed_ms = took.as_millis() as u64, "sandbox woke");
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
