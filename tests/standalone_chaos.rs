//! Chaos and soak tests of `rouse up`: the hostile-use repros of what once went wrong, each
//! asserting the fixed behaviour (docs/standalone.md, "Guarantees"). Every loop is bounded in
//! count and time, every wait is on a condition with a deadline.

mod support;

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use support::{Options, Rouse, SERVE, sandbox, workload_processes};

/// A web server on `$PORT` whose `/slow` answers after three seconds.
const SLOW_SERVER: &str = r#"exec python3 -c '
import http.server, os, time
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/slow":
            return super().do_GET()
        time.sleep(3)
        self.send_response(200)
        self.send_header("content-length", "5")
        self.end_headers()
        self.wfile.write(b"slow\n")
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
'"#;

/// Requests `rounds` times with `gap` between the end of one and the start of the next and
/// checks that none was refused and the workload never restarted (was never idle-suspended).
async fn use_with_gaps(rouse: &Rouse, name: &str, gap: Duration, rounds: usize, slow: bool) {
    // No wait for Ready=True: on a loaded machine a 1 s sandbox may be idle-suspended before
    // a poll sees it Ready (or before its slow start ends), and then it stays suspended until
    // a request. That suspend is right; the first request is held and wakes it (or waits for
    // the start). The runs are counted from then on.
    expect_ok(rouse, name, "/").await;
    let runs = rouse.runs(name).len();
    for round in 0..rounds {
        tokio::time::sleep(gap).await;
        let path = if slow && round % 2 == 1 { "/slow" } else { "/" };
        expect_ok(rouse, name, path).await;
    }
    let after = rouse.runs(name).len();
    if after != runs {
        rouse.fail(&format!(
            "{name}: suspended while in use ({runs} runs before, {after} after); log:\n{}",
            rouse.log(name)
        ));
    }
}

async fn expect_ok(rouse: &Rouse, name: &str, path: &str) {
    match rouse.get(name, path).await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("{name}: GET {path} through the proxy: {other:?}")),
    }
}

/// Item 1: an idle timeout shorter than the activity report interval (10 s) never suspends a
/// sandbox that sees a request just under its timeout apart, nor one with a request open
/// longer than the timeout.
#[tokio::test]
async fn idle_suspend_never_stops_a_sandbox_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    for (name, idle) in [("idle1", 1), ("idle2", 2), ("idle5", 5)] {
        let spec = json!({"suspension": {"idleTimeoutSeconds": idle}});
        rouse.create(&sandbox(name, SLOW_SERVER, spec)).await;
    }
    tokio::join!(
        use_with_gaps(&rouse, "idle1", Duration::from_millis(500), 8, true),
        use_with_gaps(&rouse, "idle2", Duration::from_millis(1400), 6, false),
        use_with_gaps(&rouse, "idle5", Duration::from_millis(4000), 3, false),
    );
    // Idle suspend still works: left alone, the 1 s sandbox is suspended.
    rouse
        .wait_condition("idle1", "Suspended", "True", None)
        .await;
}

/// Runs the `rouse` CLI against this `rouse up`; the exit status and stderr.
fn cli(rouse: &Rouse, args: &[&str]) -> (bool, String) {
    let output = rouse.cli(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr)
}

/// The GETs the REST API answered so far.
async fn api_gets(rouse: &Rouse) -> f64 {
    rouse
        .metric("rouse_controller_api_requests_total", "method=\"GET\"")
        .await
}

/// Item 2: after a restart the object's resourceVersion is outside the watch history; `rouse
/// wait` (for a condition and for delete) must neither spin nor fail, and still see changes.
#[tokio::test]
async fn rouse_wait_after_a_restart_does_not_spin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        admin: true,
        ..Options::default()
    };
    let mut rouse = Rouse::start(dir.path(), &options);
    // A suspended sandbox's object does not change across a restart, and a later write to
    // another one puts the store's version past it: its own version is then older than the
    // (empty) watch history of the new run.
    let suspended = json!({"operatingMode": "Suspended"});
    rouse
        .create(&sandbox("waited", SERVE, suspended.clone()))
        .await;
    rouse
        .wait_condition("waited", "Suspended", "True", None)
        .await;
    rouse.create(&sandbox("later", SERVE, suspended)).await;
    rouse
        .wait_condition("later", "Suspended", "True", None)
        .await;
    assert!(rouse.stop(), "rouse up exits cleanly");
    drop(rouse);
    let rouse = Rouse::start(dir.path(), &options);

    let before = api_gets(&rouse).await;
    let (met, stderr) = cli(
        &rouse,
        &["wait", "waited", "--for=condition=Never", "--timeout=3s"],
    );
    assert!(!met, "a condition that never comes times out");
    assert!(stderr.contains("timed out"), "{stderr}");
    let during = api_gets(&rouse).await - before;
    // One list and one watch, then a list and a watch per backoff step at most: a handful,
    // not the thousands a retry loop without a pause makes.
    assert!(during < 40.0, "rouse wait made {during} GETs in 3 s");

    // And it still sees what happens: a delete ends `--for=delete`.
    let waiter = {
        let (api, data) = (rouse.api, rouse.data.clone());
        std::thread::spawn(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_rouse"))
                .args(["wait", "waited", "--for=delete", "--timeout=60s"])
                .arg("--server")
                .arg(format!("http://{api}"))
                .arg("--data-dir")
                .arg(&data)
                .env_remove("ROUSE_TOKEN")
                .env_remove("ROUSE_SERVER")
                .output()
                .expect("run rouse wait")
        })
    };
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/waited", None)
        .await;
    assert_eq!(code, 200, "delete: {body}");
    let output = tokio::task::spawn_blocking(move || waiter.join().expect("waiter thread"))
        .await
        .expect("join");
    assert!(
        output.status.success(),
        "rouse wait --for=delete: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A workload that starts at once and costs nearly nothing.
const SLEEP: &str = "exec sleep 600";

/// Item 4 (and issue 9's chaos test): `kill -9` of `rouse up` during 200 concurrent creates.
/// Every create answered 201 is there after the restart, and no workload process of the
/// killed run is left running untracked: after a clean stop of the new run none is left.
#[tokio::test]
async fn kill9_during_200_creates_loses_nothing_and_leaves_no_orphan() {
    const CREATES: usize = 200;
    const KILL_AFTER: usize = 60;
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Arc::new(Rouse::start(dir.path(), &Options::default()));
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (killed_tx, killed_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CREATES {
        let (rouse, acknowledged, killed_tx) =
            (rouse.clone(), acknowledged.clone(), killed_tx.clone());
        let pid = rouse.pid().expect("running");
        tasks.spawn(async move {
            let name = format!("c{i}");
            let body = sandbox(&name, SLEEP, json!({}));
            let path = "/v1/namespaces/default/sandboxes";
            let headers = vec![
                ("content-type", "application/json".to_owned()),
                (
                    "authorization",
                    format!("Bearer {}", rouse.token.as_deref().unwrap_or_default()),
                ),
            ];
            let answer = support::http(
                rouse.api,
                "POST",
                path,
                "localhost",
                &headers,
                body.to_string(),
            )
            .await;
            if let Ok((201, _)) = answer {
                let count = {
                    let mut acked = acknowledged.lock().expect("lock");
                    acked.push(name);
                    acked.len()
                };
                if count == KILL_AFTER && !*killed_tx.borrow() {
                    // Mid-flight: workloads are being spawned and creates are in progress.
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    killed_tx.send_replace(true);
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    assert!(*killed_rx.borrow(), "rouse up was killed mid-way");
    let mut rouse = Arc::into_inner(rouse).expect("the only owner");
    rouse.stop();
    drop(rouse);

    // Killed again while the next run starts the workloads of all of them at once.
    for _ in 0..2 {
        let mut rouse = Rouse::start(dir.path(), &Options::default());
        let data = rouse.data.clone();
        let until = std::time::Instant::now() + support::DEADLINE;
        while workload_processes(&data).len() < KILL_AFTER / 2 && std::time::Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = kill(
            Pid::from_raw(rouse.pid().expect("running")),
            Signal::SIGKILL,
        );
        rouse.stop();
    }

    let mut rouse = Rouse::start(dir.path(), &Options::default());
    let (code, list) = rouse
        .api("GET", "/v1/namespaces/default/sandboxes", None)
        .await;
    assert_eq!(code, 200, "{list}");
    let present: std::collections::HashSet<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let acknowledged = acknowledged.lock().expect("lock").clone();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|n| !present.contains(*n))
        .collect();
    assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
    // The new run starts a workload for every sandbox; then a clean stop stops what it
    // tracks. Anything of the killed run it did not find would still be running.
    let data = rouse.data.clone();
    let expected = present.len();
    let until = std::time::Instant::now() + support::DEADLINE;
    while workload_processes(&data).len() < expected && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rouse.stop(), "rouse up exits cleanly");
    let left = workload_processes(&data);
    assert!(left.is_empty(), "workload processes left running: {left:?}");
}

/// Item 5: a deleted sandbox's data never outlives it — not through a `kill -9` during its
/// slow stop, not through a delete in the first moments after a restart — and a new sandbox
/// of the same name starts on empty volumes.
#[tokio::test]
async fn a_deleted_sandboxs_volume_never_reaches_the_next_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    // Ignores SIGTERM, so its stop takes the whole grace period.
    let stubborn = "trap '' TERM; echo secret > secret.txt; exec sleep 600";
    let slow_stop = json!({"podTemplate": {"spec": {"terminationGracePeriodSeconds": 60}}});
    rouse
        .create(&sandbox("leak", stubborn, slow_stop.clone()))
        .await;
    rouse.create(&sandbox("early", stubborn, json!({}))).await;
    let secret = rouse.volume("leak", "work").join("secret.txt");
    let early = rouse.volume("early", "work").join("secret.txt");
    support::eventually("both workloads wrote their secret", || {
        secret.exists() && early.exists()
    })
    .await;
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/leak", None)
        .await;
    assert_eq!(code, 200, "delete: {body}");
    rouse.wait_for("leak", "gone", |s| s.is_none()).await;
    // The workload is in its 60 s grace period now; the crash cuts the cleanup short.
    let _ = kill(
        Pid::from_raw(rouse.pid().expect("running")),
        Signal::SIGKILL,
    );
    rouse.stop();
    drop(rouse);

    let rouse = Rouse::start(dir.path(), &Options::default());
    // At once after the start: before or while the first reconciles run.
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/early", None)
        .await;
    assert_eq!(code, 200, "delete: {body}");
    let (leak_dir, early_dir) = (
        rouse.data.join("volumes/default/leak"),
        rouse.data.join("volumes/default/early"),
    );
    support::eventually("the deleted sandboxes' volumes removed", || {
        !leak_dir.exists() && !early_dir.exists()
    })
    .await;

    rouse
        .create(&sandbox(
            "leak",
            "ls > listing.txt; exec sleep 600",
            json!({}),
        ))
        .await;
    let listing = rouse.volume("leak", "work").join("listing.txt");
    support::eventually("the new sandbox's workload ran", || listing.exists()).await;
    let seen = std::fs::read_to_string(&listing).expect("listing");
    assert!(
        !seen.contains("secret"),
        "the old data reached the new sandbox: {seen}"
    );
}

/// Opens `count` connections to `addr` that send nothing and waits until the server closed
/// every one; panics naming `what` if any is still open after `within`.
async fn silent_connections_are_closed(
    what: &str,
    addr: std::net::SocketAddr,
    count: usize,
    within: Duration,
) {
    use tokio::io::AsyncReadExt;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..count {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        tasks.spawn(async move {
            let mut stream = stream;
            let mut buf = [0_u8; 64];
            // EOF or a reset: the server closed it.
            tokio::time::timeout(within, stream.read(&mut buf))
                .await
                .is_ok()
        });
    }
    let mut open = 0;
    while let Some(closed) = tasks.join_next().await {
        if !closed.expect("task") {
            open += 1;
        }
    }
    assert_eq!(
        open, 0,
        "{what}: silent connections still open after {within:?}"
    );
}

/// Item 6: connections that never send a byte are closed after the header timeout, on the
/// REST API (10 s) and on the proxy (`[limits] header_read_timeout`), so they cannot lock
/// other clients out.
#[tokio::test]
async fn silent_connections_are_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        config: "[limits]\nheader_read_timeout = \"1s\"\n".to_owned(),
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    // Generous: only a failure waits this long; before the fix they were never closed
    // (the api) or only after the 5 min idle timeout (the proxy).
    let within = Duration::from_secs(40);
    tokio::join!(
        silent_connections_are_closed("api", rouse.api, 50, within),
        silent_connections_are_closed("proxy", rouse.proxy, 50, within),
    );
    let (code, _) = rouse
        .api("GET", "/v1/namespaces/default/sandboxes", None)
        .await;
    assert_eq!(code, 200, "the api still serves");
}

/// The resident memory of a process in bytes.
fn rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Creates a sandbox, waits until its workload started, deletes it and waits until it is
/// gone; `rounds` times.
async fn create_delete_cycles(rouse: &Rouse, name: &str, rounds: usize) {
    let path = format!("/v1/namespaces/default/sandboxes/{name}");
    for round in 0..rounds {
        rouse.create(&sandbox(name, SLEEP, json!({}))).await;
        let log = rouse.log_path(name);
        let starts = round + 1;
        support::eventually("the workload started", || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("rouse: started pid")
                .count()
                >= starts
        })
        .await;
        let (code, body) = rouse.api("DELETE", &path, None).await;
        assert_eq!(code, 200, "delete {name}: {body}");
        rouse.wait_for(name, "gone", |s| s.is_none()).await;
    }
}

/// Issue 9's soak: 100 create/delete cycles leave no process, leased port, directory or
/// memory behind.
#[tokio::test]
async fn create_delete_cycles_leave_nothing_behind() {
    const LANES: usize = 10;
    const ROUNDS: usize = 10;
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        admin: true,
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    let pid = rouse.pid().expect("running");
    // A warm-up round first, so the baseline includes what any first use allocates.
    let lanes = |rounds: usize| {
        let rouse = &rouse;
        futures::future::join_all((0..LANES).map(move |lane| async move {
            create_delete_cycles(rouse, &format!("cycle{lane}"), rounds).await;
        }))
    };
    lanes(1).await;
    let baseline = rss(pid);
    lanes(ROUNDS).await;

    let data = rouse.data.clone();
    support::eventually("no workload process left", || {
        workload_processes(&data).is_empty()
    })
    .await;
    let leftovers = |sub: &str| {
        std::fs::read_dir(data.join(sub))
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    support::eventually("no directory left", || {
        [
            "volumes/default",
            "scratch/default",
            "run/owners/default",
            "run/pids/default",
        ]
        .iter()
        .all(|sub| leftovers(sub).is_empty())
    })
    .await;
    assert_eq!(rouse.metric("rouse_controller_workloads", "").await, 0.0);
    assert_eq!(
        rouse
            .metric("rouse_controller_workload_ports_leased", "")
            .await,
        0.0,
        "every port lease was returned"
    );
    let grown = rss(pid).saturating_sub(baseline);
    assert!(
        grown < 64 * 1024 * 1024,
        "rouse up grew by {} MiB over {} cycles",
        grown / 1024 / 1024,
        LANES * ROUNDS
    );
}

/// Item 7: many patches of a large object do not grow `rouse up` without bound (the watch
/// history is bounded in bytes, 64 MiB by default, and keeps compact entries).
#[tokio::test]
async fn patches_of_a_large_object_keep_memory_bounded() {
    const PATCHES: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let pid = rouse.pid().expect("running");
    // About 200 KB of JSON in 2,000 small fields, as real objects have them.
    let annotations: serde_json::Map<String, serde_json::Value> = (0..2_000)
        .map(|i| (format!("example.com/field-{i:04}"), json!("v".repeat(80))))
        .collect();
    let mut big = sandbox("big", SLEEP, json!({"operatingMode": "Suspended"}));
    big["metadata"]["annotations"] = serde_json::Value::Object(annotations);
    rouse.create(&big).await;
    let baseline = rss(pid);
    let path = "/v1/namespaces/default/sandboxes/big";
    for round in 0..PATCHES {
        let patch = json!({"metadata": {"annotations": {"example.com/round": round.to_string()}}});
        let mut headers = vec![("content-type", "application/merge-patch+json".to_owned())];
        if let Some(token) = &rouse.token {
            headers.push(("authorization", format!("Bearer {token}")));
        }
        match support::http(
            rouse.api,
            "PATCH",
            path,
            "localhost",
            &headers,
            patch.to_string(),
        )
        .await
        {
            Ok((200, _)) => {}
            other => rouse.fail(&format!("PATCH {round}: {other:?}")),
        }
    }
    let grown = rss(pid).saturating_sub(baseline);
    eprintln!(
        "rouse up grew by {} MiB over {PATCHES} patches",
        grown / 1024 / 1024
    );
    // 300 changes of about 200 KB (object and previous state each) are about 120 MB as JSON,
    // several times that as parsed values (about 280 MiB measured when bounded by count);
    // the bound keeps 64 MiB (about 85 MiB of growth measured, with the store's cache).
    assert!(
        grown < 150 * 1024 * 1024,
        "rouse up grew by {} MiB over {PATCHES} patches",
        grown / 1024 / 1024
    );
}
