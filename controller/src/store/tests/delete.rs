//! delete: preconditions, finalizers and owner-reference propagation.

use kube::ResourceExt;
use rouse_shared::api::{LocalObjectReference, Sandbox, SandboxClaim, SandboxClaimSpec};
use rouse_shared::store::{DeleteParams, Deletion, ObjectKey, Propagation, Store, StoreError};
use serde_json::json;

use super::{SandboxFixture, key, merge, rv, sandbox, temp_store};

fn claim(name: &str) -> SandboxClaim {
    let mut claim = SandboxClaim::new(
        name,
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference {
                name: "pool".into(),
            },
            ..Default::default()
        },
    );
    claim.metadata.namespace = Some("team-a".into());
    claim
}

async fn exists(store: &impl Store<Sandbox>, name: &str) -> Option<Sandbox> {
    match store.get(&key(name)).await {
        Ok(s) => Some(s),
        Err(e) if e.is_not_found() => None,
        Err(e) => panic!("get {name}: {e}"),
    }
}

#[tokio::test]
async fn delete_removes_the_object() {
    let (store, _dir) = temp_store();
    let created = store.create(&sandbox("alice")).await.expect("create");
    let Deletion::Deleted(gone) =
        Store::<Sandbox>::delete(&store, &key("alice"), &DeleteParams::default())
            .await
            .expect("delete")
    else {
        panic!("no finalizers: deleted at once");
    };
    assert_eq!(gone.uid(), created.uid());
    assert!(rv(&gone) > rv(&created), "the deletion has its own version");
    assert!(exists(&store, "alice").await.is_none());
    let err = Store::<Sandbox>::delete(&store, &key("alice"), &DeleteParams::default())
        .await
        .expect_err("gone");
    assert!(err.is_not_found(), "{err}");
    let again = store.create(&sandbox("alice")).await.expect("re-create");
    assert_ne!(again.uid(), created.uid(), "a namesake gets a new uid");
}

#[tokio::test]
async fn delete_preconditions() {
    let (store, _dir) = temp_store();
    let created = store.create(&sandbox("alice")).await.expect("create");
    let uid = created.uid();
    let version = created.resource_version();
    struct Case {
        name: &'static str,
        params: DeleteParams,
        message: &'static str,
    }
    let cases = [
        Case {
            name: "other uid",
            params: DeleteParams {
                uid: Some("not-it".into()),
                ..Default::default()
            },
            message: "uid not-it is not the stored",
        },
        Case {
            name: "old version",
            params: DeleteParams {
                resource_version: Some("0".into()),
                uid: uid.clone(),
                ..Default::default()
            },
            message: "resourceVersion 0 is not the stored 1",
        },
    ];
    for case in cases {
        let err = Store::<Sandbox>::delete(&store, &key("alice"), &case.params)
            .await
            .expect_err(case.name);
        assert!(
            matches!(err, StoreError::Conflict { .. }),
            "{}: {err}",
            case.name
        );
        assert!(
            err.to_string().contains(case.message),
            "{}: {err}",
            case.name
        );
    }
    let params = DeleteParams {
        uid,
        resource_version: version,
        propagation: None,
    };
    let done = Store::<Sandbox>::delete(&store, &key("alice"), &params)
        .await
        .expect("matching preconditions");
    assert!(matches!(done, Deletion::Deleted(_)));
}

#[tokio::test]
async fn finalizers_hold_the_object_until_cleared() {
    let (store, _dir) = temp_store();
    store
        .create(&sandbox("alice").finalized("rouse.dev/volumes"))
        .await
        .expect("create");
    let Deletion::Pending(marked) =
        Store::<Sandbox>::delete(&store, &key("alice"), &DeleteParams::default())
            .await
            .expect("delete")
    else {
        panic!("finalizers hold it");
    };
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.generation,
        Some(2),
        "marking bumps generation"
    );
    let Deletion::Pending(again) =
        Store::<Sandbox>::delete(&store, &key("alice"), &DeleteParams::default())
            .await
            .expect("delete again")
    else {
        panic!("still held");
    };
    assert_eq!(again, marked, "a second delete changes nothing");

    let err = Store::<Sandbox>::patch(
        &store,
        &key("alice"),
        &merge(json!({"metadata": {"finalizers": ["rouse.dev/volumes", "more"]}})),
    )
    .await
    .expect_err("no new finalizers while deleting");
    assert!(err.to_string().contains("no new finalizers"), "{err}");
    let labeled: Sandbox = store
        .patch(
            &key("alice"),
            &merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("other changes are fine");
    assert_eq!(
        labeled.metadata.deletion_timestamp,
        marked.metadata.deletion_timestamp
    );

    let last: Sandbox = store
        .patch(
            &key("alice"),
            &merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("clear finalizers");
    assert!(last.finalizers().is_empty());
    assert!(
        exists(&store, "alice").await.is_none(),
        "gone once the finalizers clear"
    );
}

/// Owner claim `owner`; `child` owned by it, `grandchild` owned by `child`, `shared` owned by
/// it and by `other`, and `unrelated`.
async fn family(store: &super::EmbeddedStore) -> SandboxClaim {
    let owner = store.create(&claim("owner")).await.expect("owner");
    let other = store.create(&sandbox("other")).await.expect("other");
    let child = store
        .create(&sandbox("child").owned_by(&owner))
        .await
        .expect("child");
    store
        .create(&sandbox("grandchild").owned_by(&child))
        .await
        .expect("grandchild");
    store
        .create(&sandbox("shared").owned_by(&owner).owned_by(&other))
        .await
        .expect("shared");
    store
        .create(&sandbox("unrelated"))
        .await
        .expect("unrelated");
    owner
}

#[tokio::test]
async fn propagation_of_owner_deletion() {
    struct Case {
        name: &'static str,
        propagation: Option<Propagation>,
        kept: &'static [&'static str],
        gone: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "default is background",
            propagation: None,
            kept: &["other", "shared", "unrelated"],
            gone: &["child", "grandchild"],
        },
        Case {
            name: "foreground",
            propagation: Some(Propagation::Foreground),
            kept: &["other", "shared", "unrelated"],
            gone: &["child", "grandchild"],
        },
        Case {
            name: "orphan",
            propagation: Some(Propagation::Orphan),
            kept: &["other", "shared", "unrelated", "child", "grandchild"],
            gone: &[],
        },
    ];
    for case in cases {
        let (store, _dir) = temp_store();
        let owner = family(&store).await;
        let params = DeleteParams {
            propagation: case.propagation,
            ..Default::default()
        };
        let done = Store::<SandboxClaim>::delete(&store, &ObjectKey::of(&owner), &params)
            .await
            .expect(case.name);
        assert!(matches!(done, Deletion::Deleted(_)), "{}", case.name);
        for name in case.gone {
            assert!(
                exists(&store, name).await.is_none(),
                "{}: {name} deleted",
                case.name
            );
        }
        for name in case.kept {
            let kept = exists(&store, name).await;
            let kept = kept.unwrap_or_else(|| panic!("{}: {name} kept", case.name));
            let owners: Vec<String> = kept
                .owner_references()
                .iter()
                .map(|r| r.uid.clone())
                .collect();
            assert!(
                !owners.contains(&owner.uid().expect("uid")),
                "{}: {name} lost its reference to the deleted owner: {owners:?}",
                case.name
            );
        }
        let shared = exists(&store, "shared").await.expect("shared kept");
        assert_eq!(
            shared.owner_references().len(),
            1,
            "{}: the other owner stays",
            case.name
        );
        if case.propagation == Some(Propagation::Orphan) {
            let grandchild = exists(&store, "grandchild").await.expect("kept");
            assert_eq!(
                grandchild.owner_references().len(),
                1,
                "only direct dependents are orphaned"
            );
        }
    }
}

#[tokio::test]
async fn finalized_owner_cascades_when_it_finally_goes() {
    let (store, _dir) = temp_store();
    let owner = store
        .create(&sandbox("owner").finalized("rouse.dev/stop"))
        .await
        .expect("owner");
    store
        .create(&sandbox("child").owned_by(&owner))
        .await
        .expect("child");
    let pending = Store::<Sandbox>::delete(&store, &key("owner"), &DeleteParams::default())
        .await
        .expect("delete");
    assert!(matches!(pending, Deletion::Pending(_)));
    assert!(
        exists(&store, "child").await.is_some(),
        "background: dependents wait for the owner"
    );
    let _: Sandbox = store
        .patch(
            &key("owner"),
            &merge(json!({"metadata": {"finalizers": []}})),
        )
        .await
        .expect("clear finalizers");
    assert!(exists(&store, "owner").await.is_none());
    assert!(
        exists(&store, "child").await.is_none(),
        "dependents follow the owner"
    );
}
