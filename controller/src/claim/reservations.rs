//! What this process knows about the warm pool members claims adopt, beyond any read:
//!
//! - **Reservations**: members a reconcile of this process is adopting right now. Concurrent
//!   claim reconciles skip them, so a burst of claims spreads over the members instead of all
//!   racing for the oldest (each lost race costs two writes).
//! - **Superseded versions**: a member version this process adopted, or saw refused as stale,
//!   is gone for good (versions never come back), so a list or cache still showing it is
//!   behind. Claims skip such views instead of trying them, which is what keeps concurrent
//!   reconciles with lists taken a moment apart from a storm of conflicts.
//! - **Superseded claim versions**: likewise for claims: a claim version this process wrote
//!   over (or saw refused) is behind, and a reconcile handed it waits for the newer one the
//!   watch is about to deliver instead of planning from it (each such plan costs a refused
//!   write and a re-read).
//! - Optionally a [`MemberCache`] (Kubernetes mode) to read the members from.
//!
//! Correctness never rests on this: the resourceVersion precondition of the re-own is what
//! keeps a member from two claims, across processes too. Bounded: a reservation lives only
//! while its guard does; superseded versions are kept up to [`SUPERSEDED_LIMIT`] per kind and
//! [`VERSIONS_PER_OBJECT`] per object, oldest forgotten first (a forgotten one costs at most
//! one conflict).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rouse_shared::api::{Sandbox, SandboxClaim};
use rouse_shared::store::{ListParams, ObjectKey, Store, StoreError};

use super::members::MemberCache;
use crate::pool::{is_ready, member_selector};

/// Superseded versions remembered at most, of members and of claims each.
pub const SUPERSEDED_LIMIT: usize = 16_384;

/// Superseded versions remembered per object: a claim is written up to three times in one
/// binding (stamp, annotation, status), each leaving a version behind that a lagging watch
/// may still hand out.
pub const VERSIONS_PER_OBJECT: usize = 4;

/// The members reserved in this process and the member versions known superseded; cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    taken: Arc<Mutex<HashSet<ObjectKey>>>,
    superseded: Arc<Mutex<Superseded>>,
    claims: Arc<Mutex<Superseded>>,
    cache: Option<MemberCache>,
}

/// A held reservation; dropping it releases the member.
#[derive(Debug)]
pub struct Reservation {
    taken: Arc<Mutex<HashSet<ObjectKey>>>,
    superseded: Arc<Mutex<Superseded>>,
    key: ObjectKey,
}

/// Object versions known to be gone, in the order they were learnt.
#[derive(Debug, Default)]
struct Superseded {
    by_key: HashMap<ObjectKey, VecDeque<String>>,
    order: VecDeque<(ObjectKey, String)>,
}

impl Superseded {
    fn insert(&mut self, key: ObjectKey, version: String) {
        if self.contains(&key, &version) {
            return;
        }
        while self.order.len() >= SUPERSEDED_LIMIT {
            let Some((old, old_version)) = self.order.pop_front() else {
                break;
            };
            self.forget(&old, &old_version);
        }
        let versions = self.by_key.entry(key.clone()).or_default();
        if versions.len() >= VERSIONS_PER_OBJECT {
            // Its entry in `order` stays until it comes up, then finds nothing to forget.
            versions.pop_front();
        }
        versions.push_back(version.clone());
        self.order.push_back((key, version));
    }

    fn forget(&mut self, key: &ObjectKey, version: &str) {
        if let Some(versions) = self.by_key.get_mut(key) {
            versions.retain(|v| v != version);
            if versions.is_empty() {
                self.by_key.remove(key);
            }
        }
    }

    fn contains(&self, key: &ObjectKey, version: &str) -> bool {
        self.by_key
            .get(key)
            .is_some_and(|v| v.iter().any(|v| v == version))
    }
}

impl Reservations {
    /// Reservations that read the members from `cache` (Kubernetes mode).
    pub fn reading_from(cache: MemberCache) -> Self {
        Self {
            cache: Some(cache),
            ..Self::default()
        }
    }

    /// The member cache to read from, if any.
    pub(super) fn cache(&self) -> Option<&MemberCache> {
        self.cache.as_ref()
    }

    /// Reserves `key` unless another reconcile holds it.
    pub fn try_reserve(&self, key: ObjectKey) -> Option<Reservation> {
        // Each update is one insert or remove, so a poisoned lock still guards a valid set.
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        taken.insert(key.clone()).then(|| Reservation {
            taken: self.taken.clone(),
            superseded: self.superseded.clone(),
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

    /// True when this view of `member` is one this process knows is gone (adopted, or
    /// refused as stale).
    pub fn is_superseded(&self, member: &Sandbox) -> bool {
        let Some(version) = member.metadata.resource_version.as_deref() else {
            return false;
        };
        self.superseded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&ObjectKey::of(member), version)
    }

    /// True when this read of `claim` is one this process wrote over or saw refused: a newer
    /// version is stored, and its watch event is on the way.
    pub fn is_claim_superseded(&self, claim: &SandboxClaim) -> bool {
        let Some(version) = claim.metadata.resource_version.as_deref() else {
            return false;
        };
        self.claims
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&ObjectKey::of(claim), version)
    }

    /// Records that this read of `claim` is behind the stored claim (this process just wrote
    /// it, or a conditional write of it was refused).
    pub fn supersede_claim(&self, claim: &SandboxClaim) {
        if let Some(version) = claim.metadata.resource_version.clone() {
            self.claims
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(ObjectKey::of(claim), version);
        }
    }

    /// `members` without those reserved by another reconcile or seen at a superseded version.
    pub fn free(&self, mut members: Vec<Sandbox>) -> FreeMembers {
        let before = members.len();
        members.retain(|m| !self.is_superseded(m));
        let stale = before - members.len();
        if stale > 0 {
            metrics::counter!("rouse_controller_claim_stale_members_skipped_total")
                .increment(stale as u64);
        }
        let mut contended = false;
        members.retain(|m| {
            let reserved = self.is_reserved(&ObjectKey::of(m));
            contended |= reserved && is_ready(m);
            !reserved
        });
        FreeMembers { members, contended }
    }
}

/// The members of a pool a claim may try, from one read.
#[derive(Debug, Default)]
pub struct FreeMembers {
    /// Neither reserved by another reconcile nor seen at a superseded version.
    pub members: Vec<Sandbox>,
    /// A Ready member was left out because another reconcile is adopting it right now; it
    /// comes free again if that adoption fails (e.g. the other claim was read stale).
    pub contended: bool,
}

impl Reservation {
    /// Records that the reserved member's `version` is gone: this process just adopted it, or
    /// its conditional write was refused.
    pub fn supersede(&self, version: Option<String>) {
        if let Some(version) = version {
            self.superseded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(self.key.clone(), version);
        }
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

/// The members of `pool` in `namespace` that no other reconcile of this process is adopting
/// and that are not known to be taken: from the cache when it offers a Ready one, else listed.
pub(super) async fn free_members<S: Store<Sandbox>>(
    store: &S,
    reservations: &Reservations,
    namespace: &str,
    pool: &str,
) -> Result<FreeMembers, StoreError> {
    if let Some(cache) = reservations.cache()
        && let Some(members) = cache.members(namespace, pool).await
    {
        let free = reservations.free(members);
        if free.members.iter().any(is_ready) {
            metrics::counter!("rouse_controller_claim_member_reads_total", "source" => "cache")
                .increment(1);
            return Ok(free);
        }
    }
    metrics::counter!("rouse_controller_claim_member_reads_total", "source" => "list").increment(1);
    let mut params = ListParams::namespace(namespace);
    params.selector = member_selector(pool);
    Ok(reservations.free(store.list(&params).await?.items))
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;

    use super::*;

    fn member(name: &str, version: &str) -> Sandbox {
        let mut s = Sandbox::new(name, Default::default());
        s.metadata.namespace = Some("default".into());
        s.metadata.resource_version = Some(version.into());
        s
    }

    #[test]
    fn a_superseded_version_is_skipped_and_a_newer_one_is_not() {
        let reservations = Reservations::default();
        let old = member("a", "7");
        let reservation = reservations.try_reserve(ObjectKey::of(&old)).expect("free");
        reservation.supersede(old.resource_version());
        drop(reservation);
        assert!(reservations.free(vec![old]).members.is_empty());
        let newer = member("a", "9");
        assert_eq!(reservations.free(vec![newer]).members.len(), 1);
    }

    #[test]
    fn every_claim_version_written_over_is_known_behind() {
        let reservations = Reservations::default();
        let mut claim = SandboxClaim::new("c", Default::default());
        claim.metadata.namespace = Some("default".into());
        let versions: Vec<String> = (1..=VERSIONS_PER_OBJECT + 1)
            .map(|v| v.to_string())
            .collect();
        for version in &versions {
            claim.metadata.resource_version = Some(version.clone());
            assert!(!reservations.is_claim_superseded(&claim));
            reservations.supersede_claim(&claim);
            assert!(reservations.is_claim_superseded(&claim));
        }
        // The oldest beyond the per-object bound is forgotten; the rest are still known.
        claim.metadata.resource_version = Some(versions[0].clone());
        assert!(!reservations.is_claim_superseded(&claim));
        claim.metadata.resource_version = Some(versions[1].clone());
        assert!(reservations.is_claim_superseded(&claim));
        // A member of the same name is another object.
        let namesake = member("c", &versions[1]);
        assert_eq!(reservations.free(vec![namesake]).members.len(), 1);
    }

    #[test]
    fn a_reserved_member_is_skipped_until_released() {
        let reservations = Reservations::default();
        let m = member("a", "1");
        let held = reservations.try_reserve(ObjectKey::of(&m)).expect("free");
        assert!(reservations.try_reserve(ObjectKey::of(&m)).is_none());
        assert!(reservations.free(vec![m.clone()]).members.is_empty());
        drop(held);
        assert_eq!(reservations.free(vec![m]).members.len(), 1);
    }

    #[test]
    fn superseded_versions_are_bounded_oldest_first() {
        let reservations = Reservations::default();
        for i in 0..=SUPERSEDED_LIMIT {
            let m = member(&format!("m{i}"), "1");
            let r = reservations.try_reserve(ObjectKey::of(&m)).expect("free");
            r.supersede(m.resource_version());
        }
        let guard = reservations.superseded.lock().expect("lock");
        assert_eq!(guard.order.len(), SUPERSEDED_LIMIT);
        assert_eq!(guard.by_key.len(), SUPERSEDED_LIMIT);
        assert!(!guard.contains(&ObjectKey::new("default", "m0"), "1"));
        assert!(guard.contains(&ObjectKey::new("default", "m1"), "1"));
    }
}
