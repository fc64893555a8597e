//! The local-path provisioner against the real control plane (kube-controller-manager's
//! `persistentvolume-binder` and `pv-protection` included): claims become Bound to hostPath
//! volumes in directories it makes; deleting a claim removes the volume and its directory.
//! Skipped without the Kubernetes binaries, except under CI.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rouse_testsupport::cluster;
use rouse_testsupport::provisioner::{
    LocalPathProvisioner, PROVISIONER, ProvisionerConfig, SELECTED_NODE_ANNOTATION, STORAGE_CLASS,
};
use serde_json::json;

/// The node the volumes belong to: the control plane's node object.
const NODE: &str = "fake-node";

/// A StorageClass of ours with `Immediate` binding, made by the test.
const IMMEDIATE_CLASS: &str = "rouse-local-immediate";

/// How long binding or reclaiming may take on a loaded machine (the PV binder reacts to
/// events; its periodic resync is 15 s).
const DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_get_host_path_volumes_that_go_with_them() -> Result<()> {
    let test = "claims_get_host_path_volumes_that_go_with_them";
    let Some(plane) = cluster::shared_or_skip(test) else {
        return Ok(());
    };
    let client = plane.client().await?;
    let namespace = cluster::test_namespace(&client, "provisioner").await?;
    let base = tempfile::tempdir()?;
    let provisioner =
        LocalPathProvisioner::start(client.clone(), ProvisionerConfig::new(NODE, base.path()))
            .await?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let immediate = serde_json::from_value(json!({
        "metadata": {"name": IMMEDIATE_CLASS},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }))?;
    match classes.create(&PostParams::default(), &immediate).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);

    // The default class (WaitForFirstConsumer): admission fills in the class; the claim is
    // provisioned once the scheduler names the node. No scheduler runs here, so the test
    // writes the annotation the scheduler writes when it binds the claim's first pod.
    let created = claims
        .create(&PostParams::default(), &claim("wait", None, "1Gi"))
        .await?;
    let class = created
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone());
    assert_eq!(class.as_deref(), Some(STORAGE_CLASS), "the default class");
    let selected = json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: NODE}}});
    claims
        .patch("wait", &PatchParams::default(), &Patch::Merge(&selected))
        .await?;
    let waiting = bound_volume(&client, &claims, "wait", "1Gi", base.path()).await?;

    // A class with Immediate binding: provisioned at once.
    claims
        .create(
            &PostParams::default(),
            &claim("now", Some(IMMEDIATE_CLASS), "2Gi"),
        )
        .await?;
    let immediate = bound_volume(&client, &claims, "now", "2Gi", base.path()).await?;

    for (claim, (volume, dir)) in [("wait", waiting), ("now", immediate)] {
        std::fs::write(dir.join("data"), claim)?;
        claims.delete(claim, &DeleteParams::default()).await?;
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        wait_for(
            &format!("volume {volume} of claim {claim} deleted"),
            || async {
                Ok(volumes
                    .get_opt(&volume)
                    .await?
                    .map(|v| format!("{:?}", v.status.and_then(|s| s.phase))))
            },
        )
        .await?;
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    provisioner.stop().await;
    Ok(())
}

fn claim(name: &str, class: Option<&str>, size: &str) -> PersistentVolumeClaim {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    });
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a PVC")
}

/// Waits until claim `name` is Bound, checks its volume, and returns the volume's name and
/// directory.
async fn bound_volume(
    client: &Client,
    claims: &Api<PersistentVolumeClaim>,
    name: &str,
    size: &str,
    base: &Path,
) -> Result<(String, PathBuf)> {
    wait_for(&format!("claim {name} Bound"), || async {
        let claim = claims.get(name).await?;
        let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
        Ok((phase != "Bound").then_some(phase))
    })
    .await?;
    let claim = claims.get(name).await?;
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .context("a bound claim names its volume")?;
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume_name)
        .await?;
    let spec = volume.spec.clone().context("a volume spec")?;
    let claim_ref = spec.claim_ref.clone().context("a claimRef")?;
    assert_eq!(
        claim_ref.uid,
        claim.uid(),
        "{volume_name} is bound to {name}"
    );
    assert_eq!(
        spec.capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some(size)
    );
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let terms = serde_json::to_value(&spec.node_affinity)?;
    assert_eq!(
        terms["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!([NODE])
    );
    let host_path = spec.host_path.context("a hostPath volume")?;
    let dir = PathBuf::from(host_path.path);
    assert_eq!(
        dir.parent(),
        Some(base),
        "{} not in the base",
        dir.display()
    );
    let mode = std::fs::metadata(&dir)
        .with_context(|| format!("the volume's directory {}", dir.display()))?
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o777, "writable by any pod user");
    let annotations: BTreeMap<String, String> = volume.annotations().clone();
    assert_eq!(
        annotations
            .get("pv.kubernetes.io/provisioned-by")
            .map(String::as_str),
        Some(PROVISIONER)
    );
    Ok((volume_name, dir))
}

/// Polls `probe` until it returns `None` (done), failing after [`DEADLINE`] with `what` and
/// the last value it returned.
async fn wait_for<F, Fut>(what: &str, mut probe: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<String>>>,
{
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let last = probe().await?;
        let Some(last) = last else { return Ok(()) };
        if tokio::time::Instant::now() >= end {
            bail!("{what}: not after {DEADLINE:?} (last seen: {last})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
