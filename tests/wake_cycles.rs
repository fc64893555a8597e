//! `rouse up` end to end: the lost wake of issue 9. A sandbox suspended again at once after
//! a wake — before it reports Ready — is woken by the next request, cycle after cycle; and a
//! `kill -9` in the middle of a wake leaves nothing behind and the next run wakes it again.

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
