//! Write sequences: dependent writes in order, stopping at the first refused one, many
//! sequences in one commit.

use futures::StreamExt;
use kube::ResourceExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ListParams, Store, StoreError, WatchEvent};
use serde_json::json;

use super::super::WriteSequence;
use super::{key, merge, rv, sandbox, temp_store};

#[tokio::test]
async fn a_sequence_stops_at_its_first_refused_write_and_others_go_on() {
    let (store, _dir) = temp_store();
    for name in ["a", "b", "c"] {
        store.create(&sandbox(name)).await.expect("create");
    }
    let b: Sandbox = store.get(&key("b")).await.expect("b");
    let list = Store::<Sandbox>::list(&store, &ListParams::namespace("team-a"))
        .await
        .expect("list");
    let mut watch = Store::<Sandbox>::watch(
        &store,
        &ListParams::namespace("team-a"),
        &list.resource_version,
    )
    .await
    .expect("watch");

    let stale = merge(json!({"metadata": {"labels": {"taken": "yes"}}}))
        .with_resource_version(&(rv(&b) - 1).to_string());
    let sequences = vec![
        // Labels a, then fails on b's stale precondition: c's status is never written.
        WriteSequence::new()
            .patch::<Sandbox>(
                &key("a"),
                &merge(json!({"metadata": {"labels": {"step": "1"}}})),
            )
            .patch::<Sandbox>(&key("b"), &stale)
            .patch_status::<Sandbox>(
                &key("c"),
                &merge(json!({"status": {"podIPs": ["10.0.0.1"]}})),
            ),
        // Independent of the first: both writes land.
        WriteSequence::new()
            .patch::<Sandbox>(
                &key("c"),
                &merge(json!({"metadata": {"labels": {"step": "2"}}})),
            )
            .patch_status::<Sandbox>(
                &key("c"),
                &merge(json!({"status": {"podIPs": ["10.0.0.2"]}})),
            ),
    ];
    let results = store.write_sequences(sequences).await.expect("committed");
    let error = results[0]
        .as_ref()
        .expect_err("the stale write stops the first");
    assert_eq!(error.index, 1);
    assert!(
        matches!(error.source, StoreError::Conflict { .. }),
        "{error}"
    );
    assert!(results[1].is_ok(), "{:?}", results[1]);

    let a: Sandbox = store.get(&key("a")).await.expect("a");
    assert_eq!(
        a.labels().get("step").map(String::as_str),
        Some("1"),
        "written before the failure"
    );
    let b_now: Sandbox = store.get(&key("b")).await.expect("b");
    assert_eq!(rv(&b_now), rv(&b), "the refused write wrote nothing");
    let c: Sandbox = store.get(&key("c")).await.expect("c");
    assert_eq!(c.labels().get("step").map(String::as_str), Some("2"));
    let ips = c.status.clone().expect("status").pod_ips;
    assert_eq!(ips, ["10.0.0.2"], "the write after the failure did not run");

    // One commit: the three changes have consecutive versions, in order.
    let mut versions = Vec::new();
    for _ in 0..3 {
        match watch.next().await {
            Some(Ok(WatchEvent::Modified(s))) => versions.push((s.name_any(), rv(&s))),
            other => panic!("expected a modification, got {other:?}"),
        }
    }
    let base = rv(&c) - 2;
    assert_eq!(
        versions,
        [
            ("a".to_owned(), base),
            ("c".to_owned(), base + 1),
            ("c".to_owned(), base + 2)
        ]
    );
}

#[tokio::test]
async fn an_empty_call_commits_nothing() {
    let (store, _dir) = temp_store();
    let results = store
        .write_sequences(Vec::new())
        .await
        .expect("nothing to do");
    assert!(results.is_empty());
    let empty = store
        .write_sequences(vec![WriteSequence::new()])
        .await
        .expect("an empty sequence");
    assert!(empty[0].is_ok());
}
