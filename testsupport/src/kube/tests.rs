//! Storage rules tested without HTTP: history bounds, deletion and garbage collection edge
//! cases.

use serde_json::{Value, json};

use super::delete::{DeleteOptions, Deleted, Propagation};
use super::registry::{ResourceType, by_name};
use super::storage::Storage;

fn rt(name: &str) -> &'static ResourceType {
    by_name(name).expect("a served resource")
}

fn named(name: &str) -> Value {
    json!({"metadata": {"name": name}})
}

fn owned_by(name: &str, owners: &[&Value]) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}))
        .collect();
    json!({"metadata": {"name": name, "ownerReferences": refs}})
}

#[test]
fn history_keeps_exactly_the_limit() {
    let storage = Storage::new(3);
    let cms = rt("configmaps");
    let start = storage.resource_version();
    for i in 0..5 {
        storage
            .create(cms, "ns", named(&format!("c{i}")))
            .expect("created");
    }
    // Five events at start+1..=start+5; the last three are kept.
    let (events, now) = storage.events_after(cms, start + 2, 10).expect("kept");
    assert_eq!(
        events.iter().map(|e| e.rv).collect::<Vec<_>>(),
        [start + 3, start + 4, start + 5]
    );
    assert_eq!(now, start + 5);
    let expired = storage
        .events_after(cms, start + 1, 10)
        .expect_err("dropped");
    assert_eq!(expired.code, 410);
    // Another resource's history is its own.
    assert!(storage.events_after(rt("secrets"), start, 10).is_ok());
}

#[test]
fn dependents_with_another_live_owner_survive() {
    let storage = Storage::new(100);
    let cms = rt("configmaps");
    let a = storage.create(cms, "ns", named("a")).expect("a");
    let b = storage.create(cms, "ns", named("b")).expect("b");
    storage
        .create(cms, "ns", owned_by("shared", &[&a, &b]))
        .expect("shared");
    storage
        .create(cms, "ns", owned_by("only-a", &[&a]))
        .expect("only-a");
    storage
        .delete(cms, "ns", "a", &DeleteOptions::default())
        .expect("deleted");
    assert!(
        storage.get(cms, "ns", "shared").is_some(),
        "b still owns it"
    );
    assert!(storage.get(cms, "ns", "only-a").is_none());
    storage
        .delete(cms, "ns", "b", &DeleteOptions::default())
        .expect("deleted");
    assert!(
        storage.get(cms, "ns", "shared").is_none(),
        "last owner gone"
    );
}

#[test]
fn foreground_waits_for_dependents_held_by_finalizers() {
    let storage = Storage::new(100);
    let cms = rt("configmaps");
    let owner = storage.create(cms, "ns", named("owner")).expect("owner");
    let mut child = owned_by("child", &[&owner]);
    child["metadata"]["finalizers"] = json!(["example.com/hold"]);
    storage.create(cms, "ns", child).expect("child");
    let options = DeleteOptions {
        propagation: Some(Propagation::Foreground),
        ..DeleteOptions::default()
    };
    let deleted = storage
        .delete(cms, "ns", "owner", &options)
        .expect("marked");
    assert!(matches!(deleted, Deleted::Pending(_)));
    let marked = storage.get(cms, "ns", "owner").expect("still there");
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    let child = storage.get(cms, "ns", "child").expect("held");
    assert!(child["metadata"]["deletionTimestamp"].is_string());

    // Releasing the child's finalizer removes it, and then the owner.
    let patch = serde_json::to_vec(&json!({"metadata": {"finalizers": null}})).expect("json");
    storage
        .patch(
            cms,
            "ns",
            "child",
            super::patch::PatchKind::Merge,
            &patch,
            super::write::Part::Main,
        )
        .expect("patched");
    assert!(storage.get(cms, "ns", "child").is_none());
    assert!(storage.get(cms, "ns", "owner").is_none());
}

#[test]
fn bound_pods_wait_for_the_kubelet_unless_forced() {
    let storage = Storage::new(100);
    let pods = rt("pods");
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 5}});
    storage.create(pods, "ns", pod).expect("created");
    let marked = storage
        .delete(pods, "ns", "p", &DeleteOptions::default())
        .expect("marked");
    let Deleted::Pending(marked) = marked else {
        panic!("a bound pod is deleted gracefully");
    };
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 5);
    let again = storage
        .delete(pods, "ns", "p", &DeleteOptions::default())
        .expect("again");
    assert!(matches!(again, Deleted::Pending(_)), "still terminating");
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..DeleteOptions::default()
    };
    let gone = storage.delete(pods, "ns", "p", &force).expect("forced");
    assert!(matches!(gone, Deleted::Gone(_)));
}

#[test]
fn no_op_writes_keep_the_version() {
    let storage = Storage::new(100);
    let cms = rt("configmaps");
    let created = storage
        .create(
            cms,
            "ns",
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
        )
        .expect("created");
    let rv = storage.resource_version();
    let same = storage
        .update(cms, "ns", "c", created.clone(), super::write::Part::Main)
        .expect("updated");
    assert_eq!(same, created);
    assert_eq!(storage.resource_version(), rv);
}
