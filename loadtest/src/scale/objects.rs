//! The objects of the workload, as the wire format both controllers' CRDs accept (nothing
//! either one alone knows): a Sandbox running one container, the template and pool of the
//! warm pool, claims of it.

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::tracker::{extension, sandboxes};

/// The name of the template and of the pool.
pub const POOL: &str = "scale";

/// The pod template every sandbox runs: one container with a port (kwok runs nothing), a
/// one-second grace period so a deleted pod goes quickly.
fn pod_template() -> Value {
    json!({"spec": {
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "main",
            "image": "busybox",
            "ports": [{"containerPort": 8080}],
        }],
    }})
}

fn object(resource: &ApiResource, name: &str, spec: Value) -> DynamicObject {
    DynamicObject::new(name, resource).data(json!({"spec": spec}))
}

/// A Sandbox named `name`.
pub fn sandbox(name: &str) -> DynamicObject {
    object(&sandboxes(), name, json!({"podTemplate": pod_template()}))
}

/// The SandboxTemplate [`POOL`].
pub fn template() -> DynamicObject {
    object(
        &extension("SandboxTemplate"),
        POOL,
        json!({"podTemplate": pod_template()}),
    )
}

/// The SandboxWarmPool [`POOL`] of `replicas` members.
pub fn pool(replicas: usize) -> DynamicObject {
    object(
        &extension("SandboxWarmPool"),
        POOL,
        json!({"replicas": replicas, "sandboxTemplateRef": {"name": POOL}}),
    )
}

/// A SandboxClaim of the pool.
pub fn claim(name: &str) -> DynamicObject {
    object(
        &extension("SandboxClaim"),
        name,
        json!({"warmPoolRef": {"name": POOL}}),
    )
}

/// The APIs of one namespace.
#[derive(Clone)]
pub struct Apis {
    /// Sandboxes.
    pub sandboxes: Api<DynamicObject>,
    /// SandboxClaims.
    pub claims: Api<DynamicObject>,
    /// SandboxWarmPools.
    pub pools: Api<DynamicObject>,
    /// SandboxTemplates.
    pub templates: Api<DynamicObject>,
}

impl Apis {
    /// The APIs of `namespace`.
    pub fn new(client: &Client, namespace: &str) -> Self {
        let api = |r| Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &r);
        Self {
            sandboxes: api(sandboxes()),
            claims: api(extension("SandboxClaim")),
            pools: api(extension("SandboxWarmPool")),
            templates: api(extension("SandboxTemplate")),
        }
    }

    /// Creates `object` with `api`.
    pub async fn create(api: &Api<DynamicObject>, object: &DynamicObject) -> kube::Result<()> {
        api.create(&PostParams::default(), object).await.map(|_| ())
    }
}

/// Deletes every `(api, name)`, `concurrency` at a time, in the background (owned objects go
/// with their owners); an object already gone counts as deleted.
pub async fn delete_each(
    deletes: impl IntoIterator<Item = (Api<DynamicObject>, String)>,
    concurrency: usize,
) -> Result<()> {
    stream::iter(deletes)
        .map(|(api, name)| async move {
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e).with_context(|| format!("delete {name}")),
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
