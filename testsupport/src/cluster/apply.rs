//! Applying YAML manifests as a user would (`kubectl apply --server-side`): every document is
//! a server-side apply patch with field manager `kubectl`, its resource found by discovery.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use kube::{Api, Client};
use serde_json::Value;

use super::START_DEADLINE;

/// The documents of a multi-document YAML text (empty documents left out).
pub fn yaml_documents(text: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(text)?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Applies every `*.yaml` file of `dir` but `kustomization.yaml`, in name order.
pub async fn apply_dir(client: &Client, dir: &Path) -> Result<()> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    for file in files {
        apply_file(client, &file).await?;
    }
    Ok(())
}

/// Applies every document of one YAML file.
pub async fn apply_file(client: &Client, file: &Path) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
    let docs = yaml_documents(&text).with_context(|| format!("parse {}", file.display()))?;
    for doc in &docs {
        apply(client, doc, false)
            .await
            .with_context(|| format!("apply {}", file.display()))?;
    }
    Ok(())
}

/// Server-side applies one object (with `dry_run`, the API server validates and admits it but
/// stores nothing: `kubectl apply --server-side --dry-run=server`).
pub async fn apply(client: &Client, doc: &Value, dry_run: bool) -> Result<DynamicObject> {
    let (api_version, kind) = (
        doc["apiVersion"].as_str().unwrap_or_default(),
        doc["kind"].as_str().unwrap_or_default(),
    );
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .with_context(|| format!("a {kind} without metadata.name"))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discover {api_version} {kind}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => {
            let namespace = doc
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
    };
    let mut params = PatchParams::apply("kubectl");
    params.dry_run = dry_run;
    api.patch(name, &params, &Patch::Apply(doc))
        .await
        .with_context(|| format!("{kind} {name}"))
}

/// Waits until each CustomResourceDefinition named is `Established`.
pub async fn wait_established(client: &Client, names: &[String]) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let end = tokio::time::Instant::now() + START_DEADLINE;
    for name in names {
        loop {
            let crd = api.get(name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if tokio::time::Instant::now() >= end {
                bail!("CRD {name} not established after {START_DEADLINE:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
