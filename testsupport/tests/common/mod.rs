//! Helpers shared by the fake API server tests.

#![allow(dead_code)]

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::core::Status;
use serde_json::{Value, json};

/// Generous bound for anything that should happen promptly on a loaded machine.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The Sandbox custom resource, for tests that cannot name the Rust type.
pub fn sandboxes() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"),
        "sandboxes",
    )
}

/// The SandboxWarmPool custom resource (it has a scale subresource).
pub fn warm_pools() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1beta1", "SandboxWarmPool"),
        "sandboxwarmpools",
    )
}

/// A Sandbox object with the given name and labels.
pub fn sandbox(name: &str, labels: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "labels": labels},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    }))
    .expect("a valid Sandbox")
}

/// The `Status` of a failed kube call.
pub fn api_error(error: kube::Error) -> Box<Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `probe` until it returns `Some`, failing after [`DEADLINE`] with `what`.
pub async fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
