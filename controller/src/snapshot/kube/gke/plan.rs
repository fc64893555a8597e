//! The `kube-gke` provider: GKE pod snapshots (memory and root filesystem of a gVisor pod),
//! through the `podsnapshot.gke.io/v1` objects the GKE extension of the upstream
//! agent-sandbox client uses:
//!
//! - snapshot: a `PodSnapshotManualTrigger` `{spec: {targetPod}}`; GKE's agent takes the
//!   snapshot, sets the trigger's condition `Triggered` (`True`/`Complete`, or `False` with
//!   reason `Failed`/`Error` and a message) and names the `PodSnapshot` it made in
//!   `status.snapshotCreated.name`; that `PodSnapshot` is usable once its `Ready` condition
//!   is `True`;
//! - restore: a pod annotated `podsnapshot.gke.io/ps-name: <PodSnapshot>` is restored from it.
//!
//! The cluster's `PodSnapshotStorageConfig` and a `PodSnapshotPolicy` (manual trigger)
//! selecting the sandboxes' pods are set up by the operator (docs/snapshots.md).
//!
//! Rules of the pure [`plan`] (no I/O): a settled snapshot gets nothing; once its trigger
//! exists only the trigger (and its `PodSnapshot`) count; before that the sandbox must run
//! and be ready (a pod snapshot is taken of a running pod): missing or starting → `Pending`
//! and look again, suspended → `Failed`, ready → create the trigger.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use rouse_shared::api::{Sandbox, SandboxSnapshot};
use serde_json::{Value, json};

use super::super::ownership::{controlled_by, owned_object};
use super::super::plan::{KubePlan, READY_RECHECK, in_progress};
use crate::snapshot::plan::{MISSING_RETRY, failed, pending};

/// `SandboxSnapshot.status.provider` of this provider.
pub const PROVIDER: &str = "kube-gke";
/// API group of GKE pod snapshots.
pub const GROUP: &str = "podsnapshot.gke.io";
/// Their API version.
pub const VERSION: &str = "v1";
/// Kind of the object asking for one snapshot of one pod.
pub const TRIGGER_KIND: &str = "PodSnapshotManualTrigger";
/// Kind of a taken pod snapshot.
pub const POD_SNAPSHOT_KIND: &str = "PodSnapshot";
/// Pod annotation naming the `PodSnapshot` the pod is restored from.
pub const RESTORE_ANNOTATION: &str = "podsnapshot.gke.io/ps-name";
/// Annotation Rouse sets on a fork once its pod was created with [`RESTORE_ANNOTATION`]:
/// the name of the `SandboxSnapshot`, so later starts (resumes) are fresh, not restores.
pub const RESTORED_ANNOTATION: &str = "rouse.dev/restored-from";
/// How often a snapshot whose trigger completed looks at its `PodSnapshot` (made by GKE, so
/// not watched) until that is `Ready`.
pub const POD_SNAPSHOT_RECHECK: Duration = Duration::from_secs(5);

/// The `PodSnapshotManualTrigger` resource.
pub fn trigger_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, TRIGGER_KIND),
        "podsnapshotmanualtriggers",
    )
}

/// The `PodSnapshot` resource.
pub fn pod_snapshot_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, POD_SNAPSHOT_KIND),
        "podsnapshots",
    )
}

/// The trigger asking GKE to snapshot `pod` for `snapshot`: named like the snapshot and
/// owned by it ([`owned_object`]).
pub fn trigger(snapshot: &SandboxSnapshot, sandbox: &Sandbox, pod: &str) -> DynamicObject {
    owned_object(
        &trigger_resource(),
        &snapshot.name_any(),
        snapshot,
        sandbox,
        [],
        json!({"spec": {"targetPod": pod}}),
    )
}

/// Where a trigger stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerOutcome {
    /// Not processed yet.
    Waiting,
    /// `Triggered=True/Complete`: the `PodSnapshot` made, and when.
    Complete {
        /// `status.snapshotCreated.name`.
        pod_snapshot: String,
        /// The condition's `lastTransitionTime`.
        at: Option<Timestamp>,
    },
    /// `Triggered=False` with reason `Failed` or `Error`: the message.
    Failed(String),
}

/// What a trigger reports, seen from the `SandboxSnapshot` of UID `owner_uid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerState {
    /// Its name.
    pub name: String,
    /// It has a controller reference to the `SandboxSnapshot`.
    pub owned: bool,
    /// `spec.targetPod`.
    pub target_pod: String,
    /// Where it stands.
    pub outcome: TriggerOutcome,
}

impl TriggerState {
    /// Reads a `PodSnapshotManualTrigger`.
    pub fn of(object: &DynamicObject, owner_uid: &str) -> Self {
        let status = &object.data["status"];
        let triggered = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Triggered");
        let outcome = match triggered {
            Some(c) if c["status"] == "True" && c["reason"] == "Complete" => {
                match status["snapshotCreated"]["name"].as_str() {
                    Some(name) if !name.is_empty() => TriggerOutcome::Complete {
                        pod_snapshot: name.to_owned(),
                        at: c["lastTransitionTime"]
                            .as_str()
                            .and_then(|t| t.parse().ok()),
                    },
                    _ => TriggerOutcome::Failed(
                        "the trigger completed without naming its PodSnapshot".to_owned(),
                    ),
                }
            }
            Some(c)
                if c["status"] == "False"
                    && (c["reason"] == "Failed" || c["reason"] == "Error") =>
            {
                TriggerOutcome::Failed(
                    c["message"]
                        .as_str()
                        .filter(|m| !m.is_empty())
                        .unwrap_or("no message")
                        .to_owned(),
                )
            }
            _ => TriggerOutcome::Waiting,
        };
        Self {
            name: object.name_any(),
            owned: controlled_by(object, owner_uid),
            target_pod: object.data["spec"]["targetPod"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            outcome,
        }
    }
}

/// True when a `PodSnapshot` has `Ready=True`.
pub fn pod_snapshot_ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The source sandbox, before the trigger exists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GkeSource {
    /// No sandbox of that name.
    #[default]
    Missing,
    /// Suspended or expired: it has no pod to snapshot.
    Stopped(String),
    /// Starting, or not ready: why.
    NotReady(String),
    /// Ready; the name of its pod.
    Running(String),
}

/// What was observed for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GkeObserved {
    /// The sandbox.
    pub source: GkeSource,
    /// The trigger named like the snapshot, if it exists.
    pub trigger: Option<TriggerState>,
    /// For a completed trigger, whether its `PodSnapshot` is `Ready` (`false` while missing).
    pub pod_snapshot_ready: bool,
}

/// What to do for one snapshot: the pod to create the trigger for now, and the status to
/// write.
pub type GkePlan = KubePlan<Option<String>>;

/// Plans one reconcile of `snapshot`; see the module documentation for the rules.
pub fn plan(snapshot: &SandboxSnapshot, observed: &GkeObserved) -> GkePlan {
    if !in_progress(snapshot) {
        return GkePlan::unchanged(snapshot);
    }
    let name = snapshot.name_any();
    let sandbox = &snapshot.spec.sandbox_name;
    let pending = |message: String| pending(PROVIDER, message);
    let settle = GkePlan::settle;
    if let Some(trigger) = &observed.trigger {
        if !trigger.owned {
            let message = format!(
                "{TRIGGER_KIND} {} exists and does not belong to this snapshot",
                trigger.name
            );
            return settle(failed(PROVIDER, message), None);
        }
        return match &trigger.outcome {
            TriggerOutcome::Failed(why) => settle(
                failed(PROVIDER, format!("{TRIGGER_KIND} {name} failed: {why}")),
                None,
            ),
            TriggerOutcome::Waiting => settle(
                pending(format!(
                    "waiting for GKE to snapshot pod {}",
                    trigger.target_pod
                )),
                Some(READY_RECHECK),
            ),
            TriggerOutcome::Complete { pod_snapshot, .. } if !observed.pod_snapshot_ready => {
                settle(
                    pending(format!(
                        "waiting for {POD_SNAPSHOT_KIND} {pod_snapshot} to be Ready"
                    )),
                    Some(POD_SNAPSHOT_RECHECK),
                )
            }
            TriggerOutcome::Complete { pod_snapshot, at } => {
                let mut message = format!(
                    "{POD_SNAPSHOT_KIND} {pod_snapshot} of pod {}: memory and the root \
                     filesystem; PVCs are not kept",
                    trigger.target_pod
                );
                if !snapshot.spec.include_memory {
                    message.push_str(
                        "; includeMemory is false, but a GKE pod snapshot always keeps memory",
                    );
                }
                // GKE reports no size on the objects the provider reads.
                GkePlan::ready(snapshot, PROVIDER, at.map(Time), None, message)
            }
        };
    }
    match &observed.source {
        GkeSource::Missing => settle(
            pending(format!("waiting for sandbox {sandbox} to exist")),
            Some(MISSING_RETRY),
        ),
        GkeSource::Stopped(why) => settle(
            failed(
                PROVIDER,
                format!(
                    "sandbox {sandbox} {why}: the kube-gke provider snapshots a running pod; \
                     resume it and create the snapshot again"
                ),
            ),
            None,
        ),
        GkeSource::NotReady(why) => settle(
            pending(format!("waiting for sandbox {sandbox} to be ready: {why}")),
            Some(MISSING_RETRY),
        ),
        GkeSource::Running(pod) => GkePlan {
            create: Some(pod.clone()),
            status: pending(format!("asked GKE to snapshot pod {pod}")),
            ..GkePlan::default()
        },
    }
}

/// The source of a pod snapshot as `sandbox` stands.
pub fn source(sandbox: &Sandbox) -> GkeSource {
    use rouse_shared::api::OperatingMode;
    use rouse_shared::api::keys::{condition, reason};
    if sandbox.spec.effective_operating_mode() == OperatingMode::Suspended {
        return GkeSource::Stopped("is suspended".to_owned());
    }
    let ready = sandbox
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY));
    match ready {
        Some(c) if c.status == "True" => GkeSource::Running(crate::sandbox::pod_name(sandbox)),
        Some(c) if c.reason == reason::SANDBOX_EXPIRED => {
            GkeSource::Stopped("has expired".to_owned())
        }
        Some(c) if c.reason == reason::POD_SUCCEEDED || c.reason == reason::POD_FAILED => {
            GkeSource::Stopped("has finished".to_owned())
        }
        Some(c) => GkeSource::NotReady(format!("{}: {}", c.reason, c.message)),
        None => GkeSource::NotReady("it has no status yet".to_owned()),
    }
}

/// The value of a `PodSnapshotManualTrigger`'s `status.snapshotCreated.name`, if any.
pub fn created_pod_snapshot(trigger: &DynamicObject) -> Option<String> {
    match &trigger.data["status"]["snapshotCreated"]["name"] {
        Value::String(name) if !name.is_empty() => Some(name.clone()),
        _ => None,
    }
}

#[cfg(test)]
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
