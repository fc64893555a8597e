//! The provisioner's decisions, without I/O: what to do with a claim (given its class) and
//! with a volume.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::{
    Error, PROVISIONED_BY_ANNOTATION, PROVISIONER, ProvisionerConfig, Result,
    SELECTED_NODE_ANNOTATION,
};

/// The node label a volume's node affinity matches.
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// What to do with a claim.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ClaimDecision {
    /// Nothing, until the claim changes (the reason is logged).
    Skip(&'static str),
    /// Nothing yet; look again later (its class does not exist yet).
    Retry(&'static str),
    /// Create this volume (its directory first).
    Provision(Box<PersistentVolume>),
}

/// What to do with a volume.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VolumeDecision {
    /// Nothing (the reason is logged).
    Skip(&'static str),
    /// Remove this directory, then the volume.
    Reclaim(PathBuf),
}

/// The decision for `claim`, whose class (`spec.storageClassName`) is `class` (`None`: not
/// found). Claims of our classes that cannot be served are errors naming the claim.
pub(crate) fn plan_claim(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
    config: &ProvisionerConfig,
) -> Result<ClaimDecision> {
    use ClaimDecision::{Retry, Skip};
    let spec = claim.spec.clone().unwrap_or_default();
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(Skip("the claim is being deleted"));
    }
    if spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
        return Ok(Skip("the claim names its volume"));
    }
    if spec
        .storage_class_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return Ok(Skip("the claim has no storage class"));
    }
    let Some(class) = class else {
        return Ok(Retry("the claim's storage class does not exist"));
    };
    if class.provisioner != PROVISIONER {
        return Ok(Skip("the claim's class has another provisioner"));
    }
    if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
        match claim.annotations().get(SELECTED_NODE_ANNOTATION) {
            None => return Ok(Skip("waiting for the scheduler to select a node")),
            Some(node) if *node != config.node_name => {
                return Ok(Skip("the scheduler selected another node"));
            }
            Some(_) => {}
        }
    }
    let key = format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    if spec.volume_mode.as_deref() == Some("Block") {
        return Err(Error::Unsupported {
            claim: key,
            reason: "volumeMode Block (a directory is a filesystem volume)",
        });
    }
    if spec.selector.is_some() || spec.data_source.is_some() {
        return Err(Error::Unsupported {
            claim: key,
            reason: "a selector or a data source (a new empty directory has neither)",
        });
    }
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned()
        .ok_or(Error::NoStorageRequest { claim: key })?;
    Ok(ClaimDecision::Provision(Box::new(volume_for(
        claim, class, storage, config,
    ))))
}

/// The volume of `claim`: see the module documentation.
fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    storage: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    config: &ProvisionerConfig,
) -> PersistentVolume {
    let spec = claim.spec.clone().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let namespace = claim.namespace().unwrap_or_default();
    let name = format!("pvc-{uid}");
    let path = config
        .base_dir
        .join(format!("{name}_{namespace}_{}", claim.name_any()));
    let access_modes = spec
        .access_modes
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| vec!["ReadWriteOnce".to_owned()]);
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY_ANNOTATION.to_owned(),
                PROVISIONER.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(access_modes),
            capacity: Some(BTreeMap::from([("storage".to_owned(), storage)])),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("PersistentVolumeClaim".to_owned()),
                namespace: Some(namespace),
                name: Some(claim.name_any()),
                uid: Some(uid),
                ..ObjectReference::default()
            }),
            host_path: Some(HostPathVolumeSource {
                path: path.display().to_string(),
                type_: Some("DirectoryOrCreate".to_owned()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.to_owned(),
                            operator: "In".to_owned(),
                            values: Some(vec![config.node_name.clone()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".to_owned()),
            ),
            storage_class_name: Some(class.name_any()),
            volume_mode: Some(spec.volume_mode.unwrap_or_else(|| "Filesystem".to_owned())),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// The decision for `volume`: reclaim it when we made it for our node, it is `Released` and
/// its policy is `Delete`. A volume of ours whose path is not a directory under the base
/// directory is [`Error::OutsideBaseDir`] and is never touched.
pub(crate) fn plan_volume(
    volume: &PersistentVolume,
    config: &ProvisionerConfig,
) -> Result<VolumeDecision> {
    use VolumeDecision::Skip;
    if volume
        .annotations()
        .get(PROVISIONED_BY_ANNOTATION)
        .map(String::as_str)
        != Some(PROVISIONER)
    {
        return Ok(Skip("not provisioned by us"));
    }
    let spec = volume.spec.clone().unwrap_or_default();
    let on_our_node = spec
        .node_affinity
        .and_then(|a| a.required)
        .into_iter()
        .flat_map(|s| s.node_selector_terms)
        .flat_map(|t| t.match_expressions.unwrap_or_default())
        .any(|e| {
            e.key == HOSTNAME_LABEL && e.values.unwrap_or_default() == [config.node_name.clone()]
        });
    if !on_our_node {
        return Ok(Skip("a volume of another node"));
    }
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Released") {
        return Ok(Skip("not released"));
    }
    if spec.persistent_volume_reclaim_policy.as_deref() != Some("Delete") {
        return Ok(Skip("its reclaim policy keeps it"));
    }
    let path = PathBuf::from(spec.host_path.map(|h| h.path).unwrap_or_default());
    if !strictly_under(&path, &config.base_dir) {
        return Err(Error::OutsideBaseDir {
            volume: volume.name_any(),
            path,
            base: config.base_dir.clone(),
        });
    }
    Ok(VolumeDecision::Reclaim(path))
}

/// Whether `path` is `base/<something>` with no `..`, `.` or root components after `base`.
fn strictly_under(path: &Path, base: &Path) -> bool {
    match path.strip_prefix(base) {
        Ok(rest) => {
            let mut components = rest.components().peekable();
            components.peek().is_some() && components.all(|c| matches!(c, Component::Normal(_)))
        }
        Err(_) => false,
    }
}
