//! The workload part of the chaos and abuse suite (issue 24), against the real `rouse up`: a
//! workload's detached descendants (`setsid`, even with a cleared environment) die with it at
//! every stop — delete, suspend, a restart after an exit, shutdown — also under gVisor; a
//! crash loop says so in the sandbox's status; and `kill -9` of `rouse up` in the middle of a
//! wake loses nothing acknowledged, leaves no process behind and the restarted process serves
//! the sandbox and the others. Every loop is bounded, every wait is on a condition with a
//! deadline (processes are watched by pid in `/proc`).

mod support;

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse, SERVE, alive, condition, eventually, sandbox};

/// Starts two detached descendants that record their pids in the working directory (the
/// volume): one in a new session (`kept.pids`), and, with `cleared`, one that also clears its
/// environment (`cleared.pids`), which only a cgroup holds. Appends, so restarts add lines.
/// (`$$$$` is the shell's `$$` once Rouse expanded `$(VAR)` references.)
fn detach(cleared: bool) -> String {
    let mut script =
        "(setsid sh -c 'echo $$$$ >> kept.pids; exec sleep 7771' > /dev/null 2>&1 &); ".to_owned();
    if cleared {
        script.push_str(
            "(setsid env -i sh -c 'echo $$$$ >> cleared.pids; exec sleep 7772' > /dev/null 2>&1 &); ",
        );
    }
    script
}

/// The pids recorded in `file` so far.
fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits until `file` holds at least `count` pids and returns them.
async fn recorded(rouse: &Rouse, file: &Path, count: usize) -> Vec<i32> {
    let until = std::time::Instant::now() + DEADLINE;
    loop {
        let found = pids(file);
        if found.len() >= count {
            return found;
        }
        if std::time::Instant::now() > until {
            rouse.fail(&format!(
                "{} holds {} pids, not {count}, after {DEADLINE:?}",
                file.display(),
                found.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every process in `pids` is gone (a zombie counts as gone).
async fn all_gone(what: &str, pids: &[i32]) {
    eventually(&format!("{what}: processes {pids:?} gone"), || {
        pids.iter().all(|pid| !alive(*pid))
    })
    .await;
}

/// The descendants' pid files of sandbox `name` (in its volume).
fn pid_files(rouse: &Rouse, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let volume = rouse.volume(name, "work");
    (volume.join("kept.pids"), volume.join("cleared.pids"))
}

/// The first recorded descendants of `name` (both kinds when `cleared`).
async fn descendants(rouse: &Rouse, name: &str, cleared: bool) -> Vec<i32> {
    let (kept, wiped) = pid_files(rouse, name);
    let mut found = recorded(rouse, &kept, 1).await;
    if cleared {
        found.extend(recorded(rouse, &wiped, 1).await);
    }
    found
}

/// A merge patch of a sandbox's spec through the REST API.
async fn patch_spec(rouse: &Rouse, name: &str, spec: Value) {
    let mut headers = vec![("content-type", "application/merge-patch+json".to_owned())];
    if let Some(token) = &rouse.token {
        headers.push(("authorization", format!("Bearer {token}")));
    }
    let path = format!("/v1/namespaces/default/sandboxes/{name}");
    let body = json!({"spec": spec}).to_string();
    match support::http(rouse.api, "PATCH", &path, "localhost", &headers, body).await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("PATCH {path}: {other:?}")),
    }
}

/// Whether process `pid` runs in a cgroup `rouse up` made (a `rouse-*` directory).
fn in_rouse_cgroup(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .is_ok_and(|c| c.lines().any(|l| l.contains("/rouse-")))
}

/// Whether the run must use cgroups: under CI, which runs as root on hosts that have them.
fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Starts sandbox `other` (a plain web server) and waits until it is served; true when its
/// workload runs in a cgroup of `rouse up`.
async fn start_other(rouse: &Rouse) -> bool {
    rouse.create(&sandbox("other", SERVE, json!({}))).await;
    rouse.wait_condition("other", "Ready", "True", None).await;
    expect_served(rouse, "other").await;
    let leader = *rouse.runs("other").last().expect("other started");
    in_rouse_cgroup(leader)
}

/// A GET through the proxy that must be answered 200.
async fn expect_served(rouse: &Rouse, name: &str) {
    match rouse.get(name, "/").await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("{name}: GET / through the proxy: {other:?}")),
    }
}

/// Delete, suspend, restarts after exits and shutdown each end every descendant of the
/// workload; `cleared` adds descendants with an empty environment (cgroups only).
async fn descendants_die_at_every_stop(mut rouse: Rouse, cleared: bool) {
    let serve = format!("{}{SERVE}", detach(cleared));
    for name in ["deleted", "suspended", "down"] {
        rouse.create(&sandbox(name, &serve, json!({}))).await;
    }
    // Exits at once, over and over: each run leaves its descendants.
    let looping = format!("{}sleep 0.2; exit 0", detach(cleared));
    rouse.create(&sandbox("looping", &looping, json!({}))).await;

    let deleted = descendants(&rouse, "deleted", cleared).await;
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/deleted", None)
        .await;
    assert_eq!(code, 200, "delete: {body}");
    all_gone("after a delete", &deleted).await;

    let suspended = descendants(&rouse, "suspended", cleared).await;
    patch_spec(&rouse, "suspended", json!({"operatingMode": "Suspended"})).await;
    rouse
        .wait_condition("suspended", "Suspended", "True", None)
        .await;
    all_gone("after a suspend", &suspended).await;

    // Three runs recorded: those of the first two ended, so their descendants must be gone.
    let (kept, wiped) = pid_files(&rouse, "looping");
    let mut restarted = recorded(&rouse, &kept, 3).await[..2].to_vec();
    if cleared {
        restarted.extend_from_slice(&recorded(&rouse, &wiped, 3).await[..2]);
    }
    all_gone("after restarts", &restarted).await;

    let down = descendants(&rouse, "down", cleared).await;
    expect_served(&rouse, "other").await;
    assert!(rouse.stop(), "rouse up exits cleanly");
    all_gone("after a shutdown", &down).await;
    // Whatever the loop started last is gone too.
    let mut last = pids(&kept);
    last.extend(pids(&wiped));
    all_gone("the crash loop's last run after the shutdown", &last).await;
}

#[tokio::test]
async fn detached_descendants_die_at_delete_suspend_restart_and_shutdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    if !start_other(&rouse).await {
        let why = "workloads run without cgroups here (needs root and a writable cgroup hierarchy)";
        assert!(!required(), "cgroups are required under CI: {why}");
        eprintln!(
            "skipping detached_descendants_die_at_delete_suspend_restart_and_shutdown: {why}"
        );
        return;
    }
    descendants_die_at_every_stop(rouse, true).await;
}

/// Without cgroups (`[runtime] cgroups = false`, as where they cannot be written) the
/// descendants that keep their environment are found by their marks at every stop.
#[tokio::test]
async fn without_cgroups_marked_descendants_die_at_every_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        config: "[runtime]\ncgroups = false\n".to_owned(),
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    assert!(!start_other(&rouse).await, "cgroups = false uses none");
    descendants_die_at_every_stop(rouse, false).await;
}

/// Item 11: a crash-looping workload's `Ready` condition names the loop, the restarts so far
/// and when the next start is due.
#[tokio::test]
async fn a_crash_loop_shows_its_restarts_and_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    rouse
        .create(&sandbox("crashing", "exit 3", json!({})))
        .await;
    let restarts = |s: &Value| -> Option<u32> {
        let message = condition(s, "Ready")?["message"].as_str()?;
        let rest = message.split("restarts: ").nth(1)?;
        rest.split(',').next()?.parse().ok()
    };
    let seen = rouse
        .wait_for("crashing", "in CrashLoopBackOff after 2 restarts", |s| {
            s.and_then(restarts).is_some_and(|n| n >= 2)
        })
        .await
        .expect("exists");
    let ready = condition(&seen, "Ready").expect("Ready");
    assert_eq!(ready["status"], "False", "{ready}");
    assert_eq!(ready["reason"], "DependenciesNotReady", "{ready}");
    let message = ready["message"].as_str().expect("message");
    for part in [
        "CrashLoopBackOff: back-off ",
        "last exit code 3",
        "next start at 20",
    ] {
        assert!(message.contains(part), "{part:?} missing in {message:?}");
    }
}

/// One round of the chaos test: `kill -9` while a request holds a wake of `name` whose
/// workload is starting; returns the descendants of the killed run.
async fn kill_mid_wake(rouse: &Rouse, name: &str, cleared: bool) -> Vec<i32> {
    let (kept, wiped) = pid_files(rouse, name);
    let before = (pids(&kept).len(), pids(&wiped).len());
    let held = {
        let (proxy, host) = (rouse.proxy, format!("{name}.default.sandbox.localhost"));
        tokio::spawn(
            async move { support::http(proxy, "GET", "/", &host, &[], String::new()).await },
        )
    };
    // The workload started (its descendants are out) and sleeps before it listens: the request
    // is held and the wake is in the middle.
    let mut left = recorded(rouse, &kept, before.0 + 1).await[before.0..].to_vec();
    if cleared {
        left.extend_from_slice(&recorded(rouse, &wiped, before.1 + 1).await[before.1..]);
    }
    assert!(
        !held.is_finished(),
        "the request is held while the workload starts"
    );
    let _ = kill(
        Pid::from_raw(rouse.pid().expect("running")),
        Signal::SIGKILL,
    );
    // The held request ends with the process (reset or EOF); it was never acknowledged.
    let _ = tokio::time::timeout(DEADLINE, held).await;
    left.extend(rouse.runs(name).last());
    left
}

/// The chaos part for wakes: `kill -9` of `rouse up` while a wake is held and its workload is
/// starting (twice). After each restart every acknowledged object is there, nothing of the
/// killed run is left running, the woken sandbox ends Ready and is served, and so is another.
#[tokio::test]
async fn kill9_mid_wake_loses_nothing_and_leaves_no_orphan() {
    const OBJECTS: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    let cleared = start_other(&rouse).await;
    if !cleared {
        eprintln!("kill9_mid_wake: no cgroups here; descendants keep their environment");
        assert!(!required(), "cgroups are required under CI");
    }
    let suspended = json!({"operatingMode": "Suspended"});
    let mut acknowledged = vec!["other".to_owned()];
    for i in 0..OBJECTS {
        let name = format!("kept{i}");
        rouse
            .create(&sandbox(&name, SERVE, suspended.clone()))
            .await;
        acknowledged.push(name);
    }
    let slow = format!("{}sleep 3; {SERVE}", detach(cleared));
    rouse.create(&sandbox("slow", &slow, suspended)).await;
    acknowledged.push("slow".to_owned());
    rouse
        .wait_condition("slow", "Suspended", "True", None)
        .await;

    for round in 0..2 {
        let left = kill_mid_wake(&rouse, "slow", cleared).await;
        rouse.stop();
        drop(rouse);
        rouse = Rouse::start(dir.path(), &Options::default());
        all_gone(&format!("round {round}: the killed run's processes"), &left).await;
        let (code, list) = rouse
            .api("GET", "/v1/namespaces/default/sandboxes", None)
            .await;
        assert_eq!(code, 200, "{list}");
        let present: Vec<&str> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|s| s["metadata"]["name"].as_str())
            .collect();
        let lost: Vec<&String> = acknowledged
            .iter()
            .filter(|n| !present.contains(&n.as_str()))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged objects lost: {lost:?}"
        );
        // Woken by the held request's store write, or not yet: either way a request is served.
        expect_served(&rouse, "slow").await;
        rouse.wait_condition("slow", "Ready", "True", None).await;
        expect_served(&rouse, "other").await;
        patch_spec(&rouse, "slow", json!({"operatingMode": "Suspended"})).await;
        rouse
            .wait_condition("slow", "Suspended", "True", None)
            .await;
    }
    let data = rouse.data.clone();
    assert!(rouse.stop(), "rouse up exits cleanly");
    let (kept, wiped) = pid_files(&rouse, "slow");
    let mut every = pids(&kept);
    every.extend(pids(&wiped));
    all_gone("every descendant of every run", &every).await;
    let left = support::workload_processes(&data);
    assert!(left.is_empty(), "workload processes left running: {left:?}");
}

/// The host processes of the gVisor sandboxes of `rouse` (`runsc run`, its gofer and
/// sandbox): those other than `rouse up` whose command line names its data directory.
fn runsc_processes(rouse: &Rouse) -> Vec<i32> {
    let data = std::fs::canonicalize(&rouse.data).unwrap_or_else(|_| rouse.data.clone());
    let me = rouse.pid();
    let needle = data.as_os_str().as_encoded_bytes().to_vec();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .filter(|pid| alive(*pid) && Some(*pid) != me)
        .collect()
}

/// Under gVisor, a `runsc run` killed from outside takes its sandbox and gofer with it (the
/// restart starts clean), and a delete leaves no runsc process behind.
#[tokio::test]
async fn a_gvisor_sandbox_leaves_no_runsc_process() {
    let test = "a_gvisor_sandbox_leaves_no_runsc_process";
    let Some(runsc) = rouse_testsupport::gvisor::available(test) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        runsc: Some(runsc),
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    let spec = json!({"podTemplate": {"spec": {"runtimeClassName": "gvisor"}}});
    // Inside gVisor a detached descendant is a task of the sandbox's kernel.
    let script = "(setsid sleep 7773 &); exec python3 -m http.server 8000";
    rouse.create(&sandbox("gv", script, spec)).await;
    rouse.wait_condition("gv", "Ready", "True", None).await;
    let first = runsc_processes(&rouse);
    assert!(first.len() >= 3, "runsc run, gofer and sandbox: {first:?}");
    let leader = *rouse.runs("gv").last().expect("started");
    assert!(
        first.contains(&leader),
        "the leader {leader} is one of {first:?}"
    );
    // runsc runs with --ignore-cgroups: its gofer and sandbox stay in the workload's cgroup.
    let cgroup_of = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok();
    if in_rouse_cgroup(leader) {
        for pid in &first {
            assert_eq!(cgroup_of(*pid), cgroup_of(leader), "runsc process {pid}");
        }
    }
    let _ = kill(Pid::from_raw(leader), Signal::SIGKILL);
    all_gone("the killed runsc's sandbox and gofer", &first).await;
    // Restarted by its restart policy.
    eventually("the sandbox restarted", || {
        rouse.log("gv").matches("rouse: started pid").count() >= 2
    })
    .await;
    rouse.wait_condition("gv", "Ready", "True", None).await;
    let second = runsc_processes(&rouse);
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/gv", None)
        .await;
    assert_eq!(code, 200, "delete: {body}");
    all_gone("the deleted sandbox's runsc processes", &second).await;
}
