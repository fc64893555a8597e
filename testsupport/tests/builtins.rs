//! Update rules of built-in kinds that controllers meet on a real cluster: immutable pod and
//! PVC specs, a Service's allocated `clusterIP`.

mod common;

use common::api_error;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;

#[tokio::test]
async fn pod_specs_are_immutable_but_images() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<Pod> = Api::default_namespaced(server.client()?);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
    }))?;
    api.create(&PostParams::default(), &pod).await?;
    let pp = PatchParams::default();

    let image = json!({"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}});
    api.patch("p", &pp, &Patch::Merge(&image)).await?;
    let labels = json!({"metadata": {"labels": {"a": "b"}}});
    api.patch("p", &pp, &Patch::Merge(&labels)).await?;

    let restart = json!({"spec": {"restartPolicy": "Never"}});
    let status = api_error(
        api.patch("p", &pp, &Patch::Merge(&restart))
            .await
            .expect_err("immutable"),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let ports = json!({"spec": {"containers": [{"name": "main", "image": "busybox:2", "ports": [{"containerPort": 80}]}]}});
    assert_eq!(
        api_error(
            api.patch("p", &pp, &Patch::Merge(&ports))
                .await
                .expect_err("immutable")
        )
        .code,
        422
    );
    Ok(())
}

#[tokio::test]
async fn pvc_specs_are_immutable_but_requests() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<PersistentVolumeClaim> = Api::default_namespaced(server.client()?);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))?;
    let created = api.create(&PostParams::default(), &pvc).await?;
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let pp = PatchParams::default();
    let grow = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    api.patch("data", &pp, &Patch::Merge(&grow)).await?;
    let class = json!({"spec": {"storageClassName": "fast"}});
    assert_eq!(
        api_error(
            api.patch("data", &pp, &Patch::Merge(&class))
                .await
                .expect_err("immutable")
        )
        .code,
        422
    );
    Ok(())
}

#[tokio::test]
async fn services_keep_their_cluster_ip() -> anyhow::Result<()> {
    let server = FakeApiServer::start().await?;
    let api: Api<Service> = Api::default_namespaced(server.client()?);
    let headless: Service = serde_json::from_value(json!({
        "metadata": {"name": "headless"},
        "spec": {"clusterIP": "None", "selector": {"app": "a"}, "ports": [{"port": 80}]},
    }))?;
    let created = api.create(&PostParams::default(), &headless).await?;
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.cluster_ips, Some(vec!["None".to_owned()]));

    let plain: Service = serde_json::from_value(
        json!({"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}}),
    )?;
    let plain = api.create(&PostParams::default(), &plain).await?;
    let ip = plain
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("allocated");

    // A replace built without the allocated IP keeps it.
    let mut rebuilt: Service = serde_json::from_value(
        json!({"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 81}]}}),
    )?;
    rebuilt.metadata.resource_version = plain.metadata.resource_version.clone();
    let replaced = api
        .replace("plain", &PostParams::default(), &rebuilt)
        .await?;
    assert_eq!(replaced.spec.and_then(|s| s.cluster_ip), Some(ip));

    let change = json!({"spec": {"clusterIP": "10.0.0.99"}});
    let refused = api
        .patch("plain", &PatchParams::default(), &Patch::Merge(&change))
        .await;
    assert_eq!(api_error(refused.expect_err("immutable")).code, 422);
    Ok(())
}

#[tokio::test]
async fn sandbox_crd_rules_are_enforced() -> anyhow::Result<()> {
    use common::{sandbox, sandboxes};
    use kube::api::DynamicObject;
    let server = FakeApiServer::start().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(server.client()?, "default", &sandboxes());
    let pp = PatchParams::default();
    api.create(&PostParams::default(), &sandbox("s", json!({})))
        .await?;
    let empty = json!({"spec": {"volumeClaimTemplates": []}});
    api.patch("s", &pp, &Patch::Merge(&empty)).await?;
    let added = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}]}});
    let status = api_error(
        api.patch("s", &pp, &Patch::Merge(&added))
            .await
            .expect_err("immutable"),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.contains("volumeClaimTemplates is immutable"),
        "{}",
        status.message
    );

    let mut dotted = sandbox("a.b", json!({}));
    dotted.data["spec"]["service"] = json!(true);
    let status = api_error(
        api.create(&PostParams::default(), &dotted)
            .await
            .expect_err("not a DNS-1035 label"),
    );
    assert_eq!(status.code, 422);
    dotted.data["spec"]["service"] = json!(false);
    api.create(&PostParams::default(), &dotted).await?;
    Ok(())
}
