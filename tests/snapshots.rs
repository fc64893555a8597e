//! End-to-end tests of suspend by checkpoint (`spec.suspension.strategy: Checkpoint`) with
//! the gvisor runtime, through `rouse up`'s proxy:
//!
//! - `a_checkpointed_sandbox_keeps_its_memory_across_suspend_wake_and_restart`: a counter held
//!   in the workload's memory goes on counting after a suspend and a wake, also after a
//!   restart of `rouse up`; the proxy's pooled upstream connection to it is open when the
//!   suspend starts (the reset path).
//! - `a_request_during_a_checkpoint_suspend_is_served_after_restore`: requests sent while the
//!   checkpoint is being taken are held and served by the restored workload.
//! - `a_suspend_right_after_traffic_keeps_memory`: the server closing first, a WebSocket open,
//!   a request in flight: each suspend keeps the memory.
//! - `a_refused_checkpoint_is_retried_then_falls_back_saying_why`: a runsc that refuses
//!   checkpoints (a wrapper) is retried, and when it never gives in, the condition says why.
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
//! The gvisor tests need a current runsc (the pinned build of testsupport/gvisor/build.sh) and
//! root (network namespaces); under `CI` their absence fails the test.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse, condition, sandbox};

/// An HTTP/1.1 (keep-alive) server on `BIND` whose answer counts the requests it served: the
/// count lives only in memory. `/close` answers and closes the connection itself (its side
/// then waits in TIME_WAIT, which the 2022 runsc could not checkpoint); `/slow` marks
/// `slow-started` in the working directory and answers 5 s later; a WebSocket handshake
/// (`Upgrade: websocket`) is answered with 101 and the connection then echoes what it reads.
/// A gvisor sandbox listens on every address of its own network namespace; a host process on
/// loopback only.
const COUNTER: &str = r#"exec python3 -c '
import base64, hashlib, http.server, os, time
n = [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            accept = base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            self.wfile.flush()
            while True:
                data = self.connection.recv(4096)
                if not data:
                    return
                self.connection.sendall(data)
        n[0] += 1
        if self.path == "/slow":
            open("slow-started", "w").close()
            time.sleep(5)
        body = str(n[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.path == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((os.environ["BIND"], int(os.environ["PORT"])), H).serve_forever()
'"#;

/// The options of a gVisor checkpoint test (`rouse up` with the pinned runsc first on its
/// `PATH`), when it can run here: a current runsc and root; under CI a missing one fails.
fn gvisor(test: &str) -> Option<Options> {
    rouse_testsupport::gvisor::available(test).map(|runsc| Options {
        runsc: Some(runsc),
        ..Options::default()
    })
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
    let Some(options) = gvisor("a_checkpointed_sandbox_keeps_its_memory") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &options);
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
    let rouse = Rouse::start(dir.path(), &options);
    assert_eq!(count(&rouse, "memo").await, 5);
    delete(&rouse, "memo").await;
}

#[tokio::test]
async fn a_request_during_a_checkpoint_suspend_is_served_after_restore() {
    let Some(options) = gvisor("a_request_during_a_checkpoint_suspend") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &options);
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

/// Opens a WebSocket to the sandbox through the proxy and checks that it echoes; the open
/// stream.
async fn open_websocket(rouse: &Rouse, name: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(rouse.proxy)
        .await
        .expect("connect to the proxy");
    let head = format!(
        "GET /ws HTTP/1.1\r\nHost: {name}.default.sandbox.localhost\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .await
        .expect("send the handshake");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("handshake answered in time")
            .expect("read the handshake");
        assert!(n > 0, "closed during the handshake: {answer:?}");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 101"), "{text}");
    assert!(text.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{text}");
    stream
        .write_all(b"ping")
        .await
        .expect("send through the socket");
    let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
        .await
        .expect("echo in time")
        .expect("read the echo");
    assert_eq!(&buf[..n], b"ping");
    stream
}

/// A suspend right after traffic keeps the memory whatever the traffic left behind: the
/// server's side of a connection it closed (TIME_WAIT in gVisor), a WebSocket still open, a
/// request still running. Each suspend must end `Checkpointed=True/MemoryKept` and the count
/// must go on after the wake.
#[tokio::test]
async fn a_suspend_right_after_traffic_keeps_memory() {
    let Some(options) = gvisor("a_suspend_right_after_traffic_keeps_memory") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &options);
    rouse.create(&counter("busy")).await;
    rouse.wait_condition("busy", "Ready", "True", None).await;
    assert_eq!(count(&rouse, "busy").await, 1);

    // The server closes first, and at once the sandbox is suspended.
    let (code, body) = rouse.get("busy", "/close").await.expect("GET /close");
    assert_eq!((code, body.as_str()), (200, "2"));
    suspend(&rouse, "busy").await;
    assert_eq!(count(&rouse, "busy").await, 3, "restored, not restarted");

    // A WebSocket open through the proxy when the sandbox is suspended.
    let mut socket = open_websocket(&rouse, "busy").await;
    suspend(&rouse, "busy").await;
    {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16];
        // The quiesce ended the connection (reset or closed): never a hang.
        let read = tokio::time::timeout(DEADLINE, socket.read(&mut buf))
            .await
            .expect("the WebSocket ends when the sandbox is suspended");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    assert_eq!(count(&rouse, "busy").await, 4, "restored, not restarted");

    // A request still running inside the sandbox when the suspend is asked for (it counted
    // 5). The proxy resets its connection for the checkpoint and, the request being a GET
    // (idempotent), sends it again: that wakes the sandbox, and the restored memory answers 6.
    // A fresh start would answer 1.
    let marker = rouse.volume("busy", "work").join("slow-started");
    let slow = {
        let proxy = rouse.proxy;
        tokio::spawn(async move {
            let host = "busy.default.sandbox.localhost";
            support::http(proxy, "GET", "/slow", host, &[], String::new()).await
        })
    };
    support::eventually("the slow request reached the workload", || marker.exists()).await;
    let restores = rouse
        .log("busy")
        .matches("restoring from checkpoint")
        .count();
    set_mode(&rouse, "busy", "Suspended").await;
    let interrupted = tokio::time::timeout(DEADLINE, slow)
        .await
        .expect("the in-flight request ends")
        .expect("the request task");
    assert_eq!(
        interrupted,
        Ok((200, "6".to_owned())),
        "sent again and answered by the restored memory"
    );
    assert_eq!(
        rouse
            .log("busy")
            .matches("restoring from checkpoint")
            .count(),
        restores + 1,
        "{}",
        rouse.log("busy")
    );
    assert_eq!(count(&rouse, "busy").await, 7);
    delete(&rouse, "busy").await;
}

/// A `runsc` that refuses the first `checkpoint` calls (as many as the number in the file
/// `failures` beside it, counted down) with the 2022 runsc's error, and runs the real one for
/// everything else.
fn refusing_runsc(dir: &std::path::Path, real: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let failures = dir.join("failures");
    std::fs::write(&failures, "0").expect("failures file");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && ck=1; done\n\
         if [ -n \"$ck\" ]; then\n  n=$(cat {f})\n  if [ \"$n\" -gt 0 ]; then\n    \
         echo $((n - 1)) > {f}\n    \
         echo 'checkpoint failed: encoding error at object tcp.endpoint (refused by the test)' >&2\n    \
         exit 128\n  fi\nfi\nexec {real} \"$@\"\n",
        f = failures.display(),
        real = real.display()
    );
    let runsc = bin.join("runsc");
    std::fs::write(&runsc, script).expect("write the wrapper");
    std::fs::set_permissions(&runsc, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    runsc
}

/// Where runsc refuses a checkpoint, Rouse tries again (bounded) before it gives up; when it
/// gives up, the workload is stopped and `Checkpointed=False/CheckpointFailed` says what
/// runsc answered and how often it was tried.
#[tokio::test]
async fn a_refused_checkpoint_is_retried_then_falls_back_saying_why() {
    let Some(options) = gvisor("a_refused_checkpoint_is_retried") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let real = options.runsc.clone().expect("gvisor options name runsc");
    let wrapper = refusing_runsc(dir.path(), &real);
    let failures = dir.path().join("failures");
    let options = Options {
        runsc: Some(wrapper),
        admin: true,
        ..options
    };
    let rouse = Rouse::start(dir.path(), &options);
    rouse.create(&counter("stubborn")).await;
    rouse
        .wait_condition("stubborn", "Ready", "True", None)
        .await;
    assert_eq!(count(&rouse, "stubborn").await, 1);

    // Refused twice, saved the third time.
    std::fs::write(&failures, "2").expect("arm the wrapper");
    suspend(&rouse, "stubborn").await;
    assert_eq!(
        rouse
            .metric("rouse_controller_checkpoint_retries_total", "")
            .await,
        2.0
    );
    assert_eq!(
        count(&rouse, "stubborn").await,
        2,
        "restored, not restarted"
    );

    // Refused every time: stopped, and the condition says why.
    std::fs::write(&failures, "1000").expect("arm the wrapper");
    set_mode(&rouse, "stubborn", "Suspended").await;
    let sandbox = rouse
        .wait_condition(
            "stubborn",
            "Checkpointed",
            "False",
            Some("CheckpointFailed"),
        )
        .await;
    let message = condition(&sandbox, "Checkpointed").expect("waited for")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("encoding error at object tcp.endpoint"),
        "{message}"
    );
    assert!(message.contains("tried 4 times"), "{message}");
    rouse
        .wait_condition("stubborn", "Suspended", "True", None)
        .await;
    std::fs::write(&failures, "0").expect("disarm the wrapper");
    assert_eq!(
        count(&rouse, "stubborn").await,
        1,
        "started fresh: memory lost, as the condition said"
    );
    delete(&rouse, "stubborn").await;
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
    let Some(options) = gvisor("forks_from_one_snapshot") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &options);
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

    // The restarted workload writes its mark again; gone now, its return says that happened
    // (the stored Ready=True is the killed run's until the first reconcile).
    std::fs::remove_file(&mark).expect("remove the mark");

    let rouse = Rouse::start(dir.path(), &Options::default());
    support::eventually("the deleted and the stray snapshot data removed", || {
        !first.exists() && !ghost.exists()
    })
    .await;
    let (code, body) = rouse.api("GET", path, None).await;
    assert_eq!(code, 404, "the snapshot stays deleted: {body}");

    // A new snapshot of the same name, of changed data: a fork sees only the new data.
    support::eventually("the restarted workload wrote its mark", || mark.exists()).await;
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
