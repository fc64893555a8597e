//! Injected failures, ended watches and a kube-runtime `Controller` running against the
//! fake API server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{DEADLINE, api_error, wait_for};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;
use tokio::time::timeout;

#[tokio::test]
async fn injected_failures_answer_with_a_status() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    server.create("configmaps", "default", json!({"metadata": {"name": "c"}}))?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);

    server.fail_requests("get", "configmaps", 500, 1);
    let status = api_error(api.get("c").await.expect_err("injected"));
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    assert!(api.get("c").await.is_ok(), "only once");

    // kube's client retries 503 on its own; the fake counts both attempts.
    server.reset_requests();
    server.fail_requests("get", "configmaps", 503, 1);
    assert!(api.get("c").await.is_ok());
    assert_eq!(server.requests().count("get", "configmaps"), 2);
    Ok(())
}

#[tokio::test]
async fn watchers_resume_after_watches_end() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "one"}}),
    )?;
    // Drive the watcher in a task so its watch request is open while the test acts.
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let driver = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Ok(Some(cm)) = stream.try_next().await {
            if tx.send(cm.metadata.name.unwrap_or_default()).await.is_err() {
                return;
            }
        }
    });
    assert_eq!(timeout(DEADLINE, rx.recv()).await?.as_deref(), Some("one"));
    wait_for("the first watch", || {
        (server.requests().count("watch", "configmaps") == 1).then_some(())
    })
    .await;

    server.end_watches();
    wait_for("a second watch", || {
        (server.requests().count("watch", "configmaps") >= 2).then_some(())
    })
    .await;
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "two"}}),
    )?;
    assert_eq!(timeout(DEADLINE, rx.recv()).await?.as_deref(), Some("two"));
    driver.abort();
    Ok(())
}

#[tokio::test]
async fn kube_runtime_controller_reconciles() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let reconcile = |cm: Arc<ConfigMap>, api: Arc<Api<ConfigMap>>| async move {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let patch = json!({"metadata": {"annotations": {"reconciled": "yes"}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| Action::await_change())
    };
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(
            reconcile,
            |_, _: &kube::Error, _| Action::requeue(Duration::from_secs(1)),
            Arc::new(api),
        )
        .for_each(|_| async {});
    let running = tokio::spawn(controller);
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "app"}}),
    )?;
    wait_for("the controller's annotation", || {
        let cm = server.get("configmaps", "default", "app")?;
        (cm["metadata"]["annotations"]["reconciled"] == "yes").then_some(())
    })
    .await;
    running.abort();
    Ok(())
}

#[tokio::test]
async fn kube_runtime_recorder_publishes_and_repeats_events() -> anyhow::Result<()> {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = FakeApiServer::start().await?;
    let reporter = Reporter {
        controller: "rouse-test".into(),
        instance: None,
    };
    let recorder = Recorder::new(server.client()?, reporter);
    let cm = server.create("configmaps", "default", json!({"metadata": {"name": "c"}}))?;
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("c".into()),
        namespace: Some("default".into()),
        uid: cm["metadata"]["uid"].as_str().map(str::to_owned),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Tested".into(),
        note: Some("first".into()),
        action: "Testing".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await?;
    recorder.publish(&event, &reference).await?;
    let events = server.list("events.events.k8s.io");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(events[0]["reason"], "Tested");
    Ok(())
}
