//! create, get, list, patch and patch_status.

use kube::ResourceExt;
use kube::core::{Expression, Selector};
use rouse_shared::api::{
    LocalObjectReference, OperatingMode, Sandbox, SandboxClaim, SandboxClaimSpec, SandboxStatus,
};
use rouse_shared::store::{ListParams, ObjectKey, Store, StoreError};
use serde_json::json;

use super::{SandboxFixture, key, merge, rv, sandbox, temp_store};

#[tokio::test]
async fn create_fills_in_server_fields() {
    let (store, _dir) = temp_store();
    let mut given = sandbox("alice").labeled("app", "web");
    given.status = Some(SandboxStatus {
        node_name: Some("forged".into()),
        ..Default::default()
    });
    let created = store.create(&given).await.expect("create");
    let meta = &created.metadata;
    let uid = meta.uid.as_deref().expect("uid");
    assert_eq!(uid.len(), 36, "{uid}");
    assert_eq!(&uid[14..15], "4", "version 4 uid: {uid}");
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    assert_eq!(rv(&created), 1);
    assert_eq!(created.status, None, "status is ignored on create");
    assert_eq!(created.labels().get("app").map(String::as_str), Some("web"));
    assert_eq!(created.spec, given.spec);

    let got: Sandbox = store.get(&key("alice")).await.expect("get");
    assert_eq!(got, created);

    let mut other = sandbox("bob");
    other.metadata.namespace = None;
    let other = store.create(&other).await.expect("create in default");
    assert_eq!(other.namespace().as_deref(), Some("default"));
    assert_eq!(rv(&other), 2);
    assert_ne!(other.uid(), created.uid());
}

#[tokio::test]
async fn create_rejects_bad_objects() {
    let (store, _dir) = temp_store();
    store.create(&sandbox("taken")).await.expect("create");
    struct Case {
        name: &'static str,
        given: Sandbox,
        want: &'static str,
        message: &'static str,
    }
    let mut nameless = sandbox("x");
    nameless.metadata.name = None;
    let mut versioned = sandbox("versioned");
    versioned.metadata.resource_version = Some("5".into());
    let cases = [
        Case {
            name: "existing name",
            given: sandbox("taken"),
            want: "already_exists",
            message: "Sandbox team-a/taken already exists",
        },
        Case {
            name: "no name",
            given: nameless,
            want: "invalid",
            message: "name or generateName is required",
        },
        Case {
            name: "upper case name",
            given: sandbox("Alice"),
            want: "invalid",
            message: "metadata.name: must consist of lower case",
        },
        Case {
            name: "bad namespace",
            given: sandbox("ok").in_namespace("team_a"),
            want: "invalid",
            message: "metadata.namespace:",
        },
        Case {
            name: "resourceVersion on create",
            given: versioned,
            want: "invalid",
            message: "metadata.resourceVersion: must not be set on create",
        },
    ];
    for case in cases {
        let err = store.create(&case.given).await.expect_err(case.name);
        assert_eq!(err.metric_label(), case.want, "{}: {err}", case.name);
        assert!(
            err.to_string().contains(case.message),
            "{}: {err}",
            case.name
        );
    }
}

#[tokio::test]
async fn generate_name_picks_unique_names() {
    let (store, _dir) = temp_store();
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let mut given = sandbox("x");
        given.metadata.name = None;
        given.metadata.generate_name = Some("job-".into());
        let created = store.create(&given).await.expect("create");
        let name = created.name_any();
        let suffix = name.strip_prefix("job-").expect("keeps the prefix");
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{name}"
        );
        assert!(names.insert(name.clone()), "duplicate {name}");
    }
    let mut long = sandbox("x");
    long.metadata.name = None;
    long.metadata.generate_name = Some("a".repeat(100));
    let created = store.create(&long).await.expect("long prefix is cut");
    assert_eq!(created.name_any().len(), 63);
}

#[tokio::test]
async fn get_missing_is_not_found() {
    let (store, _dir) = temp_store();
    let err = Store::<Sandbox>::get(&store, &key("ghost"))
        .await
        .expect_err("missing");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.to_string(), "Sandbox team-a/ghost not found");
}

#[tokio::test]
async fn kinds_are_separate() {
    let (store, _dir) = temp_store();
    store.create(&sandbox("same")).await.expect("sandbox");
    let mut claim = SandboxClaim::new(
        "same",
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference {
                name: "pool".into(),
            },
            ..Default::default()
        },
    );
    claim.metadata.namespace = Some("team-a".into());
    let claim = store.create(&claim).await.expect("claim of the same name");
    assert_eq!(claim.spec.warm_pool_ref.name, "pool");
    let sandboxes = Store::<Sandbox>::list(&store, &ListParams::default())
        .await
        .expect("list");
    assert_eq!(sandboxes.items.len(), 1);
    assert_eq!(sandboxes.resource_version, "2");
}

#[tokio::test]
async fn patch_follows_merge_and_generation_rules() {
    let (store, _dir) = temp_store();
    let created = store
        .create(&sandbox("alice").labeled("a", "1").labeled("b", "2"))
        .await
        .expect("create");
    struct Case {
        name: &'static str,
        patch: serde_json::Value,
        generation: i64,
        check: fn(&Sandbox) -> bool,
    }
    let cases = [
        Case {
            name: "label added, generation kept",
            patch: json!({"metadata": {"labels": {"c": "3"}}}),
            generation: 1,
            check: |s| s.labels().len() == 3,
        },
        Case {
            name: "null deletes a label",
            patch: json!({"metadata": {"labels": {"a": null}}}),
            generation: 1,
            check: |s| !s.labels().contains_key("a") && s.labels().contains_key("b"),
        },
        Case {
            name: "spec change bumps generation",
            patch: json!({"spec": {"operatingMode": "Suspended"}}),
            generation: 2,
            check: |s| s.spec.operating_mode == Some(OperatingMode::Suspended),
        },
        Case {
            name: "status in a patch is ignored",
            patch: json!({"status": {"nodeName": "n1"}, "metadata": {"annotations": {"x": "y"}}}),
            generation: 2,
            check: |s| s.status.is_none() && s.annotations().contains_key("x"),
        },
        Case {
            name: "null deletes a spec field",
            patch: json!({"spec": {"operatingMode": null}}),
            generation: 3,
            check: |s| s.spec.operating_mode.is_none(),
        },
    ];
    let mut last_rv = rv(&created);
    for case in cases {
        let got: Sandbox = store
            .patch(&key("alice"), &merge(case.patch))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(
            got.metadata.generation,
            Some(case.generation),
            "{}",
            case.name
        );
        assert!((case.check)(&got), "{}: {got:?}", case.name);
        assert!(rv(&got) > last_rv, "{}: version moves", case.name);
        last_rv = rv(&got);
        assert_eq!(got.uid(), created.uid(), "{}", case.name);
    }
    let same: Sandbox = store
        .patch(
            &key("alice"),
            &merge(json!({"metadata": {"labels": {"b": "2"}}})),
        )
        .await
        .expect("no-op patch");
    assert_eq!(rv(&same), last_rv, "a no-op patch writes nothing");
    let owned: Sandbox = store
        .patch(
            &key("alice"),
            &merge(json!({"metadata": {
                "generation": 99,
                "creationTimestamp": "2001-01-01T00:00:00Z",
                "resourceVersion": null,
            }})),
        )
        .await
        .expect("server-owned fields");
    assert_eq!(
        owned, same,
        "server-owned fields are not the client's to change"
    );
}

#[tokio::test]
async fn patch_preconditions_and_invalid_patches() {
    let (store, _dir) = temp_store();
    let created = store.create(&sandbox("alice")).await.expect("create");
    let current = created.resource_version().expect("rv");
    let fresh = merge(json!({"metadata": {"labels": {"x": "1"}}})).with_resource_version(&current);
    let patched: Sandbox = store.patch(&key("alice"), &fresh).await.expect("fresh rv");
    let stale = merge(json!({"metadata": {"labels": {"x": "2"}}})).with_resource_version(&current);
    let err = Store::<Sandbox>::patch(&store, &key("alice"), &stale)
        .await
        .expect_err("stale rv");
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert!(err.is_retryable());

    struct Case {
        name: &'static str,
        patch: serde_json::Value,
        message: &'static str,
    }
    let cases = [
        Case {
            name: "rename",
            patch: json!({"metadata": {"name": "bob"}}),
            message: "metadata.name: may not be changed",
        },
        Case {
            name: "move",
            patch: json!({"metadata": {"namespace": "team-b"}}),
            message: "metadata.namespace: may not be changed",
        },
        Case {
            name: "new uid",
            patch: json!({"metadata": {"uid": "x"}}),
            message: "metadata.uid: may not be changed",
        },
        Case {
            name: "wrong type",
            patch: json!({"spec": {"podTemplate": {"spec": {"containers": "x"}}}}),
            message: "spec.podTemplate.spec.containers",
        },
        Case {
            name: "unknown enum value",
            patch: json!({"spec": {"operatingMode": "Sleeping"}}),
            message: "spec.operatingMode: unknown variant",
        },
        Case {
            name: "spec removed",
            patch: json!({"spec": null}),
            message: "missing field `spec`",
        },
    ];
    for case in cases {
        let err = Store::<Sandbox>::patch(&store, &key("alice"), &merge(case.patch))
            .await
            .expect_err(case.name);
        assert!(
            matches!(err, StoreError::Invalid { .. }),
            "{}: {err}",
            case.name
        );
        assert!(
            err.to_string().contains(case.message),
            "{}: {err}",
            case.name
        );
    }
    let after: Sandbox = store.get(&key("alice")).await.expect("get");
    assert_eq!(after, patched, "rejected patches change nothing");

    let err = Store::<Sandbox>::patch(&store, &key("ghost"), &merge(json!({})))
        .await
        .expect_err("missing");
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn patch_status_touches_status_only() {
    let (store, _dir) = temp_store();
    let created = store.create(&sandbox("alice")).await.expect("create");
    let patch = merge(json!({
        "status": {"nodeName": "n1", "podIPs": ["10.0.0.1"]},
        "spec": {"operatingMode": "Suspended"},
        "metadata": {"labels": {"sneaky": "yes"}},
    }));
    let got: Sandbox = store
        .patch_status(&key("alice"), &patch)
        .await
        .expect("patch status");
    let status = got.status.clone().expect("status set");
    assert_eq!(status.node_name.as_deref(), Some("n1"));
    assert_eq!(status.pod_ips, vec!["10.0.0.1".to_owned()]);
    assert_eq!(got.spec, created.spec, "spec unchanged");
    assert!(got.labels().is_empty(), "metadata unchanged");
    assert_eq!(
        got.metadata.generation,
        Some(1),
        "status does not bump generation"
    );
    assert!(rv(&got) > rv(&created));

    let got: Sandbox = store
        .patch_status(&key("alice"), &merge(json!({"status": {"nodeName": null}})))
        .await
        .expect("null deletes");
    let status = got.status.expect("status kept");
    assert_eq!(status.node_name, None);
    assert_eq!(status.pod_ips.len(), 1);

    let stale = merge(json!({"status": {"nodeName": "n2"}})).with_resource_version("1");
    let err = Store::<Sandbox>::patch_status(&store, &key("alice"), &stale)
        .await
        .expect_err("stale");
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
}

#[tokio::test]
async fn list_filters_by_namespace_and_selector() {
    let (store, _dir) = temp_store();
    let objects = [
        sandbox("a").labeled("tier", "web"),
        sandbox("b").labeled("tier", "db"),
        sandbox("c"),
        sandbox("a").in_namespace("team-b").labeled("tier", "web"),
        // "team-a.x" sorts between "team-a" names and "team-b" byte-wise; the list must not
        // mix namespaces.
        sandbox("z").in_namespace("team-a-x").labeled("tier", "web"),
    ];
    for object in &objects {
        store.create(object).await.expect("create");
    }
    let names = |list: &rouse_shared::store::ObjectList<Sandbox>| -> Vec<String> {
        list.items
            .iter()
            .map(|s| ObjectKey::of(s).to_string())
            .collect()
    };
    let web: Selector = Selector::from_iter([Expression::Equal("tier".into(), "web".into())]);
    let has_tier: Selector = Selector::from_iter([Expression::Exists("tier".into())]);
    struct Case {
        name: &'static str,
        params: ListParams,
        want: Vec<&'static str>,
    }
    let cases = [
        Case {
            name: "one namespace",
            params: ListParams::namespace("team-a"),
            want: vec!["team-a/a", "team-a/b", "team-a/c"],
        },
        Case {
            name: "all namespaces, ordered",
            params: ListParams::default(),
            want: vec!["team-a/a", "team-a/b", "team-a/c", "team-a-x/z", "team-b/a"],
        },
        Case {
            name: "selector across namespaces",
            params: ListParams {
                namespace: None,
                selector: web.clone(),
            },
            want: vec!["team-a/a", "team-a-x/z", "team-b/a"],
        },
        Case {
            name: "selector in a namespace",
            params: ListParams {
                namespace: Some("team-a".into()),
                selector: has_tier,
            },
            want: vec!["team-a/a", "team-a/b"],
        },
        Case {
            name: "empty namespace",
            params: ListParams::namespace("nobody"),
            want: vec![],
        },
    ];
    for case in cases {
        let list = Store::<Sandbox>::list(&store, &case.params)
            .await
            .expect(case.name);
        assert_eq!(names(&list), case.want, "{}", case.name);
        assert_eq!(list.resource_version, "5", "{}", case.name);
    }
}
