//! One reconcile of one sandbox, the same in both modes: observe → plan → apply the actions →
//! apply the sandbox changes → write the status if it changed.

use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{condition, reason};
use rouse_shared::api::{Sandbox, SandboxStatus};
use rouse_shared::store::{DeleteParams, ObjectKey, Patch, Store, StoreError};
use serde_json::json;
use tracing::{debug, warn};

use super::action::{Action, SandboxOp};
use super::conditions::{FALSE, Transition, Want, transitions};
use super::events::{LifecycleEvent, create_failed, lifecycle_events};
use super::plan::plan;
use super::port::{Platform, PlatformError};
pub(crate) use crate::status::status_patch;

/// What a reconcile did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReconcileOutcome {
    /// Reconcile again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
    /// Conditions that changed status or reason.
    pub transitions: Vec<Transition>,
    /// The lifecycle Events of this reconcile (upstream's reasons), to publish or log.
    pub events: Vec<LifecycleEvent>,
    /// Number of platform actions applied.
    pub actions: usize,
    /// True when the Sandbox object was deleted (`shutdownPolicy: Delete`).
    pub deleted: bool,
}

/// Why a reconcile failed; the caller retries with a backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Reading the platform's state failed.
    #[error("observe sandbox {key}: {source}")]
    Observe {
        /// The sandbox.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: PlatformError,
    },
    /// A platform action failed.
    #[error("{action} for sandbox {key}: {source}")]
    Apply {
        /// The sandbox.
        key: ObjectKey,
        /// Which action ([`super::Action::metric_label`]).
        action: &'static str,
        /// What failed.
        #[source]
        source: PlatformError,
    },
    /// Setting `operatingMode: Suspended` on an idle sandbox failed (a conflict means a wake
    /// came first).
    #[error("suspend idle sandbox {key}: {source}")]
    Suspend {
        /// The sandbox.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Deleting an expired sandbox failed.
    #[error("delete expired sandbox {key}: {source}")]
    Delete {
        /// The sandbox.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// Writing the status failed.
    #[error("patch status of sandbox {key}: {source}")]
    PatchStatus {
        /// The sandbox.
        key: ObjectKey,
        /// What failed.
        #[source]
        source: StoreError,
    },
}

impl ReconcileError {
    /// The lifecycle Event of this failure, if it has one (a pod that could not be created).
    pub fn event(&self) -> Option<LifecycleEvent> {
        match self {
            ReconcileError::Apply {
                key,
                action: "create_workload",
                source,
            } => Some(create_failed(&key.name, source)),
            _ => None,
        }
    }

    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ReconcileError::Observe { .. } => "observe",
            ReconcileError::Apply { .. } => "apply",
            ReconcileError::Suspend { .. } => "suspend",
            ReconcileError::Delete { .. } => "delete",
            ReconcileError::PatchStatus { .. } => "patch_status",
        }
    }
}

/// Reconciles one sandbox against a store and a platform at time `now`.
///
/// The sandbox must be the stored object (uid, resourceVersion). On a failed action the
/// status gets `Ready=False/ReconcilerError` naming it (best effort) and the error is returned.
pub async fn reconcile_sandbox<S, P>(
    store: &S,
    platform: &P,
    sandbox: &Sandbox,
    now: Timestamp,
) -> Result<ReconcileOutcome, ReconcileError>
where
    S: Store<Sandbox>,
    P: Platform,
{
    let key = ObjectKey::of(sandbox);
    let observed = platform
        .observe(sandbox)
        .await
        .map_err(|source| ReconcileError::Observe {
            key: key.clone(),
            source,
        })?;
    let plan = plan(sandbox, &observed, now);
    let previous = sandbox.status.clone().unwrap_or_default();

    for action in &plan.actions {
        debug!(sandbox.key = %key, action = action.metric_label(), "applying action");
        if let Err(source) = platform.apply(sandbox, action).await {
            let error = ReconcileError::Apply {
                key: key.clone(),
                action: action.metric_label(),
                source,
            };
            report_error(store, sandbox, &key, &previous, plan.status, &error, now).await;
            return Err(error);
        }
    }

    for op in &plan.sandbox_ops {
        match op {
            SandboxOp::Suspend => {
                let mut patch = Patch::Merge(
                    json!({"spec": {"operatingMode": "Suspended"}})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                );
                if let Some(rv) = sandbox.resource_version() {
                    patch = patch.with_resource_version(&rv);
                }
                store
                    .patch(&key, &patch)
                    .await
                    .map_err(|source| ReconcileError::Suspend {
                        key: key.clone(),
                        source,
                    })?;
            }
            SandboxOp::Delete => {
                let params = DeleteParams {
                    uid: sandbox.uid(),
                    ..DeleteParams::default()
                };
                match store.delete(&key, &params).await {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(source) => {
                        return Err(ReconcileError::Delete {
                            key: key.clone(),
                            source,
                        });
                    }
                }
                return Ok(ReconcileOutcome {
                    requeue_after: None,
                    transitions: Vec::new(),
                    events: Vec::new(),
                    actions: plan.actions.len(),
                    deleted: true,
                });
            }
        }
    }

    let changes = transitions(&previous.conditions, &plan.status.conditions);
    let created = plan.actions.iter().find_map(|a| match a {
        Action::CreateWorkload(spec) => Some(spec.name.as_str()),
        _ => None,
    });
    let events = lifecycle_events(sandbox, created, &changes);
    if let Some(patch) = status_patch(&previous, &plan.status) {
        store
            .patch_status(&key, &patch)
            .await
            .map_err(|source| ReconcileError::PatchStatus {
                key: key.clone(),
                source,
            })?;
    }
    Ok(ReconcileOutcome {
        requeue_after: plan.requeue_after,
        transitions: changes,
        events,
        actions: plan.actions.len(),
        deleted: false,
    })
}

/// Writes `Ready=False/ReconcilerError` with the error's message; failures are only logged,
/// the original error is what the caller reports.
async fn report_error<S: Store<Sandbox>>(
    store: &S,
    sandbox: &Sandbox,
    key: &ObjectKey,
    previous: &SandboxStatus,
    mut status: SandboxStatus,
    error: &ReconcileError,
    now: Timestamp,
) {
    let ready = Want::new(
        condition::READY,
        FALSE,
        reason::RECONCILER_ERROR,
        // Upstream's prefix, which tools match on.
        format!("Error seen: {error}"),
    )
    .into_condition(&previous.conditions, sandbox.meta().generation, now);
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == condition::READY)
    {
        Some(c) => *c = ready,
        None => status.conditions.insert(0, ready),
    }
    if let Some(patch) = status_patch(previous, &status)
        && let Err(e) = store.patch_status(key, &patch).await
    {
        warn!(sandbox.key = %key, error = %e, "could not record the reconcile error");
    }
}
