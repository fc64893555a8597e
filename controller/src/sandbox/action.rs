//! What a plan asks a platform (and the store) to do, and the workload it asks to run.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use rouse_shared::api::PersistentVolumeClaimTemplate;

/// One change a platform makes; every action is idempotent (applying it twice is harmless).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the volume if it does not exist; an existing one is kept as is.
    EnsureVolume(Box<VolumeSpec>),
    /// Start the workload. Fails with a conflict-class error if one of that name exists.
    CreateWorkload(Box<WorkloadSpec>),
    /// Take over an adoptable workload: make the sandbox its controller and stamp the
    /// `sandbox-name-hash` label.
    AdoptWorkload {
        /// Name of the workload.
        name: String,
    },
    /// Stop and delete the workload; volumes stay.
    DeleteWorkload {
        /// Name of the workload.
        name: String,
    },
    /// Create the headless Service if it does not exist.
    EnsureService(ServiceSpec),
    /// Delete the sandbox's (owned) Service.
    DeleteService {
        /// Name of the Service.
        name: String,
    },
}

impl Action {
    /// A fixed label naming the action, for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Action::EnsureVolume(_) => "ensure_volume",
            Action::CreateWorkload(_) => "create_workload",
            Action::AdoptWorkload { .. } => "adopt_workload",
            Action::DeleteWorkload { .. } => "delete_workload",
            Action::EnsureService(_) => "ensure_service",
            Action::DeleteService { .. } => "delete_service",
        }
    }
}

/// A change to the Sandbox object itself, made through the store (not the platform).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxOp {
    /// Set `spec.operatingMode: Suspended` (idle suspend), conditional on the resourceVersion
    /// the plan saw, so a concurrent wake is never overwritten.
    Suspend,
    /// Delete the Sandbox object (`shutdownPolicy: Delete` after `shutdownTime`).
    Delete,
}

/// The workload a sandbox runs, the same on every platform.
///
/// Built by [`super::workload_spec`] from the pod template: system label and annotation
/// prefixes stripped, the `sandbox-name-hash` label added, and every volume claim template
/// mounted as the pod volume of its name (replacing a pod volume of that name).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkloadSpec {
    /// Name of the workload: the sandbox's (or its `agents.x-k8s.io/pod-name` annotation).
    pub name: String,
    /// Labels: the template's without system prefixes, plus `sandbox-name-hash`.
    pub labels: BTreeMap<String, String>,
    /// Annotations: the template's without system prefixes.
    pub annotations: BTreeMap<String, String>,
    /// The pod spec with the claim volumes merged in.
    pub spec: PodSpec,
    /// The volumes the workload mounts from claims, in template order.
    pub volumes: Vec<VolumeSpec>,
    /// [`pod_template_hash`](super::pod_template_hash) of the sandbox it is made from.
    pub template_hash: String,
}

/// A persistent volume of a sandbox, from one volume claim template.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VolumeSpec {
    /// The pod volume name (the template's name).
    pub volume_name: String,
    /// The claim (or directory) name: `<template>-<sandbox>`.
    pub claim_name: String,
    /// The template, with system label and annotation prefixes stripped.
    pub template: PersistentVolumeClaimTemplate,
}

/// The headless Service of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceSpec {
    /// Its name: the sandbox's.
    pub name: String,
    /// Its selector and labels: `sandbox-name-hash=<hash>`.
    pub selector: BTreeMap<String, String>,
}
