//! `rouse up` end to end: the direct wake (`[runtime] direct_wake`, on by default). A request
//! to a suspended sandbox is served by a workload the local platform starts at once, and the
//! store converges behind it to `Running` and `Ready` with the endpoint; a storm of
//! connections starts it once; a suspend sent right after the wake wins; a restart converges;
//! a sandbox the platform cannot start directly is woken through the store.

mod support;

use serde_json::{Value, json};
use support::{Options, Rouse, SERVE, alive, condition, eventually, sandbox};

/// Starts `rouse up` with its metrics listener.
fn start(dir: &std::path::Path) -> Rouse {
    let options = Options {
        admin: true,
        ..Options::default()
    };
    Rouse::start(dir, &options)
}

/// Creates the sandbox, waits for it to run, suspends it and waits until its process is gone.
async fn suspended(rouse: &Rouse, name: &str, spec: Value) {
    rouse.create(&sandbox(name, SERVE, spec)).await;
    rouse.wait_condition(name, "Ready", "True", None).await;
    suspend(rouse, name).await;
    rouse.wait_condition(name, "Suspended", "True", None).await;
    let runs = rouse.runs(name);
    let pid = *runs.last().expect("the workload ran");
    eventually("the suspended workload's process gone", || !alive(pid)).await;
}

async fn suspend(rouse: &Rouse, name: &str) {
    let path = format!("/v1/namespaces/default/sandboxes/{name}/suspend");
    let (code, body) = rouse.api("POST", &path, None).await;
    assert_eq!(code, 200, "suspend: {body}");
}

/// GETs `/` through the proxy and expects it served.
async fn served(rouse: &Rouse, name: &str) {
    match rouse.get(name, "/").await {
        Ok((200, _)) => {}
        Ok((code, body)) => rouse.fail(&format!("GET / answered {code} {body}")),
        Err(err) => rouse.fail(&format!("GET /: {err}")),
    }
}

/// `rouse_proxy_direct_wakes_total` of one result.
async fn direct_wakes(rouse: &Rouse, result: &str) -> f64 {
    let labels = format!("result=\"{result}\"");
    rouse
        .metric("rouse_proxy_direct_wakes_total", &labels)
        .await
}

/// Waits until the store has the sandbox running and Ready with an endpoint; returns it.
async fn converged(rouse: &Rouse, name: &str) -> Value {
    rouse
        .wait_for(name, "Running, Ready=True, with an endpoint", |s| {
            s.is_some_and(|s| {
                s["spec"]["operatingMode"] == "Running"
                    && condition(s, "Ready").is_some_and(|c| c["status"] == "True")
                    && s["status"]["endpoint"]["address"] == "127.0.0.1"
            })
        })
        .await
        .expect("converged on an existing sandbox")
}

#[tokio::test]
async fn a_direct_wake_serves_and_the_store_converges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = start(dir.path());
    suspended(&rouse, "direct", json!({})).await;

    served(&rouse, "direct").await;
    assert_eq!(direct_wakes(&rouse, "started").await, 1.0, "woken directly");
    assert_eq!(rouse.runs("direct").len(), 2, "one start for the wake");
    let woken = converged(&rouse, "direct").await;
    let port = woken["status"]["endpoint"]["ports"][0]["port"].clone();
    assert!(port.as_u64().is_some_and(|p| p > 0), "{woken}");
    // The reconciler adopted the woken workload: no second start.
    served(&rouse, "direct").await;
    assert_eq!(rouse.runs("direct").len(), 2, "{}", rouse.log("direct"));
}

#[tokio::test]
async fn a_storm_of_connections_starts_the_workload_once() {
    const CLIENTS: usize = 50;
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = std::sync::Arc::new(start(dir.path()));
    suspended(&rouse, "storm", json!({})).await;

    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let rouse = rouse.clone();
        tasks.spawn(async move { rouse.get("storm", "/").await });
    }
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    while let Some(result) = tasks.join_next().await {
        let key = match result.expect("client task") {
            Ok((code, _)) => code.to_string(),
            Err(err) => err,
        };
        *codes.entry(key).or_default() += 1;
    }
    if codes.get("200") != Some(&CLIENTS) {
        rouse.fail(&format!("not every client was served: {codes:?}"));
    }
    assert_eq!(direct_wakes(&rouse, "started").await, 1.0);
    converged(&rouse, "storm").await;
    assert_eq!(rouse.runs("storm").len(), 2, "{}", rouse.log("storm"));
}

#[tokio::test]
async fn a_suspend_right_after_a_direct_wake_ends_suspended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = start(dir.path());
    suspended(&rouse, "brief", json!({})).await;

    served(&rouse, "brief").await;
    suspend(&rouse, "brief").await;
    let last = rouse
        .wait_for("brief", "suspended with its workload gone", |s| {
            s.is_some_and(|s| {
                s["spec"]["operatingMode"] == "Suspended"
                    && condition(s, "Suspended").is_some_and(|c| c["status"] == "True")
            })
        })
        .await
        .expect("exists");
    let pid = *rouse.runs("brief").last().expect("woken once");
    eventually("the woken workload's process gone", || !alive(pid)).await;
    assert_eq!(direct_wakes(&rouse, "started").await, 1.0);
    // The wake's own write came first: the object stays suspended.
    let now = rouse.sandbox("brief").await.expect("exists");
    assert_eq!(now["spec"]["operatingMode"], "Suspended", "{now}");
    assert_eq!(
        now["metadata"]["generation"], last["metadata"]["generation"],
        "nothing wrote the spec after the suspend"
    );
}

#[tokio::test]
async fn a_restart_after_a_direct_wake_converges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rouse = start(dir.path());
    suspended(&rouse, "again", json!({})).await;
    served(&rouse, "again").await;
    converged(&rouse, "again").await;
    assert!(rouse.stop(), "rouse up exits cleanly on SIGINT");
    drop(rouse);

    let rouse = start(dir.path());
    converged(&rouse, "again").await;
    served(&rouse, "again").await;
    assert_eq!(rouse.runs("again").len(), 3, "{}", rouse.log("again"));
}

#[tokio::test]
async fn a_sandbox_the_platform_cannot_start_directly_wakes_through_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = start(dir.path());
    // The process runtime suspends a Checkpoint sandbox by stopping it; a checkpointed
    // sandbox's start is a restore, which the direct wake leaves to the reconciler.
    let spec = json!({"suspension": {"strategy": "Checkpoint"}});
    suspended(&rouse, "restoring", spec).await;

    served(&rouse, "restoring").await;
    assert_eq!(direct_wakes(&rouse, "fallback").await, 1.0);
    assert_eq!(direct_wakes(&rouse, "started").await, 0.0);
    converged(&rouse, "restoring").await;
    assert_eq!(rouse.runs("restoring").len(), 2);
}
