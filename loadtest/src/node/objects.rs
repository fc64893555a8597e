//! The objects the node scenarios create and the waits between measurements (none of these
//! waits is timed; each is bounded and names what it waited for).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rouse_shared::api::Sandbox;
use rouse_testsupport::image::{PAUSE, PYTHON_RUNTIME};
use serde_json::{Value, json};

use super::release::RELEASE_NAMESPACE;

/// Bounds every wait for a state: pods really start here, on a shared machine.
pub const DEADLINE: Duration = Duration::from_secs(180);
/// Pause between two reads of a state that is waited for.
const POLL: Duration = Duration::from_millis(50);
/// The Python runtime's port (`sandbox_runtime.py`).
pub const RUNTIME_PORT: u16 = 8888;

/// The runtime class a workload runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// `runtimeClassName: gvisor` (containerd's `runsc` handler).
    Gvisor,
    /// No runtime class: the node's default, runc.
    Runc,
}

impl Runtime {
    /// The name printed and used in object names.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Gvisor => "gvisor",
            Runtime::Runc => "runc",
        }
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The pod spec of the Python runtime (what the end-to-end suite runs): `sandbox_runtime.py`
/// on 8888, a readiness probe every second.
pub fn runtime_pod_spec(runtime: Runtime) -> Value {
    let mut spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "runtime",
            "image": PYTHON_RUNTIME,
            "imagePullPolicy": "Never",
            "ports": [{"containerPort": RUNTIME_PORT}],
            "readinessProbe": {"httpGet": {"path": "/", "port": RUNTIME_PORT}, "periodSeconds": 1},
        }],
    });
    if runtime == Runtime::Gvisor {
        spec["runtimeClassName"] = json!("gvisor");
    }
    spec
}

/// The smallest workload: the pause program under runc.
pub fn pause_pod_spec() -> Value {
    json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "pause", "image": PAUSE, "imagePullPolicy": "Never"}],
    })
}

/// A Sandbox of `pod_spec`.
pub fn sandbox(namespace: &str, name: &str, pod_spec: &Value) -> Result<Sandbox> {
    serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podTemplate": {"spec": pod_spec}},
    }))
    .context("a Sandbox manifest")
}

/// A plain Pod of `pod_spec`.
pub fn pod(namespace: &str, name: &str, pod_spec: &Value) -> Result<Pod> {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"rouse-loadtest": "bare"}},
        "spec": pod_spec,
    }))
    .context("a Pod manifest")
}

/// Creates `object` in `api`.
pub async fn create<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .map(|_| ())
        .context("create")
}

/// The status of condition `kind` of `sandbox`, if it has one.
pub fn condition<'a>(sandbox: &'a Sandbox, kind: &str) -> Option<&'a str> {
    sandbox
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.as_str())
}

/// Polls `check` until it yields a value or [`DEADLINE`] passes; the error names `what`.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let end = tokio::time::Instant::now() + DEADLINE;
    let mut last = String::new();
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = format!("; last error: {e:#}"),
        }
        if tokio::time::Instant::now() >= end {
            bail!("not {what} within {DEADLINE:?}{last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until sandbox `name`'s condition `kind` is `status`.
pub async fn wait_condition(
    api: &Api<Sandbox>,
    name: &str,
    kind: &str,
    status: &str,
) -> Result<()> {
    wait_for(&format!("{name} {kind}={status}"), || async {
        let sandbox = api.get_opt(name).await?;
        Ok(sandbox
            .filter(|s| condition(s, kind) == Some(status))
            .map(|_| ()))
    })
    .await
}

/// Waits until pod `name` is gone (its containers stopped and the object removed).
pub async fn wait_pod_gone(pods: &Api<Pod>, name: &str) -> Result<()> {
    wait_for(&format!("pod {name} gone"), || async {
        Ok(pods.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Deletes pod `name` (with its grace period) and waits until it is gone.
pub async fn delete_pod(pods: &Api<Pod>, name: &str) -> Result<()> {
    match pods.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e).with_context(|| format!("delete pod {name}")),
    }
    wait_pod_gone(pods, name).await
}

/// Sets `spec.operatingMode` of sandbox `name`.
pub async fn set_mode(api: &Api<Sandbox>, name: &str, mode: &str) -> Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"operatingMode": mode}})),
    )
    .await
    .with_context(|| format!("set {name} to {mode}"))?;
    Ok(())
}

/// Deletes namespace `name` and waits until it and its pods are gone.
pub async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("delete namespace {name}")),
    }
    wait_for(&format!("namespace {name} gone"), || async {
        Ok(namespaces.get_opt(name).await?.is_none().then_some(()))
    })
    .await
}

/// Sums the values of metric `name` whose labels include every pair of `labels`, on `port` of
/// pod `pod` of the release, read through the API server's pod proxy.
pub async fn pod_metric(
    client: &Client,
    pod: &str,
    port: u16,
    name: &str,
    labels: &[(&str, &str)],
) -> Result<f64> {
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{RELEASE_NAMESPACE}/pods/{pod}:{port}/proxy/metrics"
    ))
    .body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("metrics of {pod}"))?;
    Ok(sum_metric(&text, name, labels))
}

/// The sum of metric `name`'s samples in a Prometheus text page whose labels include every
/// pair of `labels` (other labels may be there too; label values are Rouse's own, without
/// commas or braces).
pub fn sum_metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (set, value) = match rest.strip_prefix('{') {
                Some(inner) => inner.split_once('}')?,
                None if rest.starts_with(' ') => ("", rest),
                None => return None,
            };
            let has = |(key, want): &(&str, &str)| {
                set.split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .any(|(k, v)| k == *key && v.trim_matches('"') == *want)
            };
            if !labels.iter().all(has) {
                return None;
            }
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}
