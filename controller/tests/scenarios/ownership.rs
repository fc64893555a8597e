//! Ownership as upstream agent-sandbox defines it: a pod of the sandbox's name that the
//! sandbox does not own is never touched, and the status says so (its e2e
//! `TestSandboxSuspensionBlockedByUnownedPodConflict`).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::{ObjectMeta, PostParams};

use super::env::{Env, condition};

/// A pod named like a suspended sandbox, made by someone else without any label: the sandbox
/// reports `Suspended=False/PodNotOwned` and `Ready=False/SandboxSuspended` ("suspending"),
/// and the pod stays, unchanged and unowned.
pub async fn unowned_pod_left_alone(env: &Env) {
    let controller = env.start(env.config());
    let name = "my-sandbox-conflict";
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(env.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "pause".to_owned(),
                image: Some(env.image.clone()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    };
    let pod = env
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the unowned pod");
    let mut sandbox = super::sandbox(env, name);
    sandbox.spec.volume_claim_templates.clear();
    sandbox.spec.service = Some(true);
    sandbox.spec.operating_mode = Some(rouse_shared::api::OperatingMode::Suspended);
    env.create(&sandbox).await;
    let reported = env
        .wait_sandbox(name, "Suspended=False/PodNotOwned", |s| {
            condition(s, "Suspended") == Some(("False".into(), "PodNotOwned".into()))
        })
        .await;
    let ready = reported
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.reason.clone(), c.message.clone()));
    assert_eq!(
        ready,
        Some(("SandboxSuspended".into(), "Sandbox is suspending".into()))
    );
    let after = env.pods().get(name).await.expect("the pod is still there");
    assert_eq!(after.metadata.uid, pod.metadata.uid, "not deleted");
    assert_eq!(after.metadata.deletion_timestamp, None, "not being deleted");
    assert_eq!(after.metadata.owner_references, None, "not adopted");
    controller.stop().await;
}
