//! The sandbox manifests the end-to-end tests create.

use serde_json::{Value, json};

/// A sandbox running `sh -c script` with a `work` volume and container port 8000; `spec` is
/// merged over its spec.
pub fn sandbox(name: &str, script: &str, spec: Value) -> Value {
    let mut sandbox = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "podTemplate": {"spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "web",
                    "image": "python:3",
                    "command": ["sh", "-c", script],
                    "ports": [{"name": "http", "containerPort": 8000}],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                }],
            }},
            "volumeClaimTemplates": [{
                "metadata": {"name": "work"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }],
        },
    });
    merge(&mut sandbox["spec"], spec);
    sandbox
}

/// A python3 web server on `$PORT` serving the working directory.
pub const SERVE: &str = "exec python3 -m http.server --bind 127.0.0.1 \"$PORT\"";

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}
