//! `rouse up` end to end: the real binary on a temporary data directory running real
//! workloads (python3 web servers), reached through its proxy and driven through its REST API.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Options, Rouse, SERVE, alive, condition, eventually, sandbox};

/// A file written into a sandbox's volume and read back through the proxy.
const FILE: &str = "greeting.txt";
const TEXT: &str = "hello from the volume\n";

/// Waits until the sandbox is Ready and writes [`FILE`] into its `work` volume.
async fn ready_with_file(rouse: &Rouse, name: &str) {
    rouse.wait_condition(name, "Ready", "True", None).await;
    std::fs::write(rouse.volume(name, "work").join(FILE), TEXT).expect("write into the volume");
}

/// GETs [`FILE`] through the proxy and checks it is served whole.
async fn get_file(rouse: &Rouse, name: &str) {
    match rouse.get(name, &format!("/{FILE}")).await {
        Ok((200, body)) => assert_eq!(body, TEXT),
        Ok((code, body)) => rouse.fail(&format!("GET /{FILE} through the proxy: {code} {body}")),
        Err(err) => rouse.fail(&format!("GET /{FILE} through the proxy: {err}")),
    }
}

/// The pid of the sandbox's workload, which must have run once so far.
fn only_pid(rouse: &Rouse, name: &str) -> i32 {
    expect_runs(rouse, name, 1)
}

/// Checks the workload was started `count` times (a create and each wake or restart of
/// `rouse up`) and returns the latest pid.
fn expect_runs(rouse: &Rouse, name: &str, count: usize) -> i32 {
    let runs = rouse.runs(name);
    match runs.last() {
        Some(pid) if runs.len() == count => *pid,
        _ => rouse.fail(&format!(
            "{name}: expected {count} runs, found {runs:?}; workload log:\n{}",
            rouse.log(name)
        )),
    }
}

#[tokio::test]
async fn a_sandbox_is_reached_through_the_proxy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&sandbox("hello", SERVE, json!({}))).await;
    ready_with_file(&rouse, "hello").await;
    get_file(&rouse, "hello").await;
    // The directory listing is the volume: the working directory of the process runtime.
    let (code, listing) = rouse.get("hello", "/").await.expect("GET /");
    assert_eq!(code, 200);
    assert!(listing.contains(FILE), "{listing}");
    let (code, _) = rouse
        .get("nobody", "/")
        .await
        .expect("GET to a missing sandbox");
    assert_eq!(code, 404, "an unknown sandbox is not found");
}

#[tokio::test]
async fn an_idle_sandbox_is_suspended_and_woken_by_the_next_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let spec = json!({"suspension": {"idleTimeoutSeconds": 2}});
    rouse.create(&sandbox("idle", SERVE, spec)).await;
    ready_with_file(&rouse, "idle").await;
    let created =
        rouse.sandbox("idle").await.expect("exists")["metadata"]["creationTimestamp"].clone();
    // On a slow machine this request may already find the sandbox idle-suspended and wake it;
    // the runs are counted from the suspend on.
    get_file(&rouse, "idle").await;

    rouse
        .wait_condition("idle", "Suspended", "True", None)
        .await;
    let runs = rouse.runs("idle").len();
    let pid = expect_runs(&rouse, "idle", runs);
    eventually("the suspended workload's process gone", || !alive(pid)).await;
    let suspended = rouse.sandbox("idle").await.expect("exists");
    assert_eq!(suspended["spec"]["operatingMode"], "Suspended");
    assert!(
        rouse.volume("idle", "work").join(FILE).exists(),
        "the volume is kept while suspended"
    );

    // The request is held, not refused, while the sandbox wakes.
    let started = Instant::now();
    get_file(&rouse, "idle").await;
    expect_runs(&rouse, "idle", runs + 1);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "woke in {:?}",
        started.elapsed()
    );
    let woken = rouse.sandbox("idle").await.expect("exists");
    assert_eq!(woken["spec"]["operatingMode"], "Running");
    assert_eq!(
        woken["metadata"]["creationTimestamp"], created,
        "status updates keep the creation time"
    );
}

#[tokio::test]
async fn concurrent_connections_to_a_suspended_sandbox_wake_it_once() {
    const CLIENTS: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        admin: true,
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    rouse.create(&sandbox("crowd", SERVE, json!({}))).await;
    ready_with_file(&rouse, "crowd").await;
    let pid = only_pid(&rouse, "crowd");
    let (code, body) = rouse
        .api(
            "POST",
            "/v1/namespaces/default/sandboxes/crowd/suspend",
            None,
        )
        .await;
    assert_eq!(code, 200, "suspend: {body}");
    rouse
        .wait_condition("crowd", "Suspended", "True", None)
        .await;
    eventually("the suspended workload's process gone", || !alive(pid)).await;
    let wakes_before = rouse.metric("rouse_proxy_wakes_total", "").await;

    let rouse = std::sync::Arc::new(rouse);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let rouse = rouse.clone();
        tasks.spawn(async move { rouse.get("crowd", &format!("/{FILE}")).await });
    }
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    while let Some(result) = tasks.join_next().await {
        let key = match result.expect("client task") {
            Ok((200, body)) if body == TEXT => "200".to_owned(),
            Ok((code, body)) => format!("{code} {body}"),
            Err(err) => err,
        };
        *codes.entry(key).or_default() += 1;
    }
    if codes.get("200") != Some(&CLIENTS) {
        rouse.fail(&format!("not every client was served: {codes:?}"));
    }
    expect_runs(&rouse, "crowd", 2);
    let wakes = rouse.metric("rouse_proxy_wakes_total", "").await - wakes_before;
    assert_eq!(wakes, 1.0, "the proxy sent exactly one wake");
}

#[tokio::test]
async fn shutdown_time_deletes_or_expires_the_sandbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    for name in ["doomed", "kept"] {
        rouse.create(&sandbox(name, SERVE, json!({}))).await;
    }
    rouse.wait_condition("doomed", "Ready", "True", None).await;
    rouse.wait_condition("kept", "Ready", "True", None).await;
    let doomed = only_pid(&rouse, "doomed");
    let kept = only_pid(&rouse, "kept");
    // The shutdown time is set once both run, so a slow start cannot outrun it.
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
    for (name, policy) in [("doomed", "Delete"), ("kept", "Retain")] {
        let patch = json!({"spec": {"shutdownTime": at.to_string(), "shutdownPolicy": policy}});
        let path = format!("/v1/namespaces/default/sandboxes/{name}");
        let (code, body) = rouse.api("PATCH", &path, Some(&patch)).await;
        assert_eq!(code, 200, "{body}");
    }

    rouse.wait_for("doomed", "deleted", |s| s.is_none()).await;
    eventually("the deleted sandbox's process gone", || !alive(doomed)).await;
    let expired = rouse
        .wait_condition("kept", "Ready", "False", Some("SandboxExpired"))
        .await;
    eventually("the expired sandbox's process gone", || !alive(kept)).await;
    assert!(condition(&expired, "Ready").is_some());
    let (code, _) = rouse
        .get("kept", "/")
        .await
        .expect("GET to an expired sandbox");
    assert_ne!(code, 200, "an expired sandbox serves nothing");
}

#[tokio::test]
async fn a_restart_keeps_objects_and_volumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&sandbox("durable", SERVE, json!({}))).await;
    ready_with_file(&rouse, "durable").await;
    get_file(&rouse, "durable").await;
    let pid = only_pid(&rouse, "durable");
    let before = rouse.sandbox("durable").await.expect("exists")["metadata"].clone();
    assert!(rouse.stop(), "rouse up exits cleanly on SIGINT");
    assert!(!alive(pid), "Ctrl-C stops the workloads");
    drop(rouse);

    let rouse = Rouse::start(dir.path(), &Options::default());
    let again = rouse.wait_condition("durable", "Ready", "True", None).await;
    assert_eq!(again["metadata"]["uid"], before["uid"], "the same object");
    assert_eq!(
        again["metadata"]["creationTimestamp"], before["creationTimestamp"],
        "a restart keeps the creation time"
    );
    get_file(&rouse, "durable").await;
    expect_runs(&rouse, "durable", 2);
}

#[tokio::test]
async fn the_api_answers_errors_as_status_objects_and_needs_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let list = "/v1/namespaces/default/sandboxes";

    let (code, status) = rouse.api_as("GET", list, None, None).await;
    assert_eq!(code, 401, "{status}");
    assert_status(&status, 401, "Unauthorized");
    let (code, status) = rouse.api_as("GET", list, None, Some("wrong")).await;
    assert_eq!(code, 401, "{status}");
    let (code, body) = rouse.api("GET", list, None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["items"], json!([]));

    let (code, status) = rouse.api("GET", &format!("{list}/nobody"), None).await;
    assert_eq!(code, 404, "{status}");
    assert_status(&status, 404, "NotFound");

    let bad = sandbox(
        "bad",
        SERVE,
        json!({"suspension": {"idleTimeoutSeconds": "soon"}}),
    );
    let (code, status) = rouse.api("POST", list, Some(&bad)).await;
    assert_eq!(code, 422, "{status}");
    assert_status(&status, 422, "Invalid");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.suspension.idleTimeoutSeconds"),
        "the error names the field: {message}"
    );
    assert!(rouse.sandbox("bad").await.is_none(), "nothing was stored");
}

fn assert_status(status: &Value, code: u16, reason: &str) {
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["code"], code, "{status}");
    assert_eq!(status["reason"], reason, "{status}");
}

#[tokio::test]
async fn a_gvisor_sandbox_is_reached_suspended_and_woken() {
    let Some(runsc) = rouse_testsupport::gvisor::available("a_gvisor_sandbox_is_reached") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        runsc: Some(runsc),
        ..Options::default()
    };
    let rouse = Rouse::start(dir.path(), &options);
    let spec = json!({
        "suspension": {"idleTimeoutSeconds": 2},
        "podTemplate": {"spec": {"runtimeClassName": "gvisor"}},
    });
    // As in a pod: the server listens on its declared container port (8000) on every address
    // of the sandbox's own network namespace, no `$PORT` needed; inside gVisor the volume is
    // mounted at /work, the working directory.
    let script = "exec python3 -m http.server 8000";
    rouse.create(&sandbox("gbox", script, spec)).await;
    ready_with_file(&rouse, "gbox").await;
    get_file(&rouse, "gbox").await;
    rouse
        .wait_condition("gbox", "Suspended", "True", None)
        .await;
    let runs = rouse.runs("gbox").len();
    let pid = expect_runs(&rouse, "gbox", runs);
    eventually("the suspended runsc gone", || !alive(pid)).await;
    assert!(rouse.volume("gbox", "work").join(FILE).exists());
    get_file(&rouse, "gbox").await;
    expect_runs(&rouse, "gbox", runs + 1);
}

/// Runs the `rouse` CLI against this `rouse up`; the exit status and stdout.
fn cli(rouse: &Rouse, args: &[&str]) -> (bool, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rouse"));
    command
        .args(args)
        .arg("--server")
        .arg(format!("http://{}", rouse.api))
        .arg("--data-dir")
        .arg(&rouse.data)
        .env_remove("ROUSE_TOKEN")
        .env_remove("ROUSE_SERVER");
    let output = command.output().expect("run the rouse CLI");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprintln!("rouse {args:?} failed: {stdout}{stderr}");
    }
    (output.status.success(), stdout)
}

#[tokio::test]
async fn the_quickstart_example_works_through_the_cli() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/examples/hello.yaml");
    let (ok, out) = cli(&rouse, &["apply", "-f", example]);
    assert!(ok && out.contains("hello created"), "{out}");
    let (ok, _) = cli(
        &rouse,
        &["wait", "hello", "--for=condition=Ready", "--timeout=60s"],
    );
    if !ok {
        rouse.fail("rouse wait hello --for=condition=Ready failed");
    }
    std::fs::write(rouse.volume("hello", "work").join(FILE), TEXT).expect("write into the volume");
    get_file(&rouse, "hello").await;

    let (ok, out) = cli(&rouse, &["suspend", "hello"]);
    assert!(ok, "{out}");
    rouse
        .wait_condition("hello", "Suspended", "True", None)
        .await;
    let (ok, out) = cli(&rouse, &["get", "sandbox", "hello"]);
    assert!(ok, "{out}");
    let row = out.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("hello") && row.contains("Suspended"),
        "{out}"
    );
    get_file(&rouse, "hello").await;
    let (ok, out) = cli(&rouse, &["logs", "hello"]);
    assert!(ok && out.contains("GET /greeting.txt"), "{out}");
}

/// A pod template change under a running workload is reported (`PodTemplateUpToDate=False`),
/// not silently claimed applied; a suspend and resume runs the new template. Names of 253
/// characters (the longest object name) run and log like any other.
#[tokio::test]
async fn template_changes_are_reported_and_long_names_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let long = "l".repeat(253);
    rouse.create(&sandbox("drift", SERVE, json!({}))).await;
    // Without a volume: a claim name adds to the sandbox's, past the 253 allowed.
    let mut bare = sandbox(&long, SERVE, json!({}));
    let spec = bare["spec"].as_object_mut().expect("spec");
    spec.remove("volumeClaimTemplates");
    bare["spec"]["podTemplate"]["spec"]["containers"][0]
        .as_object_mut()
        .expect("container")
        .remove("volumeMounts");
    rouse.create(&bare).await;
    rouse.wait_condition("drift", "Ready", "True", None).await;
    rouse.wait_condition(&long, "Ready", "True", None).await;
    // Its log file has a shortened name, and the workload's start is in it.
    expect_runs(&rouse, &long, 1);

    let path = "/v1/namespaces/default/sandboxes/drift";
    let patch = json!({"spec": {"podTemplate": {"spec": {"terminationGracePeriodSeconds": 3}}}});
    let (code, body) = rouse.api("PATCH", path, Some(&patch)).await;
    assert_eq!(code, 200, "{body}");
    let stale = rouse
        .wait_condition(
            "drift",
            "PodTemplateUpToDate",
            "False",
            Some("RestartRequired"),
        )
        .await;
    expect_runs(&rouse, "drift", 1);
    assert_eq!(
        condition(&stale, "Ready").map(|c| c["status"].clone()),
        Some(json!("True")),
        "it keeps serving"
    );

    for action in ["suspend", "resume"] {
        let (code, body) = rouse.api("POST", &format!("{path}/{action}"), None).await;
        assert_eq!(code, 200, "{action}: {body}");
        if action == "suspend" {
            rouse
                .wait_condition("drift", "Suspended", "True", None)
                .await;
        }
    }
    rouse
        .wait_for("drift", "running the new template", |s| {
            s.is_some_and(|s| {
                condition(s, "PodTemplateUpToDate").is_none()
                    && condition(s, "Ready").is_some_and(|c| c["status"] == "True")
            })
        })
        .await;
    expect_runs(&rouse, "drift", 2);
}
