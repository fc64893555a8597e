//! The statuses upstream agent-sandbox's own end-to-end suite (v1.0.1, `test/e2e`) expects,
//! condition by condition and word by word: reasons, messages, `observedGeneration`, and the
//! status fields an expired sandbox clears.

use rouse_shared::api::keys::condition as kind;
use rouse_shared::api::{Sandbox, SandboxStatus, ShutdownPolicy};

use super::fixtures::{SandboxBuilder, at, now};
use super::*;

/// One condition as upstream's predicates compare it: type, status, reason, message and
/// observedGeneration (the transition time aside).
type Cond = (&'static str, &'static str, &'static str, &'static str, i64);

fn conditions(status: &SandboxStatus) -> Vec<(String, String, String, String, i64)> {
    let mut got: Vec<_> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
                c.observed_generation.unwrap_or_default(),
            )
        })
        .collect();
    got.sort();
    got
}

fn want(conditions: &[Cond]) -> Vec<(String, String, String, String, i64)> {
    let mut want: Vec<_> = conditions
        .iter()
        .map(|(t, s, r, m, g)| ((*t).into(), (*s).into(), (*r).into(), (*m).into(), *g))
        .collect();
    want.sort();
    want
}

const NOT_SUSPENDED: Cond = (
    "Suspended",
    "False",
    "NotSuspended",
    "Sandbox is not suspended",
    1,
);
const SCHEDULED: Cond = ("PodScheduled", "True", "PodScheduled", "", 1);

fn with_service() -> Sandbox {
    Sandbox::test("my-sandbox").service(Some(true))
}

/// A running pod as a kubelet reports it: scheduled without a reason or message.
fn running_pod() -> Workload {
    Workload::ready("my-sandbox").scheduled("True", "")
}

#[test]
fn a_ready_sandbox_reports_upstreams_conditions() {
    let observed = Observed::nothing()
        .workload(running_pod())
        .service("my-sandbox", true);
    let plan = plan(&with_service(), &observed, now());
    assert_eq!(
        conditions(&plan.status),
        want(&[
            NOT_SUSPENDED,
            SCHEDULED,
            (
                "Ready",
                "True",
                "DependenciesReady",
                "Pod is Ready; Service Exists",
                1
            ),
        ])
    );
    assert_eq!(
        plan.status.selector.as_deref(),
        Some("agents.x-k8s.io/sandbox-name-hash=374de8f5")
    );
    assert_eq!(plan.status.service.as_deref(), Some("my-sandbox"));
}

#[test]
fn pod_scheduled_carries_the_generation_and_upstreams_fallback_reasons() {
    let mut sandbox = with_service();
    sandbox.metadata.generation = Some(4);
    let cases = [
        (Some(("True", "")), ("True", "PodScheduled", "")),
        (
            Some(("False", "Unschedulable")),
            ("False", "Unschedulable", ""),
        ),
        (Some(("False", "")), ("False", "PodSchedulingUnknown", "")),
        (
            None,
            (
                "Unknown",
                "PodSchedulingUnknown",
                "Pod has not reported a PodScheduled condition yet",
            ),
        ),
    ];
    for (pod, (status, reason, message)) in cases {
        let mut w = Workload::pending("my-sandbox");
        if let Some((s, r)) = pod {
            w = w.scheduled(s, r);
        }
        let plan = plan(&sandbox, &Observed::nothing().workload(w), now());
        let got = plan
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == kind::POD_SCHEDULED)
            .expect("PodScheduled");
        assert_eq!(
            (
                got.status.as_str(),
                got.reason.as_str(),
                got.message.as_str()
            ),
            (status, reason, message),
            "pod {pod:?}"
        );
        assert_eq!(got.observed_generation, Some(4), "pod {pod:?}");
    }
}

#[test]
fn ready_messages_follow_the_pod_as_upstream_words_them() {
    let sb = || Sandbox::test("my-sandbox");
    let cases: Vec<(&str, Sandbox, Observed, &str, &str)> = vec![
        (
            "created now",
            sb(),
            Observed::nothing(),
            "DependenciesNotReady",
            "Pod exists with phase: Pending",
        ),
        (
            "pending",
            sb(),
            Observed::nothing().workload(Workload::pending("my-sandbox")),
            "DependenciesNotReady",
            "Pod exists with phase: Pending",
        ),
        (
            "running, not ready",
            sb(),
            Observed::nothing().workload(Workload::ready("my-sandbox").not_ready()),
            "DependenciesNotReady",
            "Pod is Running but not Ready",
        ),
        (
            "ready without an IP",
            sb(),
            Observed::nothing().workload(Workload::ready("my-sandbox").no_ip()),
            "DependenciesNotReady",
            "Pod is Ready but has no podIPs yet",
        ),
        (
            "ready, no service asked for",
            sb(),
            Observed::nothing().workload(Workload::ready("my-sandbox")),
            "DependenciesReady",
            "Pod is Ready",
        ),
        (
            "service unset but an owned one exists",
            sb(),
            Observed::nothing()
                .workload(Workload::ready("my-sandbox"))
                .service("my-sandbox", true),
            "DependenciesReady",
            "Pod is Ready; Service Exists",
        ),
        (
            "succeeded",
            sb(),
            Observed::nothing()
                .workload(Workload::ready("my-sandbox").phase(WorkloadPhase::Succeeded)),
            "PodSucceeded",
            "Pod completed successfully",
        ),
        (
            "failed",
            sb(),
            Observed::nothing()
                .workload(Workload::ready("my-sandbox").phase(WorkloadPhase::Failed)),
            "PodFailed",
            "Pod failed",
        ),
        (
            "more than one owned pod",
            sb(),
            Observed::nothing()
                .workload(Workload::ready("my-sandbox"))
                .workload(Workload::ready("my-sandbox-old")),
            "MultiplePods",
            "multiple Pods (2) are controlled by this Sandbox; refusing to choose or create a Pod",
        ),
    ];
    for (name, sandbox, observed, reason, message) in cases {
        let plan = plan(&sandbox, &observed, now());
        let ready = plan
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == kind::READY)
            .expect("Ready");
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            (reason, message),
            "{name}"
        );
    }
}

#[test]
fn suspend_reports_terminating_then_terminated() {
    let sandbox = with_service().suspended();
    let terminating = Observed::nothing()
        .workload(running_pod().terminating())
        .service("my-sandbox", true);
    assert_eq!(
        conditions(&plan(&sandbox, &terminating, now()).status),
        want(&[
            (
                "Suspended",
                "False",
                "PodTerminating",
                "Pod is terminating. Sandbox is suspending",
                1
            ),
            SCHEDULED,
            (
                "Ready",
                "False",
                "SandboxSuspended",
                "Sandbox is suspending",
                1
            ),
        ])
    );
    let gone = Observed::nothing().service("my-sandbox", true);
    assert_eq!(
        conditions(&plan(&sandbox, &gone, now()).status),
        want(&[
            (
                "Suspended",
                "True",
                "PodTerminated",
                "Pod has been terminated. Sandbox is suspended",
                1
            ),
            (
                "Ready",
                "False",
                "SandboxSuspended",
                "Sandbox is suspended",
                1
            ),
        ])
    );
}

#[test]
fn a_pod_the_sandbox_does_not_own_is_left_alone_and_reported() {
    let sandbox = Sandbox::test("my-sandbox-conflict")
        .service(Some(true))
        .suspended();
    let observed = Observed::nothing()
        .workload(Workload::ready("my-sandbox-conflict").owned_by(Ownership::NotOwned))
        .service("my-sandbox-conflict", true);
    let plan = plan(&sandbox, &observed, now());
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(
        conditions(&plan.status),
        want(&[
            (
                "Suspended",
                "False",
                "PodNotOwned",
                "Refused to delete pod because it is not owned by this sandbox",
                1
            ),
            (
                "Ready",
                "False",
                "SandboxSuspended",
                "Sandbox is suspending",
                1
            ),
        ])
    );
    // Running, the same pod is an error named as upstream names it.
    let running = plan_ready_message(&sandbox.clone().running(), &observed);
    assert_eq!(
        running,
        "Error seen: cannot adopt unowned pod \"my-sandbox-conflict\": missing required pool authorization label (\"agents.x-k8s.io/adoptable\") or sandbox tracking label (\"agents.x-k8s.io/sandbox-name-hash\")"
    );
}

fn plan_ready_message(sandbox: &Sandbox, observed: &Observed) -> String {
    plan(sandbox, observed, now())
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == kind::READY)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[test]
fn expiry_clears_what_ran_and_keeps_finished() {
    let sandbox = with_service()
        .shutdown_at(at(-1), Some(ShutdownPolicy::Retain))
        .status(SandboxStatus {
            service: Some("my-sandbox".into()),
            service_fqdn: Some("my-sandbox.team-a.svc.cluster.local".into()),
            selector: Some("agents.x-k8s.io/sandbox-name-hash=374de8f5".into()),
            pod_ips: vec!["10.0.0.7".into()],
            node_name: Some("node-1".into()),
            ..SandboxStatus::default()
        })
        .condition("Finished", "True", "PodSucceeded", at(-30))
        .condition("PodScheduled", "True", "PodScheduled", at(-60));
    // The pod is still there, being deleted by this pass.
    let observed = Observed::nothing()
        .workload(running_pod())
        .service("my-sandbox", true);
    let plan = plan(&sandbox, &observed, now());
    let status = &plan.status;
    assert_eq!(
        (
            &status.service,
            &status.service_fqdn,
            &status.selector,
            &status.node_name
        ),
        (&None, &None, &None, &None)
    );
    assert!(status.pod_ips.is_empty(), "{:?}", status.pod_ips);
    assert!(status.endpoint.is_none());
    let types: Vec<_> = conditions(status).into_iter().map(|c| (c.0, c.2)).collect();
    assert_eq!(
        types,
        [
            ("Ready".to_owned(), "SandboxExpired".to_owned()),
            ("Suspended".to_owned(), "NotSuspended".to_owned()),
        ],
        "PodScheduled goes; a running pod has not finished"
    );
    assert_eq!(
        plan_ready_message(&sandbox, &observed),
        "Sandbox has expired"
    );
    // Once the pod is gone, the Finished it had stays.
    let gone = super::plan(&sandbox, &Observed::nothing(), now());
    assert!(
        gone.status
            .conditions
            .iter()
            .any(|c| c.type_ == kind::FINISHED && c.reason == "PodSucceeded"),
        "{:?}",
        gone.status.conditions
    );
}

#[test]
fn finished_uses_upstreams_messages() {
    for (phase, reason, message) in [
        (
            WorkloadPhase::Succeeded,
            "PodSucceeded",
            "Pod completed successfully",
        ),
        (WorkloadPhase::Failed, "PodFailed", "Pod failed"),
    ] {
        let observed = Observed::nothing().workload(Workload::ready("my-sandbox").phase(phase));
        let plan = plan(&Sandbox::test("my-sandbox"), &observed, now());
        let finished = plan
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == kind::FINISHED)
            .expect("Finished");
        assert_eq!(
            (
                finished.status.as_str(),
                finished.reason.as_str(),
                finished.message.as_str(),
                finished.observed_generation
            ),
            ("True", reason, message, Some(1))
        );
    }
}
