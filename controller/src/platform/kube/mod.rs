//! The Kubernetes platform: a sandbox's workload is a Pod named after it, its volumes are PVCs
//! `<template>-<sandbox>`, and its Service a headless Service named like it, all carrying a
//! controller ownerReference to the Sandbox and the `sandbox-name-hash` label. A sandbox with
//! `spec.restoreFrom` starts from its snapshot (see [`restore`]).
//!
//! Observation reads reflector caches fed by the controller's watches, never the API server,
//! so a reconcile costs only its writes. A lagging cache is safe: every create uses the
//! deterministic name and treats `AlreadyExists` as done, every delete treats `NotFound` as
//! done, so a stale view can never make a second Pod.

mod checkpoint;
mod index;
mod objects;
mod restore;

pub use index::PodIndex;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use rouse_shared::api::keys::{SANDBOX_NAME_HASH, condition, reason};
use rouse_shared::api::{MemorySharing, OperatingMode, Sandbox, SandboxSnapshot};
use rouse_shared::names::sandbox_name_hash;
use serde_json::json;

use super::{Platform, PlatformError, Result};
use crate::sandbox::{
    Action, Observed, ObservedMemorySharing, ObservedService, ObservedVolume, SharingState,
    not_owned_error, pod_name, volume_specs,
};
use crate::snapshot::kube::gke::plan::RESTORE_ANNOTATION;

pub(crate) use objects::is_owned_by;

/// Read-only caches of the objects a sandbox owns, kept by reflectors.
#[derive(Clone)]
pub struct KubeCache {
    /// Pods labelled with `sandbox-name-hash`.
    pub pods: Store<Pod>,
    /// Services labelled with `sandbox-name-hash`.
    pub services: Store<Service>,
    /// PVCs labelled with `sandbox-name-hash`.
    pub claims: Store<PersistentVolumeClaim>,
    /// Names of the cached Pods by namespace and hash label.
    pub pod_index: PodIndex,
    /// Every `SandboxSnapshot`, for the `restoreFrom` of forks.
    pub snapshots: Store<SandboxSnapshot>,
}

/// Pods, PVCs and headless Services through the Kubernetes API.
#[derive(Clone)]
pub struct KubePlatform {
    client: Client,
    cache: KubeCache,
    cluster_domain: String,
}

impl KubePlatform {
    /// A platform writing through `client` and observing `cache`; `cluster_domain` is the
    /// DNS suffix of Services (`cluster.local` by default in most clusters).
    pub fn new(client: Client, cache: KubeCache, cluster_domain: impl Into<String>) -> Self {
        Self {
            client,
            cache,
            cluster_domain: cluster_domain.into(),
        }
    }

    fn api<K>(&self, sandbox: &Sandbox) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        let namespace = sandbox.namespace().unwrap_or_else(|| "default".to_owned());
        Api::namespaced(self.client.clone(), &namespace)
    }
}

impl Platform for KubePlatform {
    async fn observe(&self, sandbox: &Sandbox) -> Result<Observed> {
        let namespace = sandbox.namespace().unwrap_or_else(|| "default".to_owned());
        let name = pod_name(sandbox);
        let hash = sandbox_name_hash(&sandbox.name_any());
        let mut workloads = Vec::new();
        if let Some(pod) = self
            .cache
            .pods
            .get(&ObjectRef::new(&name).within(&namespace))
        {
            workloads.push(objects::workload(&pod, sandbox));
        } else if needs_lookup(sandbox) {
            // The cache holds only labelled pods; a pod of this name without the label is
            // someone else's, and the status must say so rather than call the sandbox
            // suspended (upstream's `PodNotOwned`).
            let pod = self
                .api::<Pod>(sandbox)
                .get_opt(&name)
                .await
                .map_err(|e| classify(format!("get pod {namespace}/{name}"), e))?;
            workloads.extend(pod.map(|p| objects::workload(&p, sandbox)));
        }
        // Other pods this sandbox owns, to refuse when there is more than one.
        let others: Vec<_> = self
            .cache
            .pod_index
            .names(&namespace, &hash)
            .into_iter()
            .filter(|n| *n != name)
            .filter_map(|n| self.cache.pods.get(&ObjectRef::new(&n).within(&namespace)))
            .filter(|p| is_owned_by(p.as_ref(), sandbox))
            .collect();
        workloads.extend(others.iter().map(|p| objects::workload(p, sandbox)));

        let volumes: Vec<ObservedVolume> = volume_specs(sandbox)
            .into_iter()
            .filter(|v| {
                self.cache
                    .claims
                    .get(&ObjectRef::new(&v.claim_name).within(&namespace))
                    .is_some()
            })
            .map(|v| ObservedVolume {
                claim_name: v.claim_name,
            })
            .collect();
        let restore = self.restore_source(sandbox, &volumes).await?;
        let service = self
            .cache
            .services
            .get(&ObjectRef::new(&sandbox.name_any()).within(&namespace))
            .map(|s| ObservedService {
                name: s.name_any(),
                owned: is_owned_by(s.as_ref(), sandbox),
            });
        Ok(Observed {
            workloads,
            volumes,
            service,
            cluster_domain: self.cluster_domain.clone(),
            // The proxy runs apart; its reports reach the status instead.
            activity: None,
            checkpoint: checkpoint::unsupported(sandbox),
            // Merging is the node's business (its KSM, or Kata VM templating): say so.
            memory_sharing: (sandbox.spec.effective_memory_sharing() == MemorySharing::Merge)
                .then(|| ObservedMemorySharing {
                    state: SharingState::Unsupported,
                    message: "on Kubernetes, memory merging is set up on the nodes (KSM, or Kata VM templating), not per sandbox: see docs/memory-sharing.md"
                        .to_owned(),
                    merged_bytes: None,
                }),
            restore,
        })
    }

    async fn apply(&self, sandbox: &Sandbox, action: &Action) -> Result<()> {
        let what = || format!("{} for {}", action.metric_label(), sandbox.name_any());
        let post = PostParams::default();
        let result = match action {
            Action::EnsureVolume(volume) => {
                let mut claim = objects::claim(sandbox, volume);
                if let Some(source) = self.data_source(sandbox, volume)?
                    && let Some(spec) = claim.spec.as_mut()
                {
                    spec.data_source = Some(source);
                }
                created(
                    self.api::<PersistentVolumeClaim>(sandbox)
                        .create(&post, &claim)
                        .await,
                )
            }
            Action::CreateWorkload(spec) => {
                let mut pod = objects::pod(sandbox, spec);
                let restore = self.pod_restore(sandbox).await?;
                if let Some(pod_snapshot) = &restore {
                    pod.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(RESTORE_ANNOTATION.to_owned(), pod_snapshot.clone());
                }
                let api = self.api::<Pod>(sandbox);
                let created = match api.create(&post, &pod).await {
                    Err(kube::Error::Api(status)) if status.is_already_exists() => {
                        // Ours and the cache lags, or someone else's outside the cache
                        // (no hash label): only the second is an error.
                        match api.get_opt(&spec.name).await {
                            Ok(Some(existing)) if !is_owned_by(&existing, sandbox) => {
                                let (_, owner) = objects::ownership(&existing, sandbox);
                                return Err(PlatformError::Conflict {
                                    what: what(),
                                    message: not_owned_error(
                                        &spec.name,
                                        owner.as_deref(),
                                        &sandbox.name_any(),
                                    ),
                                });
                            }
                            Ok(_) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                    other => other.map(|_| ()),
                };
                // An existing pod of ours was made by an earlier try, with the same
                // annotation: the fork is restored either way.
                if restore.is_some() && created.is_ok() {
                    self.mark_restored(sandbox).await?;
                }
                created
            }
            Action::AdoptWorkload { name } => {
                let patch = json!({"metadata": {
                    "ownerReferences": objects::owner_ref(sandbox).map(|r| vec![r]),
                    "labels": {SANDBOX_NAME_HASH: sandbox_name_hash(&sandbox.name_any())},
                }});
                self.api::<Pod>(sandbox)
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
            Action::DeleteWorkload { name } => deleted(
                self.api::<Pod>(sandbox)
                    .delete(name, &DeleteParams::default())
                    .await,
            ),
            Action::EnsureService(spec) => {
                let service = objects::service(sandbox, spec);
                created(self.api::<Service>(sandbox).create(&post, &service).await)
            }
            Action::DeleteService { name } => deleted(
                self.api::<Service>(sandbox)
                    .delete(name, &DeleteParams::default())
                    .await,
            ),
        };
        result.map_err(|e| classify(what(), e))
    }
}

/// Whether observing `sandbox` must look for its pod past the cache: only while it is suspended
/// and not yet known to have no pod (`Suspended=True/PodTerminated`), so a suspended sandbox
/// costs one read per suspend, and a running one none.
fn needs_lookup(sandbox: &Sandbox) -> bool {
    if sandbox.spec.effective_operating_mode() != OperatingMode::Suspended {
        return false;
    }
    let known_gone = sandbox.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == condition::SUSPENDED
                && c.status == "True"
                && c.reason == reason::POD_TERMINATED
        })
    });
    !known_gone
}

/// A create that found the object already there counts as done: names are deterministic.
fn created<K>(result: kube::Result<K>) -> kube::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(e) => Err(e),
    }
}

/// A delete of an object that is already gone counts as done.
fn deleted<K>(result: kube::Result<K>) -> kube::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Classifies an API error by its status code.
pub(super) fn classify(what: String, error: kube::Error) -> PlatformError {
    match &error {
        kube::Error::Api(status) if status.is_conflict() || status.is_already_exists() => {
            PlatformError::Conflict {
                what,
                message: status.message.clone(),
            }
        }
        kube::Error::Api(status) if status.is_invalid() || status.code == 400 => {
            PlatformError::Invalid {
                what,
                message: status.message.clone(),
            }
        }
        _ => PlatformError::Unavailable {
            what,
            message: error.to_string(),
            source: Some(Box::new(error)),
        },
    }
}

#[cfg(test)]
mod tests;
