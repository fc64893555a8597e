//! The `process` runtime end to end.

use std::time::Duration;

use super::super::{Layout, WorkloadPhase};
use super::*;

#[tokio::test]
async fn starts_ready_with_env_cwd_volumes_and_log() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let script =
        format!("env > env.txt; pwd > cwd.txt; echo to-stdout; echo to-stderr >&2; {SERVE}");
    let workload = start(&layout, "box", &pod(&script));
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "ready", |s| s.ready).await;
    assert_eq!(status.phase, WorkloadPhase::Running);
    let host_port = status.ports.host_port(Some(8080));
    assert_eq!(
        status.ports.default_port, host_port,
        "the first port is PORT"
    );

    let volume = layout.volume_dir(&key("box"), "data");
    let env = read(&volume.join("env.txt"));
    assert!(env.contains(&format!("PORT={host_port}\n")), "{env}");
    assert!(
        env.contains(&format!("ROUSE_PORT_8080={host_port}\n")),
        "{env}"
    );
    assert!(
        env.contains(&format!("ROUSE_VOLUME_DATA={}\n", volume.display())),
        "{env}"
    );
    assert!(
        env.contains(&format!("GREETING=hello from {host_port}\n")),
        "{env}"
    );
    assert_eq!(
        read(&volume.join("cwd.txt")).trim(),
        volume.display().to_string()
    );

    let (code, body) = http_get(host_port, "/env.txt").await;
    assert_eq!(code, 200);
    assert!(body.contains("GREETING="));

    workload.stop().await;
    let log = read(&layout.log_file(&key("box")));
    for line in [
        "rouse: started pid",
        "to-stdout",
        "to-stderr",
        "rouse: stopped",
    ] {
        assert!(log.contains(line), "log lacks {line:?}: {log}");
    }
    assert!(
        !layout.pid_file(&key("box")).exists(),
        "pid file removed after stop"
    );
}

#[tokio::test]
async fn scratch_dir_is_the_cwd_without_volumes() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let mut pod = with_restart(pod("pwd > \"$HOME_OUT\"/cwd.txt"), "Never");
    pod.volumes = None;
    pod.containers[0].volume_mounts = None;
    let out = tempfile::tempdir().expect("tempdir");
    pod.containers[0].env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
        name: "HOME_OUT".into(),
        value: Some(out.path().display().to_string()),
        value_from: None,
    }]);
    let workload = start(&layout, "plain", &pod);
    let mut rx = workload.subscribe();
    wait_status(&mut rx, "succeeded", |s| {
        s.phase == WorkloadPhase::Succeeded
    })
    .await;
    assert_eq!(
        read(&out.path().join("cwd.txt")).trim(),
        layout.scratch_dir(&key("plain")).display().to_string()
    );
    workload.stop().await;
}

#[tokio::test]
async fn stop_kills_the_whole_group_after_the_grace_period() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    // The shell ignores SIGTERM, so only SIGKILL after the 1 s grace period ends it; its
    // background child must die with it.
    let mut pod = pod(&format!(
        "trap '' TERM; sleep 1000 & echo $! > child.pid; {SERVE} & wait"
    ));
    pod.termination_grace_period_seconds = Some(1);
    let workload = start(&layout, "group", &pod);
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "ready", |s| s.ready).await;
    let leader = status.pgid.expect("pgid") as i32;
    let volume = layout.volume_dir(&key("group"), "data");
    let child: i32 = wait_until("child pid file", || {
        read(&volume.join("child.pid")).trim().parse().ok()
    })
    .await;
    assert!(!process_gone(child));

    let started = tokio::time::Instant::now();
    workload.stop().await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "SIGTERM was ignored, so the grace period ran out"
    );
    assert!(process_gone(leader), "leader gone");
    wait_until("background child gone", || {
        process_gone(child).then_some(())
    })
    .await;
    let log = read(&layout.log_file(&key("group")));
    assert!(log.contains("rouse: stopped (killed by signal 9)"), "{log}");
}

#[tokio::test]
async fn never_exits_to_succeeded_or_failed() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    for (name, script, want) in [
        ("ok", "exit 0", WorkloadPhase::Succeeded),
        ("bad", "exit 3", WorkloadPhase::Failed),
    ] {
        let workload = start(&layout, name, &with_restart(pod(script), "Never"));
        let mut rx = workload.subscribe();
        let status = wait_status(&mut rx, "terminal phase", |s| {
            matches!(s.phase, WorkloadPhase::Succeeded | WorkloadPhase::Failed)
        })
        .await;
        assert_eq!(status.phase, want, "{name}");
        assert_eq!(status.restarts, 0, "{name}");
        assert!(!status.ready, "{name}");
        if want == WorkloadPhase::Failed {
            assert_eq!(status.message.as_deref(), Some("exit code 3"));
        }
        workload.stop().await;
    }
}

#[tokio::test]
async fn a_missing_program_fails_with_a_message() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let mut pod = with_restart(pod(""), "Never");
    pod.containers[0].command = Some(vec!["/nonexistent/program".into()]);
    let workload = start(&layout, "missing", &pod);
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "failed", |s| s.phase == WorkloadPhase::Failed).await;
    let message = status.message.expect("message");
    assert!(message.contains("/nonexistent/program"), "{message}");
    workload.stop().await;
}

#[tokio::test]
async fn on_failure_restarts_until_success_and_always_restarts_after_success() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    // Fails on the first run, succeeds on the second: the run count lives in the volume.
    let script = "echo run >> runs.txt; [ $(wc -l < runs.txt) -ge 2 ]";
    let workload = start(&layout, "flaky", &with_restart(pod(script), "OnFailure"));
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "succeeded", |s| {
        s.phase == WorkloadPhase::Succeeded
    })
    .await;
    assert_eq!(status.restarts, 1);
    workload.stop().await;

    let workload = start(&layout, "looping", &with_restart(pod("exit 0"), "Always"));
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "two restarts", |s| s.restarts >= 2).await;
    assert!(!matches!(
        status.phase,
        WorkloadPhase::Succeeded | WorkloadPhase::Failed
    ));
    workload.stop().await;
}

#[tokio::test]
async fn volumes_survive_stop_and_start() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let script = format!("[ -f note.txt ] && cp note.txt seen.txt; echo kept > note.txt; {SERVE}");
    let first = start(&layout, "keep", &pod(&script));
    wait_status(&mut first.subscribe(), "ready", |s| s.ready).await;
    first.stop().await;
    let volume = layout.volume_dir(&key("keep"), "data");
    assert!(!volume.join("seen.txt").exists());

    let second = start(&layout, "keep", &pod(&script));
    let status = wait_status(&mut second.subscribe(), "ready again", |s| s.ready).await;
    let (code, body) = http_get(status.ports.default_port, "/seen.txt").await;
    assert_eq!((code, body.trim()), (200, "kept"));
    second.stop().await;
}

#[tokio::test]
async fn http_readiness_probe_waits_for_a_good_status() {
    use k8s_openapi::api::core::v1::{HTTPGetAction, Probe};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let mut pod = pod(SERVE);
    pod.containers[0].readiness_probe = Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/ready".into()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(1),
        ..Probe::default()
    });
    let workload = start(&layout, "probe", &pod);
    let mut rx = workload.subscribe();
    let status = wait_status(&mut rx, "running", |s| s.phase == WorkloadPhase::Running).await;
    let port = status.ports.default_port;
    // The server answers 404 for /ready until the file exists, so it cannot be ready yet.
    wait_until_http(port).await;
    assert!(!workload.status().ready, "ready before /ready exists");
    std::fs::write(layout.volume_dir(&key("probe"), "data").join("ready"), "ok").expect("write");
    wait_status(&mut rx, "ready", |s| s.ready).await;
    workload.stop().await;
}

async fn wait_until_http(port: u16) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "server never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_port_taken_by_another_program_moves_the_workload_to_a_new_port() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    // The first run waits for `go` and then fails as if it could not bind its port; every
    // later run serves.
    let script = format!(
        "if [ ! -e ran ]; then touch ran; while [ ! -e go ]; do sleep 0.05; done; exit 1; fi; {SERVE}"
    );
    let workload = start(&layout, "moved", &pod(&script));
    let mut rx = workload.subscribe();
    let first = wait_status(&mut rx, "running", |s| s.phase == WorkloadPhase::Running).await;
    let volume = layout.volume_dir(&key("moved"), "data");
    wait_until("the first run started", || {
        volume.join("ran").exists().then_some(())
    })
    .await;
    // Another program takes the port before the workload binds it.
    let old = first.ports.default_port;
    let thief = std::net::TcpListener::bind(("127.0.0.1", old)).expect("take the port");
    std::fs::write(volume.join("go"), "").expect("write go");
    // (The thief's listener answers the readiness probe on the old port meanwhile.)
    let status = wait_status(&mut rx, "ready on another port", |s| {
        s.ready && s.ports.default_port != old
    })
    .await;
    assert!(status.restarts >= 1);
    let (code, _) = http_get(status.ports.default_port, "/").await;
    assert_eq!(code, 200);
    drop(thief);
    workload.stop().await;
}

#[test]
fn a_merge_workload_starts_through_the_trampoline_with_its_command_after_the_marker() {
    let data = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(data.path());
    let mut spec = LaunchSpec::from_pod(&pod("serve")).expect("valid pod");
    let (ports, _lease) = super::super::PortMap::allocate(&spec.ports).expect("ports");
    let plain =
        super::super::process::prepare(&layout, &key("box"), &spec, &ports).expect("prepared");
    assert_eq!(plain.program, Path::new("sh"));
    assert_eq!(plain.args, ["-c", "serve"]);

    spec.merge_exec = Some("/opt/rouse".into());
    let merged =
        super::super::process::prepare(&layout, &key("box"), &spec, &ports).expect("prepared");
    assert_eq!(merged.program, Path::new("/opt/rouse"));
    assert_eq!(merged.args, ["__merge-exec", "--", "sh", "-c", "serve"]);
    assert_eq!(
        (merged.env, merged.cwd),
        (plain.env, plain.cwd),
        "same environment and directory"
    );
}
