//! The standalone driver end to end: the embedded store, the local platform with real
//! processes, and the controller core in between.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, VolumeMount};
use rouse_shared::api::{
    EmbeddedObjectMetadata, OperatingMode, PersistentVolumeClaimTemplate, PodTemplate, Sandbox,
    SandboxSpec,
};
use rouse_shared::store::{DeleteParams, Deletion, ObjectKey, Patch, Store};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{DriverConfig, DriverError, run_with};
use crate::platform::local::{LocalConfig, LocalPlatform};
use crate::store::{EmbeddedStore, STORE_FILE_NAME};

const DEADLINE: Duration = Duration::from_secs(30);
const SERVE: &str = "exec python3 -m http.server --bind 127.0.0.1 $PORT";

fn sandbox(name: &str, script: &str) -> Sandbox {
    let mut sandbox = Sandbox::new(
        name,
        SandboxSpec {
            pod_template: PodTemplate {
                spec: PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                        ports: Some(vec![ContainerPort {
                            container_port: 8080,
                            ..ContainerPort::default()
                        }]),
                        volume_mounts: Some(vec![VolumeMount {
                            name: "data".into(),
                            mount_path: "/data".into(),
                            ..VolumeMount::default()
                        }]),
                        ..Container::default()
                    }],
                    termination_grace_period_seconds: Some(5),
                    ..PodSpec::default()
                },
                ..PodTemplate::default()
            },
            volume_claim_templates: vec![PersistentVolumeClaimTemplate {
                metadata: EmbeddedObjectMetadata {
                    name: "data".into(),
                    ..EmbeddedObjectMetadata::default()
                },
                ..PersistentVolumeClaimTemplate::default()
            }],
            ..SandboxSpec::default()
        },
    );
    sandbox.metadata.namespace = Some("default".into());
    sandbox
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("default", name)
}

/// A data directory with a store in it.
struct Env {
    dir: tempfile::TempDir,
    store: EmbeddedStore,
    /// The platform's settings (the runsc the gvisor tests use).
    config: LocalConfig,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).expect("store");
        let config = LocalConfig::new(dir.path());
        Self { dir, store, config }
    }

    fn data(&self) -> &Path {
        self.dir.path()
    }

    /// Starts a driver on a fresh platform over the data directory.
    fn start(&self) -> Driver {
        let platform = LocalPlatform::new(self.config.clone()).expect("platform");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_with(
            self.store.clone(),
            platform.clone(),
            DriverConfig::default(),
            shutdown.clone(),
        ));
        Driver {
            platform,
            shutdown,
            task,
        }
    }

    /// Waits until the stored sandbox satisfies `what`.
    async fn wait(&self, name: &str, condition: &str, what: impl Fn(&Sandbox) -> bool) -> Sandbox {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let got: Result<Sandbox, _> = self.store.get(&key(name)).await;
            if let Ok(sandbox) = &got
                && what(sandbox)
            {
                return sandbox.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {condition}; last {:?}",
                got.map(|s| s.status)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn set_mode(&self, name: &str, mode: OperatingMode) {
        let patch = Patch::merge(serde_json::json!({"spec": {"operatingMode": mode}}))
            .expect("object patch");
        let _: Sandbox = self.store.patch(&key(name), &patch).await.expect("patch");
    }
}

struct Driver {
    platform: LocalPlatform,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), DriverError>>,
}

impl Driver {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("driver stops in time")
            .expect("driver task")
            .expect("driver result");
    }
}

fn condition<'a>(sandbox: &'a Sandbox, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    sandbox
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

fn is_ready(sandbox: &Sandbox) -> bool {
    condition(sandbox, "Ready").is_some_and(|c| c.0 == "True")
}

/// The port the proxy would dial for container port 8080.
fn endpoint_port(sandbox: &Sandbox) -> u16 {
    let endpoint = sandbox
        .status
        .as_ref()
        .and_then(|s| s.endpoint.as_ref())
        .expect("endpoint");
    assert_eq!(endpoint.address, "127.0.0.1");
    let port = endpoint
        .ports
        .iter()
        .find(|p| p.container_port == 8080)
        .expect("port 8080 mapped");
    u16::try_from(port.port).expect("port number")
}

/// Where the proxy would dial container port 8080: the endpoint's address and port.
fn endpoint_addr(sandbox: &Sandbox) -> std::net::SocketAddr {
    let endpoint = sandbox
        .status
        .as_ref()
        .and_then(|s| s.endpoint.as_ref())
        .expect("endpoint");
    let port = endpoint
        .ports
        .iter()
        .find(|p| p.container_port == 8080)
        .expect("port 8080 mapped");
    let ip: std::net::IpAddr = endpoint.address.parse().expect("an IP address");
    (ip, u16::try_from(port.port).expect("port number")).into()
}

async fn get(port: u16, path: &str) -> Option<String> {
    get_at((std::net::Ipv4Addr::LOCALHOST, port).into(), path).await
}

async fn get_at(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut response))
        .await
        .ok()?
        .ok()?;
    response.starts_with("HTTP/1.0 200").then(|| {
        response
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .trim()
            .to_owned()
    })
}

fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

#[tokio::test]
async fn create_suspend_resume_and_delete() {
    let env = Env::new();
    let driver = env.start();
    let script = format!("echo $$ >> starts.txt; {SERVE}");
    let _: Sandbox = env
        .store
        .create(&sandbox("web", &script))
        .await
        .expect("create");

    let ready = env.wait("web", "Ready=True", is_ready).await;
    let port = endpoint_port(&ready);
    assert_eq!(
        get(port, "/starts.txt").await.map(|b| b.lines().count()),
        Some(1)
    );
    let status = ready.status.as_ref().expect("status");
    assert_eq!(status.pod_ips, ["127.0.0.1"]);
    assert_eq!(
        condition(&ready, "Suspended").map(|c| c.1),
        Some("NotSuspended")
    );

    env.set_mode("web", OperatingMode::Suspended).await;
    let suspended = env
        .wait("web", "Suspended=True", |s| {
            condition(s, "Suspended").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(
        condition(&suspended, "Ready").map(|c| c.1),
        Some("SandboxSuspended")
    );
    assert!(
        suspended
            .status
            .as_ref()
            .is_some_and(|s| s.endpoint.is_none())
    );
    assert!(!listening(port), "the workload is gone while suspended");
    assert!(driver.platform.workload_status(&key("web")).is_none());

    env.set_mode("web", OperatingMode::Running).await;
    let resumed = env.wait("web", "Ready=True again", is_ready).await;
    let body = get_at(endpoint_addr(&resumed), "/starts.txt")
        .await
        .expect("served");
    assert_eq!(
        body.lines().count(),
        2,
        "the volume kept the first start's line: {body}"
    );

    let volume = driver.platform.layout().volume_dir(&key("web"), "data");
    assert!(volume.is_dir());
    let _: Deletion<Sandbox> = env
        .store
        .delete(&key("web"), &DeleteParams::default())
        .await
        .expect("delete");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while volume.exists() || driver.platform.workload_status(&key("web")).is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deleted sandbox not cleaned up"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    driver.stop().await;
}

#[tokio::test]
async fn an_exit_with_restart_policy_never_finishes_the_sandbox() {
    let env = Env::new();
    let driver = env.start();
    let mut failing = sandbox("job", "exit 7");
    failing.spec.pod_template.spec.restart_policy = Some("Never".into());
    let _: Sandbox = env.store.create(&failing).await.expect("create");
    let finished = env
        .wait("job", "Finished", |s| condition(s, "Finished").is_some())
        .await;
    assert_eq!(
        condition(&finished, "Finished").map(|c| (c.0, c.1)),
        Some(("True", "PodFailed"))
    );
    assert_eq!(
        condition(&finished, "Ready").map(|c| c.1),
        Some("PodFailed")
    );
    driver.stop().await;
}

#[tokio::test]
async fn a_pod_standalone_cannot_run_gets_a_reconciler_error() {
    let env = Env::new();
    let driver = env.start();
    let mut bad = sandbox("bad", "unused");
    bad.spec.pod_template.spec.containers[0].command = None;
    let _: Sandbox = env.store.create(&bad).await.expect("create");
    let failed = env
        .wait("bad", "ReconcilerError", |s| {
            condition(s, "Ready").is_some_and(|c| c.1 == "ReconcilerError")
        })
        .await;
    let message = condition(&failed, "Ready").map(|c| c.2).unwrap_or_default();
    assert!(
        message.contains("containers[0].command is empty"),
        "{message}"
    );
    driver.stop().await;
}

#[tokio::test]
async fn shutdown_stops_workloads_and_a_restart_resumes_them() {
    let env = Env::new();
    let driver = env.start();
    let script = format!("echo $$ >> starts.txt; {SERVE}");
    let _: Sandbox = env
        .store
        .create(&sandbox("kept", &script))
        .await
        .expect("create");
    let first = env.wait("kept", "Ready=True", is_ready).await;
    let first_port = endpoint_port(&first);
    driver.stop().await;
    assert!(!listening(first_port), "shutdown stopped the workload");

    let driver = env.start();
    let again = env
        .wait("kept", "Ready=True on a new port", |s| {
            is_ready(s)
                && s.status
                    .as_ref()
                    .and_then(|st| st.endpoint.as_ref())
                    .is_some_and(|e| e.ports.iter().all(|p| p.port != i32::from(first_port)))
        })
        .await;
    let body = get(endpoint_port(&again), "/starts.txt")
        .await
        .expect("served");
    assert_eq!(
        body.lines().count(),
        2,
        "same volume after the restart: {body}"
    );
    driver.stop().await;
}

#[tokio::test]
async fn a_second_driver_on_one_platform_is_refused() {
    let env = Env::new();
    let platform = LocalPlatform::new(LocalConfig::new(env.data())).expect("platform");
    let _changes = platform.take_changes();
    let result = run_with(
        env.store.clone(),
        platform,
        DriverConfig::default(),
        CancellationToken::new(),
    )
    .await;
    assert!(matches!(result, Err(DriverError::ChangesTaken)));
}

#[tokio::test]
async fn a_new_platform_kills_process_groups_left_by_a_crash() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let env = Env::new();
    let layout = crate::platform::local::Layout::new(env.data());
    let mut orphan = std::process::Command::new("sleep")
        .arg("1000")
        .process_group(0)
        .spawn()
        .expect("spawn sleep");
    crate::platform::local::write_pid_file(&layout.pid_file(&key("lost")), orphan.id());
    let _platform = LocalPlatform::new(LocalConfig::new(env.data())).expect("platform");
    let status = orphan.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "the leftover group was killed");
    assert!(!layout.pid_file(&key("lost")).exists());
}

#[tokio::test]
async fn gvisor_sandbox_runs_suspends_and_resumes_with_its_volume() {
    let Some(runsc) = rouse_testsupport::gvisor::available("the gvisor driver test") else {
        return;
    };
    let mut env = Env::new();
    env.config.runsc = runsc;
    let driver = env.start();
    // As in a pod: it listens on its container port on every address of its own namespace.
    let mut boxed = sandbox(
        "gv",
        "echo start >> /data/starts.txt; exec python3 -m http.server 8080",
    );
    boxed.spec.pod_template.spec.runtime_class_name = Some("gvisor".into());
    let _: Sandbox = env.store.create(&boxed).await.expect("create");
    let ready = env.wait("gv", "Ready=True under gvisor", is_ready).await;
    assert_eq!(
        get_at(endpoint_addr(&ready), "/starts.txt")
            .await
            .as_deref(),
        Some("start")
    );

    env.set_mode("gv", OperatingMode::Suspended).await;
    env.wait("gv", "Suspended=True", |s| {
        condition(s, "Suspended").is_some_and(|c| c.0 == "True")
    })
    .await;
    env.set_mode("gv", OperatingMode::Running).await;
    let resumed = env.wait("gv", "Ready=True again", is_ready).await;
    let body = get_at(endpoint_addr(&resumed), "/starts.txt")
        .await
        .expect("served");
    assert_eq!(
        body.lines().count(),
        2,
        "the volume survived the suspend: {body}"
    );
    driver.stop().await;
}

#[tokio::test]
async fn a_restart_marks_the_last_runs_ready_sandboxes_not_ready() {
    let env = Env::new();
    let created: Sandbox = env
        .store
        .create(&sandbox("left", "exit 0"))
        .await
        .expect("create");
    let key = ObjectKey::of(&created);
    // What a previous run left: Ready with an endpoint nothing listens on.
    let status = serde_json::json!({"status": {
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "DependenciesReady",
             "message": "ready", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Suspended", "status": "False", "reason": "NotSuspended",
             "message": "running", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
        "endpoint": {"address": "127.0.0.1", "ports": [{"containerPort": 8080, "port": 41234}]},
        "podIPs": ["127.0.0.1"],
    }});
    let _: Sandbox = env
        .store
        .patch_status(&key, &Patch::merge(status).expect("object"))
        .await
        .expect("status");
    let quiet: Sandbox = env
        .store
        .create(&sandbox("never", "exit 0"))
        .await
        .expect("create");

    assert_eq!(
        super::super::mark_not_ready(&env.store)
            .await
            .expect("marked"),
        1
    );
    let left: Sandbox = env.store.get(&key).await.expect("get");
    let status = left.status.expect("status");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "DependenciesNotReady")
    );
    assert!(
        status.endpoint.is_none() && status.pod_ips.is_empty(),
        "{status:?}"
    );
    let suspended = status.conditions.iter().find(|c| c.type_ == "Suspended");
    assert_eq!(
        suspended.map(|c| c.status.as_str()),
        Some("False"),
        "others kept"
    );
    let untouched: Sandbox = env.store.get(&ObjectKey::of(&quiet)).await.expect("get");
    assert_eq!(
        untouched.metadata.resource_version,
        quiet.metadata.resource_version
    );
    // Idempotent: nothing claims readiness any more.
    assert_eq!(
        super::super::mark_not_ready(&env.store)
            .await
            .expect("marked"),
        0
    );
}
