//! Members being adopted by a reconcile of this process right now. Concurrent claim
//! reconciles skip them, so a burst of claims spreads over the members instead of all racing
//! for the oldest (each lost race costs two writes). Correctness never rests on this: the
//! resourceVersion precondition of the re-own is what keeps a member from two claims, across
//! processes too.
//!
//! Bounded by the claims reconciled at once: an entry lives only while its guard does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rouse_shared::store::ObjectKey;

/// The set of members reserved in this process; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    taken: Arc<Mutex<HashSet<ObjectKey>>>,
}

/// A held reservation; dropping it releases the member.
#[derive(Debug)]
pub struct Reservation {
    taken: Arc<Mutex<HashSet<ObjectKey>>>,
    key: ObjectKey,
}

impl Reservations {
    /// Reserves `key` unless another reconcile holds it.
    pub fn try_reserve(&self, key: ObjectKey) -> Option<Reservation> {
        // Each update is one insert or remove, so a poisoned lock still guards a valid set.
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        taken.insert(key.clone()).then(|| Reservation {
            taken: self.taken.clone(),
            key,
        })
    }

    /// True when another reconcile holds `key`.
    pub fn is_reserved(&self, key: &ObjectKey) -> bool {
        self.taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}
