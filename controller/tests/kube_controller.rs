//! The Sandbox controller against the in-process fake API server and fake kubelet: the shared
//! scenarios, plus the ones only a fake can stage (a lagging watch).

mod scenarios;

use std::time::Duration;

use rouse_testsupport::kube::{FakeApiServer, FakeKubelet};
use scenarios::Env;
use scenarios::lifecycle;
use serde_json::json;

/// A fake API server with a kubelet, and the scenario environment on it.
async fn fake() -> (FakeApiServer, FakeKubelet, Env) {
    scenarios::fake::start(Duration::from_secs(30)).await
}

#[tokio::test]
async fn create_becomes_ready_with_an_endpoint() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::create_ready(&env).await;
}

#[tokio::test]
async fn suspend_keeps_the_claim_and_resume_reuses_it() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::suspend_resume(&env).await;
}

#[tokio::test]
async fn expiry_with_retain_and_delete() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::expiry(&env).await;
}

#[tokio::test]
async fn idle_sandboxes_are_suspended() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::idle_suspend(&env).await;
}

#[tokio::test]
async fn a_restarted_controller_converges() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::restart_converges(&env, 12).await;
}

#[tokio::test]
async fn deleting_a_sandbox_collects_what_it_owns() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::owned_objects_collected(&env).await;
}

#[tokio::test]
async fn a_pod_the_sandbox_does_not_own_is_left_alone() {
    let (_server, _kubelet, env) = fake().await;
    scenarios::ownership::unowned_pod_left_alone(&env).await;
}

#[tokio::test]
async fn only_the_leader_reconciles() {
    let (_server, _kubelet, env) = fake().await;
    lifecycle::leader_election(&env).await;
}

/// With every watch event delayed, suspend/resume churn still ends with one pod per running
/// sandbox and a status that matches the last spec written (no lost update).
#[tokio::test]
async fn a_lagging_watch_never_duplicates_pods_or_loses_updates() {
    let (server, _kubelet, env) = fake().await;
    server.set_watch_delay(Duration::from_millis(150));
    let controller = env.start(env.config());
    let names: Vec<String> = (0..6).map(|i| format!("lag-{i}")).collect();
    for name in &names {
        env.create(&scenarios::sandbox(&env, name)).await;
    }
    for name in &names {
        env.wait_ready(name, "True", "DependenciesReady").await;
    }
    // Flip each sandbox several times faster than the watch delivers events.
    for round in 0..3 {
        for name in &names {
            let mode = if round % 2 == 0 {
                "Suspended"
            } else {
                "Running"
            };
            env.patch_spec(name, json!({"operatingMode": mode})).await;
        }
    }
    // Last write: Suspended for even sandboxes, Running for odd ones.
    for (i, name) in names.iter().enumerate() {
        let mode = if i % 2 == 0 { "Suspended" } else { "Running" };
        env.patch_spec(name, json!({"operatingMode": mode})).await;
    }
    let running: Vec<String> = names.iter().skip(1).step_by(2).cloned().collect();
    for (i, name) in names.iter().enumerate() {
        if i % 2 == 0 {
            env.wait_sandbox(name, &format!("{name} suspended"), |s| {
                scenarios::env::condition(s, "Suspended")
                    == Some(("True".into(), "PodTerminated".into()))
            })
            .await;
            env.wait_pod_gone(name).await;
        } else {
            env.wait_ready(name, "True", "DependenciesReady").await;
        }
    }
    server.set_watch_delay(Duration::ZERO);
    lifecycle::assert_one_pod_each(&env, &running).await;
    controller.stop().await;
}

/// `strategy: Checkpoint` in Kubernetes mode: the pod is stopped, and the sandbox says why in
/// `Checkpointed=False/CheckpointUnsupported`; resumed, the condition goes away.
#[tokio::test]
async fn a_checkpoint_suspend_stops_the_pod_and_says_why() {
    let (_server, _kubelet, env) = fake().await;
    let _controller = env.start(env.config());
    let mut sandbox = scenarios::sandbox(&env, "cora");
    sandbox.spec.suspension = Some(rouse_shared::api::Suspension {
        strategy: rouse_shared::api::SuspensionStrategy::Checkpoint,
        ..Default::default()
    });
    env.create(&sandbox).await;
    env.wait_ready("cora", "True", "DependenciesReady").await;
    env.patch_spec("cora", json!({"operatingMode": "Suspended"}))
        .await;
    env.wait_sandbox(
        "cora",
        "cora Suspended=True and Checkpointed=False/CheckpointUnsupported",
        |s| {
            scenarios::env::condition(s, "Suspended")
                == Some(("True".into(), "PodTerminated".into()))
                && scenarios::env::condition(s, "Checkpointed")
                    == Some(("False".into(), "CheckpointUnsupported".into()))
        },
    )
    .await;
    env.wait_pod_gone("cora").await;
    env.patch_spec("cora", json!({"operatingMode": "Running"}))
        .await;
    let resumed = env.wait_ready("cora", "True", "DependenciesReady").await;
    assert_eq!(scenarios::env::condition(&resumed, "Checkpointed"), None);
}
