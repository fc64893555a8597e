//! Kubernetes mode end to end on a real node (`rouse_testsupport::node`): pods really run, under
//! gVisor where asked, and Rouse is the Helm release installed from a local image exactly as a
//! user installs it (tests/node). Every request goes through the installed proxy's NodePort.
//!
//! Needs root, the Kubernetes binaries (testsupport/cluster/build.sh), gVisor
//! (testsupport/gvisor/build.sh), Debian's containerd, runc and CNI plugins; skipped with a
//! message without them, failing under CI. docs/testing.md lists what each test checks.

mod node;

use std::net::Ipv4Addr;
use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use node::{DEADLINE, RELEASE_NAMESPACE, Release, release, wait_for};
use rouse_shared::api::Sandbox;
use serde_json::{Value, json};

/// The Python runtime image (tests/node): `sandbox_runtime.py` on 8888.
const RUNTIME_IMAGE: &str = "registry.local/python-runtime:1";

/// A Sandbox of the SDK runtime, `spec` merged over its spec.
fn runtime_sandbox(namespace: &str, name: &str, spec: Value) -> Value {
    let mut sandbox = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"podTemplate": {"spec": {
            "runtimeClassName": "gvisor",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "runtime",
                "image": RUNTIME_IMAGE,
                "imagePullPolicy": "Never",
                "ports": [{"containerPort": 8888}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8888}, "periodSeconds": 1},
            }],
        }}},
    });
    merge(&mut sandbox["spec"], spec);
    sandbox
}

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

/// Waits until the sandbox's condition `kind` is `status`; the sandbox then.
async fn condition(
    release: &Release,
    namespace: &str,
    name: &str,
    kind: &str,
    status: &str,
) -> Sandbox {
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, namespace);
    wait_for(&format!("{namespace}/{name} {kind}={status}"), || async {
        let sandbox = sandboxes.get_opt(name).await?;
        Ok(sandbox.filter(|s| {
            s.status
                .as_ref()
                .and_then(|st| st.conditions.iter().find(|c| c.type_ == kind))
                .is_some_and(|c| c.status == status)
        }))
    })
    .await
}

/// Sets `spec.operatingMode`.
async fn set_mode(release: &Release, namespace: &str, name: &str, mode: &str) {
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, namespace);
    sandboxes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"operatingMode": mode}})),
        )
        .await
        .expect("patch operatingMode");
}

/// Runs a command in the sandbox through the proxy (the runtime's `/execute`); its stdout.
async fn execute(release: &Release, namespace: &str, name: &str, command: &str) -> String {
    let body = json!({"command": command}).to_string().into_bytes();
    let host = format!("{name}.{namespace}.{}", node::DOMAIN);
    let (code, text) = node::http(
        release.proxy,
        "POST",
        "/execute",
        &host,
        &[("Content-Type", "application/json")],
        body,
    )
    .await
    .expect("POST /execute through the proxy");
    assert_eq!(code, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    answer["stdout"].as_str().unwrap_or_default().to_owned()
}

/// The pods of a sandbox (by its name; the controller names the pod after it).
async fn pod(release: &Release, namespace: &str, name: &str) -> Option<Pod> {
    let pods: Api<Pod> = Api::namespaced(release.client().await, namespace);
    pods.get_opt(name).await.expect("get pod")
}

#[tokio::test]
async fn a_gvisor_sandbox_runs_in_a_real_pod_and_answers_through_the_proxy() {
    let Some(release) = release("a_gvisor_sandbox_runs_in_a_real_pod") else {
        return;
    };
    let ns = release.namespace("gvisor-pod").await;
    let created = Instant::now();
    release.apply(&runtime_sandbox(&ns, "box", json!({}))).await;
    let ready = condition(release, &ns, "box", "Ready", "True").await;
    eprintln!(
        "create → Ready under gVisor: {:.2} s",
        created.elapsed().as_secs_f64()
    );
    let pod = pod(release, &ns, "box").await.expect("the sandbox's pod");
    let spec = pod.spec.expect("pod spec");
    assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
    let ip: Ipv4Addr = pod
        .status
        .and_then(|s| s.pod_ip)
        .expect("a pod IP")
        .parse()
        .expect("an IPv4 pod IP");
    assert_eq!(
        ip.octets()[..2],
        [10, 88],
        "an address of the node's pod network"
    );
    let status = ready.status.expect("status");
    assert!(
        status.pod_ips.iter().any(|p| p == &ip.to_string()),
        "{:?}",
        status.pod_ips
    );
    // Answered through the installed proxy, and by gVisor's kernel, not the host's.
    let (code, body) = release
        .get(&ns, "box", "/")
        .await
        .expect("GET / through the proxy");
    assert_eq!(code, 200, "{body}");
    let kernel = execute(
        release,
        &ns,
        "box",
        "python3 -c 'import os; print(os.uname().release)'",
    )
    .await;
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("the host's kernel");
    assert_ne!(kernel.trim(), host.trim(), "not the host's kernel");
    assert!(kernel.contains("gvisor"), "gVisor's kernel: {kernel}");
}

#[tokio::test]
async fn an_idle_sandbox_is_suspended_and_woken_by_the_next_request() {
    let Some(release) = release("an_idle_sandbox_is_suspended") else {
        return;
    };
    let ns = release.namespace("idle").await;
    release
        .apply(&runtime_sandbox(&ns, "sleepy", json!({})))
        .await;
    condition(release, &ns, "sleepy", "Ready", "True").await;
    let (code, _) = release.get(&ns, "sleepy", "/").await.expect("served");
    assert_eq!(code, 200);
    // Only now the idle timeout: the pod's start must not count as idleness.
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, &ns);
    sandboxes
        .patch(
            "sleepy",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspension": {"idleTimeoutSeconds": 3}}})),
        )
        .await
        .expect("set the idle timeout");
    // No traffic for 3 s: the controller suspends it, the pod goes.
    condition(release, &ns, "sleepy", "Suspended", "True").await;
    wait_for("the pod gone", || async {
        Ok(pod(release, &ns, "sleepy").await.is_none().then_some(()))
    })
    .await;
    // The next request is held, wakes it, and is answered.
    let woken = Instant::now();
    let (code, body) = release
        .get(&ns, "sleepy", "/")
        .await
        .expect("served after a wake");
    assert_eq!(code, 200, "{body}");
    eprintln!(
        "wake on connect (pod start under gVisor included): {:.2} s",
        woken.elapsed().as_secs_f64()
    );
    assert!(pod(release, &ns, "sleepy").await.is_some(), "a new pod");
}

#[tokio::test]
async fn shutdown_time_deletes_or_expires_the_sandbox() {
    let Some(release) = release("shutdown_time") else {
        return;
    };
    let ns = release.namespace("shutdown").await;
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, &ns);
    for (name, policy) in [("gone", "Delete"), ("kept", "Retain")] {
        release
            .apply(&runtime_sandbox(
                &ns,
                name,
                json!({"shutdownPolicy": policy}),
            ))
            .await;
    }
    // Both run first; then the shutdown time, a few seconds ahead.
    for name in ["gone", "kept"] {
        condition(release, &ns, name, "Ready", "True").await;
    }
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3);
    for name in ["gone", "kept"] {
        sandboxes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"shutdownTime": at.to_string()}})),
            )
            .await
            .expect("set shutdownTime");
    }
    wait_for("the Delete sandbox gone", || async {
        Ok(sandboxes.get_opt("gone").await?.is_none().then_some(()))
    })
    .await;
    let kept = condition(release, &ns, "kept", "Ready", "False").await;
    let ready = kept
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .expect("Ready");
    assert_eq!(ready.reason, "SandboxExpired", "{ready:?}");
    wait_for("the expired sandbox's pod gone", || async {
        Ok(pod(release, &ns, "kept").await.is_none().then_some(()))
    })
    .await;
}

#[tokio::test]
async fn a_claim_adopts_a_real_warm_pod_and_the_template_policy_exists() {
    let Some(release) = release("a_claim_adopts_a_real_warm_pod") else {
        return;
    };
    let ns = release.namespace("warm").await;
    let template = runtime_sandbox(&ns, "unused", json!({}))["spec"].clone();
    release
        .apply(&json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxTemplate",
            "metadata": {"name": "runtime", "namespace": ns},
            "spec": {"podTemplate": template["podTemplate"]},
        }))
        .await;
    release
        .apply(&json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxWarmPool",
            "metadata": {"name": "pool", "namespace": ns},
            "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "runtime"}},
        }))
        .await;
    // The pool's members run real pods before any claim.
    let pods: Api<Pod> = Api::namespaced(release.client().await, &ns);
    let warm: Vec<String> = wait_for("two warm pods Ready", || async {
        let ready: Vec<String> = pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.metadata.name)
            .collect();
        Ok((ready.len() == 2).then_some(ready))
    })
    .await;
    let claimed = Instant::now();
    release
        .apply(&json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxClaim",
            "metadata": {"name": "mine", "namespace": ns},
            "spec": {"warmPoolRef": {"name": "pool"}},
        }))
        .await;
    let claims: Api<kube::api::DynamicObject> = Api::namespaced_with(
        release.client().await,
        &ns,
        &kube::api::ApiResource {
            group: "extensions.agents.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "extensions.agents.x-k8s.io/v1beta1".into(),
            kind: "SandboxClaim".into(),
            plural: "sandboxclaims".into(),
        },
    );
    let claim = wait_for("the claim Ready", || async {
        let claim = claims.get("mine").await?;
        let ready = claim.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
        Ok(ready.then_some(claim))
    })
    .await;
    eprintln!(
        "warm claim → Ready: {:.2} s",
        claimed.elapsed().as_secs_f64()
    );
    let adopted = claim.data["status"]["sandbox"]["name"]
        .as_str()
        .expect("status.sandbox.name")
        .to_owned();
    assert!(
        warm.contains(&adopted),
        "adopted a warm member: {adopted} of {warm:?}"
    );
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, &ns);
    let sandbox = sandboxes.get(&adopted).await.expect("the adopted sandbox");
    assert_eq!(
        sandbox
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("agents.x-k8s.io/launch-type"))
            .map(String::as_str),
        Some("warm")
    );
    let (code, _) = release.get(&ns, &adopted, "/").await.expect("served");
    assert_eq!(code, 200);
    // The template's managed NetworkPolicy exists (nothing enforces it: the bridge CNI has no
    // policy support, docs/testing.md).
    let policies: Api<NetworkPolicy> = Api::namespaced(release.client().await, &ns);
    wait_for("the template's NetworkPolicy", || async {
        Ok(policies.get_opt("runtime-network-policy").await?)
    })
    .await;
    // The pool refills to two.
    wait_for("the pool refilled", || async {
        let members = sandboxes
            .list(&ListParams::default().labels("agents.x-k8s.io/warm-pool-sandbox"))
            .await?
            .items
            .len();
        Ok((members >= 2).then_some(()))
    })
    .await;
}

/// Each proxy pod's metric `name` (summed), read through the API server's pod proxy.
async fn proxy_metric(release: &Release, pod: &str, name: &str) -> f64 {
    let client = release.client().await;
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{RELEASE_NAMESPACE}/pods/{pod}:9090/proxy/metrics"
    ))
    .body(Vec::new())
    .expect("request");
    let text = client.request_text(request).await.expect("proxy metrics");
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The proxy's pods.
async fn proxy_pods(release: &Release) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(release.client().await, RELEASE_NAMESPACE);
    pods.list(&ListParams::default().labels("app.kubernetes.io/name=rouse-proxy"))
        .await
        .expect("list proxy pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect()
}

#[tokio::test]
async fn two_proxy_replicas_wake_a_suspended_sandbox_once() {
    let Some(release) = release("two_proxy_replicas_wake_once") else {
        return;
    };
    let ns = release.namespace("storm").await;
    release
        .apply(&runtime_sandbox(&ns, "crowd", json!({})))
        .await;
    condition(release, &ns, "crowd", "Ready", "True").await;
    set_mode(release, &ns, "crowd", "Suspended").await;
    condition(release, &ns, "crowd", "Suspended", "True").await;
    wait_for("the pod gone", || async {
        Ok(pod(release, &ns, "crowd").await.is_none().then_some(()))
    })
    .await;
    let proxies = proxy_pods(release).await;
    assert_eq!(
        proxies.len(),
        2,
        "the chart's two proxy replicas: {proxies:?}"
    );
    let before: Vec<f64> = futures::future::join_all(
        proxies
            .iter()
            .map(|p| proxy_metric(release, p, "rouse_proxy_hold_duration_seconds_count")),
    )
    .await;
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, &ns);
    let generation = sandboxes
        .get("crowd")
        .await
        .expect("get")
        .metadata
        .generation;
    // 40 connections through the NodePort: kube-proxy spreads them over both replicas.
    let requests = (0..40).map(|_| release.get(&ns, "crowd", "/"));
    let answers = futures::future::join_all(requests).await;
    for answer in &answers {
        assert!(matches!(answer, Ok((200, _))), "{answer:?}");
    }
    let after: Vec<f64> = futures::future::join_all(
        proxies
            .iter()
            .map(|p| proxy_metric(release, p, "rouse_proxy_hold_duration_seconds_count")),
    )
    .await;
    for (i, pod) in proxies.iter().enumerate() {
        assert!(
            after[i] > before[i],
            "proxy {pod} held some of the connections"
        );
    }
    let now = sandboxes
        .get("crowd")
        .await
        .expect("get")
        .metadata
        .generation;
    assert_eq!(
        now,
        generation.map(|g| g + 1),
        "exactly one wake (one spec change)"
    );
}

#[tokio::test]
async fn killing_the_leader_mid_wake_loses_no_wake() {
    let Some(release) = release("killing_the_leader_mid_wake") else {
        return;
    };
    let ns = release.namespace("leader").await;
    release
        .apply(&runtime_sandbox(&ns, "steady", json!({})))
        .await;
    condition(release, &ns, "steady", "Ready", "True").await;
    set_mode(release, &ns, "steady", "Suspended").await;
    condition(release, &ns, "steady", "Suspended", "True").await;
    let leases: Api<Lease> = Api::namespaced(release.client().await, RELEASE_NAMESPACE);
    let leader = leases
        .get("rouse-controller")
        .await
        .expect("the controller's Lease")
        .spec
        .and_then(|s| s.holder_identity)
        .expect("a leader");
    // A request wakes the sandbox; the leader dies at once, before it could start the pod.
    let waking = {
        let proxy = release.proxy;
        let host = format!("steady.{ns}.{}", node::DOMAIN);
        tokio::spawn(async move { node::http(proxy, "GET", "/", &host, &[], Vec::new()).await })
    };
    let sandboxes: Api<Sandbox> = Api::namespaced(release.client().await, &ns);
    wait_for("the wake written", || async {
        let sandbox = sandboxes.get("steady").await?;
        let running =
            sandbox.spec.operating_mode != Some(rouse_shared::api::OperatingMode::Suspended);
        Ok(running.then_some(()))
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(release.client().await, RELEASE_NAMESPACE);
    pods.delete(&leader, &DeleteParams::default().grace_period(0))
        .await
        .expect("kill the leader");
    let answer = tokio::time::timeout(DEADLINE, waking)
        .await
        .expect("the held request ends")
        .expect("request task");
    assert!(matches!(answer, Ok((200, _))), "{answer:?}");
    condition(release, &ns, "steady", "Ready", "True").await;
    let now = leases
        .get("rouse-controller")
        .await
        .expect("Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_ne!(
        now.as_deref(),
        Some(leader.as_str()),
        "another replica leads"
    );
    // The Deployment replaces the killed pod.
    wait_for("two controller pods again", || async {
        let running = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=rouse-controller"))
            .await?
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        Ok((running == 2).then_some(()))
    })
    .await;
}

#[tokio::test]
async fn volume_data_survives_a_suspend_and_a_wake_on_connect() {
    let Some(release) = release("volume_data_survives_a_suspend") else {
        return;
    };
    let ns = release.namespace("volume").await;
    // The runtime's root is /app: a PVC from the template, provisioned by the node's
    // local-path provisioner (the default StorageClass).
    let spec = json!({
        "podTemplate": {"spec": {"containers": [{
            "name": "runtime",
            "image": RUNTIME_IMAGE,
            "imagePullPolicy": "Never",
            "ports": [{"containerPort": 8888}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 8888}, "periodSeconds": 1},
            "volumeMounts": [{"name": "work", "mountPath": "/app"}],
        }]}},
        "volumeClaimTemplates": [{
            "metadata": {"name": "work"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "64Mi"}},
            },
        }],
    });
    release.apply(&runtime_sandbox(&ns, "keeper", spec)).await;
    condition(release, &ns, "keeper", "Ready", "True").await;
    execute(release, &ns, "keeper", "echo kept > /app/marker.txt").await;
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(release.client().await, &ns);
    let claim = pvcs.get("work-keeper").await.expect("the sandbox's PVC");
    let uid = claim.metadata.uid.clone();
    assert_eq!(
        claim.status.and_then(|s| s.phase).as_deref(),
        Some("Bound"),
        "provisioned and bound"
    );
    set_mode(release, &ns, "keeper", "Suspended").await;
    condition(release, &ns, "keeper", "Suspended", "True").await;
    wait_for("the pod gone", || async {
        Ok(pod(release, &ns, "keeper").await.is_none().then_some(()))
    })
    .await;
    // The next request wakes it on the same claim, and the file is there.
    let (code, body) = release
        .get(&ns, "keeper", "/download/marker.txt")
        .await
        .expect("served after a wake");
    assert_eq!((code, body.trim()), (200, "kept"));
    let claim = pvcs.get("work-keeper").await.expect("the PVC");
    assert_eq!(claim.metadata.uid, uid, "the same claim, not a new one");
}

/// Upstream's own tests that need running images, port-forward and RuntimeClass handlers
/// (tests/node/upstream.rs), against this release; a table of every result is printed, also
/// on success.
#[test]
fn upstream_tests_that_need_a_real_node_pass_against_the_release() {
    let test = "upstream_tests_that_need_a_real_node";
    let Some(release) = release(test) else {
        return;
    };
    let Some(outcomes) = node::upstream::run(release, test) else {
        return;
    };
    let mut table =
        String::from("\nupstream agent-sandbox e2e on the real node against the release:\n");
    for (name, outcome) in &outcomes {
        table.push_str(&format!("  {:<7} {name}\n", outcome.label()));
    }
    // Past the test harness's capture, so CI logs show it on success too.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), table.as_bytes());
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| *o != node::upstream::Outcome::Pass)
        .map(|(name, o)| format!("{name} ({})", o.label()))
        .collect();
    assert!(
        failed.is_empty(),
        "upstream tests not passing against the release: {}",
        failed.join(", ")
    );
}
