//! watch: replay from a version, live events, Expired, slow watchers, selectors, close.

use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::core::{Expression, Selector};
use rouse_shared::api::{Sandbox, SandboxClaim};
use rouse_shared::store::{DeleteParams, ListParams, Store, StoreError, WatchEvent, WatchStream};
use serde_json::json;

use super::{
    EmbeddedStoreConfig, SandboxFixture, key, merge, sandbox, temp_store, temp_store_with,
};

/// Bounds a wait that only fails when something is broken.
const DEADLINE: Duration = Duration::from_secs(20);

/// The next item, failing the test when none arrives in time.
async fn next(
    stream: &mut WatchStream<Sandbox>,
) -> Option<Result<WatchEvent<Sandbox>, StoreError>> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("a watch item within the deadline")
}

/// The next event as `(type, name, resourceVersion)`.
async fn next_event(stream: &mut WatchStream<Sandbox>) -> (&'static str, String, String) {
    match next(stream).await {
        Some(Ok(event)) => describe(&event),
        other => panic!("expected an event, got {other:?}"),
    }
}

fn describe(event: &WatchEvent<Sandbox>) -> (&'static str, String, String) {
    let (ty, object) = match event {
        WatchEvent::Added(o) => ("Added", o),
        WatchEvent::Modified(o) => ("Modified", o),
        WatchEvent::Deleted(o) => ("Deleted", o),
        WatchEvent::Bookmark { .. } => panic!("the store sends no bookmarks"),
    };
    (
        ty,
        object.name_any(),
        object.resource_version().unwrap_or_default(),
    )
}

fn ev(ty: &'static str, name: &str, rv: u64) -> (&'static str, String, String) {
    (ty, name.to_owned(), rv.to_string())
}

#[tokio::test]
async fn replays_history_then_streams_live() {
    let (store, _dir) = temp_store();
    store.create(&sandbox("a")).await.expect("a");
    let list = Store::<Sandbox>::list(&store, &ListParams::default())
        .await
        .expect("list");
    assert_eq!(list.resource_version, "1");
    store.create(&sandbox("b")).await.expect("b");
    let _: Sandbox = store
        .patch(
            &key("a"),
            &merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .expect("patch");
    Store::<Sandbox>::delete(&store, &key("b"), &DeleteParams::default())
        .await
        .expect("delete");

    let mut watch = Store::<Sandbox>::watch(&store, &ListParams::default(), &list.resource_version)
        .await
        .expect("watch");
    assert_eq!(next_event(&mut watch).await, ev("Added", "b", 2));
    assert_eq!(next_event(&mut watch).await, ev("Modified", "a", 3));
    assert_eq!(next_event(&mut watch).await, ev("Deleted", "b", 4));
    store.create(&sandbox("c")).await.expect("c");
    assert_eq!(next_event(&mut watch).await, ev("Added", "c", 5));

    // From "" the current objects come first as Added, then live changes.
    let mut fresh = Store::<Sandbox>::watch(&store, &ListParams::default(), "")
        .await
        .expect("watch from now");
    assert_eq!(next_event(&mut fresh).await, ev("Added", "a", 3));
    assert_eq!(next_event(&mut fresh).await, ev("Added", "c", 5));
    Store::<Sandbox>::delete(&store, &key("a"), &DeleteParams::default())
        .await
        .expect("delete a");
    assert_eq!(next_event(&mut fresh).await, ev("Deleted", "a", 6));
    assert_eq!(next_event(&mut watch).await, ev("Deleted", "a", 6));
}

#[tokio::test]
async fn versions_older_than_the_history_are_expired() {
    let config = EmbeddedStoreConfig {
        watch_history: 3,
        ..Default::default()
    };
    let (store, _dir) = temp_store_with(config);
    for name in ["a", "b", "c", "d", "e", "f"] {
        store.create(&sandbox(name)).await.expect("create");
    }
    let mut old = Store::<Sandbox>::watch(&store, &ListParams::default(), "2")
        .await
        .expect("the error comes as an item");
    match next(&mut old).await {
        Some(Err(StoreError::Expired { resource_version })) => assert_eq!(resource_version, "2"),
        other => panic!("expected Expired, got {other:?}"),
    }
    assert!(
        next(&mut old).await.is_none(),
        "the stream ends after Expired"
    );

    let mut oldest = Store::<Sandbox>::watch(&store, &ListParams::default(), "3")
        .await
        .expect("watch");
    for (name, version) in [("d", 4), ("e", 5), ("f", 6)] {
        assert_eq!(next_event(&mut oldest).await, ev("Added", name, version));
    }

    let err = Store::<Sandbox>::watch(&store, &ListParams::default(), "abc")
        .await
        .err()
        .expect("not a version");
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
}

#[tokio::test]
async fn versions_newer_than_the_store_are_too_large() {
    let (store, _dir) = temp_store_with(EmbeddedStoreConfig::default());
    store.create(&sandbox("a")).await.expect("create");
    let started = std::time::Instant::now();
    match Store::<Sandbox>::watch(&store, &ListParams::default(), "1000").await {
        Err(StoreError::TooLargeResourceVersion {
            resource_version,
            current,
        }) => {
            assert_eq!(resource_version, "1000");
            assert_eq!(current, "1");
        }
        Err(other) => panic!("expected TooLargeResourceVersion, got {other:?}"),
        Ok(_) => panic!("expected TooLargeResourceVersion, got a stream"),
    }
    // It waited a bounded time for the version, as kube-apiserver waits for its cache.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The current version itself is fine.
    let _current = Store::<Sandbox>::watch(&store, &ListParams::default(), "1")
        .await
        .expect("a watch from the current version");
}

#[tokio::test]
async fn slow_watcher_is_ended_with_expired() {
    let config = EmbeddedStoreConfig {
        watch_buffer: 2,
        ..Default::default()
    };
    let (store, _dir) = temp_store_with(config);
    let mut slow = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("watch");
    let mut fast = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("watch");
    for i in 0..10 {
        store
            .create(&sandbox(&format!("s{i}")))
            .await
            .expect("create");
        assert_eq!(
            next_event(&mut fast).await.1,
            format!("s{i}"),
            "the fast one keeps up"
        );
    }
    assert_eq!(next_event(&mut slow).await, ev("Added", "s0", 1));
    assert_eq!(next_event(&mut slow).await, ev("Added", "s1", 2));
    match next(&mut slow).await {
        Some(Err(StoreError::Expired { resource_version })) => assert_eq!(resource_version, "2"),
        other => panic!("expected Expired, got {other:?}"),
    }
    assert!(next(&mut slow).await.is_none());
    store.create(&sandbox("late")).await.expect("create");
    assert_eq!(next_event(&mut fast).await.1, "late");
}

#[tokio::test]
async fn selector_and_namespace_transitions() {
    let (store, _dir) = temp_store();
    let web = ListParams {
        namespace: Some("team-a".into()),
        selector: Selector::from_iter([Expression::Equal("tier".into(), "web".into())]),
    };
    let mut watch = Store::<Sandbox>::watch(&store, &web, "0")
        .await
        .expect("watch");
    store
        .create(&sandbox("a").labeled("tier", "web"))
        .await
        .expect("a");
    assert_eq!(next_event(&mut watch).await, ev("Added", "a", 1));
    let tier = |t: &str| merge(json!({"metadata": {"labels": {"tier": t}}}));
    let _: Sandbox = store.patch(&key("a"), &tier("db")).await.expect("leave");
    assert_eq!(next_event(&mut watch).await, ev("Deleted", "a", 2));
    let _: Sandbox = store
        .patch(&key("a"), &tier("web"))
        .await
        .expect("come back");
    assert_eq!(next_event(&mut watch).await, ev("Added", "a", 3));
    // Not selected: other labels, other namespaces, other kinds.
    store
        .create(&sandbox("b").labeled("tier", "db"))
        .await
        .expect("b");
    store
        .create(&sandbox("c").labeled("tier", "web").in_namespace("team-b"))
        .await
        .expect("c");
    let mut claim = SandboxClaim::new("a", Default::default());
    claim.metadata.namespace = Some("team-a".into());
    claim.labels_mut().insert("tier".into(), "web".into());
    store.create(&claim).await.expect("claim");
    let _: Sandbox = store
        .patch(
            &key("a"),
            &merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("still selected");
    assert_eq!(next_event(&mut watch).await, ev("Modified", "a", 7));
}

#[tokio::test]
async fn streams_end_when_the_store_closes() {
    let (store, _dir) = temp_store();
    let mut watch = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("watch");
    let clone = store.clone();
    drop(store);
    clone
        .create(&sandbox("a"))
        .await
        .expect("a clone keeps the store open");
    assert_eq!(next_event(&mut watch).await, ev("Added", "a", 1));
    drop(clone);
    assert!(
        next(&mut watch).await.is_none(),
        "closed with the last handle"
    );
}

#[tokio::test]
async fn watchers_are_bounded() {
    let config = EmbeddedStoreConfig {
        max_watchers: 1,
        ..Default::default()
    };
    let (store, _dir) = temp_store_with(config);
    let first = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("first watch");
    let err = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .err()
        .expect("over the limit");
    assert!(err.to_string().contains("too many watchers"), "{err}");
    drop(first);
    let mut again = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("a closed watch frees its slot");
    store.create(&sandbox("a")).await.expect("create");
    assert_eq!(next_event(&mut again).await, ev("Added", "a", 1));
}
