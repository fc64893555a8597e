//! End-to-end tests of suspend by checkpoint (`spec.suspension.strategy: Checkpoint`) with
//! the gvisor runtime, through `rouse up`'s proxy:
//!
//! - `a_checkpointed_sandbox_keeps_its_memory_across_suspend_wake_and_restart`: a counter held
//!   in the workload's memory goes on counting after a suspend and a wake, also after a
//!   restart of `rouse up`; the proxy's pooled upstream connection to it is open when the
//!   suspend starts (the reset path).
//! - `a_request_during_a_checkpoint_suspend_is_served_after_restore`: requests sent while the
//!   checkpoint is being taken are held and served by the restored workload.
//!
//! - `forks_from_one_snapshot_continue_from_its_memory_and_diverge`: a `SandboxSnapshot` of
//!   the running counter (a live checkpoint and restore), three sandboxes made from it with
//!   `restoreFrom` each answer the snapshot's next count and then count on their own.
//! - `a_snapshot_of_a_process_sandbox_keeps_volumes_and_forks_wait_for_it`: volumes only (the
//!   memory is reported unsupported), a fork of a missing snapshot waits with
//!   `Ready=False/SnapshotNotFound` and starts once it is taken, deletion removes the data.
//!
//! - `a_deleted_snapshots_data_never_outlives_it_through_a_kill_9`: the delete acknowledged,
//!   `rouse up` killed at once, a stray directory planted; after the restart both are gone
//!   and a new snapshot of the same name holds only its own data.
//!
//! The gvisor tests need runsc and root (network namespaces); under `CI` their absence fails
//! the test.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse, condition, sandbox};

/// An HTTP/1.1 (keep-alive) server on `BIND` whose answer counts the requests it served: the
/// count lives only in memory. Keep-alive matters: a server that closes first leaves its side
/// of the connection in TIME_WAIT, which runsc cannot checkpoint. A gvisor sandbox with its own
/// network namespace listens on every address of it; a host process on loopback only.
const COUNTER: &str = r#"exec python3 -c '
import http.server, os
n = [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        n[0] += 1
        body = str(n[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((os.environ["BIND"], int(os.environ["PORT"])), H).serve_forever()
'"#;

/// Whether these tests can run: runsc installed and root; under CI a missing one fails.
fn checkpoint_available() -> bool {
    let runsc = std::process::Command::new("runsc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let root = nix::unistd::geteuid().is_root();
    if !(runsc && root) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the checkpoint tests: runsc installed: {runsc}, root: {root}"
        );
        eprintln!("skipping the checkpoint test: needs runsc and root");
    }
    runsc && root
}

/// `COUNTER` listening on `bind`.
fn counter_script(bind: &str) -> String {
    format!("BIND={bind} {COUNTER}")
}

fn counter(name: &str) -> Value {
    sandbox(
        name,
        &counter_script("0.0.0.0"),
        json!({
            "suspension": {"strategy": "Checkpoint"},
            "podTemplate": {"spec": {"runtimeClassName": "gvisor"}},
        }),
    )
}

/// The count the sandbox answers with.
async fn count(rouse: &Rouse, name: &str) -> u64 {
    match rouse.get(name, "/").await {
        Ok((200, body)) => body
            .trim()
            .parse()
            .unwrap_or_else(|_| rouse.fail(&format!("not a count: {body:?}"))),
        other => rouse.fail(&format!(
            "GET through the proxy: {other:?}; workload log:\n{}",
            rouse.log(name)
        )),
    }
}

async fn set_mode(rouse: &Rouse, name: &str, mode: &str) {
    let path = format!("/v1/namespaces/default/sandboxes/{name}");
    let patch = json!({"spec": {"operatingMode": mode}});
    let (code, body) = rouse.api("PATCH", &path, Some(&patch)).await;
    assert_eq!(code, 200, "{body}");
}

/// Deletes the sandbox and waits until it is gone, which removes its network namespace.
async fn delete(rouse: &Rouse, name: &str) {
    let path = format!("/v1/namespaces/default/sandboxes/{name}");
    let (code, body) = rouse.api("DELETE", &path, None).await;
    assert!(code == 200 || code == 202, "delete answered {code}: {body}");
    rouse.wait_for(name, "deleted", |s| s.is_none()).await;
}

/// Suspends and waits until the checkpoint is recorded.
async fn suspend(rouse: &Rouse, name: &str) -> Value {
    set_mode(rouse, name, "Suspended").await;
    rouse.wait_condition(name, "Suspended", "True", None).await;
    let sandbox = rouse
        .wait_for(name, "checkpointed", |s| {
            s.and_then(|s| condition(s, "Checkpointed")).is_some()
        })
        .await
        .expect("exists");
    let checkpointed = condition(&sandbox, "Checkpointed").expect("waited for");
    assert_eq!(
        checkpointed["status"], "True",
        "the checkpoint kept the memory: {checkpointed}"
    );
    assert_eq!(checkpointed["reason"], "MemoryKept", "{checkpointed}");
    sandbox
}

#[tokio::test]
async fn a_checkpointed_sandbox_keeps_its_memory_across_suspend_wake_and_restart() {
    if !checkpoint_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&counter("memo")).await;
    rouse.wait_condition("memo", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "memo").await, 1);
    // The proxy now pools a keep-alive connection to the sandbox: the suspend resets it.
    assert_eq!(count(&rouse, "memo").await, 2);
    suspend(&rouse, "memo").await;
    // A request wakes it: restored, not started fresh.
    assert_eq!(count(&rouse, "memo").await, 3);
    assert!(
        rouse.log("memo").contains("restoring from checkpoint"),
        "{}",
        rouse.log("memo")
    );
    assert_eq!(count(&rouse, "memo").await, 4);

    // Suspended by checkpoint, `rouse up` restarts; the image is on disk and is restored.
    suspend(&rouse, "memo").await;
    assert!(rouse.stop(), "rouse up stops");
    drop(rouse);
    let rouse = Rouse::start(dir.path(), &Options::default());
    assert_eq!(count(&rouse, "memo").await, 5);
    delete(&rouse, "memo").await;
}

#[tokio::test]
async fn a_request_during_a_checkpoint_suspend_is_served_after_restore() {
    if !checkpoint_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&counter("held")).await;
    rouse.wait_condition("held", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "held").await, 1);
    set_mode(&rouse, "held", "Suspended").await;
    // Sent while the proxy resets and holds the sandbox's connections and runsc saves it:
    // each is held, wakes it, and is answered by the restored workload.
    let (a, b) = tokio::join!(count(&rouse, "held"), count(&rouse, "held"));
    let mut got = [a, b];
    got.sort_unstable();
    assert_eq!(got, [2, 3], "both served by the same memory");
    assert!(
        rouse.log("held").contains("restoring from checkpoint"),
        "{}",
        rouse.log("held")
    );
    delete(&rouse, "held").await;
}

#[tokio::test]
async fn the_process_runtime_falls_back_to_stop_and_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let spec = json!({"suspension": {"strategy": "Checkpoint"}});
    rouse
        .create(&sandbox("plain", &counter_script("127.0.0.1"), spec))
        .await;
    rouse.wait_condition("plain", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "plain").await, 1);
    set_mode(&rouse, "plain", "Suspended").await;
    rouse
        .wait_condition("plain", "Suspended", "True", None)
        .await;
    let sandbox = rouse
        .wait_condition(
            "plain",
            "Checkpointed",
            "False",
            Some("CheckpointUnsupported"),
        )
        .await;
    let message = condition(&sandbox, "Checkpointed").expect("waited for")["message"].clone();
    assert!(
        message
            .as_str()
            .is_some_and(|m| m.contains("cannot keep memory")),
        "{message}"
    );
    // Woken by a request: a fresh start, volumes kept.
    assert_eq!(count(&rouse, "plain").await, 1);
}

/// Creates a `SandboxSnapshot` of `sandbox` in `default`.
async fn create_snapshot(rouse: &Rouse, name: &str, sandbox: &str) {
    let snapshot = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "SandboxSnapshot",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"sandboxName": sandbox},
    });
    let path = "/v1/namespaces/default/sandboxsnapshots";
    let (code, body) = rouse.api("POST", path, Some(&snapshot)).await;
    assert_eq!(code, 201, "create snapshot: {body}");
}

/// Waits until the snapshot's phase is `phase`; returns it.
async fn wait_snapshot(rouse: &Rouse, name: &str, phase: &str) -> Value {
    let path = format!("/v1/namespaces/default/sandboxsnapshots/{name}");
    let until = Instant::now() + DEADLINE;
    loop {
        let (code, body) = rouse.api("GET", &path, None).await;
        if code == 200 && body["status"]["phase"] == phase {
            return body;
        }
        if Instant::now() > until {
            rouse.fail(&format!(
                "snapshot {name} not {phase} within {DEADLINE:?}; last: {code} {body}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes the snapshot and waits until its data is gone from the data directory.
async fn delete_snapshot(rouse: &Rouse, name: &str) {
    let path = format!("/v1/namespaces/default/sandboxsnapshots/{name}");
    let (code, body) = rouse.api("DELETE", &path, None).await;
    assert!(code == 200 || code == 202, "delete answered {code}: {body}");
    let dir = snapshot_dir(rouse, name);
    support::eventually(&format!("{} removed", dir.display()), || !dir.exists()).await;
}

fn snapshot_dir(rouse: &Rouse, name: &str) -> PathBuf {
    rouse_shared::datadir::snapshot_dir(&rouse.data, "default", name)
}

/// A sandbox started from snapshot `from`, with `spec` merged in.
fn fork(name: &str, script: &str, from: &str, mut spec: Value) -> Value {
    spec["restoreFrom"] = json!({"snapshotName": from});
    sandbox(name, script, spec)
}

#[tokio::test]
async fn forks_from_one_snapshot_continue_from_its_memory_and_diverge() {
    if !checkpoint_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&counter("origin")).await;
    rouse.wait_condition("origin", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "origin").await, 1);
    assert_eq!(count(&rouse, "origin").await, 2);
    std::fs::write(rouse.volume("origin", "work").join("seed.txt"), "kept").expect("seed");

    // A snapshot of the running sandbox: checkpointed, copied, restored at once.
    create_snapshot(&rouse, "snap", "origin").await;
    let snap = wait_snapshot(&rouse, "snap", "Ready").await;
    let status = &snap["status"];
    assert_eq!(status["provider"], "local-gvisor", "{snap}");
    assert!(
        status["sizeBytes"].as_i64().is_some_and(|n| n > 0),
        "{snap}"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("memory image and 1 volume"), "{snap}");
    assert!(message.contains("paused"), "{snap}");
    eprintln!("live snapshot: {message}");
    // The origin kept its memory through the snapshot, and names it.
    assert_eq!(count(&rouse, "origin").await, 3);
    let origin = rouse.sandbox("origin").await.expect("exists");
    assert_eq!(origin["status"]["lastSnapshot"]["name"], "snap", "{origin}");

    let spec = json!({
        "suspension": {"strategy": "Checkpoint"},
        "podTemplate": {"spec": {"runtimeClassName": "gvisor"}},
    });
    let forks = ["fork-a", "fork-b", "fork-c"];
    for name in forks {
        rouse
            .create(&fork(
                name,
                &counter_script("0.0.0.0"),
                "snap",
                spec.clone(),
            ))
            .await;
    }
    // Each continues from the snapshot's count (2), in its own network namespace.
    for name in forks {
        rouse.wait_condition(name, "Ready", "True", None).await;
        assert_eq!(count(&rouse, name).await, 3, "{name}");
        assert!(
            rouse.log(name).contains("restoring from checkpoint"),
            "{name}: {}",
            rouse.log(name)
        );
        let seed = std::fs::read_to_string(rouse.volume(name, "work").join("seed.txt"));
        assert_eq!(seed.ok().as_deref(), Some("kept"), "{name}: volume copied");
    }
    // ... and then each counts on its own.
    assert_eq!(count(&rouse, "fork-a").await, 4);
    assert_eq!(count(&rouse, "fork-a").await, 5);
    assert_eq!(count(&rouse, "fork-b").await, 4);
    assert_eq!(count(&rouse, "origin").await, 4);
    assert_eq!(count(&rouse, "fork-c").await, 4);
    let endpoints: std::collections::HashSet<String> = {
        let mut seen = std::collections::HashSet::new();
        for name in forks.iter().chain(&["origin"]) {
            let s = rouse.sandbox(name).await.expect("exists");
            seen.insert(s["status"]["endpoint"]["address"].to_string());
        }
        seen
    };
    assert_eq!(endpoints.len(), 4, "each its own address: {endpoints:?}");

    // A snapshot of a sandbox suspended by checkpoint copies its pending image.
    suspend(&rouse, "fork-a").await;
    create_snapshot(&rouse, "asleep", "fork-a").await;
    let snap = wait_snapshot(&rouse, "asleep", "Ready").await;
    let message = snap["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("memory image"), "{snap}");
    assert!(
        !message.contains("paused"),
        "not paused: it was asleep: {snap}"
    );
    rouse
        .create(&fork("fork-d", &counter_script("0.0.0.0"), "asleep", spec))
        .await;
    assert_eq!(count(&rouse, "fork-d").await, 6, "fork-a's memory");
    assert_eq!(count(&rouse, "fork-a").await, 6, "woken on its own");

    // The snapshot outlives its sandbox; deleting it removes its data.
    delete(&rouse, "origin").await;
    wait_snapshot(&rouse, "snap", "Ready").await;
    assert!(snapshot_dir(&rouse, "snap").join("image").is_dir());
    delete_snapshot(&rouse, "snap").await;
    delete_snapshot(&rouse, "asleep").await;
    for name in forks.iter().chain(&["fork-d"]) {
        delete(&rouse, name).await;
    }
}

#[tokio::test]
async fn a_snapshot_of_a_process_sandbox_keeps_volumes_and_forks_wait_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let script = counter_script("127.0.0.1");
    rouse.create(&sandbox("plain", &script, json!({}))).await;
    rouse.wait_condition("plain", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "plain").await, 1);
    std::fs::write(rouse.volume("plain", "work").join("seed.txt"), "kept").expect("seed");

    // A fork of a snapshot that does not exist yet waits for it.
    rouse
        .create(&fork("copy", &script, "later", json!({})))
        .await;
    let waiting = rouse
        .wait_condition("copy", "Ready", "False", Some("SnapshotNotFound"))
        .await;
    assert!(rouse.runs("copy").is_empty(), "not started: {waiting}");

    create_snapshot(&rouse, "later", "plain").await;
    let snap = wait_snapshot(&rouse, "later", "Ready").await;
    assert_eq!(snap["status"]["provider"], "local-process", "{snap}");
    let message = snap["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("1 volume(s), no memory"), "{snap}");
    assert!(message.contains("includeMemory is unsupported"), "{snap}");
    assert!(snap["status"]["takenAt"].is_string(), "{snap}");
    let plain = rouse.sandbox("plain").await.expect("exists");
    assert_eq!(plain["status"]["lastSnapshot"]["name"], "later", "{plain}");

    // The fork starts from the snapshot's volumes, fresh in memory, and goes its own way.
    rouse.wait_condition("copy", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "copy").await, 1);
    let seed = rouse.volume("copy", "work").join("seed.txt");
    assert_eq!(std::fs::read_to_string(&seed).ok().as_deref(), Some("kept"));
    std::fs::write(&seed, "changed").expect("write");
    let origin = std::fs::read_to_string(rouse.volume("plain", "work").join("seed.txt"));
    assert_eq!(origin.ok().as_deref(), Some("kept"), "a copy, not a share");

    delete_snapshot(&rouse, "later").await;
    // The fork was seeded once; it runs on without the snapshot.
    assert_eq!(count(&rouse, "copy").await, 2);
}

/// A deleted snapshot's data never outlives it: not through a `kill -9` of `rouse up` right
/// after the delete was acknowledged (whether or not the removal ran before the kill), not as
/// a stray directory no snapshot owns, and a new snapshot of the same name holds only its own
/// data.
#[tokio::test]
async fn a_deleted_snapshots_data_never_outlives_it_through_a_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    let counter = counter_script("127.0.0.1");
    let writes = |text: &str| format!("echo {text} > mark.txt; {counter}");
    rouse
        .create(&sandbox("origin", &writes("first"), json!({})))
        .await;
    let mark = rouse.volume("origin", "work").join("mark.txt");
    support::eventually("the workload wrote its mark", || mark.exists()).await;
    create_snapshot(&rouse, "snap", "origin").await;
    wait_snapshot(&rouse, "snap", "Ready").await;
    let first = snapshot_dir(&rouse, "snap");
    let data = rouse.data.clone();
    assert!(
        first.exists(),
        "the snapshot has data at {}",
        first.display()
    );

    let path = "/v1/namespaces/default/sandboxsnapshots/snap";
    let (code, body) = rouse.api("DELETE", path, None).await;
    assert!(code == 200 || code == 202, "delete answered {code}: {body}");
    // At once after the acknowledgement: the removal may or may not have run.
    let _ = kill(
        Pid::from_raw(rouse.pid().expect("running")),
        Signal::SIGKILL,
    );
    rouse.stop();
    drop(rouse);
    // A directory no snapshot owns (left by a crash between the copy and the record, or by
    // an older data directory): a copy of the first one under a name never created.
    let ghost = rouse_shared::datadir::snapshot_dir(&data, "default", "ghost");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&first)
        .arg(&ghost)
        .status()
        .expect("cp runs");
    assert!(copied.success() || !first.exists(), "copy the stray data");
    if !ghost.exists() {
        // The delete's removal ran before the kill; plant the stray directory by hand.
        std::fs::create_dir_all(ghost.join("volumes")).expect("stray dir");
    }

    let rouse = Rouse::start(dir.path(), &Options::default());
    support::eventually("the deleted and the stray snapshot data removed", || {
        !first.exists() && !ghost.exists()
    })
    .await;
    let (code, body) = rouse.api("GET", path, None).await;
    assert_eq!(code, 404, "the snapshot stays deleted: {body}");

    // A new snapshot of the same name, of changed data: a fork sees only the new data.
    rouse.wait_condition("origin", "Ready", "True", None).await;
    std::fs::write(&mark, "second\n").expect("rewrite the mark");
    create_snapshot(&rouse, "snap", "origin").await;
    wait_snapshot(&rouse, "snap", "Ready").await;
    rouse
        .create(&fork("copy", &counter, "snap", json!({})))
        .await;
    rouse.wait_condition("copy", "Ready", "True", None).await;
    let seen = std::fs::read_to_string(rouse.volume("copy", "work").join("mark.txt"));
    assert_eq!(seen.ok().as_deref(), Some("second\n"), "only the new data");
}
