//! `rouse up` with the warm pool example: the template, pool and claim of
//! deploy/examples/warm-pool.yaml run on the process runtime, a claim adopts a warm member
//! that serves through the proxy, the CLI lists claims, pools and templates, and deleting the
//! claim deletes its sandbox while the pool refills.

// The harness also exports helpers this file does not use.
#[allow(unused_imports)]
mod support;

use std::time::Instant;

use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse};

const CLAIMS: &str = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims";
const CLAIM: &str =
    "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims/task-42";
const POOL: &str =
    "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools/python-runners";

/// Runs the `rouse` CLI against this `rouse up`; the exit status and stdout.
fn cli(rouse: &Rouse, args: &[&str]) -> (bool, String) {
    let output = rouse.cli(args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        eprintln!(
            "rouse {args:?} failed: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    (output.status.success(), stdout)
}

/// Polls the API object at `path` until `check` holds.
async fn wait_api(
    rouse: &Rouse,
    path: &str,
    what: &str,
    check: impl Fn(u16, &Value) -> bool,
) -> Value {
    let until = Instant::now() + DEADLINE;
    loop {
        let (code, body) = rouse.api("GET", path, None).await;
        if check(code, &body) {
            return body;
        }
        if Instant::now() > until {
            rouse.fail(&format!(
                "{what}: not within {DEADLINE:?}; last: {code} {body}"
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn ready(object: &Value) -> bool {
    object["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

#[tokio::test]
async fn the_warm_pool_example_runs_with_rouse_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/examples/warm-pool.yaml"
    );
    let (ok, out) = cli(&rouse, &["apply", "-f", example]);
    assert!(ok && out.contains("task-42 created"), "{out}");

    let claim = wait_api(&rouse, CLAIM, "claim task-42 Ready", |code, c| {
        code == 200 && ready(c) && c["status"]["sandbox"]["name"].is_string()
    })
    .await;
    // Applied together with its pool, the example's claim usually finds no member Ready yet
    // and starts cold; once the pool is full, a second claim adopts a warm member.
    let sandbox = claim["status"]["sandbox"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    match rouse.get(&sandbox, "/").await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("GET / of {sandbox} through the proxy: {other:?}")),
    }
    wait_api(&rouse, POOL, "the pool full", |code, p| {
        code == 200 && p["status"]["readyReplicas"] == 2
    })
    .await;
    let second = json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxClaim",
        "metadata": {"name": "task-43"},
        "spec": {"warmPoolRef": {"name": "python-runners"}},
    });
    let (code, body) = rouse.api("POST", CLAIMS, Some(&second)).await;
    assert_eq!(code, 201, "{body}");
    let claim = wait_api(
        &rouse,
        &format!("{CLAIMS}/task-43"),
        "claim task-43 Ready",
        |code, c| code == 200 && ready(c) && c["status"]["sandbox"]["name"].is_string(),
    )
    .await;
    let warm = claim["status"]["sandbox"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let bound = rouse
        .sandbox(&warm)
        .await
        .expect("the claimed sandbox exists");
    assert_eq!(
        bound["metadata"]["labels"]["agents.x-k8s.io/launch-type"], "warm",
        "{bound}"
    );
    assert_eq!(
        bound["spec"]["suspension"]["idleTimeoutSeconds"], 600,
        "the template's suspension applies once claimed"
    );
    match rouse.get(&warm, "/").await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("GET / of {warm} through the proxy: {other:?}")),
    }
    wait_api(&rouse, POOL, "the pool refilled", |code, p| {
        code == 200 && p["status"]["readyReplicas"] == 2
    })
    .await;
    let (ok, out) = cli(&rouse, &["get", "claims"]);
    assert!(
        ok && out
            .lines()
            .nth(1)
            .is_some_and(|r| r.starts_with("task-42") && r.contains(&sandbox)),
        "{out}"
    );
    let (ok, out) = cli(&rouse, &["get", "pools"]);
    assert!(
        ok && out
            .lines()
            .nth(1)
            .is_some_and(|r| r.starts_with("python-runners") && r.contains("python-runner")),
        "{out}"
    );
    let (ok, out) = cli(&rouse, &["get", "templates"]);
    assert!(ok && out.contains("python-runner"), "{out}");

    let (ok, out) = cli(&rouse, &["delete", "claim", "task-42"]);
    assert!(ok, "{out}");
    rouse
        .wait_for(&sandbox, "deleted with its claim", |s| s.is_none())
        .await;
    wait_api(&rouse, POOL, "the pool still full", |code, p| {
        code == 200 && p["status"]["readyReplicas"] == 2
    })
    .await;
}
