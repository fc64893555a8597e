//! The upstream agent-sandbox SDK's flow (`tests/fixtures/sdk/sdk_flow.py`) on the real node:
//! the SDK runtime's template and warm pool in a test namespace, the flow run on the host with
//! the test venv's python, or in a pod of the Python SDK image.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DynamicObject, LogParams};
use rouse_testsupport::{cluster, image};
use serde_json::{Value, json};

use super::{DEADLINE, Release, release, wait_for};

/// The Python runtime image (tests/node).
pub const RUNTIME_IMAGE: &str = "registry.local/python-runtime:1";
/// The warm pool of the example.
pub const POOL: &str = "python-sandbox-warmpool";
/// One SDK flow: a claim, a suspend, a wake under gVisor and a delete, each bounded by
/// [`DEADLINE`] inside the flow.
pub const FLOW_DEADLINE: Duration = Duration::from_secs(300);
/// The router Service the SDK's tunnel and in-cluster modes use (the chart's).
pub const ROUTER_URL: &str = "http://sandbox-router-svc.rouse-system.svc.cluster.local:8080";

/// The release and the venv's python, or `None` (printed) when either cannot be had here.
pub fn setup(test: &str) -> Option<(&'static Release, PathBuf)> {
    let python = match super::sdk_python() {
        Ok(python) => python,
        Err(why) if cluster::required() => {
            panic!("{test}: the agent-sandbox SDK venv is needed under CI: {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: {why}; run testsupport/python/setup.sh");
            return None;
        }
    };
    Some((release(test)?, python))
}

/// `deploy/examples/sdk-runtime.yaml` in `namespace`, adapted to the node: the local runtime
/// image (`imagePullPolicy: Never`), `runtimeClassName: gvisor`, one warm member and no
/// resource requests (the parallel tests share two CPUs). The rest — the embedded runtime,
/// the `workspace` volume, the idle suspension — as shipped.
pub fn sdk_runtime(namespace: &str) -> Vec<Value> {
    let path = cluster::deploy_dir().join("examples/sdk-runtime.yaml");
    let text = std::fs::read_to_string(&path).expect("read the SDK example");
    let mut docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("YAML");
    for doc in &mut docs {
        doc["metadata"]["namespace"] = json!(namespace);
        match doc["kind"].as_str() {
            Some("SandboxTemplate") => {
                let pod = &mut doc["spec"]["podTemplate"]["spec"];
                pod["runtimeClassName"] = json!("gvisor");
                let container = &mut pod["containers"][0];
                container["image"] = json!(RUNTIME_IMAGE);
                container["imagePullPolicy"] = json!("Never");
                container
                    .as_object_mut()
                    .expect("a container")
                    .remove("resources");
            }
            Some("SandboxWarmPool") => doc["spec"]["replicas"] = json!(1),
            other => panic!("unexpected {other:?} in {}", path.display()),
        }
    }
    docs
}

/// A namespace with the SDK runtime's template and warm pool, once the pool has a Ready
/// member (adoption needs one).
pub async fn namespace_with_pool(release: &Release, test: &str) -> String {
    let ns = release.namespace(test).await;
    for doc in sdk_runtime(&ns) {
        release.apply(&doc).await;
    }
    let pools: Api<DynamicObject> = Api::namespaced_with(
        release.client().await,
        &ns,
        &kube::api::ApiResource {
            group: "extensions.agents.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "extensions.agents.x-k8s.io/v1beta1".into(),
            kind: "SandboxWarmPool".into(),
            plural: "sandboxwarmpools".into(),
        },
    );
    let started = Instant::now();
    wait_for("a Ready warm pool member", || async {
        let pool = pools.get(POOL).await?;
        let ready = pool.data["status"]["readyReplicas"].as_i64().unwrap_or(0);
        Ok((ready >= 1).then_some(()))
    })
    .await;
    eprintln!(
        "{test}: warm member Ready {:.1} s after the pool's creation",
        started.elapsed().as_secs_f64()
    );
    ns
}

/// Runs the flow with the venv's python on the host; its output. The flow runs in a process
/// group of its own, killed at the end: the tunnel mode's `kubectl port-forward` must not
/// outlive a failed flow.
pub async fn flow_on_host(python: &Path, args: &[String]) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sdk/sdk_flow.py"
    );
    let bin = python.parent().expect("the venv's bin directory");
    let path = std::env::join_paths(
        std::iter::once(bin.to_owned()).chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        ),
    )
    .expect("PATH");
    let child = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the SDK flow");
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    let output = tokio::time::timeout(FLOW_DEADLINE, child.wait_with_output()).await;
    if let Some(group) = group {
        // ESRCH when the group is already empty.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let output = output
        .unwrap_or_else(|_| panic!("the SDK flow did not finish within {FLOW_DEADLINE:?}"))
        .expect("the SDK flow's output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && stdout.contains("all steps passed"),
        "the SDK flow failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The Python SDK image, built and imported into the node once per test binary (blocking).
pub fn sdk_image(release: &Release, python: &Path) -> &'static str {
    static IMPORTED: OnceLock<Result<(), String>> = OnceLock::new();
    let imported = IMPORTED.get_or_init(|| {
        let venv = python
            .parent()
            .and_then(Path::parent)
            .expect("the venv of bin/python3");
        let started = Instant::now();
        let image = image::python_sdk_image(venv).map_err(|e| format!("{e:#}"))?;
        release
            .node
            .import_image(&image.archive)
            .map_err(|e| format!("{e:#}"))?;
        eprintln!(
            "the SDK image built and imported in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    });
    if let Err(e) = imported {
        panic!("the Python SDK image: {e}");
    }
    image::PYTHON_SDK
}

/// Runs the flow in a pod of `image` in `ns` (with the venv's packages), as a ServiceAccount
/// allowed what the SDK calls, in direct mode to `api_url`; its output.
pub async fn flow_in_pod(release: &Release, ns: &str, image: &str, api_url: &str) -> String {
    // What the SDK calls (claims; sandboxes read), and `patch` of sandboxes for the flow's
    // own suspend step.
    let objects = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "sdk", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "sdk", "namespace": ns},
        "rules": [
            {"apiGroups": ["extensions.agents.x-k8s.io"], "resources": ["sandboxclaims"],
             "verbs": ["create", "get", "list", "watch", "delete"]},
            {"apiGroups": ["agents.x-k8s.io"], "resources": ["sandboxes"],
             "verbs": ["get", "list", "watch", "patch"]},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "sdk", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sdk"},
               "subjects": [{"kind": "ServiceAccount", "name": "sdk", "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "sdk-flow", "namespace": ns},
               "data": {"sdk_flow.py": include_str!("../fixtures/sdk/sdk_flow.py")}}),
    ];
    for object in &objects {
        release.apply(object).await;
    }
    let deadline = DEADLINE.as_secs().to_string();
    release
        .apply(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "sdk-flow", "namespace": ns},
            "spec": {
                "serviceAccountName": "sdk",
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "flow",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "/flow/sdk_flow.py", "--in-cluster",
                                "--direct", api_url, "--namespace", ns,
                                "--deadline", deadline],
                    "volumeMounts": [{"name": "flow", "mountPath": "/flow"}],
                }],
                "volumes": [{"name": "flow", "configMap": {"name": "sdk-flow"}}],
            },
        }))
        .await;
    let pods: Api<Pod> = Api::namespaced(release.client().await, ns);
    let end = Instant::now() + FLOW_DEADLINE;
    let phase = loop {
        let phase = pods
            .get("sdk-flow")
            .await
            .expect("the flow's pod")
            .status
            .and_then(|s| s.phase)
            .unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            break phase;
        }
        assert!(
            Instant::now() < end,
            "the in-cluster SDK flow did not end within {FLOW_DEADLINE:?} (phase {phase})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let logs = pods
        .logs("sdk-flow", &LogParams::default())
        .await
        .expect("the flow's logs");
    assert!(
        phase == "Succeeded" && logs.contains("all steps passed"),
        "the in-cluster SDK flow failed ({phase}):\n{logs}"
    );
    logs
}
