//! Watches through the real `kube::Client` and kube-runtime's watcher: resume from a
//! resourceVersion, 410 for a too-old one, selector transitions, bookmarks and the delay
//! switch.

mod common;

use std::time::Duration;

use common::{DEADLINE, sandbox, sandboxes};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;
use tokio::time::timeout;

fn name_of(event: &WatchEvent<DynamicObject>) -> String {
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => {
            format!("MODIFIED {}", o.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Deleted(o) => {
            format!("DELETED {}", o.metadata.name.clone().unwrap_or_default())
        }
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn watch_from_a_list_version_sees_later_changes_in_order() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    api.create(&PostParams::default(), &sandbox("before", json!({})))
        .await?;
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .expect("rv");

    let mut stream = api
        .watch(&WatchParams::default().timeout(60), &rv)
        .await?
        .boxed();
    api.create(&PostParams::default(), &sandbox("after", json!({})))
        .await?;
    let patch = json!({"spec": {"operatingMode": "Suspended"}});
    api.patch("after", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    api.delete("before", &Default::default()).await?;

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = timeout(DEADLINE, stream.try_next())
            .await?
            .transpose()
            .expect("open")?;
        seen.push(name_of(&event));
    }
    assert_eq!(seen, ["ADDED after", "MODIFIED after", "DELETED before"]);
    Ok(())
}

#[tokio::test]
async fn watch_without_version_starts_with_the_current_objects() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    api.create(&PostParams::default(), &sandbox("present", json!({})))
        .await?;
    let mut stream = api.watch(&WatchParams::default(), "0").await?.boxed();
    let event = timeout(DEADLINE, stream.try_next())
        .await?
        .transpose()
        .expect("open")?;
    assert_eq!(name_of(&event), "ADDED present");
    Ok(())
}

/// The next event, which must be an `ERROR`.
async fn error_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> kube::core::Status {
    match timeout(DEADLINE, stream.try_next()).await {
        Ok(Err(kube::Error::Api(status))) => *status,
        Ok(Ok(Some(WatchEvent::Error(status)))) => *status,
        other => panic!("expected an error event, got {other:?}"),
    }
}

#[tokio::test]
async fn a_too_old_version_gets_410_in_the_stream() -> anyhow::Result<()> {
    let server = FakeApiServer::builder().history_limit(2).start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    let first = api
        .create(&PostParams::default(), &sandbox("a", json!({})))
        .await?;
    for name in ["b", "c", "d"] {
        api.create(&PostParams::default(), &sandbox(name, json!({})))
            .await?;
    }
    let old = first.metadata.resource_version.expect("rv");
    let mut stream = api.watch(&WatchParams::default(), &old).await?.boxed();
    let status = error_event(&mut stream).await;
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));

    // After compaction nothing before now can be resumed either.
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .expect("rv");
    api.create(&PostParams::default(), &sandbox("e", json!({})))
        .await?;
    server.compact();
    let mut stream = api.watch(&WatchParams::default(), &rv).await?.boxed();
    assert_eq!(
        error_event(&mut stream).await.code,
        410,
        "compacted history"
    );
    Ok(())
}

#[tokio::test]
async fn label_changes_enter_and_leave_a_selected_watch() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    api.create(&PostParams::default(), &sandbox("s", json!({"team": "x"})))
        .await?;
    let rv = server.resource_version().to_string();
    let params = WatchParams::default().labels("team=y");
    let mut stream = api.watch(&params, &rv).await?.boxed();
    for team in ["y", "y2", "y"] {
        let patch = json!({"metadata": {"labels": {"team": team}}});
        api.patch("s", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    api.delete("s", &Default::default()).await?;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let event = timeout(DEADLINE, stream.try_next())
            .await?
            .transpose()
            .expect("open")?;
        seen.push(name_of(&event));
    }
    assert_eq!(seen, ["ADDED s", "DELETED s", "ADDED s", "DELETED s"]);
    Ok(())
}

#[tokio::test]
async fn bookmarks_and_timeouts() -> anyhow::Result<()> {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let rv = server.resource_version().to_string();
    let params = WatchParams::default().timeout(1);
    assert!(params.bookmarks, "kube asks for bookmarks by default");
    let events: Vec<_> = api.watch(&params, &rv).await?.try_collect().await?;
    assert!(!events.is_empty(), "bookmarks while idle");
    for event in &events {
        match event {
            WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
            other => panic!("only bookmarks expected, got {other:?}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn kube_runtime_watcher_sees_objects_and_changes() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "early"}}),
    )?;
    let mut stream = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = timeout(DEADLINE, stream.try_next())
        .await??
        .expect("an object");
    assert_eq!(first.metadata.name.as_deref(), Some("early"));
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "late"}}),
    )?;
    let second = timeout(DEADLINE, stream.try_next())
        .await??
        .expect("an object");
    assert_eq!(second.metadata.name.as_deref(), Some("late"));
    assert!(server.requests().count("watch", "configmaps") >= 1);
    Ok(())
}

#[tokio::test]
async fn kube_runtime_streaming_list_gets_the_initial_events_end() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "one"}}),
    )?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(api, config).boxed();
    let mut seen = Vec::new();
    loop {
        let event = timeout(DEADLINE, stream.try_next()).await??.expect("open");
        let done = matches!(event, watcher::Event::InitDone);
        seen.push(event);
        if done {
            break;
        }
    }
    assert!(seen.iter().any(
        |e| matches!(e, watcher::Event::InitApply(c) if c.metadata.name.as_deref() == Some("one"))
    ));
    assert_eq!(
        server.requests().count("list", "configmaps"),
        0,
        "no list call"
    );
    Ok(())
}

#[tokio::test]
async fn delayed_watch_lags_behind_reads() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    server.set_watch_delay(Duration::from_millis(500));
    let rv = server.resource_version().to_string();
    let mut stream = api.watch(&WatchParams::default(), &rv).await?.boxed();
    let start = tokio::time::Instant::now();
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "lagging"}}),
    )?;
    // Reads see the object at once; the watch only after the delay.
    assert!(api.get_opt("lagging").await?.is_some());
    let event = loop {
        match timeout(DEADLINE, stream.try_next())
            .await??
            .expect("an event")
        {
            WatchEvent::Bookmark(_) => continue,
            event => break event,
        }
    };
    assert!(
        matches!(event, WatchEvent::Added(ref c) if c.metadata.name.as_deref() == Some("lagging"))
    );
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    Ok(())
}
