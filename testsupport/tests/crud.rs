//! Create, read, replace, patch and delete through the real `kube::Client`.

mod common;

use common::{api_error, sandbox, sandboxes};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;

fn config_map(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).expect("a ConfigMap")
}

#[tokio::test]
async fn create_get_replace_delete() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<ConfigMap> = Api::namespaced(server.client()?, "team-a");

    let created = api
        .create(
            &PostParams::default(),
            &config_map("one", json!({"a": "1"})),
        )
        .await?;
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("team-a"));
    assert!(meta.uid.as_ref().is_some_and(|u| u.len() == 36), "{meta:?}");
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv1 = meta.resource_version.clone().expect("a resourceVersion");

    let got = api.get("one").await?;
    assert_eq!(got, created);

    let mut changed = got.clone();
    changed.data = Some([("a".to_owned(), "2".to_owned())].into());
    let replaced = api.replace("one", &PostParams::default(), &changed).await?;
    assert_ne!(
        replaced.metadata.resource_version.as_deref(),
        Some(rv1.as_str())
    );
    assert_eq!(replaced.metadata.generation, Some(2), "data changed");
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // The stale copy conflicts.
    let stale = api.replace("one", &PostParams::default(), &changed).await;
    let status = api_error(stale.expect_err("stale resourceVersion"));
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    let deleted = api.delete("one", &DeleteParams::default()).await?;
    assert!(deleted.is_left(), "the deleted object is returned");
    let status = api_error(api.get("one").await.expect_err("gone"));
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, "configmaps \"one\" not found");
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("one", "configmaps")
    );
    Ok(())
}

#[tokio::test]
async fn already_exists_and_generate_name() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    api.create(&PostParams::default(), &sandbox("alice", json!({})))
        .await?;
    let again = api
        .create(&PostParams::default(), &sandbox("alice", json!({})))
        .await;
    let status = api_error(again.expect_err("duplicate"));
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.details.expect("details").group, "agents.x-k8s.io");

    let mut generated = sandbox("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("pool-".to_owned());
    let first = api.create(&PostParams::default(), &generated).await?;
    let second = api.create(&PostParams::default(), &generated).await?;
    let (a, b) = (
        first.metadata.name.expect("name"),
        second.metadata.name.expect("name"),
    );
    assert!(
        a.starts_with("pool-") && a.len() == "pool-".len() + 5,
        "{a}"
    );
    assert_ne!(a, b);

    let mut nameless = sandbox("", json!({}));
    nameless.metadata.name = None;
    let status = api_error(
        api.create(&PostParams::default(), &nameless)
            .await
            .expect_err("no name"),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    Ok(())
}

#[tokio::test]
async fn list_with_label_and_field_selectors() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let client = server.client()?;
    for (ns, name, tier) in [
        ("a", "web", "front"),
        ("a", "db", "back"),
        ("b", "cache", "back"),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &sandboxes());
        api.create(
            &PostParams::default(),
            &sandbox(name, json!({"tier": tier, "app": name})),
        )
        .await?;
    }
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &sandboxes());
    let in_a: Api<DynamicObject> = Api::namespaced_with(client, "a", &sandboxes());
    let names = |list: kube::core::ObjectList<DynamicObject>| {
        list.items
            .into_iter()
            .map(|o| o.metadata.name.expect("name"))
            .collect::<Vec<_>>()
    };
    let cases = [
        (&all, ListParams::default(), vec!["db", "web", "cache"]),
        (&in_a, ListParams::default(), vec!["db", "web"]),
        (
            &all,
            ListParams::default().labels("tier=back"),
            vec!["db", "cache"],
        ),
        (
            &all,
            ListParams::default().labels("app in (web,cache)"),
            vec!["web", "cache"],
        ),
        (
            &all,
            ListParams::default().labels("app notin (web,cache)"),
            vec!["db"],
        ),
        (&all, ListParams::default().labels("!tier"), vec![]),
        (
            &all,
            ListParams::default().labels("tier"),
            vec!["db", "web", "cache"],
        ),
        (
            &all,
            ListParams::default().fields("metadata.name=cache"),
            vec!["cache"],
        ),
        (
            &all,
            ListParams::default().fields("metadata.namespace=a"),
            vec!["db", "web"],
        ),
        (
            &all,
            ListParams::default().limit(1),
            vec!["db", "web", "cache"],
        ),
    ];
    for (api, params, want) in cases {
        let got = names(api.list(&params).await?);
        assert_eq!(got, want, "{params:?}");
    }
    let list = all.list(&ListParams::default()).await?;
    let rv: u64 = list
        .metadata
        .resource_version
        .expect("list version")
        .parse()?;
    assert_eq!(rv, server.resource_version());
    Ok(())
}

#[tokio::test]
async fn merge_json_and_apply_patches() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    let created = api
        .create(&PostParams::default(), &sandbox("bob", json!({"a": "1"})))
        .await?;
    let rv = created.metadata.resource_version.clone().expect("version");

    let merge = json!({"metadata": {"labels": {"a": null, "b": "2"}}, "spec": {"operatingMode": "Suspended"}});
    let patched = api
        .patch("bob", &PatchParams::default(), &Patch::Merge(&merge))
        .await?;
    assert_eq!(
        patched.metadata.labels,
        Some([("b".to_owned(), "2".to_owned())].into())
    );
    assert_eq!(patched.data["spec"]["operatingMode"], "Suspended");
    assert_eq!(patched.metadata.generation, Some(2));

    // A merge patch carrying the old resourceVersion is a precondition.
    let conditional =
        json!({"metadata": {"resourceVersion": rv}, "spec": {"operatingMode": "Running"}});
    let status = api_error(
        api.patch("bob", &PatchParams::default(), &Patch::Merge(&conditional))
            .await
            .expect_err("stale"),
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    // A patch that changes nothing keeps the version.
    let same = api
        .patch("bob", &PatchParams::default(), &Patch::Merge(&merge))
        .await?;
    assert_eq!(
        same.metadata.resource_version,
        patched.metadata.resource_version
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/operatingMode", "value": "Suspended"},
        {"op": "replace", "path": "/spec/operatingMode", "value": "Running"},
    ]))?;
    let jsonpatched = api
        .patch(
            "bob",
            &PatchParams::default(),
            &Patch::Json::<()>(ops.clone()),
        )
        .await?;
    assert_eq!(jsonpatched.data["spec"]["operatingMode"], "Running");
    let status = api_error(
        api.patch("bob", &PatchParams::default(), &Patch::Json::<()>(ops))
            .await
            .expect_err("test op fails now"),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));

    let strategic = api
        .patch("bob", &PatchParams::default(), &Patch::Strategic(&merge))
        .await
        .expect_err("no strategic merge for custom resources");
    assert_eq!(api_error(strategic).code, 415);

    let applied = sandbox("carol", json!({"x": "y"}));
    let params = PatchParams::apply("tests");
    let created = api.patch("carol", &params, &Patch::Apply(&applied)).await?;
    assert_eq!(
        created.metadata.labels,
        Some([("x".to_owned(), "y".to_owned())].into())
    );
    let missing = api
        .patch("carol", &PatchParams::default(), &Patch::Apply(&applied))
        .await;
    assert_eq!(
        api_error(missing.expect_err("fieldManager required")).code,
        400
    );
    Ok(())
}

#[tokio::test]
async fn unknown_resources_are_404_status() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let unknown = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &unknown);
    let status = api_error(api.list(&ListParams::default()).await.expect_err("unknown"));
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(server.requests().count("unknown", "unknown"), 1);
    Ok(())
}

#[tokio::test]
async fn request_counters_and_direct_access() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    server.create(
        "configmaps",
        "default",
        json!({"metadata": {"name": "seeded"}}),
    )?;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    api.get("seeded").await?;
    api.get("seeded").await?;
    api.list(&ListParams::default()).await?;
    let requests = server.requests();
    assert_eq!(requests.count("get", "configmaps"), 2);
    assert_eq!(requests.count("list", "configmaps"), 1);
    assert_eq!(
        requests.verb("create"),
        0,
        "direct creates are not requests"
    );
    assert_eq!(server.list("configmaps").len(), 1);
    assert!(server.get("configmaps", "default", "seeded").is_some());
    assert!(server.get("configmaps", "other", "seeded").is_none());
    server.reset_requests();
    assert_eq!(server.requests().verb("get"), 0);
    Ok(())
}

#[tokio::test]
async fn direct_patch_and_delete_follow_the_same_rules() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    server.create(
        "sandboxes",
        "default",
        serde_json::to_value(sandbox("s", json!({})))?,
    )?;
    let patched = server.merge_patch(
        "sandboxes",
        "default",
        "s",
        &json!({"status": {"x": 1}, "spec": {"a": 1}}),
        false,
    )?;
    assert!(patched.get("status").is_none(), "main patch ignores status");
    assert_eq!(patched["metadata"]["generation"], 2);
    let patched = server.merge_patch(
        "sandboxes",
        "default",
        "s",
        &json!({"status": {"x": 1}}),
        true,
    )?;
    assert_eq!(patched["status"]["x"], 1);
    let missing = server.merge_patch("sandboxes", "default", "nope", &json!({}), false);
    assert_eq!(missing.expect_err("absent").code, 404);
    server.delete("sandboxes", "default", "s")?;
    assert!(server.get("sandboxes", "default", "s").is_none());
    Ok(())
}
