//! `rouse controller` end to end: the real binary against the in-process fake API server and
//! kubelet, found through a kubeconfig; a Sandbox becomes Ready, the probes and metrics answer,
//! and SIGTERM stops it cleanly and releases the lease.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Container;
use kube::Api;
use kube::api::PostParams;
use rouse_shared::api::{Sandbox, SandboxSpec};
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};

const DEADLINE: Duration = Duration::from_secs(30);

/// Kills the child if the test fails before it exits.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the probe server");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_command_reconciles_and_stops_on_sigterm() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: test\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: test\n\
             current-context: fake\n",
            server.url()
        ),
    )
    .expect("write kubeconfig");

    let child = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .args([
            "controller",
            "--metrics-address",
            "127.0.0.1:0",
            "--lease-namespace",
            "default",
        ])
        .args([
            "--identity",
            "cli-test",
            "--lease-duration",
            "5s",
            "--lease-retry",
            "500ms",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start rouse controller");
    let mut child = Guard(child);

    // The log line naming the probe address.
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("metrics.address=").nth(1) {
                let addr = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let _ = tx.send(addr);
            }
        }
    });
    let addr: SocketAddr = rx
        .recv_timeout(DEADLINE)
        .expect("the controller logs its probe address")
        .parse()
        .expect("a socket address");
    assert!(http_get(addr, "/healthz").starts_with("HTTP/1.1 200"));

    let client = server.client().expect("client");
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), "default");
    let mut sandbox = Sandbox::new(
        "cli",
        SandboxSpec::running(Container {
            name: "main".into(),
            image: Some("busybox".into()),
            ..Container::default()
        }),
    );
    sandbox.metadata.namespace = Some("default".into());
    sandboxes
        .create(&PostParams::default(), &sandbox)
        .await
        .expect("create sandbox");

    let end = Instant::now() + DEADLINE;
    let mut last = None;
    loop {
        let s = sandboxes.get("cli").await.expect("get sandbox");
        let ready = s.status.as_ref().and_then(|st| {
            st.conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.clone())
        });
        if ready.as_deref() == Some("True") {
            break;
        }
        assert!(
            Instant::now() < end,
            "sandbox never Ready; last status: {last:?}"
        );
        last = s.status;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(http_get(addr, "/readyz").starts_with("HTTP/1.1 200"));
    let metrics = http_get(addr, "/metrics");
    assert!(
        metrics.contains("rouse_controller_reconciles_total"),
        "{metrics}"
    );
    assert!(metrics.contains("rouse_controller_leader 1"), "{metrics}");

    let leases: Api<Lease> = Api::namespaced(client, "default");
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(
        holder(leases.get("rouse-controller").await.expect("lease")).as_deref(),
        Some("cli-test")
    );

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("send SIGTERM");
    assert!(status.success());
    let end = Instant::now() + DEADLINE;
    let exit = loop {
        if let Some(exit) = child.0.try_wait().expect("wait") {
            break exit;
        }
        assert!(
            Instant::now() < end,
            "the controller did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        holder(leases.get("rouse-controller").await.expect("lease")),
        None,
        "lease released"
    );
}
