//! The upstream agent-sandbox Python SDK (`k8s-agent-sandbox`, unchanged) against the Helm
//! release on a real node (tests/node), in each of its connection modes a cluster offers:
//! direct to the proxy's NodePort from the host, in-cluster by the router Service's DNS name
//! from a pod, and its default tunnel mode (`kubectl port-forward svc/sandbox-router-svc`).
//! Each runs `tests/fixtures/sdk/sdk_flow.py`: a sandbox adopted from a warm pool of the SDK
//! runtime template (`deploy/examples/sdk-runtime.yaml`, under gVisor), commands, files, a
//! command that wakes the suspended sandbox through the proxy, terminate. Also: pods resolve
//! Services through the node's cluster DNS (`rouse_testsupport::node::dns`).
//!
//! Needs what tests/real_node.rs needs, and the SDK's venv (testsupport/python/setup.sh);
//! skipped with a message without them, failing under CI. docs/testing.md lists the checks.

mod node;

use std::time::Instant;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use node::sdk::{self, flow_on_host, namespace_with_pool, sdk_runtime, setup};
use node::{RELEASE_NAMESPACE, release, wait_for};
use serde_json::{Value, json};

#[tokio::test]
async fn sdk_direct_mode_to_the_proxy_service() {
    let Some((release, python)) = setup("sdk_direct_mode") else {
        return;
    };
    let ns = namespace_with_pool(release, "sdk-direct").await;
    let started = Instant::now();
    let out = flow_on_host(
        &python,
        &[
            "--kubeconfig".into(),
            release.node.kubeconfig().display().to_string(),
            "--direct".into(),
            format!("http://{}", release.proxy),
            "--namespace".into(),
            ns,
            "--deadline".into(),
            node::DEADLINE.as_secs().to_string(),
        ],
    )
    .await;
    eprintln!(
        "SDK direct mode: {:.1} s\n{out}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn sdk_tunnel_mode_through_kubectl_port_forward() {
    let Some((release, python)) = setup("sdk_tunnel_mode") else {
        return;
    };
    let ns = namespace_with_pool(release, "sdk-tunnel").await;
    let started = Instant::now();
    let out = flow_on_host(
        &python,
        &[
            "--kubeconfig".into(),
            release.node.kubeconfig().display().to_string(),
            "--tunnel".into(),
            RELEASE_NAMESPACE.into(),
            "--namespace".into(),
            ns,
            "--deadline".into(),
            node::DEADLINE.as_secs().to_string(),
        ],
    )
    .await;
    eprintln!(
        "SDK tunnel mode: {:.1} s\n{out}",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn sdk_in_cluster_by_the_router_service_dns_name() {
    let Some((release, python)) = setup("sdk_in_cluster") else {
        return;
    };
    let image = {
        let python = python.clone();
        tokio::task::spawn_blocking(move || sdk::sdk_image(release, &python))
            .await
            .expect("the SDK image")
    };
    let ns = namespace_with_pool(release, "sdk-in-cluster").await;
    let started = Instant::now();
    let logs = sdk::flow_in_pod(release, &ns, image, sdk::ROUTER_URL).await;
    eprintln!(
        "SDK in-cluster (pod start included): {:.1} s\n{logs}",
        started.elapsed().as_secs_f64()
    );
}

/// A script for the runtime's `/execute`: resolves each name with the pod's resolver
/// (`getaddrinfo`, the kubelet's resolv.conf) and prints one JSON object per name.
const RESOLVE: &str = r#"python3 -c '
import json, socket, sys, time
for name in sys.argv[1:]:
    start = time.monotonic()
    try:
        found = sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET)})
    except socket.gaierror as err:
        found = "error %d" % err.errno
    print(json.dumps({"name": name, "found": found, "seconds": round(time.monotonic() - start, 3)}))
'"#;

#[tokio::test]
async fn cluster_dns_resolves_services_and_pods_from_a_gvisor_pod() {
    let Some(release) = release("cluster_dns_resolves") else {
        return;
    };
    let ns = release.namespace("dns").await;
    // A sandbox of the SDK runtime template's spec (gVisor, its workspace volume), with its
    // headless Service.
    let mut spec = sdk_runtime(&ns)[0]["spec"].clone();
    spec["service"] = json!(true);
    release
        .apply(&json!({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "resolver", "namespace": ns},
            "spec": spec,
        }))
        .await;
    let pods: Api<Pod> = Api::namespaced(release.client().await, &ns);
    let pod_ip = wait_for("the resolver pod Ready with an IP", || async {
        let pod = pods.get_opt("resolver").await?;
        let status = pod.and_then(|p| p.status);
        let ready = status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        Ok(status.and_then(|s| s.pod_ip).filter(|_| ready))
    })
    .await;
    let services: Api<Service> = Api::namespaced(release.client().await, RELEASE_NAMESPACE);
    let cluster_ip = |service: Service| {
        service
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("a ClusterIP")
    };
    let router = cluster_ip(
        services
            .get("sandbox-router-svc")
            .await
            .expect("router Service"),
    );
    let proxy = cluster_ip(services.get("rouse-proxy").await.expect("proxy Service"));
    // The sandbox's own Service is headless: its name resolves to the pod's address.
    let own: Api<Service> = Api::namespaced(release.client().await, &ns);
    let headless = wait_for("the sandbox's Service", || async {
        Ok(own.get_opt("resolver").await?)
    })
    .await;
    assert_eq!(cluster_ip(headless), "None");
    let sandboxes: Api<rouse_shared::api::Sandbox> = Api::namespaced(release.client().await, &ns);
    let fqdn = wait_for("the sandbox's status.serviceFQDN", || async {
        let sandbox = sandboxes.get("resolver").await?;
        Ok(sandbox.status.and_then(|s| s.service_fqdn))
    })
    .await;
    assert_eq!(fqdn, format!("resolver.{ns}.svc.cluster.local"));
    let dashed = pod_ip.replace('.', "-");
    let names: Vec<(String, Value)> = vec![
        // Short names through the search list (ndots:5), as a program in the pod writes them.
        ("kubernetes.default".into(), json!(["10.96.0.1"])),
        ("rouse-proxy.rouse-system".into(), json!([proxy])),
        (
            "sandbox-router-svc.rouse-system.svc.cluster.local".into(),
            json!([router]),
        ),
        // Not the short name: the kubelet's /etc/hosts answers the pod's own hostname.
        (fqdn, json!([pod_ip])),
        (format!("{dashed}.{ns}.pod.cluster.local"), json!([pod_ip])),
        (
            format!("nothing-here.{ns}.svc.cluster.local"),
            json!("error -2"),
        ),
    ];
    let command = format!(
        "{RESOLVE} {} example.invalid",
        names
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let body = json!({"command": command}).to_string().into_bytes();
    let host = format!("resolver.{ns}.{}", node::DOMAIN);
    // The headless Service's EndpointSlice follows the pod's readiness: retried until then.
    let answers: Vec<Value> = wait_for("every name resolved as expected", || {
        let body = body.clone();
        let (host, names) = (&host, &names);
        async move {
            let headers = [("Content-Type", "application/json")];
            let (code, text) =
                node::http(release.proxy, "POST", "/execute", host, &headers, body).await?;
            anyhow::ensure!(code == 200, "execute: {code} {text}");
            let out: Value = serde_json::from_str(&text)?;
            let answers: Vec<Value> = out["stdout"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .map(serde_json::from_str)
                .collect::<Result<_, _>>()?;
            for (name, want) in names {
                let got = answers.iter().find(|a| a["name"] == name.as_str());
                anyhow::ensure!(
                    got.is_some_and(|g| &g["found"] == want),
                    "{name}: got {got:?}, want {want}; stderr {}",
                    out["stderr"]
                );
            }
            Ok(Some(answers))
        }
    })
    .await;
    // Outside the cluster domain the server refuses: the lookup fails (fast, not by timeout).
    let outside = answers
        .iter()
        .find(|a| a["name"] == "example.invalid")
        .expect("the outside name's answer");
    assert!(outside["found"].is_string(), "{outside}");
    for answer in &answers {
        eprintln!("dns from a gVisor pod: {answer}");
    }
}
