//! One reconcile of one warm pool, the same in both modes: read the template and the members
//! → plan → delete → create in growing batches → write the status if it changed.

use std::time::Duration;

use futures::future::join_all;
use jiff::Timestamp;
use kube::ResourceExt;
use rouse_shared::api::{Sandbox, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{DeleteParams, ListParams, ObjectKey, Store, StoreError};
use tracing::debug;

use super::expectations::Expectations;
use super::plan::{PoolObserved, controlled_by, member_selector, plan};
use crate::status::status_patch;

/// The first create batch; each following batch doubles, as the ReplicaSet controller's
/// slow start does, so a failing create (quota, bad template) costs one call, not hundreds.
const FIRST_BATCH: usize = 1;

/// Why a pool reconcile failed; the caller retries with a backoff.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Reading the pool, its template or its members failed.
    #[error("read for pool {key}: {source}")]
    Read {
        /// The pool.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Creating a member failed.
    #[error("create member of pool {key}: {source}")]
    Create {
        /// The pool.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Deleting a member failed.
    #[error("delete member {member} of pool {key}: {source}")]
    Delete {
        /// The pool.
        key: ObjectKey,
        /// The member.
        member: String,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Writing the status failed.
    #[error("patch status of pool {key}: {source}")]
    PatchStatus {
        /// The pool.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
}

impl PoolError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PoolError::Read { .. } => "read",
            PoolError::Create { .. } => "create",
            PoolError::Delete { .. } => "delete",
            PoolError::PatchStatus { .. } => "patch_status",
        }
    }

    /// Whether retrying may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            PoolError::Read { source, .. }
            | PoolError::Create { source, .. }
            | PoolError::Delete { source, .. }
            | PoolError::PatchStatus { source, .. } => source.is_retryable(),
        }
    }
}

/// What a pool reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolOutcome {
    /// Members created.
    pub created: usize,
    /// Members deleted.
    pub deleted: usize,
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// Reconciles one pool (the stored object) at time `now`.
pub async fn reconcile_pool<S>(
    store: &S,
    expectations: &Expectations,
    pool: &SandboxWarmPool,
    stuck_after: Duration,
    now: Timestamp,
) -> Result<PoolOutcome, PoolError>
where
    S: Store<Sandbox> + Store<SandboxTemplate> + Store<SandboxWarmPool>,
{
    let key = ObjectKey::of(pool);
    let read = |source| PoolError::Read {
        key: key.clone(),
        source,
    };
    let template_key = ObjectKey::new(&key.namespace, &pool.spec.sandbox_template_ref.name);
    let template: Option<SandboxTemplate> =
        match Store::<SandboxTemplate>::get(store, &template_key).await {
            Ok(t) => Some(t),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(read(e)),
        };
    let mut params = ListParams::namespace(&key.namespace);
    params.selector = member_selector(&key.name);
    let listed: Vec<Sandbox> = Store::<Sandbox>::list(store, &params)
        .await
        .map_err(read)?
        .items;
    let uid = pool.uid().unwrap_or_default();
    let members: Vec<Sandbox> = listed
        .into_iter()
        .filter(|s| controlled_by(s, &uid))
        .collect();
    let names: Vec<String> = members.iter().map(ResourceExt::name_any).collect();
    let in_flight = expectations.in_flight(&key, &names);
    let observed = PoolObserved {
        template: template.as_ref(),
        members: &members,
        creates_in_flight: in_flight.creates,
        deletes_in_flight: &in_flight.deletes,
    };
    let plan = plan(pool, &observed, stuck_after, now);

    for (name, uid) in &plan.delete {
        let member = ObjectKey::new(&key.namespace, name);
        let params = DeleteParams {
            uid: uid.clone(),
            ..DeleteParams::default()
        };
        match Store::<Sandbox>::delete(store, &member, &params).await {
            Ok(_) => expectations.deleted(&key, name),
            Err(e) if e.is_not_found() || matches!(e, StoreError::Conflict { .. }) => {}
            Err(source) => {
                return Err(PoolError::Delete {
                    key: key.clone(),
                    member: name.clone(),
                    source,
                });
            }
        }
        debug!(pool.key = %key, member = %name, "deleted member");
    }

    let mut created = 0;
    if let Some(prototype) = &plan.prototype {
        let mut batch = FIRST_BATCH;
        while created < plan.create {
            let n = batch.min(plan.create - created);
            let results =
                join_all((0..n).map(|_| Store::<Sandbox>::create(store, prototype))).await;
            let mut failure = None;
            for result in results {
                match result {
                    Ok(member) => {
                        expectations.created(&key, &member.name_any());
                        created += 1;
                    }
                    Err(source) => failure = Some(source),
                }
            }
            metrics::counter!("rouse_controller_pool_members_created_total").increment(n as u64);
            if let Some(source) = failure {
                return Err(PoolError::Create {
                    key: key.clone(),
                    source,
                });
            }
            batch *= 2;
        }
    }

    let previous = pool.status.clone().unwrap_or_default();
    if let Some(patch) = status_patch(&previous, &plan.status) {
        Store::<SandboxWarmPool>::patch_status(store, &key, &patch)
            .await
            .map_err(|source| PoolError::PatchStatus {
                key: key.clone(),
                source,
            })?;
    }
    Ok(PoolOutcome {
        created,
        deleted: plan.delete.len(),
        requeue_after: plan.requeue_after,
    })
}
