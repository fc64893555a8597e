//! The `gvisor` runtime end to end with `runsc`. Under CI (`CI` set) a missing runsc fails the
//! test; elsewhere the test is skipped with a printed reason.

use super::super::{Layout, Runsc, WorkloadPhase};
use super::*;

/// The runsc to test with, or `None` (after printing why) when it is missing outside CI.
fn runsc(layout: &Layout) -> Option<Runsc> {
    match Runsc::locate(Path::new("runsc"), layout) {
        Ok(runsc) => Some(runsc),
        Err(error) if std::env::var_os("CI").is_some() => {
            panic!("CI must run the gvisor tests, but: {error}")
        }
        Err(error) => {
            eprintln!("skipping the gvisor runtime test: {error}");
            None
        }
    }
}

#[tokio::test]
async fn gvisor_starts_ready_serves_a_volume_and_stops() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let Some(runsc) = runsc(&layout) else { return };
    let mut pod = pod(&format!(
        "echo \"$ROUSE_VOLUME_DATA $(pwd)\" > where.txt; touch /etc/rouse-overlay-probe; {SERVE}"
    ));
    pod.runtime_class_name = Some("gvisor".into());
    pod.termination_grace_period_seconds = Some(2);
    let spec = LaunchSpec::from_pod(&pod).expect("valid pod");
    let workload = Workload::start(&layout, Some(&runsc), key("gbox"), spec, notify_none())
        .expect("workload starts");
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "ready under runsc", |s| s.ready).await;
    let (code, body) = http_get(status.ports.default_port, "/where.txt").await;
    assert_eq!(code, 200);
    assert_eq!(
        body.trim(),
        "/data /data",
        "volume mounted at its mountPath and used as cwd"
    );
    assert!(
        !Path::new("/etc/rouse-overlay-probe").exists(),
        "a write to the sandbox's root must not reach the host"
    );
    let volume = layout.volume_dir(&key("gbox"), "data");
    assert!(
        volume.join("where.txt").exists(),
        "the volume is the host directory"
    );

    workload.stop().await;
    assert_eq!(rx.borrow().phase, WorkloadPhase::Stopped);
    let port = status.ports.default_port;
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "nothing listens after the stop"
    );
    assert_eq!(runsc.delete_all().await, 0, "the container was removed");
}

#[test]
fn missing_runsc_is_a_clear_error() {
    let layout = Layout::new("/nonexistent");
    let error = Runsc::locate(Path::new("/nonexistent/runsc"), &layout).expect_err("missing");
    let message = error.to_string();
    assert!(
        message.contains("runsc") && message.contains("apt-get install runsc"),
        "{message}"
    );
}
