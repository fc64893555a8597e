//! `rouse proxy` in Kubernetes mode: the real binary finds the API server through a
//! kubeconfig, follows the Sandboxes of its namespace and proxies to their endpoints. Runs
//! against the in-process fake API server, and against the real control plane of
//! `rouse_testsupport::cluster` as the proxy's ServiceAccount with exactly the RBAC of
//! `deploy/kubernetes/proxy-rbac.yaml` (skipped when its binaries are missing, outside CI).

mod kube_common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_common::{DEADLINE, backend, get, sandbox, wait_for};
use rouse_shared::api::Sandbox;
use rouse_testsupport::cluster::{self, SYSTEM_NAMESPACE};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;

/// Kills the child if the test fails before it exits.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes a kubeconfig for the API server at `url` (no credentials) to `path`.
pub fn write_kubeconfig(path: &Path, url: &str) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
             users:\n- name: test\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: test\n\
             current-context: fake\n"
        ),
    )
    .expect("write kubeconfig");
}

/// Marks a sandbox Ready with an endpoint on 127.0.0.1, as the controller would.
async fn mark_ready(client: &Client, namespace: &str, name: &str, port: u16) {
    let status = json!({"status": {
        "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "DependenciesReady",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }],
        "endpoint": {"address": "127.0.0.1", "ports": [{"containerPort": port, "port": port}]},
    }});
    Api::<Sandbox>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("patch status");
}

/// Starts `rouse proxy` for namespace `mine` with `kubeconfig`, creates a Ready sandbox `web`
/// in `mine` and in `other` (with `client`), and checks that only the first is routed; then
/// stops the proxy with SIGTERM and checks it exits cleanly.
async fn routes_the_sandboxes_of_its_namespace(
    client: &Client,
    kubeconfig: &Path,
    mine: &str,
    other: &str,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
             [directory]\nkind = \"store\"\nnamespace = \"{mine}\"\n"
        ),
    )
    .expect("write config");

    let child = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .args(["proxy", "--config"])
        .arg(&config)
        .env("KUBECONFIG", kubeconfig)
        .env("ROUSE_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rouse proxy");
    let mut child = Guard(child);
    let stderr = child.0.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listener.addr=").nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = tx.send(addr.to_owned());
            } else if line.contains("ERROR") || line.contains("WARN") {
                eprintln!("rouse proxy: {line}");
            }
        }
    });
    let proxy: SocketAddr = rx
        .recv_timeout(DEADLINE)
        .expect("the proxy logs its listener")
        .parse()
        .expect("a socket address");

    // Created after the proxy started: it arrives through the watch.
    let web = backend("web").await;
    for namespace in [mine, other] {
        let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), namespace);
        sandboxes
            .create(
                &PostParams::default(),
                &sandbox(namespace, "web", web.port(), json!({})),
            )
            .await
            .expect("create sandbox");
        mark_ready(client, namespace, "web", web.port()).await;
    }

    let host = format!("web.{mine}.sandbox.localhost");
    let body = wait_for(&format!("{host} routed"), || async {
        match get(proxy, &host).await {
            (200, body) => Ok(body),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(body, "backend web");
    // Out of the proxy's namespace scope: unknown.
    let (code, _) = get(proxy, &format!("web.{other}.sandbox.localhost")).await;
    assert_eq!(code, 404);

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("send SIGTERM");
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.0.wait())
        .await
        .expect("join")
        .expect("wait for rouse");
    assert!(exit.success(), "{exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_command_routes_the_sandboxes_of_its_namespace() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    write_kubeconfig(&kubeconfig, &server.url());
    let client = server.client().expect("client");
    routes_the_sandboxes_of_its_namespace(&client, &kubeconfig, "team-a", "team-b").await;
    assert!(
        server.requests().count("watch", "sandboxes") >= 1,
        "{:?}",
        server.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_api_server_proxy_routes_as_its_service_account() {
    let test = "real_api_server_proxy_routes_as_its_service_account";
    let Some(plane) = cluster::shared_or_skip(test) else {
        return;
    };
    let client = plane.client().await.expect("admin client");
    cluster::install(&client)
        .await
        .expect("install CRDs and RBAC");
    let mine = cluster::test_namespace(&client, "proxy-mine")
        .await
        .expect("namespace");
    let other = cluster::test_namespace(&client, "proxy-other")
        .await
        .expect("namespace");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    plane
        .write_service_account_kubeconfig(&kubeconfig, SYSTEM_NAMESPACE, "rouse-proxy")
        .expect("kubeconfig");
    routes_the_sandboxes_of_its_namespace(&client, &kubeconfig, &mine, &other).await;
}
