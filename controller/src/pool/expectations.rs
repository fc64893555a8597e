//! Expectations: the member creates and deletes a pool issued that its view of the members
//! does not show yet. The pool plan counts them, so a lagging cache never leads to creating
//! (or deleting) twice. An expectation is met when the member shows up (or goes away), and
//! expires after a deadline so that a lost event cannot stall a pool forever.
//!
//! Bounded: at most `replicas` creates and the pool's members are ever expected per pool,
//! and a pool's entry is dropped when the pool is.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rouse_shared::store::ObjectKey;

/// How long an unmet expectation is trusted (the Kubernetes ReplicaSet controller's is 5
/// minutes; a shorter one recovers sooner from a lost watch event).
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Pending {
    creates: HashMap<String, Instant>,
    deletes: HashMap<String, Instant>,
}

/// Shared expectations of every pool; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    pools: Arc<Mutex<HashMap<ObjectKey, Pending>>>,
}

/// What is in flight for one pool, for [`super::PoolObserved`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InFlight {
    /// Created members not seen yet.
    pub creates: usize,
    /// Deleted members still seen.
    pub deletes: BTreeSet<String>,
}

impl Expectations {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<ObjectKey, Pending>) -> T) -> T {
        // A panic elsewhere cannot leave the maps half-updated: every update is one insert
        // or remove, so a poisoned lock still guards consistent data.
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut pools)
    }

    /// Records a member created by `pool`.
    pub fn created(&self, pool: &ObjectKey, member: &str) {
        self.with(|p| {
            p.entry(pool.clone())
                .or_default()
                .creates
                .insert(member.to_owned(), Instant::now());
        });
    }

    /// Records a member deleted by `pool`.
    pub fn deleted(&self, pool: &ObjectKey, member: &str) {
        self.with(|p| {
            p.entry(pool.clone())
                .or_default()
                .deletes
                .insert(member.to_owned(), Instant::now());
        });
    }

    /// A sandbox of this name was seen (by any view: it may already have been adopted).
    pub fn seen(&self, namespace: &str, name: &str) {
        self.with(|p| {
            for (pool, pending) in p.iter_mut() {
                if pool.namespace == namespace {
                    pending.creates.remove(name);
                }
            }
        });
    }

    /// A sandbox of this name is gone.
    pub fn gone(&self, namespace: &str, name: &str) {
        self.with(|p| {
            for (pool, pending) in p.iter_mut() {
                if pool.namespace == namespace {
                    pending.creates.remove(name);
                    pending.deletes.remove(name);
                }
            }
        });
    }

    /// Forgets a pool that no longer exists.
    pub fn forget(&self, pool: &ObjectKey) {
        self.with(|p| p.remove(pool));
    }

    /// Settles the pool's expectations against the members it sees now and returns what is
    /// still in flight.
    pub fn in_flight(&self, pool: &ObjectKey, members: &[String]) -> InFlight {
        let now = Instant::now();
        self.with(|p| {
            let Some(pending) = p.get_mut(pool) else {
                return InFlight::default();
            };
            pending.creates.retain(|name, at| {
                !members.contains(name) && now.duration_since(*at) < EXPECTATION_TIMEOUT
            });
            pending.deletes.retain(|name, at| {
                members.contains(name) && now.duration_since(*at) < EXPECTATION_TIMEOUT
            });
            InFlight {
                creates: pending.creates.len(),
                deletes: pending.deletes.keys().cloned().collect(),
            }
        })
    }
}
