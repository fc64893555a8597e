//! The fake kubelet: pods become Running and Ready with an IP; deletion is finished.

mod common;

use std::time::Duration;

use common::DEADLINE;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use rouse_testsupport::kube::{
    FakeApiServer, FakeKubelet, KubeletOptions, PodDeletion, PodOutcome,
};
use serde_json::{Value, json};
use tokio::time::timeout;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .expect("a Pod")
}

fn condition(pod: &Pod, kind: &str) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

#[tokio::test]
async fn pods_become_ready_with_an_ip_and_deletion_finishes() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let options = KubeletOptions::default().pod_ip(|pod: &Value| {
        if pod["metadata"]["name"] == "other" {
            "127.0.0.2".into()
        } else {
            "127.0.0.1".into()
        }
    });
    let _kubelet = FakeKubelet::start(&server, options);
    let api: Api<Pod> = Api::default_namespaced(server.client()?);
    let created = api.create(&PostParams::default(), &pod("web")).await?;
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    api.create(&PostParams::default(), &pod("other")).await?;

    let ready = timeout(
        DEADLINE,
        await_condition(api.clone(), "web", conditions::is_pod_running()),
    )
    .await??;
    let ready = ready.expect("the pod");
    let status = ready.status.clone().expect("status");
    assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(
        ready.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("fake-node")
    );
    for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition(&ready, kind).as_deref(), Some("True"), "{kind}");
    }
    let other = timeout(
        DEADLINE,
        await_condition(api.clone(), "other", conditions::is_pod_running()),
    )
    .await??;
    assert_eq!(
        other
            .and_then(|p| p.status)
            .and_then(|s| s.pod_ip)
            .as_deref(),
        Some("127.0.0.2")
    );

    // A bound pod is deleted gracefully: marked first, then removed by the kubelet.
    let deleted = api.delete("web", &DeleteParams::default()).await?;
    assert!(
        deleted
            .left()
            .and_then(|p| p.metadata.deletion_timestamp)
            .is_some()
    );
    let uid = ready.metadata.uid.clone().expect("uid");
    timeout(
        DEADLINE,
        await_condition(api.clone(), "web", conditions::is_deleted(&uid)),
    )
    .await??;
    Ok(())
}

#[tokio::test]
async fn outcomes_delays_and_graceful_deletion() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let options = KubeletOptions::default()
        .start_delay(Duration::from_millis(200))
        .deletion(PodDeletion::Graceful(Duration::from_millis(300)))
        .outcome(|pod: &Value| match pod["metadata"]["name"].as_str() {
            Some("fails") => PodOutcome::Fail,
            Some("done") => PodOutcome::Succeed,
            Some("slow") => PodOutcome::NeverReady,
            Some("ignored") => PodOutcome::Ignore,
            _ => PodOutcome::Ready,
        });
    let _kubelet = FakeKubelet::start(&server, options);
    let api: Api<Pod> = Api::default_namespaced(server.client()?);
    let start = tokio::time::Instant::now();
    for name in ["fails", "done", "slow", "ignored"] {
        api.create(&PostParams::default(), &pod(name)).await?;
    }
    let phase_of = |name: &'static str, phase: &'static str| {
        let api = api.clone();
        async move {
            let cond = move |p: Option<&Pod>| {
                p.and_then(|p| p.status.as_ref())
                    .and_then(|s| s.phase.as_deref())
                    == Some(phase)
            };
            timeout(DEADLINE, await_condition(api, name, cond)).await
        }
    };
    phase_of("fails", "Failed").await??;
    phase_of("done", "Succeeded").await??;
    let slow = phase_of("slow", "Running").await??.expect("pod");
    assert_eq!(condition(&slow, "Ready").as_deref(), Some("False"));
    assert!(start.elapsed() >= Duration::from_millis(200), "start delay");
    let ignored = api.get("ignored").await?;
    assert_eq!(
        ignored.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );

    let uid = slow.metadata.uid.clone().expect("uid");
    let deleting = tokio::time::Instant::now();
    let terminating = api.delete("slow", &DeleteParams::default()).await?;
    let marked = terminating.left().expect("the pod, marked");
    assert!(
        marked.metadata.deletion_timestamp.is_some(),
        "terminating first"
    );
    timeout(
        DEADLINE,
        await_condition(api.clone(), "slow", conditions::is_deleted(&uid)),
    )
    .await??;
    assert!(
        deleting.elapsed() >= Duration::from_millis(300),
        "graceful delay"
    );
    // Unbound pods are deleted at once.
    api.delete("ignored", &DeleteParams::default()).await?;
    assert!(api.get_opt("ignored").await?.is_none());
    Ok(())
}
