//! The objects a simulated node needs: the Node kwok plays, and static PersistentVolumes that
//! kube-controller-manager's binder binds claims to (no provisioner runs).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, Node, NodeSpec, PersistentVolume, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// The name of the node kwok plays.
pub const KWOK_NODE: &str = "kwok-node";

/// The annotation kwok is told to manage nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// Creates the Node [`KWOK_NODE`], annotated for kwok, which fills in its status (Ready, and
/// its default capacity of 1000 CPUs, 1 TiB and a million pods) once it runs.
pub async fn create_kwok_node(client: &Client) -> Result<()> {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(KWOK_NODE.to_owned()),
            annotations: Some(BTreeMap::from([(
                KWOK_ANNOTATION.0.to_owned(),
                KWOK_ANNOTATION.1.to_owned(),
            )])),
            labels: Some(BTreeMap::from([
                ("type".to_owned(), "kwok".to_owned()),
                ("kubernetes.io/hostname".to_owned(), KWOK_NODE.to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    };
    match Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e).context("create the kwok node"),
    }
}

/// Creates `count` static PersistentVolumes `rouse-static-<i>` of `size` (e.g. `4Gi`),
/// `ReadWriteOnce`, without a storage class, kept after release: what a cluster without a
/// provisioner offers claims. Nothing mounts them (kwok runs no containers).
pub async fn create_static_volumes(client: &Client, count: usize, size: &str) -> Result<()> {
    let api = Api::<PersistentVolume>::all(client.clone());
    for i in 0..count {
        let volume = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(format!("rouse-static-{i}")),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                persistent_volume_reclaim_policy: Some("Retain".to_owned()),
                host_path: Some(HostPathVolumeSource {
                    path: format!("/nonexistent/rouse-static-{i}"),
                    type_: None,
                }),
                ..PersistentVolumeSpec::default()
            }),
            status: None,
        };
        match api.create(&PostParams::default(), &volume).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(e).with_context(|| format!("create PersistentVolume {i}")),
        }
    }
    Ok(())
}
