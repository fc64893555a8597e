//! Which reconciles a change triggers: a sandbox change wakes its owning claim or pool (and the
//! pool it just left, when a claim adopted it), a pool change wakes the pool and its claims
//! waiting for it, a template change wakes its pools and their claims.
//!
//! The indexes hold one entry per object, added and removed with the watch events, so they
//! stay bounded by the store's contents.

use std::collections::{HashMap, HashSet};

use kube::ResourceExt;
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::ObjectKey;

use crate::pool::Expectations;

/// A reconcile to run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// Reconcile this SandboxWarmPool.
    Pool(ObjectKey),
    /// Reconcile this SandboxClaim.
    Claim(ObjectKey),
}

impl Work {
    /// A fixed label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Work::Pool(_) => "sandboxwarmpool",
            Work::Claim(_) => "sandboxclaim",
        }
    }
}

/// The indexes that turn watch events into [`Work`].
#[derive(Debug, Default)]
pub struct Router {
    member_of: HashMap<ObjectKey, ObjectKey>,
    claims_of_pool: HashMap<ObjectKey, HashSet<String>>,
    claim_pool: HashMap<ObjectKey, ObjectKey>,
    pools_of_template: HashMap<ObjectKey, HashSet<String>>,
    pool_template: HashMap<ObjectKey, ObjectKey>,
}

fn controller_of(sandbox: &Sandbox, kind: &str) -> Option<String> {
    sandbox
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == kind)
        .map(|o| o.name.clone())
}

impl Router {
    /// A sandbox was added or changed (`deleted: false`) or deleted.
    pub fn sandbox(
        &mut self,
        sandbox: &Sandbox,
        deleted: bool,
        expectations: &Expectations,
    ) -> Vec<Work> {
        let key = ObjectKey::of(sandbox);
        if deleted {
            expectations.gone(&key.namespace, &key.name);
        } else {
            expectations.seen(&key.namespace, &key.name);
        }
        let mut work = Vec::new();
        if let Some(claim) = controller_of(sandbox, "SandboxClaim") {
            work.push(Work::Claim(ObjectKey::new(&key.namespace, claim)));
        }
        let pool =
            controller_of(sandbox, "SandboxWarmPool").map(|p| ObjectKey::new(&key.namespace, p));
        let previous = match (&pool, deleted) {
            (Some(pool), false) => self.member_of.insert(key, pool.clone()),
            _ => self.member_of.remove(&key),
        };
        work.extend(previous.into_iter().chain(pool).map(Work::Pool));
        work.dedup();
        work
    }

    /// A claim was added or changed, or deleted.
    pub fn claim(&mut self, claim: &SandboxClaim, deleted: bool) -> Vec<Work> {
        let key = ObjectKey::of(claim);
        if let Some(old) = self.claim_pool.remove(&key)
            && let Some(set) = self.claims_of_pool.get_mut(&old)
        {
            set.remove(&key.name);
            if set.is_empty() {
                self.claims_of_pool.remove(&old);
            }
        }
        if deleted {
            return Vec::new();
        }
        let pool = ObjectKey::new(&key.namespace, &claim.spec.warm_pool_ref.name);
        self.claims_of_pool
            .entry(pool.clone())
            .or_default()
            .insert(key.name.clone());
        self.claim_pool.insert(key.clone(), pool);
        vec![Work::Claim(key)]
    }

    /// A pool was added or changed, or deleted.
    pub fn pool(
        &mut self,
        pool: &SandboxWarmPool,
        deleted: bool,
        expectations: &Expectations,
    ) -> Vec<Work> {
        let key = ObjectKey::of(pool);
        let known = self.pool_template.contains_key(&key);
        if let Some(old) = self.pool_template.remove(&key)
            && let Some(set) = self.pools_of_template.get_mut(&old)
        {
            set.remove(&key.name);
            if set.is_empty() {
                self.pools_of_template.remove(&old);
            }
        }
        if deleted {
            expectations.forget(&key);
        } else {
            let template = ObjectKey::new(&key.namespace, &pool.spec.sandbox_template_ref.name);
            self.pools_of_template
                .entry(template.clone())
                .or_default()
                .insert(key.name.clone());
            self.pool_template.insert(key.clone(), template);
        }
        // Claims wait on a pool only until it exists; later pool changes concern the pool.
        if deleted {
            return Vec::new();
        }
        let mut work = vec![Work::Pool(key.clone())];
        if !known {
            work.extend(self.claims_waiting_on(&key));
        }
        work
    }

    /// A template was added (`added`), changed or deleted: its pools, and on add the claims
    /// waiting for it.
    pub fn template(&self, template: &SandboxTemplate, added: bool) -> Vec<Work> {
        let key = ObjectKey::of(template);
        let pools: Vec<ObjectKey> = self
            .pools_of_template
            .get(&key)
            .into_iter()
            .flatten()
            .map(|name| ObjectKey::new(&key.namespace, name))
            .collect();
        let mut work = Vec::new();
        for pool in pools {
            if added {
                work.extend(self.claims_waiting_on(&pool));
            }
            work.push(Work::Pool(pool));
        }
        work
    }

    fn claims_waiting_on(&self, pool: &ObjectKey) -> Vec<Work> {
        self.claims_of_pool
            .get(pool)
            .into_iter()
            .flatten()
            .map(|name| Work::Claim(ObjectKey::new(&pool.namespace, name)))
            .collect()
    }

    /// Every pool and claim known, for a resync.
    pub fn all(&self) -> Vec<Work> {
        self.pool_template
            .keys()
            .cloned()
            .map(Work::Pool)
            .chain(self.claim_pool.keys().cloned().map(Work::Claim))
            .collect()
    }
}

/// The name of a sandbox's controller of `kind`, if any (for the Kubernetes adapter's
/// mappers).
pub fn sandbox_controller(sandbox: &Sandbox, kind: &str) -> Option<String> {
    controller_of(sandbox, kind)
}
