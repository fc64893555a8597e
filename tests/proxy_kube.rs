//! `rouse proxy` in Kubernetes mode: the real binary finds the in-process fake API server
//! through a kubeconfig, follows the Sandboxes of its namespace and proxies to their endpoints.

mod kube_common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use kube::Api;
use kube::api::PostParams;
use kube_common::{DEADLINE, backend, get, sandbox, wait_for};
use rouse_shared::api::Sandbox;
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
fn mark_ready(server: &FakeApiServer, namespace: &str, name: &str, port: u16) {
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
    server
        .merge_patch("sandboxes", namespace, name, &status, true)
        .expect("patch status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_command_routes_the_sandboxes_of_its_namespace() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    write_kubeconfig(&kubeconfig, &server.url());
    let config = dir.path().join("proxy.toml");
    std::fs::write(
        &config,
        "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
         [directory]\nkind = \"store\"\nnamespace = \"team-a\"\n",
    )
    .expect("write config");

    let child = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .args(["proxy", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &kubeconfig)
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
    let client = server.client().expect("client");
    for (namespace, port) in [("team-a", web.port()), ("team-b", web.port())] {
        let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), namespace);
        sandboxes
            .create(
                &PostParams::default(),
                &sandbox(namespace, "web", port, json!({})),
            )
            .await
            .expect("create sandbox");
        mark_ready(&server, namespace, "web", port);
    }

    let body = wait_for("web.team-a routed", || async {
        match get(proxy, "web.team-a.sandbox.localhost").await {
            (200, body) => Ok(body),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(body, "backend web");
    // Out of the proxy's namespace scope: unknown.
    let (code, _) = get(proxy, "web.team-b.sandbox.localhost").await;
    assert_eq!(code, 404);
    assert!(
        server.requests().count("watch", "sandboxes") >= 1,
        "{:?}",
        server.requests()
    );

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
