//! Pods to workloads (ownership, adoption, readiness) and plan specs to Kubernetes objects.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use rouse_shared::api::Sandbox;
use rouse_shared::api::keys::{ADOPTABLE, SANDBOX_NAME_HASH};
use rouse_shared::names::sandbox_name_hash;

use super::objects;
use crate::sandbox::fixtures::{SandboxBuilder, now};
use crate::sandbox::{Ownership, WorkloadPhase, workload_spec};

fn owner(uid: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "agents.x-k8s.io/v1beta1".into(),
        kind: "Sandbox".into(),
        name: "alice".into(),
        uid: uid.into(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

fn pod(owners: Vec<OwnerReference>, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("alice".into()),
            namespace: Some("team-a".into()),
            owner_references: Some(owners),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-1".into()),
            containers: vec![Container {
                name: "main".into(),
                ports: Some(vec![
                    ContainerPort {
                        container_port: 9090,
                        ..ContainerPort::default()
                    },
                    ContainerPort {
                        container_port: 8080,
                        name: Some("http".into()),
                        ..ContainerPort::default()
                    },
                ]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some("10.1.2.3".into()),
            pod_ips: Some(vec![
                PodIP {
                    ip: "10.1.2.3".into(),
                },
                PodIP {
                    ip: "fd00::3".into(),
                },
            ]),
            conditions: Some(vec![
                PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..PodCondition::default()
                },
                PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(now())),
                    ..PodCondition::default()
                },
            ]),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn ownership_of_pods() {
    let sandbox = Sandbox::test("alice");
    let cases = [
        (
            "controller ref to this sandbox",
            pod(vec![owner("uid-alice", true)], &[]),
            Ownership::Owned,
        ),
        (
            "controller ref to a namesake",
            pod(vec![owner("uid-old", true)], &[]),
            Ownership::NotOwned,
        ),
        (
            "non-controller ref only",
            pod(vec![owner("uid-alice", false)], &[]),
            Ownership::NotOwned,
        ),
        (
            "no owner, not labelled",
            pod(vec![], &[]),
            Ownership::NotOwned,
        ),
        (
            "no owner, adoptable",
            pod(vec![], &[(ADOPTABLE, "true")]),
            Ownership::Adoptable,
        ),
        (
            "adoptable=false",
            pod(vec![], &[(ADOPTABLE, "false")]),
            Ownership::NotOwned,
        ),
        (
            "adoptable but controlled",
            pod(vec![owner("uid-pool", true)], &[(ADOPTABLE, "true")]),
            Ownership::NotOwned,
        ),
        (
            "no owner, this sandbox's tracking label (upstream adopts it)",
            pod(vec![], &[(SANDBOX_NAME_HASH, &sandbox_name_hash("alice"))]),
            Ownership::Adoptable,
        ),
        (
            "no owner, another sandbox's tracking label",
            pod(vec![], &[(SANDBOX_NAME_HASH, &sandbox_name_hash("bob"))]),
            Ownership::NotOwned,
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(objects::workload(&pod, &sandbox).ownership, want, "{name}");
    }
    let other = objects::workload(&pod(vec![owner("uid-old", true)], &[]), &sandbox);
    assert_eq!(
        other.owner.as_deref(),
        Some("Sandbox/alice (UID: uid-old)"),
        "the other controller is named, as upstream's message does"
    );
}

#[test]
fn workload_state_from_a_pod() {
    let sandbox = Sandbox::test("alice");
    let w = objects::workload(&pod(vec![owner("uid-alice", true)], &[]), &sandbox);
    assert_eq!(w.phase, WorkloadPhase::Running);
    assert!(w.ready && !w.terminating);
    assert_eq!(w.ips, ["10.1.2.3", "fd00::3"]);
    assert_eq!(w.node_name.as_deref(), Some("node-1"));
    let ports: Vec<_> = w.ports.iter().map(|p| (p.container_port, p.port)).collect();
    assert_eq!(ports, [(8080, 8080), (9090, 9090)]);
    let scheduled = w.scheduled.expect("PodScheduled");
    assert_eq!(
        (scheduled.status.as_str(), scheduled.last_transition_time.0),
        ("True", now())
    );
}

#[test]
fn objects_carry_owner_and_hash_label() {
    let sandbox = Sandbox::test("alice").volume("data").label("app", "web");
    let spec = workload_spec(&sandbox);
    let pod = objects::pod(&sandbox, &spec);
    let refs = pod.metadata.owner_references.clone().expect("owner refs");
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (
            refs[0].uid.as_str(),
            refs[0].controller,
            refs[0].block_owner_deletion
        ),
        ("uid-alice", Some(true), Some(true)),
        "a foreground deletion of the sandbox waits for its pod"
    );
    assert_eq!(refs[0].kind, "Sandbox");
    let hash = sandbox_name_hash("alice");
    assert_eq!(
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SANDBOX_NAME_HASH)),
        Some(&hash)
    );
    assert_eq!(pod.metadata.namespace.as_deref(), Some("team-a"));

    let claim = objects::claim(&sandbox, &spec.volumes[0]);
    assert_eq!(claim.metadata.name.as_deref(), Some("data-alice"));
    let claim_owner = &claim.metadata.owner_references.clone().expect("owner")[0];
    assert_eq!(claim_owner.block_owner_deletion, Some(true));
    assert_eq!(
        claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SANDBOX_NAME_HASH)),
        Some(&hash)
    );

    let service = objects::service(
        &sandbox,
        &crate::sandbox::ServiceSpec {
            name: "alice".into(),
            selector: [(SANDBOX_NAME_HASH.to_owned(), hash.clone())].into(),
        },
    );
    let service_owner = &service.metadata.owner_references.clone().expect("owner")[0];
    assert_eq!(service_owner.block_owner_deletion, Some(true));
    let spec = service.spec.expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector
            .and_then(|s| s.get(SANDBOX_NAME_HASH).cloned()),
        Some(hash)
    );
}
