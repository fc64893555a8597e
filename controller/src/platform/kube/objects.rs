//! Kubernetes objects from plan specs, and workloads from Pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, PodSpec, Service, ServiceSpec as KubeServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::{ADOPTABLE, POD_TEMPLATE_HASH, SANDBOX_NAME_HASH, condition};
use rouse_shared::api::{EndpointPort, Sandbox, controller_ref};
use rouse_shared::names::sandbox_name_hash;

use crate::sandbox::{Ownership, ServiceSpec, VolumeSpec, Workload, WorkloadPhase, WorkloadSpec};

/// The controller ownerReference to the sandbox; `None` when the sandbox has no uid (it was
/// not read from the API server).
pub(crate) fn owner_ref(sandbox: &Sandbox) -> Option<OwnerReference> {
    controller_ref(sandbox)
}

fn meta(
    sandbox: &Sandbox,
    name: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: sandbox.namespace(),
        labels: (!labels.is_empty()).then_some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        owner_references: owner_ref(sandbox).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

/// The Pod for a workload spec.
pub(crate) fn pod(sandbox: &Sandbox, spec: &WorkloadSpec) -> Pod {
    let mut annotations = spec.annotations.clone();
    annotations.insert(POD_TEMPLATE_HASH.to_owned(), spec.template_hash.clone());
    Pod {
        metadata: meta(sandbox, &spec.name, spec.labels.clone(), annotations),
        spec: Some(spec.spec.clone()),
        status: None,
    }
}

/// The PVC for a volume, labelled with the sandbox's hash.
pub(crate) fn claim(sandbox: &Sandbox, volume: &VolumeSpec) -> PersistentVolumeClaim {
    let mut labels = volume.template.metadata.labels.clone();
    labels.insert(
        SANDBOX_NAME_HASH.to_owned(),
        sandbox_name_hash(&sandbox.name_any()),
    );
    PersistentVolumeClaim {
        metadata: meta(
            sandbox,
            &volume.claim_name,
            labels,
            volume.template.metadata.annotations.clone(),
        ),
        spec: Some(volume.template.spec.clone()),
        status: None,
    }
}

/// The headless Service selecting the sandbox's pod.
pub(crate) fn service(sandbox: &Sandbox, spec: &ServiceSpec) -> Service {
    Service {
        metadata: meta(sandbox, &spec.name, spec.selector.clone(), BTreeMap::new()),
        spec: Some(KubeServiceSpec {
            cluster_ip: Some("None".to_owned()),
            selector: Some(spec.selector.clone()),
            ..KubeServiceSpec::default()
        }),
        status: None,
    }
}

/// True when the object has a controller reference to this sandbox (same uid).
pub(crate) fn is_owned_by<K: Resource>(object: &K, sandbox: &Sandbox) -> bool {
    let Some(uid) = sandbox.meta().uid.as_deref() else {
        return false;
    };
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The object's controller reference, if it has one.
fn controller<K: Resource>(object: &K) -> Option<&OwnerReference> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// Whose a Pod is, seen from `sandbox`, and the other controller that owns it, if any. Like
/// upstream, a Pod without a controller may be adopted when it is labelled adoptable or
/// carries the sandbox's own `sandbox-name-hash` label.
pub(crate) fn ownership(pod: &Pod, sandbox: &Sandbox) -> (Ownership, Option<String>) {
    if is_owned_by(pod, sandbox) {
        return (Ownership::Owned, None);
    }
    if let Some(other) = controller(pod) {
        let owner = format!("{}/{} (UID: {})", other.kind, other.name, other.uid);
        return (Ownership::NotOwned, Some(owner));
    }
    let labels = pod.labels();
    let adoptable = labels.get(ADOPTABLE).is_some_and(|v| v == "true")
        || labels.get(SANDBOX_NAME_HASH) == Some(&sandbox_name_hash(&sandbox.name_any()));
    if adoptable {
        (Ownership::Adoptable, None)
    } else {
        (Ownership::NotOwned, None)
    }
}

/// The workload a Pod is, seen from `sandbox`.
pub(crate) fn workload(pod: &Pod, sandbox: &Sandbox) -> Workload {
    let (ownership, owner) = ownership(pod, sandbox);
    let status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let mut ips: Vec<String> = status
        .pod_ips
        .unwrap_or_default()
        .into_iter()
        .map(|ip| ip.ip)
        .collect();
    if ips.is_empty()
        && let Some(ip) = status.pod_ip.filter(|ip| !ip.is_empty())
    {
        ips.push(ip);
    }
    let created = pod.meta().creation_timestamp.clone();
    let scheduled = conditions
        .iter()
        .find(|c| c.type_ == condition::POD_SCHEDULED)
        .map(|c| Condition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            // An empty reason is filled in by the plan (upstream's fallbacks).
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            observed_generation: None,
            last_transition_time: c
                .last_transition_time
                .clone()
                .or_else(|| created.clone())
                .unwrap_or(Time(jiff::Timestamp::UNIX_EPOCH)),
        });
    let spec = pod.spec.clone().unwrap_or_default();
    Workload {
        name: pod.name_any(),
        ownership,
        owner,
        phase: WorkloadPhase::from_pod_phase(status.phase.as_deref()),
        ready,
        ips,
        node_name: spec.node_name.clone(),
        ports: ports(&spec),
        terminating: pod.meta().deletion_timestamp.is_some(),
        scheduled,
        template_hash: pod.annotations().get(POD_TEMPLATE_HASH).cloned(),
        // The pod's own container statuses say it on Kubernetes.
        back_off: None,
    }
}

/// Every declared container port; on Kubernetes the pod IP serves it on the same port.
fn ports(spec: &PodSpec) -> Vec<EndpointPort> {
    let mut ports: Vec<EndpointPort> = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| EndpointPort {
            name: p.name.clone(),
            container_port: p.container_port,
            port: p.container_port,
        })
        .collect();
    ports.sort_by_key(|p| p.container_port);
    ports.dedup_by_key(|p| p.container_port);
    ports
}
