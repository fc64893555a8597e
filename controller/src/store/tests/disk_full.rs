//! A full disk (issue 24): the store reports it, fails reads and writes at once with the
//! reason, reopens its file once the disk has room again, and keeps every acknowledged write.
//! The disk is a 2 MiB tmpfs the test mounts (root only; skipped without, required under CI).

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::ResourceExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ListParams, Store, StoreError};
use rouse_testsupport::tmpfs::Tmpfs;

use super::super::{EmbeddedStore, STORE_FILE_NAME, StoreHealth};
use super::{key, rv, sandbox};

const DEADLINE: Duration = Duration::from_secs(30);

/// A sandbox carrying `bytes` of annotation, so a few of them fill the disk.
fn heavy(name: &str, bytes: usize) -> Sandbox {
    let mut object = sandbox(name);
    object
        .annotations_mut()
        .insert("example.com/blob".into(), "x".repeat(bytes));
    object
}

/// Polls `check` until it holds, at most `DEADLINE`; panics naming `what` and the last value.
async fn wait_until<T: std::fmt::Debug>(what: &str, mut check: impl FnMut() -> (bool, T)) {
    let until = Instant::now() + DEADLINE;
    loop {
        let (done, seen) = check();
        if done {
            return;
        }
        assert!(
            Instant::now() < until,
            "not {what} within {DEADLINE:?}; last: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_full_disk_is_reported_and_the_store_reopens_once_there_is_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(disk) =
        Tmpfs::mount_or_skip("a_full_disk_is_reported", &dir.path().join("disk"), "2m")
    else {
        return;
    };
    let store = EmbeddedStore::open(&disk.path().join(STORE_FILE_NAME)).expect("open");
    let watch = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("watch");

    // Fill the disk: every create answered Ok is acknowledged, the first refusal ends it.
    let mut acknowledged = Vec::new();
    let failure = loop {
        let name = format!("s{}", acknowledged.len());
        match store.create(&heavy(&name, 200_000)).await {
            Ok(created) => acknowledged.push(created),
            Err(err) => break err,
        }
        assert!(acknowledged.len() < 20, "a 2 MiB disk holds fewer than 20");
    };
    assert!(
        matches!(failure, StoreError::Unavailable { .. }),
        "{failure}"
    );
    assert!(!acknowledged.is_empty(), "some writes fit");

    // Reported, and every call fails at once with the reason (the reads too: redb refuses
    // the file after an I/O error).
    let health = store.health();
    assert!(!health.is_healthy(), "{health:?}");
    assert!(health.describe().contains("No space left"), "{health:?}");
    let read = Store::<Sandbox>::get(&store, &key("s0"))
        .await
        .expect_err("reads fail while the file is down");
    assert!(read.to_string().contains("No space left"), "{read}");
    let write = store
        .create(&sandbox("small"))
        .await
        .expect_err("writes fail while the file is down");
    assert!(write.to_string().contains("reopened"), "{write}");

    // Room again: the store reopens on its own.
    disk.resize("64m");
    wait_until("healthy again", || {
        let health = store.health();
        (health.is_healthy(), health)
    })
    .await;
    let list = Store::<Sandbox>::list(&store, &ListParams::default())
        .await
        .expect("list after the reopen");
    for object in &acknowledged {
        let got: Sandbox = store
            .get(&key(&object.name_any()))
            .await
            .expect("an acknowledged write survives");
        assert_eq!(&got, object, "intact");
    }
    let newest = acknowledged.iter().map(rv).max().expect("some");
    let list_version: u64 = list.resource_version.parse().expect("a number");
    assert!(list_version > newest, "versions go on above what was seen");
    let created = store
        .create(&sandbox("after"))
        .await
        .expect("writes work again");
    assert!(rv(&created) > newest);

    // The watch from before the failure ended with Expired: its watcher lists again.
    let events: Vec<_> = tokio::time::timeout(DEADLINE, watch.collect::<Vec<_>>())
        .await
        .expect("the watch ends after the reopen");
    assert!(
        matches!(events.last(), Some(Err(StoreError::Expired { .. }))),
        "last event: {:?}",
        events.last().map(|e| e.as_ref().map(|_| "event"))
    );
    drop(store);
    assert_eq!(
        StoreHealth::Healthy.describe(),
        "ok",
        "the healthy state reads as ok"
    );
}
