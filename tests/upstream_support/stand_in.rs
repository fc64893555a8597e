//! What upstream's test framework looks for besides the CRDs, standing in for upstream's own
//! installation: the namespace `agent-sandbox-system` and a Deployment
//! `agent-sandbox-controller` in it (checked before every test; the parallel tests patch its
//! arguments and wait for it to roll out). The Deployment has no replicas (Rouse's controller
//! runs beside it), and as no deployment controller runs, [`deployment_status`] writes the
//! status one would: the generation observed, nothing to be ready.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, Namespace, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// Upstream's installation namespace.
const NAMESPACE: &str = "agent-sandbox-system";
/// The Deployment the framework checks.
const NAME: &str = "agent-sandbox-controller";

/// Creates the namespace and the Deployment (idempotent).
pub async fn install(client: &Client) -> Result<()> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    ignore_exists(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
    )?;
    let labels = BTreeMap::from([("app".to_owned(), NAME.to_owned())]);
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: NAME.to_owned(),
                        // Never pulled: the Deployment has no replicas.
                        image: Some("rouse-stand-in:none".to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    ignore_exists(
        Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
            .create(&PostParams::default(), &deployment)
            .await,
    )
}

fn ignore_exists<K>(result: kube::Result<K>) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Keeps the Deployment's status current as a deployment controller would, until aborted:
/// each new generation observed, zero replicas (none asked for).
pub async fn deployment_status(client: Client) {
    let api = Api::<Deployment>::namespaced(client, NAMESPACE);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        let Ok(deployment) = api.get(NAME).await else {
            continue;
        };
        let generation = deployment.metadata.generation.unwrap_or_default();
        let observed = deployment
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or_default();
        if observed == generation {
            continue;
        }
        let status = json!({"status": {
            "observedGeneration": generation,
            "replicas": 0,
            "readyReplicas": 0,
            "updatedReplicas": 0,
            "availableReplicas": 0,
        }});
        let _ = api
            .patch_status(NAME, &PatchParams::default(), &Patch::Merge(&status))
            .await;
    }
}
