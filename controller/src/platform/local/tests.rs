//! End-to-end tests of the local runtimes with real processes on 127.0.0.1, and table tests
//! of the pod-spec checks.

mod gvisor;
mod process;
mod spec;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, PersistentVolumeClaimVolumeSource, PodSpec, Volume,
    VolumeMount,
};
use rouse_shared::store::ObjectKey;
use tokio::sync::watch;

use super::{LaunchSpec, Layout, Notify, Workload, WorkloadStatus};

/// The generous bound of every wait: it only limits how long a failure takes.
const DEADLINE: Duration = Duration::from_secs(30);

/// A small HTTP server on `$PORT` serving the working directory, started by `sh` so the
/// workload is a process group of more than one process.
const SERVE: &str = "exec python3 -m http.server --bind 127.0.0.1 $PORT";

/// A pod running `sh -c script` with a `data` volume mounted at `/data` and port 8080.
fn pod(script: &str) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "main".into(),
            command: Some(vec!["sh".into(), "-c".into(), script.into()]),
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                name: Some("http".into()),
                ..ContainerPort::default()
            }]),
            volume_mounts: Some(vec![VolumeMount {
                name: "data".into(),
                mount_path: "/data".into(),
                ..VolumeMount::default()
            }]),
            env: Some(vec![EnvVar {
                name: "GREETING".into(),
                value: Some("hello from $(PORT)".into()),
                value_from: None,
            }]),
            ..Container::default()
        }],
        volumes: Some(vec![Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "data-box".into(),
                read_only: None,
            }),
            ..Volume::default()
        }]),
        termination_grace_period_seconds: Some(5),
        ..PodSpec::default()
    }
}

fn with_restart(mut pod: PodSpec, policy: &str) -> PodSpec {
    pod.restart_policy = Some(policy.into());
    pod
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("default", name)
}

fn notify_none() -> Notify {
    Arc::new(|_: &ObjectKey| {})
}

fn start(layout: &Layout, name: &str, pod: &PodSpec) -> Workload {
    let spec = LaunchSpec::from_pod(pod).expect("valid pod");
    Workload::start(layout, None, key(name), spec, notify_none()).expect("workload starts")
}

/// Waits until the workload's status satisfies `what`, naming the condition on failure.
async fn wait_status(
    rx: &mut watch::Receiver<WorkloadStatus>,
    condition: &str,
    what: impl FnMut(&WorkloadStatus) -> bool,
) -> WorkloadStatus {
    let outcome = tokio::time::timeout(DEADLINE, rx.wait_for(what))
        .await
        .map(|r| r.map(|status| status.clone()));
    match outcome {
        Ok(Ok(status)) => status,
        Ok(Err(_)) => panic!("workload gone while waiting for {condition}"),
        Err(_) => panic!(
            "timed out waiting for {condition}; last status {:?}",
            *rx.borrow()
        ),
    }
}

/// Waits until `probe` returns `Some`, polling with a short pause, up to the deadline.
async fn wait_until<T>(condition: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {condition}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One HTTP GET to 127.0.0.1:port; the status code and body.
async fn http_get(port: u16, path: &str) -> (u16, String) {
    http_get_at(std::net::Ipv4Addr::LOCALHOST, port, path).await
}

/// One HTTP GET to host:port; the status code and body.
async fn http_get_at(host: std::net::Ipv4Addr, port: u16, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tokio::time::timeout(DEADLINE, stream.read_to_string(&mut response))
        .await
        .expect("response in time")
        .expect("read");
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (code, body)
}

/// True when a process no longer runs (gone, or a zombie awaiting its new parent's reap).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
