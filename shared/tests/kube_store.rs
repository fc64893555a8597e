//! `KubeStore` against the fake API server with the real `kube::Client`: every method and
//! every error mapping.

use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{
    DeleteParams, Deletion, KubeStore, ListParams, ObjectKey, Patch, Propagation, Store,
    StoreError, WatchEvent,
};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;
use tokio::time::timeout;

const DEADLINE: Duration = Duration::from_secs(20);

fn sandbox(namespace: &str, name: &str, labels: serde_json::Value) -> Sandbox {
    serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    }))
    .expect("a valid Sandbox")
}

async fn setup() -> anyhow::Result<(FakeApiServer, KubeStore)> {
    let server = FakeApiServer::start().await?;
    let store = KubeStore::new(server.client()?);
    Ok((server, store))
}

fn merge(value: serde_json::Value) -> Patch {
    Patch::merge(value).expect("an object")
}

#[tokio::test]
async fn create_get_list() -> anyhow::Result<()> {
    let (_server, store) = setup().await?;
    let created: Sandbox = store
        .create(&sandbox("a", "web", json!({"tier": "front"})))
        .await?;
    assert!(created.resource_version().is_some());
    assert!(created.uid().is_some());
    store
        .create(&sandbox("a", "db", json!({"tier": "back"})))
        .await?;
    store
        .create(&sandbox("b", "cache", json!({"tier": "back"})))
        .await?;

    let got: Sandbox = store.get(&ObjectKey::new("a", "web")).await?;
    assert_eq!(got, created);

    let names = |items: Vec<Sandbox>| items.iter().map(|s| s.name_any()).collect::<Vec<_>>();
    let all = Store::<Sandbox>::list(&store, &ListParams::default()).await?;
    assert_eq!(names(all.items), ["db", "web", "cache"]);
    assert!(!all.resource_version.is_empty());
    let in_a = Store::<Sandbox>::list(&store, &ListParams::namespace("a")).await?;
    assert_eq!(names(in_a.items), ["db", "web"]);
    let back = ListParams {
        namespace: None,
        selector: [("tier", "back")].into_iter().collect(),
    };
    let back = Store::<Sandbox>::list(&store, &back).await?;
    assert_eq!(names(back.items), ["db", "cache"]);
    Ok(())
}

#[tokio::test]
async fn errors_are_classified_by_code_and_reason() -> anyhow::Result<()> {
    let (server, store) = setup().await?;
    let key = ObjectKey::new("a", "web");
    let missing = Store::<Sandbox>::get(&store, &key)
        .await
        .expect_err("absent");
    assert!(
        matches!(&missing, StoreError::NotFound { kind, key: k } if kind == "Sandbox" && *k == key),
        "{missing:?}"
    );

    store.create(&sandbox("a", "web", json!({}))).await?;
    let again = Store::<Sandbox>::create(&store, &sandbox("a", "web", json!({}))).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists { .. })),
        "{again:?}"
    );

    let bad = Store::<Sandbox>::create(&store, &sandbox("a", "Not_A_Name", json!({}))).await;
    assert!(matches!(bad, Err(StoreError::Invalid { .. })), "{bad:?}");

    let stale = merge(json!({"spec": {"operatingMode": "Suspended"}})).with_resource_version("1");
    let conflict = Store::<Sandbox>::patch(&store, &key, &stale).await;
    assert!(
        matches!(conflict, Err(StoreError::Conflict { .. })),
        "{conflict:?}"
    );

    let gone_patch = Store::<Sandbox>::patch(&store, &ObjectKey::new("a", "nope"), &stale).await;
    assert!(
        matches!(gone_patch, Err(StoreError::NotFound { .. })),
        "{gone_patch:?}"
    );

    drop(server);
    let down = Store::<Sandbox>::get(&store, &key)
        .await
        .expect_err("server gone");
    assert!(matches!(down, StoreError::Unavailable { .. }), "{down:?}");
    assert!(down.is_retryable());
    Ok(())
}

#[tokio::test]
async fn merge_patches_with_and_without_precondition() -> anyhow::Result<()> {
    let (server, store) = setup().await?;
    let key = ObjectKey::new("default", "s");
    let created: Sandbox = store.create(&sandbox("default", "s", json!({}))).await?;
    let rv = created.resource_version().expect("rv");

    let patch =
        merge(json!({"spec": {"operatingMode": "Suspended"}, "status": {"podIPs": ["10.0.0.1"]}}))
            .with_resource_version(&rv);
    let patched: Sandbox = store.patch(&key, &patch).await?;
    assert_eq!(
        patched
            .spec
            .operating_mode
            .map(|m| format!("{m:?}"))
            .as_deref(),
        Some("Suspended")
    );
    assert_eq!(patched.status, None, "status in a main patch is ignored");
    assert_eq!(patched.metadata.generation, Some(2));

    // The same precondition is stale now.
    let again = Store::<Sandbox>::patch(&store, &key, &patch).await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );

    let status = merge(
        json!({"status": {"lastActivityTime": "2026-01-02T03:04:05Z"}, "spec": {"service": true}}),
    );
    let with_status: Sandbox = store.patch_status(&key, &status).await?;
    let activity = with_status
        .status
        .as_ref()
        .and_then(|s| s.last_activity_time.clone());
    assert_eq!(
        activity.map(|t| t.0.to_string()).as_deref(),
        Some("2026-01-02T03:04:05Z")
    );
    assert_eq!(
        with_status.spec.service, None,
        "spec in a status patch is ignored"
    );
    assert_eq!(server.requests().count("patch", "sandboxes/status"), 1);
    Ok(())
}

#[tokio::test]
async fn delete_outcomes_and_preconditions() -> anyhow::Result<()> {
    let (server, store) = setup().await?;
    let key = ObjectKey::new("default", "s");
    let created: Sandbox = store.create(&sandbox("default", "s", json!({}))).await?;

    let wrong = DeleteParams {
        uid: Some("not-the-uid".into()),
        ..DeleteParams::default()
    };
    let refused = Store::<Sandbox>::delete(&store, &key, &wrong).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );
    let stale = DeleteParams {
        resource_version: Some("1".into()),
        ..DeleteParams::default()
    };
    let refused = Store::<Sandbox>::delete(&store, &key, &stale).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "{refused:?}"
    );

    let exact = DeleteParams {
        uid: created.uid(),
        resource_version: created.resource_version(),
        propagation: Some(Propagation::Background),
    };
    let deleted: Deletion<Sandbox> = store.delete(&key, &exact).await?;
    assert!(
        matches!(deleted, Deletion::Deleted(ref s) if s.name_any() == "s"),
        "{deleted:?}"
    );
    let again = Store::<Sandbox>::delete(&store, &key, &DeleteParams::default()).await;
    assert!(
        matches!(again, Err(StoreError::NotFound { .. })),
        "{again:?}"
    );

    let mut held = sandbox("default", "held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    store.create(&held).await?;
    let held_key = ObjectKey::new("default", "held");
    let pending: Deletion<Sandbox> = store.delete(&held_key, &DeleteParams::default()).await?;
    assert!(
        matches!(pending, Deletion::Pending(ref s) if s.metadata.deletion_timestamp.is_some()),
        "{pending:?}"
    );
    assert!(server.get("sandboxes", "default", "held").is_some());
    Ok(())
}

#[tokio::test]
async fn watch_from_a_list_version() -> anyhow::Result<()> {
    let (_server, store) = setup().await?;
    store
        .create(&sandbox("default", "before", json!({})))
        .await?;
    let list = Store::<Sandbox>::list(&store, &ListParams::default()).await?;
    let mut events =
        Store::<Sandbox>::watch(&store, &ListParams::default(), &list.resource_version).await?;

    store
        .create(&sandbox("default", "after", json!({})))
        .await?;
    let key = ObjectKey::new("default", "after");
    Store::<Sandbox>::patch(
        &store,
        &key,
        &merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await?;
    Store::<Sandbox>::delete(
        &store,
        &ObjectKey::new("default", "before"),
        &DeleteParams::default(),
    )
    .await?;

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = timeout(DEADLINE, events.next()).await?.expect("open")?;
        match event {
            WatchEvent::Added(s) => seen.push(format!("added {}", s.name_any())),
            WatchEvent::Modified(s) => seen.push(format!("modified {}", s.name_any())),
            WatchEvent::Deleted(s) => seen.push(format!("deleted {}", s.name_any())),
            WatchEvent::Bookmark { .. } => {}
        }
    }
    assert_eq!(seen, ["added after", "modified after", "deleted before"]);

    let selected = ListParams {
        namespace: Some("default".into()),
        selector: [("x", "z")].into_iter().collect(),
    };
    let rv = Store::<Sandbox>::list(&store, &selected)
        .await?
        .resource_version;
    let mut filtered = Store::<Sandbox>::watch(&store, &selected, &rv).await?;
    Store::<Sandbox>::patch(
        &store,
        &key,
        &merge(json!({"metadata": {"labels": {"x": "z"}}})),
    )
    .await?;
    let event = timeout(DEADLINE, filtered.next()).await?.expect("open")?;
    assert!(
        matches!(event, WatchEvent::Added(ref s) if s.name_any() == "after"),
        "entering the selector: {event:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_too_old_watch_version_is_expired() -> anyhow::Result<()> {
    let (server, store) = setup().await?;
    let rv = Store::<Sandbox>::list(&store, &ListParams::default())
        .await?
        .resource_version;
    store.create(&sandbox("default", "s", json!({}))).await?;
    server.compact();
    let mut events = Store::<Sandbox>::watch(&store, &ListParams::default(), &rv).await?;
    let first = timeout(DEADLINE, events.next()).await?.expect("an item");
    match first {
        Err(StoreError::Expired { resource_version }) => assert_eq!(resource_version, rv),
        other => panic!("expected Expired, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn calls_have_a_deadline() -> anyhow::Result<()> {
    // A listener that accepts and never answers stands in for a hung API server.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?).parse()?;
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let client = kube::Client::try_from(kube::Config::new(url))?;
    let store = KubeStore::new(client).with_call_timeout(Duration::from_millis(200));
    let hung = Store::<Sandbox>::get(&store, &ObjectKey::new("default", "s")).await;
    assert!(
        matches!(hung, Err(StoreError::Unavailable { .. })),
        "{hung:?}"
    );
    hold.abort();
    Ok(())
}
