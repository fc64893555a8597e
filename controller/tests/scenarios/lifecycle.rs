//! The Sandbox lifecycle scenarios: create, suspend, resume, expiry, idle suspend, restart,
//! leader election, garbage collection of what a Sandbox owns.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use rouse_shared::api::keys::SANDBOX_NAME_HASH;
use rouse_shared::names::sandbox_name_hash;
use serde_json::json;
use std::collections::BTreeSet;

use super::env::{Env, condition, sandbox, wait_for};

fn owned_by(object: &impl kube::Resource, owner: &rouse_shared::api::Sandbox) -> bool {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(&r.uid) == owner.metadata.uid.as_ref())
}

/// Create → Pod, PVC and headless Service, owned; `Ready=True` with an endpoint.
pub async fn create_ready(env: &Env) {
    let controller = env.start(env.config());
    let mut spec = sandbox(env, "alice");
    spec.spec.service = Some(true);
    spec.spec
        .pod_template
        .metadata
        .labels
        .insert("app".into(), "web".into());
    spec.spec
        .pod_template
        .metadata
        .labels
        .insert(SANDBOX_NAME_HASH.into(), "forged".into());
    env.create(&spec).await;
    let ready = env.wait_ready("alice", "True", "DependenciesReady").await;
    let status = ready.status.clone().expect("status");
    let pod = env
        .pods()
        .get("alice")
        .await
        .expect("pod named after the sandbox");
    let pod_ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("pod ip");
    let endpoint = status.endpoint.expect("endpoint");
    assert_eq!(endpoint.address, pod_ip);
    assert_eq!(endpoint.ports[0].container_port, 8080);
    assert_eq!(status.pod_ips, vec![pod_ip]);
    assert!(status.node_name.is_some());
    assert_eq!(
        status.service_fqdn.as_deref(),
        Some(format!("alice.{}.svc.cluster.local", env.namespace).as_str())
    );
    assert!(owned_by(&pod, &ready));
    assert_eq!(
        pod.labels().get(SANDBOX_NAME_HASH),
        Some(&sandbox_name_hash("alice"))
    );
    assert_eq!(pod.labels().get("app").map(String::as_str), Some("web"));
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .expect("volumes");
    assert_eq!(
        volumes[0]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("data-alice")
    );
    let pvc: PersistentVolumeClaim = Api::namespaced(env.client.clone(), &env.namespace)
        .get("data-alice")
        .await
        .expect("pvc");
    assert!(owned_by(&pvc, &ready));
    let service: Service = Api::namespaced(env.client.clone(), &env.namespace)
        .get("alice")
        .await
        .expect("service");
    assert!(owned_by(&service, &ready));
    let service_spec = service.spec.expect("service spec");
    assert_eq!(service_spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        service_spec
            .selector
            .and_then(|s| s.get(SANDBOX_NAME_HASH).cloned()),
        Some(sandbox_name_hash("alice"))
    );
    // The pod's creation and the sandbox becoming Ready were published as Events on the
    // Sandbox, with upstream's reasons.
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_for(
        env.timeout,
        "SandboxPodCreated and SandboxReady events for alice",
        || async {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let reasons: Vec<&str> = list
                .items
                .iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("alice")
                        && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Sandbox")
                })
                .filter_map(|e| e.reason.as_deref())
                .collect();
            if reasons.contains(&"SandboxPodCreated") && reasons.contains(&"SandboxReady") {
                Ok(())
            } else {
                Err(format!("{reasons:?}"))
            }
        },
    )
    .await;
    controller.stop().await;
}

/// Suspend → pod gone, PVC kept, `Suspended=True`; resume → a new pod on the same PVC.
pub async fn suspend_resume(env: &Env) {
    let controller = env.start(env.config());
    env.create(&sandbox(env, "bob")).await;
    env.wait_ready("bob", "True", "DependenciesReady").await;
    let first_pod = env.pods().get("bob").await.expect("pod").uid();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &env.namespace);
    let pvc_uid = pvcs.get("data-bob").await.expect("pvc").uid();

    env.patch_spec("bob", json!({"operatingMode": "Suspended"}))
        .await;
    let suspended = env
        .wait_sandbox("bob", "bob Suspended=True/PodTerminated", |s| {
            condition(s, "Suspended") == Some(("True".into(), "PodTerminated".into()))
        })
        .await;
    assert_eq!(
        condition(&suspended, "Ready"),
        Some(("False".into(), "SandboxSuspended".into()))
    );
    let status = suspended.status.expect("status");
    assert!(status.pod_ips.is_empty() && status.endpoint.is_none());
    env.wait_pod_gone("bob").await;
    assert_eq!(pvcs.get("data-bob").await.expect("pvc kept").uid(), pvc_uid);

    env.patch_spec("bob", json!({"operatingMode": "Running"}))
        .await;
    env.wait_ready("bob", "True", "DependenciesReady").await;
    let pod = env.pods().get("bob").await.expect("new pod");
    assert_ne!(pod.uid(), first_pod, "a new pod");
    let claim = pod.spec.and_then(|s| s.volumes).expect("volumes")[0]
        .persistent_volume_claim
        .clone()
        .expect("claim volume");
    assert_eq!(claim.claim_name, "data-bob");
    assert_eq!(
        pvcs.get("data-bob").await.expect("pvc").uid(),
        pvc_uid,
        "same PVC"
    );
    controller.stop().await;
}

fn soon(seconds: i64) -> String {
    (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `shutdownTime` with `Retain`: workload gone, object kept, `Ready=False/SandboxExpired`; with
/// `Delete`: the object goes too.
pub async fn expiry(env: &Env) {
    let controller = env.start(env.config());
    let mut retained = sandbox(env, "carol");
    retained.spec.service = Some(true);
    env.create(&retained).await;
    let mut deleted = sandbox(env, "dave");
    deleted.spec.shutdown_policy = Some(rouse_shared::api::ShutdownPolicy::Delete);
    env.create(&deleted).await;
    env.wait_ready("carol", "True", "DependenciesReady").await;
    env.wait_ready("dave", "True", "DependenciesReady").await;

    let at = soon(2);
    env.patch_spec("carol", json!({"shutdownTime": at})).await;
    env.patch_spec("dave", json!({"shutdownTime": at})).await;
    let expired = env.wait_ready("carol", "False", "SandboxExpired").await;
    env.wait_pod_gone("carol").await;
    let services: Api<Service> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_for(env.timeout, "service carol deleted", || async {
        match services.get_opt("carol").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|s| s.map(|s| s.name_any())))),
        }
    })
    .await;
    assert!(expired.status.expect("status").service.is_none());
    env.wait_gone("dave").await;
    controller.stop().await;
}

/// Idle suspend: no activity for `idleTimeoutSeconds` → `operatingMode: Suspended`.
pub async fn idle_suspend(env: &Env) {
    let controller = env.start(env.config());
    let mut idle = sandbox(env, "erin");
    idle.spec.suspension = Some(rouse_shared::api::Suspension {
        idle_timeout_seconds: Some(1),
        ..Default::default()
    });
    env.create(&idle).await;
    let suspended = env
        .wait_sandbox("erin", "erin idle-suspended", |s| {
            condition(s, "Suspended") == Some(("True".into(), "PodTerminated".into()))
        })
        .await;
    assert_eq!(
        suspended.spec.operating_mode,
        Some(rouse_shared::api::OperatingMode::Suspended)
    );
    env.wait_pod_gone("erin").await;
    controller.stop().await;
}

/// A controller stopped halfway through creating sandboxes; a new one converges them all,
/// with exactly one pod each.
pub async fn restart_converges(env: &Env, count: usize) {
    let first = env.start(env.config());
    let names: Vec<String> = (0..count).map(|i| format!("restart-{i}")).collect();
    for name in &names {
        env.create(&sandbox(env, name)).await;
    }
    // Stop as soon as the first pod exists: the others are somewhere in between.
    let pods = env.pods();
    wait_for(env.timeout, "a first pod", || async {
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.is_empty() {
            Err("no pods".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    first.stop().await;
    let second = env.start(env.config());
    for name in &names {
        env.wait_ready(name, "True", "DependenciesReady").await;
    }
    assert_one_pod_each(env, &names).await;
    second.stop().await;
}

/// Every named sandbox has exactly one pod, named after it.
pub async fn assert_one_pod_each(env: &Env, names: &[String]) {
    let pods = env
        .pods()
        .list(&ListParams::default().labels(SANDBOX_NAME_HASH))
        .await
        .expect("list pods");
    let mut seen = BTreeSet::new();
    for pod in &pods.items {
        assert!(
            seen.insert(pod.name_any()),
            "duplicate pod {}",
            pod.name_any()
        );
    }
    for name in names {
        assert!(seen.contains(name), "pod {name} missing; pods: {seen:?}");
    }
    assert_eq!(seen.len(), names.len(), "pods: {seen:?}");
}

/// Two replicas with leader election: exactly one leads and reconciles; when it stops, the
/// other takes over.
pub async fn leader_election(env: &Env) {
    let mut config_a = env.config();
    config_a.leader_election = Some(env.lease("replica-a"));
    let mut config_b = env.config();
    config_b.leader_election = Some(env.lease("replica-b"));
    let a = env.start(config_a);
    let b = env.start(config_b);
    wait_for(env.timeout, "one leader", || async {
        match (a.probes.is_leader(), b.probes.is_leader()) {
            (true, false) | (false, true) => Ok(()),
            other => Err(other),
        }
    })
    .await;
    env.create(&sandbox(env, "frank")).await;
    env.wait_ready("frank", "True", "DependenciesReady").await;
    assert!(
        a.probes.is_leader() != b.probes.is_leader(),
        "never two leaders"
    );

    let (leader, standby) = if a.probes.is_leader() { (a, b) } else { (b, a) };
    leader.stop().await;
    wait_for(env.timeout, "the standby takes over", || async {
        if standby.probes.is_leader() {
            Ok(())
        } else {
            Err("standby")
        }
    })
    .await;
    env.create(&sandbox(env, "grace")).await;
    env.wait_ready("grace", "True", "DependenciesReady").await;
    standby.stop().await;
}

/// Deleting a Sandbox (with the controller stopped, so only the garbage collector acts) takes
/// its Pod, PersistentVolumeClaim and Service with it through their owner references.
pub async fn owned_objects_collected(env: &Env) {
    let controller = env.start(env.config());
    let mut owner = sandbox(env, "hank");
    owner.spec.service = Some(true);
    env.create(&owner).await;
    env.wait_ready("hank", "True", "DependenciesReady").await;
    controller.stop().await;
    env.sandboxes()
        .delete("hank", &DeleteParams::background())
        .await
        .expect("delete sandbox");
    env.wait_gone("hank").await;
    let pods: Api<Pod> = env.pods();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &env.namespace);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_for(
        env.timeout,
        "pod, claim and service of hank collected",
        || async {
            let left = [
                pods.get_opt("hank").await.map(|o| o.map(|_| "pod")),
                claims
                    .get_opt("data-hank")
                    .await
                    .map(|o| o.map(|_| "claim")),
                services.get_opt("hank").await.map(|o| o.map(|_| "service")),
            ];
            let left: Vec<String> = left
                .into_iter()
                .filter_map(|r| match r {
                    Ok(None) => None,
                    Ok(Some(kind)) => Some(kind.to_owned()),
                    Err(e) => Some(e.to_string()),
                })
                .collect();
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    )
    .await;
}
