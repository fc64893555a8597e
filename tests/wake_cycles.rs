//! `rouse up` end to end: the lost wake of issue 9. A sandbox suspended again at once after
//! a wake — before it reports Ready — is woken by the next request, cycle after cycle; and a
//! `kill -9` in the middle of a wake leaves nothing behind and the next run wakes it again; a
//! delete ends held connections at once; a resume through the API while connections are held
//! serves them with one start.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use support::{Options, Rouse, SERVE, sandbox, workload_processes};

/// How long one wake may take (the bound). A lost wake waits for the proxy's 60 s wake
/// deadline; a served one takes 0.15–0.3 s here (the workload is a python3 web server
/// starting), so the bound leaves ten times that for a loaded CI machine.
const WAKE_BOUND: Duration = Duration::from_secs(3);

/// Suspends through the REST API.
async fn suspend(rouse: &Rouse, name: &str) {
    let path = format!("/v1/namespaces/default/sandboxes/{name}/suspend");
    let (code, body) = rouse.api("POST", &path, None).await;
    assert_eq!(code, 200, "suspend: {body}");
}

/// GETs `/` through the proxy; returns how long it took to be served. A request that reaches
/// the workload while it is being stopped is sent again by the proxy (docs/proxy.md), so every
/// request must be answered 200.
async fn served(rouse: &Rouse, name: &str, what: &str) -> Duration {
    let started = Instant::now();
    match rouse.get(name, "/").await {
        Ok((200, _)) => {}
        Ok((code, body)) => rouse.fail(&format!("{what}: GET / answered {code} {body}")),
        Err(err) => rouse.fail(&format!("{what}: GET /: {err}")),
    }
    let took = started.elapsed();
    if took > WAKE_BOUND {
        rouse.fail(&format!(
            "{what}: served after {took:?}, over {WAKE_BOUND:?}"
        ));
    }
    took
}

#[tokio::test]
async fn a_sandbox_suspended_again_before_ready_is_woken_by_the_next_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&sandbox("hello", SERVE, json!({}))).await;
    rouse.wait_condition("hello", "Ready", "True", None).await;

    let mut times = Vec::new();
    for cycle in 1..=5 {
        suspend(&rouse, "hello").await;
        rouse
            .wait_condition("hello", "Suspended", "True", None)
            .await;
        times.push(served(&rouse, "hello", &format!("cycle {cycle}: wake")).await);
        // At once, before the woken sandbox reports Ready again.
        suspend(&rouse, "hello").await;
        let what = format!("cycle {cycle}: wake after an immediate re-suspend");
        times.push(served(&rouse, "hello", &what).await);
    }
    eprintln!("wake times: {times:?}");
}

#[tokio::test]
async fn a_kill_during_a_wake_leaves_no_orphan_and_the_next_run_wakes_again() {
    const HELD: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    rouse.create(&sandbox("hello", SERVE, json!({}))).await;
    rouse.wait_condition("hello", "Ready", "True", None).await;
    suspend(&rouse, "hello").await;
    rouse
        .wait_condition("hello", "Suspended", "True", None)
        .await;
    let data = rouse.data.clone();
    support::eventually("the suspended workload stopped", || {
        workload_processes(&data).is_empty()
    })
    .await;

    // Connections held for the suspended sandbox start its wake; kill -9 while it is under
    // way (the wake written, the workload being started).
    let (proxy, mut held) = (rouse.proxy, tokio::task::JoinSet::new());
    for _ in 0..HELD {
        held.spawn(async move {
            let host = "hello.default.sandbox.localhost";
            support::http(proxy, "GET", "/", host, &[], String::new()).await
        });
    }
    rouse
        .wait_for("hello", "woken (operatingMode Running)", |s| {
            s.is_some_and(|s| s["spec"]["operatingMode"] == "Running")
        })
        .await;
    let pid = rouse.pid().expect("running");
    kill(Pid::from_raw(pid), Signal::SIGKILL).expect("kill -9 rouse up");
    rouse.stop();
    // The held clients see their connection end (no answer, or an error): none hangs.
    let until = tokio::time::Instant::now() + support::DEADLINE;
    while let Some(answer) = tokio::time::timeout_at(until, held.join_next())
        .await
        .expect("every held client ends once rouse up is gone")
    {
        if let Ok(Ok((code, body))) = answer {
            assert!(
                code == 200 || code >= 500,
                "a held request answered {code}: {body}"
            );
        }
    }
    drop(rouse);

    // The next run finds the killed run's workload (if it had started one) and keeps exactly
    // one; the sandbox is served.
    let mut rouse = Rouse::start(dir.path(), &Options::default());
    let took = served(&rouse, "hello", "after the restart").await;
    eprintln!("served {took:?} after the restart");
    let data = rouse.data.clone();
    support::eventually("exactly one workload process", || {
        workload_processes(&data).len() == 1
    })
    .await;
    assert!(rouse.stop(), "rouse up exits cleanly");
    let left = workload_processes(&data);
    assert!(left.is_empty(), "workload processes left running: {left:?}");
}

/// A web server that takes three seconds to start: connections to it stay held meanwhile.
const SLOW_START: &str = "sleep 3; exec python3 -m http.server --bind 127.0.0.1 \"$PORT\"";

/// Starts `rouse up` with the admin listener, a slow-starting sandbox `slow`, suspended.
async fn suspended_slow_sandbox(dir: &std::path::Path) -> Rouse {
    let options = Options {
        admin: true,
        ..Options::default()
    };
    let rouse = Rouse::start(dir, &options);
    rouse.create(&sandbox("slow", SLOW_START, json!({}))).await;
    rouse.wait_condition("slow", "Ready", "True", None).await;
    suspend(&rouse, "slow").await;
    rouse
        .wait_condition("slow", "Suspended", "True", None)
        .await;
    rouse
}

/// Sends `n` GETs to `slow` through the proxy and waits until the proxy holds all of them.
async fn hold(rouse: &Rouse, n: usize) -> tokio::task::JoinSet<Result<(u16, String), String>> {
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..n {
        let proxy = rouse.proxy;
        held.spawn(async move {
            let host = "slow.default.sandbox.localhost";
            support::http(proxy, "GET", "/", host, &[], String::new()).await
        });
    }
    let until = Instant::now() + support::DEADLINE;
    loop {
        let now = rouse.metric("rouse_proxy_held_connections", "").await;
        if now >= n as f64 {
            break;
        }
        if Instant::now() > until {
            rouse.fail(&format!("{n} connections not held; held {now}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    held
}

#[tokio::test]
async fn deleting_a_sandbox_ends_its_50_held_connections_promptly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = suspended_slow_sandbox(dir.path()).await;
    let mut held = hold(&rouse, 50).await;
    let deleted = Instant::now();
    let (code, body) = rouse
        .api("DELETE", "/v1/namespaces/default/sandboxes/slow", None)
        .await;
    assert!(code == 200 || code == 202, "delete: {code} {body}");
    // Far below the 60 s wake deadline: they end because the sandbox is gone.
    let bound = Duration::from_secs(10);
    while let Some(answer) = tokio::time::timeout(bound, held.join_next())
        .await
        .expect("every held connection ends promptly after the delete")
    {
        if let Ok((code, body)) = answer.expect("client task") {
            assert!(
                code == 404 || code == 502,
                "a held request to a deleted sandbox answered {code}: {body}"
            );
        }
    }
    eprintln!(
        "50 held connections ended {:?} after the delete",
        deleted.elapsed()
    );
}

#[tokio::test]
async fn a_resume_through_the_api_while_connections_are_held_serves_them_with_one_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = suspended_slow_sandbox(dir.path()).await;
    let runs_before = rouse.runs("slow").len();
    let mut held = hold(&rouse, 20).await;
    let (code, body) = rouse
        .api("POST", "/v1/namespaces/default/sandboxes/slow/resume", None)
        .await;
    assert_eq!(code, 200, "resume: {body}");
    while let Some(answer) = tokio::time::timeout(support::DEADLINE, held.join_next())
        .await
        .expect("every held connection is served")
    {
        let (code, body) = answer
            .expect("client task")
            .unwrap_or_else(|err| rouse.fail(&format!("held GET: {err}")));
        assert_eq!(code, 200, "a held request answered {code}: {body}");
    }
    let runs = rouse.runs("slow");
    assert_eq!(
        runs.len(),
        runs_before + 1,
        "the proxy's wake and the API's resume started the workload once: {runs:?}"
    );
}
