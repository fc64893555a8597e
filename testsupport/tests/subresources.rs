//! Status and scale subresources, finalizers and cascading deletion through the real
//! `kube::Client`.

mod common;

use common::{api_error, sandbox, sandboxes, warm_pools};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;

#[tokio::test]
async fn status_subresource_changes_only_status() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    let mut with_status = sandbox("s", json!({}));
    with_status.data["status"] = json!({"phase": "ignored"});
    let created = api.create(&PostParams::default(), &with_status).await?;
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    let patch = json!({"status": {"lastActivityTime": "2026-01-01T00:00:00Z"}, "spec": {"operatingMode": "Suspended"}});
    let patched = api
        .patch_status("s", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(
        patched.data["status"]["lastActivityTime"],
        "2026-01-01T00:00:00Z"
    );
    assert!(
        patched.data["spec"].get("operatingMode").is_none(),
        "spec untouched by /status"
    );
    assert_eq!(patched.metadata.generation, Some(1));

    let main =
        json!({"status": {"lastActivityTime": null}, "spec": {"operatingMode": "Suspended"}});
    let patched = api
        .patch("s", &PatchParams::default(), &Patch::Merge(&main))
        .await?;
    assert_eq!(
        patched.data["status"]["lastActivityTime"], "2026-01-01T00:00:00Z",
        "status untouched"
    );
    assert_eq!(patched.data["spec"]["operatingMode"], "Suspended");
    assert_eq!(patched.metadata.generation, Some(2));

    let got = api.get_status("s").await?;
    let mut replaced = got.clone();
    replaced.data["status"] = json!({"replicas": 1});
    let replaced = api
        .replace_status("s", &PostParams::default(), &replaced)
        .await?;
    assert_eq!(replaced.data["status"], json!({"replicas": 1}));
    let stale = api.replace_status("s", &PostParams::default(), &got).await;
    assert_eq!(api_error(stale.expect_err("stale")).code, 409);

    let cms: Api<ConfigMap> = Api::default_namespaced(server.client()?);
    server.create("configmaps", "default", json!({"metadata": {"name": "c"}}))?;
    assert_eq!(
        api_error(cms.get_status("c").await.expect_err("no status")).code,
        404
    );
    Ok(())
}

#[tokio::test]
async fn scale_subresource_of_warm_pools() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &warm_pools());
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
        "metadata": {"name": "pool"}, "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "t"}},
    }))?;
    api.create(&PostParams::default(), &pool).await?;
    let status = json!({"status": {"replicas": 1, "selector": "pool=pool"}});
    api.patch_status("pool", &PatchParams::default(), &Patch::Merge(&status))
        .await?;

    let scale = api.get_scale("pool").await?;
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let observed = scale.status.as_ref().expect("status");
    assert_eq!(
        (observed.replicas, observed.selector.as_deref()),
        (1, Some("pool=pool"))
    );

    let patch = json!({"spec": {"replicas": 5}});
    let scaled = api
        .patch_scale("pool", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(api.get("pool").await?.data["spec"]["replicas"], 5);

    let sandboxes_api: Api<DynamicObject> =
        Api::namespaced_with(server.client()?, "default", &sandboxes());
    sandboxes_api
        .create(&PostParams::default(), &sandbox("s", json!({})))
        .await?;
    assert_eq!(
        api_error(sandboxes_api.get_scale("s").await.expect_err("no scale")).code,
        404
    );
    Ok(())
}

fn owned_config_map(name: &str, owner: &DynamicObject) -> serde_json::Value {
    json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "name": owner.metadata.name, "uid": owner.metadata.uid, "controller": true,
    }]}})
}

#[tokio::test]
async fn cascading_delete_by_policy() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    for (name, policy) in [
        ("bg", PropagationPolicy::Background),
        ("fg", PropagationPolicy::Foreground),
        ("orphan", PropagationPolicy::Orphan),
    ] {
        let owner = api
            .create(&PostParams::default(), &sandbox(name, json!({})))
            .await?;
        server.create(
            "configmaps",
            "default",
            owned_config_map(&format!("{name}-child"), &owner),
        )?;
        let params = DeleteParams {
            propagation_policy: Some(policy.clone()),
            ..DeleteParams::default()
        };
        api.delete(name, &params).await?;
        assert!(
            server.get("sandboxes", "default", name).is_none(),
            "{name}: owner gone"
        );
        let child = server.get("configmaps", "default", &format!("{name}-child"));
        match policy {
            PropagationPolicy::Orphan => {
                let child = child.expect("orphan kept");
                assert_eq!(child["metadata"]["ownerReferences"], json!([]), "{name}");
            }
            _ => assert!(child.is_none(), "{name}: dependent deleted"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn finalizers_and_preconditions_hold_deletion() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    let mut held = sandbox("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/keep".to_owned()]);
    let created = api.create(&PostParams::default(), &held).await?;

    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let status = api_error(
        api.delete("held", &wrong_uid)
            .await
            .expect_err("uid mismatch"),
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));

    let pending = api.delete("held", &DeleteParams::default()).await?;
    let marked = pending.left().expect("the marked object");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        server.get("sandboxes", "default", "held").is_some(),
        "held by its finalizer"
    );

    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await?;
    assert!(
        server.get("sandboxes", "default", "held").is_none(),
        "gone once finalizers clear"
    );
    assert_ne!(created.metadata.uid, None);
    Ok(())
}
