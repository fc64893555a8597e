//! The `gvisor` runtime end to end with `runsc` (the pinned build of
//! testsupport/gvisor/build.sh). Under CI (`CI` set) a missing runsc fails the test; elsewhere
//! the test is skipped with a printed reason.

use super::super::netns::Netns;
use super::super::{GvisorConfig, Layout, Runsc, RunscInfo, WorkloadPhase};
use super::*;

/// The runsc to test with, or `None` (after printing why) when it is missing outside CI.
fn runsc(layout: &Layout) -> Option<Runsc> {
    let program = rouse_testsupport::gvisor::available("the gvisor runtime test")?;
    Some(Runsc::locate(&program, layout, &GvisorConfig::default()).expect("a usable runsc"))
}

#[tokio::test]
async fn gvisor_starts_ready_serves_a_volume_and_stops() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let Some(runsc) = runsc(&layout) else { return };
    // As in a pod: it listens on its container port on every address of its own namespace.
    let mut pod = pod(
        "echo \"$ROUSE_VOLUME_DATA $(pwd)\" > where.txt; touch /etc/rouse-overlay-probe; \
         exec python3 -m http.server 8080",
    );
    pod.runtime_class_name = Some("gvisor".into());
    pod.termination_grace_period_seconds = Some(2);
    let spec = LaunchSpec::from_pod(&pod).expect("valid pod");
    let workload = Workload::start(&layout, Some(&runsc), key("gbox"), spec, notify_none())
        .expect("workload starts");
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "ready under runsc", |s| s.ready).await;
    assert_eq!(status.ports.mapped, vec![(8080, 8080)], "its own ports");
    assert!(!status.ports.host.is_loopback(), "its own address");
    let (code, body) = http_get_at(status.ports.host, 8080, "/where.txt").await;
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

    let netns = Netns::recorded(&layout, &key("gbox")).expect("its namespace is recorded");
    assert!(netns.path().exists(), "its namespace exists while it runs");
    workload.stop().await;
    assert_eq!(rx.borrow().phase, WorkloadPhase::Stopped);
    // Its address is gone with its namespace. (Not probed by a connect: with the namespace
    // gone the address routes off the machine, where a network may answer anything.)
    assert!(
        !netns.path().exists(),
        "the namespace is deleted after the stop"
    );
    assert!(
        Netns::recorded(&layout, &key("gbox")).is_none(),
        "its index is released"
    );
    assert_eq!(runsc.delete_all().await, 0, "the container was removed");
    assert!(
        !layout.data().join("run/netns/default/gbox").exists(),
        "its network namespace went with it (nothing to restore into it)"
    );
}

#[test]
fn missing_runsc_is_a_clear_error() {
    let layout = Layout::new("/nonexistent");
    let error = Runsc::locate(
        Path::new("/nonexistent/runsc"),
        &layout,
        &GvisorConfig::default(),
    )
    .expect_err("missing");
    let message = error.to_string();
    assert!(
        message.contains("runsc") && message.contains("testsupport/gvisor/build.sh"),
        "{message}"
    );
}

#[test]
fn an_old_runsc_is_refused_naming_what_to_install() {
    use std::os::unix::fs::PermissionsExt;
    // A stand-in that answers like Debian's runsc of 2022.
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("runsc");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 'runsc version 0.0~20221219.0';;\n\
         flags) echo '  -platform string'; printf '    \\tspecifies which platform to use: ptrace (default), kvm.\\n';;\n\
         *) echo 'restore [flags]';;\nesac\n",
    )
    .expect("write");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let error = Runsc::locate(&fake, &Layout::new(dir.path()), &GvisorConfig::default())
        .expect_err("too old");
    let message = error.to_string();
    assert!(message.contains("0.0~20221219.0"), "{message}");
    assert!(message.contains("systrap"), "{message}");
    assert!(message.contains("testsupport/gvisor/build.sh"), "{message}");
    assert_eq!(error.metric_label(), "runtime_unusable");
    let info = super::super::gvisor::probe(&fake).expect("probed");
    assert_eq!(
        info,
        RunscInfo::parse("runsc version 0.0~20221219.0", "", "")
    );
}
