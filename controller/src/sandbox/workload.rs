//! Builds the workload a sandbox runs from its pod template and volume claim templates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
use kube::ResourceExt;
use rouse_shared::api::keys::{POD_NAME, SANDBOX_NAME_HASH, SYSTEM_PREFIXES};
use rouse_shared::api::{PersistentVolumeClaimTemplate, Sandbox};
use rouse_shared::names::sandbox_name_hash;

use super::action::{ServiceSpec, VolumeSpec, WorkloadSpec};

/// The name of the sandbox's workload: its `agents.x-k8s.io/pod-name` annotation when set
/// (a pod adopted under another name), else the sandbox's name.
pub fn pod_name(sandbox: &Sandbox) -> String {
    match sandbox.annotations().get(POD_NAME) {
        Some(name) if !name.is_empty() => name.clone(),
        _ => sandbox.name_any(),
    }
}

/// The sandbox's volumes, one per volume claim template, claim named `<template>-<sandbox>`.
pub fn volume_specs(sandbox: &Sandbox) -> Vec<VolumeSpec> {
    let sandbox_name = sandbox.name_any();
    sandbox
        .spec
        .volume_claim_templates
        .iter()
        .map(|vct| {
            let volume_name = vct.metadata.name.clone();
            let mut template: PersistentVolumeClaimTemplate = vct.clone();
            template.metadata.labels = strip_system(&vct.metadata.labels);
            template.metadata.annotations = strip_system(&vct.metadata.annotations);
            VolumeSpec {
                claim_name: format!("{volume_name}-{sandbox_name}"),
                volume_name,
                template,
            }
        })
        .collect()
}

/// The workload to run for a sandbox: see [`WorkloadSpec`].
pub fn workload_spec(sandbox: &Sandbox) -> WorkloadSpec {
    let template = &sandbox.spec.pod_template;
    let mut labels = strip_system(&template.metadata.labels);
    labels.insert(
        SANDBOX_NAME_HASH.to_owned(),
        sandbox_name_hash(&sandbox.name_any()),
    );
    let volumes = volume_specs(sandbox);
    let mut spec = template.spec.clone();
    let pod_volumes = spec.volumes.get_or_insert_with(Vec::new);
    for volume in &volumes {
        let claim = Volume {
            name: volume.volume_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: volume.claim_name.clone(),
                read_only: None,
            }),
            ..Volume::default()
        };
        match pod_volumes
            .iter_mut()
            .find(|v| v.name == volume.volume_name)
        {
            Some(existing) => *existing = claim,
            None => pod_volumes.push(claim),
        }
    }
    if pod_volumes.is_empty() {
        spec.volumes = None;
    }
    WorkloadSpec {
        name: pod_name(sandbox),
        labels,
        annotations: strip_system(&template.metadata.annotations),
        spec,
        volumes,
        template_hash: pod_template_hash(sandbox),
    }
}

/// The hash of a sandbox's `spec.podTemplate.spec` as 8 hex digits: a running workload made
/// from another hash runs an older template (the change takes effect when it restarts).
pub fn pod_template_hash(sandbox: &Sandbox) -> String {
    // Serializing plain data structures cannot fail; an empty input would still hash.
    let bytes = serde_json::to_vec(&sandbox.spec.pod_template.spec).unwrap_or_default();
    format!("{:08x}", rouse_shared::names::fnv1a_32(&bytes))
}

/// The headless Service of a sandbox.
pub(crate) fn service_spec(sandbox: &Sandbox) -> ServiceSpec {
    ServiceSpec {
        name: sandbox.name_any(),
        selector: BTreeMap::from([(
            SANDBOX_NAME_HASH.to_owned(),
            sandbox_name_hash(&sandbox.name_any()),
        )]),
    }
}

/// The `status.selector` of a sandbox: `agents.x-k8s.io/sandbox-name-hash=<hash>`.
pub(crate) fn selector(sandbox: &Sandbox) -> String {
    format!(
        "{SANDBOX_NAME_HASH}={}",
        sandbox_name_hash(&sandbox.name_any())
    )
}

/// Labels or annotations without the keys under the system prefixes.
fn strip_system(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter()
        .filter(|(key, _)| !SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
