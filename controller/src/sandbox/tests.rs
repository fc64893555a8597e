//! Table tests of every plan rule: lifecycle actions, conditions and reasons, expiry, idle
//! suspend, status fields, ownership and the built workload.

use std::time::Duration;

use jiff::Timestamp;
use rouse_shared::api::keys::{POD_NAME, SANDBOX_NAME_HASH};
use rouse_shared::api::{Sandbox, ShutdownPolicy};
use rouse_shared::names::sandbox_name_hash;

use super::fixtures::{SandboxBuilder, at, now};
use super::*;

/// The parts of a plan most rules decide.
#[derive(Debug, PartialEq)]
struct Summary {
    actions: Vec<String>,
    ops: Vec<SandboxOp>,
    ready: String,
    suspended: String,
    requeue: Option<Duration>,
}

fn want(actions: &[&str], ops: &[SandboxOp], ready: &str, suspended: &str) -> Summary {
    Summary {
        actions: actions.iter().map(|s| (*s).to_owned()).collect(),
        ops: ops.to_vec(),
        ready: ready.to_owned(),
        suspended: suspended.to_owned(),
        requeue: None,
    }
}

fn requeue(mut summary: Summary, secs: u64) -> Summary {
    summary.requeue = Some(Duration::from_secs(secs));
    summary
}

fn describe(action: &Action) -> String {
    let name = match action {
        Action::EnsureVolume(v) => v.claim_name.clone(),
        Action::CreateWorkload(w) => w.name.clone(),
        Action::AdoptWorkload { name }
        | Action::DeleteWorkload { name }
        | Action::DeleteService { name } => name.clone(),
        Action::EnsureService(s) => s.name.clone(),
    };
    format!("{} {name}", action.metric_label())
}

fn condition(plan: &Plan, type_: &str) -> String {
    plan.status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| format!("{}/{}", c.status, c.reason))
        .unwrap_or_default()
}

fn summarize(plan: &Plan) -> Summary {
    Summary {
        actions: plan.actions.iter().map(describe).collect(),
        ops: plan.sandbox_ops.clone(),
        ready: condition(plan, "Ready"),
        suspended: condition(plan, "Suspended"),
        requeue: plan.requeue_after,
    }
}

struct Case {
    name: &'static str,
    given: (Sandbox, Observed, Timestamp),
    want: Summary,
}

fn run(cases: Vec<Case>) {
    for Case { name, given, want } in cases {
        let (sandbox, observed, now) = given;
        let got = summarize(&plan(&sandbox, &observed, now));
        assert_eq!(got, want, "{name}");
    }
}

const NOT_SUSPENDED: &str = "False/NotSuspended";

#[test]
fn lifecycle_rules() {
    use SandboxOp::{Delete, Suspend};
    let sb = || Sandbox::test("alice");
    let nothing = Observed::nothing;
    run(vec![
        Case {
            name: "create: workload, volumes and service",
            given: (
                sb().volume("data").volume("cache").service(Some(true)),
                nothing(),
                now(),
            ),
            want: want(
                &[
                    "ensure_volume data-alice",
                    "ensure_volume cache-alice",
                    "ensure_service alice",
                    "create_workload alice",
                ],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "existing volumes and service are not recreated",
            given: (
                sb().volume("data").service(Some(true)),
                nothing().claim("data-alice").service("alice", true),
                now(),
            ),
            want: want(
                &["create_workload alice"],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "pending pod: nothing to do, not ready",
            given: (sb(), nothing().workload(Workload::pending("alice")), now()),
            want: want(&[], &[], "False/DependenciesNotReady", NOT_SUSPENDED),
        },
        Case {
            name: "running and ready pod: ready",
            given: (sb(), nothing().workload(Workload::ready("alice")), now()),
            want: want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED),
        },
        Case {
            name: "running pod not ready",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").not_ready()),
                now(),
            ),
            want: want(&[], &[], "False/DependenciesNotReady", NOT_SUSPENDED),
        },
        Case {
            name: "ready pod without an IP",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").no_ip()),
                now(),
            ),
            want: want(&[], &[], "False/DependenciesNotReady", NOT_SUSPENDED),
        },
        Case {
            name: "ready pod, service asked for and created in this pass",
            given: (
                sb().service(Some(true)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: want(
                &["ensure_service alice"],
                &[],
                "True/DependenciesReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "terminating pod while running: wait for it to go",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").terminating()),
                now(),
            ),
            want: want(&[], &[], "False/DependenciesNotReady", NOT_SUSPENDED),
        },
        Case {
            name: "pod succeeded: not recreated",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").phase(WorkloadPhase::Succeeded)),
                now(),
            ),
            want: want(&[], &[], "False/PodSucceeded", NOT_SUSPENDED),
        },
        Case {
            name: "pod failed: not recreated",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").phase(WorkloadPhase::Failed)),
                now(),
            ),
            want: want(&[], &[], "False/PodFailed", NOT_SUSPENDED),
        },
        Case {
            name: "suspend: delete the pod only",
            given: (
                sb().suspended().volume("data").service(Some(true)),
                nothing()
                    .workload(Workload::ready("alice"))
                    .claim("data-alice")
                    .service("alice", true),
                now(),
            ),
            want: want(
                &["delete_workload alice"],
                &[],
                "False/SandboxSuspended",
                "False/PodTerminating",
            ),
        },
        Case {
            name: "suspended, pod terminating: wait",
            given: (
                sb().suspended(),
                nothing().workload(Workload::ready("alice").terminating()),
                now(),
            ),
            want: want(&[], &[], "False/SandboxSuspended", "False/PodTerminating"),
        },
        Case {
            name: "suspended, pod gone",
            given: (
                sb().suspended().volume("data"),
                nothing().claim("data-alice"),
                now(),
            ),
            want: want(&[], &[], "False/SandboxSuspended", "True/PodTerminated"),
        },
        Case {
            name: "suspended, pod state unknown",
            given: (
                sb().suspended(),
                nothing().workload(
                    Workload::ready("alice")
                        .phase(WorkloadPhase::Unknown)
                        .terminating(),
                ),
                now(),
            ),
            want: want(&[], &[], "False/SandboxSuspended", "False/PodTerminating"),
        },
        Case {
            name: "suspended, pod unknown and not yet deleted: delete it, state unknown",
            given: (
                sb().suspended(),
                nothing().workload(Workload::ready("alice").phase(WorkloadPhase::Unknown)),
                now(),
            ),
            want: want(
                &["delete_workload alice"],
                &[],
                "False/SandboxSuspended",
                "False/PodTerminating",
            ),
        },
        Case {
            name: "suspended, pod of that name not owned",
            given: (
                sb().suspended(),
                nothing().workload(Workload::ready("alice").owned_by(Ownership::NotOwned)),
                now(),
            ),
            // Upstream: the sandbox is suspending; the pod is someone else's to delete.
            want: want(&[], &[], "False/SandboxSuspended", "False/PodNotOwned"),
        },
        Case {
            name: "resume: recreate on the same volumes",
            given: (
                sb().running().volume("data").condition(
                    "Suspended",
                    "True",
                    "PodTerminated",
                    at(-60),
                ),
                nothing().claim("data-alice"),
                now(),
            ),
            want: want(
                &["create_workload alice"],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "pod of that name not owned: never touched",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").owned_by(Ownership::NotOwned)),
                now(),
            ),
            want: want(&[], &[], "False/ReconcilerError", NOT_SUSPENDED),
        },
        Case {
            name: "adoptable pod: adopted",
            given: (
                sb(),
                nothing().workload(Workload::ready("alice").owned_by(Ownership::Adoptable)),
                now(),
            ),
            want: want(
                &["adopt_workload alice"],
                &[],
                "True/DependenciesReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "two owned pods: refuse",
            given: (
                sb(),
                nothing()
                    .workload(Workload::ready("alice"))
                    .workload(Workload::ready("alice-old")),
                now(),
            ),
            want: want(&[], &[], "False/MultiplePods", NOT_SUSPENDED),
        },
        Case {
            name: "two owned pods while suspended: refuse, state unknown",
            given: (
                sb().suspended(),
                nothing()
                    .workload(Workload::ready("alice"))
                    .workload(Workload::ready("alice-old")),
                now(),
            ),
            want: want(&[], &[], "False/MultiplePods", "Unknown/PodStateUnknown"),
        },
        Case {
            name: "service false: delete the owned one",
            given: (
                sb().service(Some(false)),
                nothing()
                    .workload(Workload::ready("alice"))
                    .service("alice", true),
                now(),
            ),
            want: want(
                &["delete_service alice"],
                &[],
                "True/DependenciesReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "service false: a foreign one is left alone",
            given: (
                sb().service(Some(false)),
                nothing()
                    .workload(Workload::ready("alice"))
                    .service("alice", false),
                now(),
            ),
            want: want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED),
        },
        Case {
            name: "service unset: existing kept, none created",
            given: (
                sb(),
                nothing()
                    .workload(Workload::ready("alice"))
                    .service("alice", true),
                now(),
            ),
            want: want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED),
        },
        Case {
            name: "before shutdownTime: requeue at it",
            given: (
                sb().shutdown_at(at(90), None),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 90),
        },
        Case {
            name: "expired, Retain: workload and service deleted, object kept",
            given: (
                sb().volume("data")
                    .service(Some(true))
                    .shutdown_at(at(0), Some(ShutdownPolicy::Retain)),
                nothing()
                    .workload(Workload::ready("alice"))
                    .claim("data-alice")
                    .service("alice", true),
                now(),
            ),
            want: want(
                &["delete_service alice", "delete_workload alice"],
                &[],
                "False/SandboxExpired",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "expired, default policy is Retain; nothing left to delete",
            given: (
                sb().volume("data").shutdown_at(at(-5), None),
                nothing(),
                now(),
            ),
            want: want(&[], &[], "False/SandboxExpired", NOT_SUSPENDED),
        },
        Case {
            name: "expired, Delete: the object goes too",
            given: (
                sb().shutdown_at(at(-1), Some(ShutdownPolicy::Delete)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: want(
                &["delete_workload alice"],
                &[Delete],
                "False/SandboxExpired",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "expired wins over suspended",
            given: (sb().suspended().shutdown_at(at(-1), None), nothing(), now()),
            want: want(&[], &[], "False/SandboxExpired", "True/PodTerminated"),
        },
        Case {
            name: "idle: not yet, requeue at the deadline",
            given: (
                sb().idle_after(60)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-2900))
                    .last_activity(at(-20)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            // A stored time stands for the end of its second: 60 - 20 + 1.
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 41),
        },
        Case {
            name: "idle: a whole-second activity time a timeout ago is not yet idle",
            given: (
                sb().idle_after(1)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-2900))
                    .last_activity(at(-1)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 1),
        },
        Case {
            name: "idle: an open connection (live activity now) keeps it running",
            given: (
                sb().idle_after(5)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-2900))
                    .last_activity(at(-600)),
                nothing().workload(Workload::ready("alice")).live(now()),
                now(),
            ),
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 5),
        },
        Case {
            name: "idle: live activity older than the timeout suspends",
            given: (
                sb().idle_after(5)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-2900))
                    .last_activity(at(-600)),
                nothing().workload(Workload::ready("alice")).live(at(-5)),
                now(),
            ),
            want: want(
                &["delete_workload alice"],
                &[Suspend],
                "False/SandboxSuspended",
                "False/PodTerminating",
            ),
        },
        Case {
            name: "idle: timeout passed since the last activity, suspend",
            given: (
                sb().idle_after(60)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-2900))
                    .last_activity(at(-61)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: want(
                &["delete_workload alice"],
                &[Suspend],
                "False/SandboxSuspended",
                "False/PodTerminating",
            ),
        },
        Case {
            name: "idle: no activity ever, clock starts when it became ready",
            given: (
                sb().idle_after(600)
                    .condition("Suspended", "False", "NotSuspended", at(-3000))
                    .condition("Ready", "True", "DependenciesReady", at(-100)),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 501),
        },
        Case {
            name: "idle: a resume counts as activity (old lastActivityTime ignored)",
            given: (
                sb().idle_after(60)
                    .condition("Suspended", "True", "PodTerminated", at(-500))
                    .last_activity(at(-4000)),
                nothing(),
                now(),
            ),
            want: requeue(
                want(
                    &["create_workload alice"],
                    &[],
                    "False/DependenciesNotReady",
                    NOT_SUSPENDED,
                ),
                60,
            ),
        },
        Case {
            name: "idle: suspended sandboxes have no idle deadline",
            given: (
                sb().suspended().idle_after(60).last_activity(at(-4000)),
                nothing(),
                now(),
            ),
            want: want(&[], &[], "False/SandboxSuspended", "True/PodTerminated"),
        },
        Case {
            name: "idle and expiry: the earlier deadline wins",
            given: (
                sb().idle_after(60).shutdown_at(at(30), None).condition(
                    "Suspended",
                    "False",
                    "NotSuspended",
                    at(-10),
                ),
                nothing().workload(Workload::ready("alice")),
                now(),
            ),
            want: requeue(want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED), 30),
        },
        Case {
            name: "sandbox being deleted: nothing",
            given: (sb().deleting(), nothing(), now()),
            want: want(&[], &[], "", ""),
        },
        Case {
            name: "pod-name annotation names the pod",
            given: (
                sb().sandbox_annotation(POD_NAME, "warm-7"),
                nothing(),
                now(),
            ),
            want: want(
                &["create_workload warm-7"],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
    ]);
}

#[test]
fn status_fields_follow_the_pod_and_service() {
    let sandbox = Sandbox::test("alice").service(Some(true));
    let observed = Observed::nothing()
        .workload(Workload::ready("alice").scheduled("True", "Scheduled"))
        .service("alice", true);
    let status = plan(&sandbox, &observed, now()).status;
    assert_eq!(status.pod_ips, vec!["10.0.0.7".to_owned()]);
    assert_eq!(status.node_name.as_deref(), Some("node-1"));
    assert_eq!(status.service.as_deref(), Some("alice"));
    assert_eq!(
        status.service_fqdn.as_deref(),
        Some("alice.team-a.svc.cluster.local")
    );
    assert_eq!(
        status.selector,
        Some(format!(
            "{SANDBOX_NAME_HASH}={}",
            sandbox_name_hash("alice")
        ))
    );
    let endpoint = status.endpoint.expect("endpoint of a running pod");
    assert_eq!(endpoint.address, "10.0.0.7");
    assert_eq!(endpoint.ports[0].container_port, 8080);
    let scheduled = status
        .conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("PodScheduled copied");
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_str()),
        ("True", "Scheduled")
    );

    // No pod: IPs, node, endpoint and PodScheduled cleared; the Service is kept.
    let suspended = sandbox.clone().suspended();
    let status = plan(
        &suspended,
        &Observed::nothing().service("alice", true),
        now(),
    )
    .status;
    assert!(status.pod_ips.is_empty());
    assert_eq!(status.node_name, None);
    assert_eq!(status.endpoint, None);
    assert!(status.conditions.iter().all(|c| c.type_ != "PodScheduled"));
    assert_eq!(status.service.as_deref(), Some("alice"));

    // Service false: no service fields.
    let status = plan(
        &Sandbox::test("alice").service(Some(false)),
        &Observed::nothing(),
        now(),
    )
    .status;
    assert_eq!((status.service, status.service_fqdn), (None, None));
}

#[test]
fn endpoint_only_for_a_running_pod_that_stays() {
    let cases = [
        ("pending", Sandbox::test("a"), Workload::pending("a"), false),
        (
            "running, not ready yet",
            Sandbox::test("a"),
            Workload::ready("a").not_ready(),
            true,
        ),
        (
            "terminating",
            Sandbox::test("a"),
            Workload::ready("a").terminating(),
            false,
        ),
        (
            "being deleted now",
            Sandbox::test("a").suspended(),
            Workload::ready("a"),
            false,
        ),
        (
            "no ip",
            Sandbox::test("a"),
            Workload::ready("a").no_ip(),
            false,
        ),
    ];
    for (name, sandbox, workload, want) in cases {
        let status = plan(&sandbox, &Observed::nothing().workload(workload), now()).status;
        assert_eq!(status.endpoint.is_some(), want, "{name}");
    }
}

#[test]
fn finished_only_on_a_terminal_phase() {
    let finished = |plan: &Plan| condition(plan, "Finished");
    let sandbox = Sandbox::test("alice");
    let running = plan(
        &sandbox,
        &Observed::nothing().workload(Workload::ready("alice")),
        now(),
    );
    assert_eq!(finished(&running), "");
    let done = plan(
        &sandbox,
        &Observed::nothing().workload(Workload::ready("alice").phase(WorkloadPhase::Succeeded)),
        now(),
    );
    assert_eq!(finished(&done), "True/PodSucceeded");
    let failed = plan(
        &sandbox,
        &Observed::nothing().workload(Workload::ready("alice").phase(WorkloadPhase::Failed)),
        now(),
    );
    assert_eq!(finished(&failed), "True/PodFailed");

    // Suspended after finishing: the pod is gone, Finished stays.
    let suspended = sandbox.clone().suspended().status(done.status.clone());
    assert_eq!(
        finished(&plan(&suspended, &Observed::nothing(), now())),
        "True/PodSucceeded"
    );
    // Resumed: a new pod is created and Finished is dropped.
    let resumed = sandbox.clone().status(done.status);
    assert_eq!(finished(&plan(&resumed, &Observed::nothing(), now())), "");
}

#[test]
fn a_template_changed_under_a_running_pod_is_reported_not_applied() {
    let drift = |plan: &Plan| condition(plan, "PodTemplateUpToDate");
    let sandbox = Sandbox::test("alice");
    let current = pod_template_hash(&sandbox);
    let made_from = |hash: Option<&str>| {
        let mut w = Workload::ready("alice");
        w.template_hash = hash.map(str::to_owned);
        Observed::nothing().workload(w)
    };
    // Made from the current template, or carrying no hash (made before hashes): nothing said.
    assert_eq!(
        drift(&plan(&sandbox, &made_from(Some(&current)), now())),
        ""
    );
    assert_eq!(drift(&plan(&sandbox, &made_from(None), now())), "");
    // Made from another one: reported, and the pod is left running (no action).
    let stale = plan(&sandbox, &made_from(Some("0badc0de")), now());
    assert_eq!(drift(&stale), "False/RestartRequired");
    assert!(stale.actions.is_empty(), "{:?}", stale.actions);
    assert_eq!(condition(&stale, "Ready"), "True/DependenciesReady");
    // The workload made for a sandbox carries that sandbox's hash.
    assert_eq!(workload_spec(&sandbox).template_hash, current);
    let mut changed = sandbox.clone();
    changed.spec.pod_template.spec.containers[0].command = Some(vec!["other".into()]);
    assert_ne!(pod_template_hash(&changed), current);
}

#[test]
fn transition_times_kept_while_unchanged() {
    let sandbox = Sandbox::test("alice").condition("Ready", "True", "DependenciesReady", at(-300));
    let observed = Observed::nothing().workload(Workload::ready("alice"));
    let status = plan(&sandbox, &observed, now()).status;
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.last_transition_time.0, at(-300));
    assert_eq!(ready.observed_generation, Some(1));

    let gone = plan(&sandbox, &Observed::nothing(), now()).status;
    let ready = gone
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.last_transition_time.0, now());
}

#[test]
fn plan_is_stable_once_converged() {
    let sandbox = Sandbox::test("alice").volume("data").service(Some(true));
    let observed = Observed::nothing()
        .workload(Workload::ready("alice"))
        .claim("data-alice")
        .service("alice", true);
    let first = plan(&sandbox, &observed, now());
    let again = plan(
        &sandbox.clone().status(first.status.clone()),
        &observed,
        at(5),
    );
    assert!(again.actions.is_empty());
    assert_eq!(
        again.status, first.status,
        "a converged sandbox needs no status write"
    );
}

#[test]
fn workload_spec_strips_system_keys_and_merges_claims() {
    let sandbox = Sandbox::test("alice")
        .label("app", "web")
        .label("agents.x-k8s.io/sandbox-name-hash", "forged")
        .label("extensions.agents.x-k8s.io/x", "y")
        .annotation("note", "kept")
        .annotation("agents.x-k8s.io/pod-name", "forged")
        .pod_volume("data")
        .pod_volume("tmp")
        .volume("data")
        .volume("cache");
    let spec = workload_spec(&sandbox);
    assert_eq!(spec.name, "alice");
    assert_eq!(spec.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        spec.labels.get(SANDBOX_NAME_HASH),
        Some(&sandbox_name_hash("alice"))
    );
    assert!(!spec.labels.contains_key("extensions.agents.x-k8s.io/x"));
    assert_eq!(spec.annotations.len(), 1, "{:?}", spec.annotations);
    let volumes = spec.spec.volumes.expect("volumes");
    let names: Vec<_> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["data", "tmp", "cache"]);
    let claim = |i: usize| {
        volumes[i]
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.clone())
    };
    assert_eq!(
        claim(0).as_deref(),
        Some("data-alice"),
        "template replaces the pod volume"
    );
    assert_eq!(claim(1), None);
    assert_eq!(claim(2).as_deref(), Some("cache-alice"));
    assert_eq!(spec.volumes.len(), 2);
}

#[test]
fn a_not_owned_pod_is_never_adopted() {
    // The platform decides ownership (the adoptable label); the plan adopts only what it
    // reports adoptable.
    let observed =
        Observed::nothing().workload(Workload::ready("alice").owned_by(Ownership::NotOwned));
    let plan = plan(&Sandbox::test("alice"), &observed, now());
    assert!(plan.actions.is_empty());
}

#[test]
fn a_sandbox_restored_from_a_snapshot_waits_for_it() {
    let sb = || {
        let mut s = Sandbox::test("alice").volume("data");
        s.spec.restore_from = Some(rouse_shared::api::RestoreFrom {
            snapshot_name: "snap".to_owned(),
        });
        s
    };
    let with = |restore: RestoreSource| Observed {
        restore: Some(restore),
        ..Observed::nothing()
    };
    let missing = || RestoreSource::NotFound("snapshot snap does not exist".to_owned());
    let pending = || RestoreSource::NotReady("snapshot snap is not taken yet".to_owned());
    run(vec![
        Case {
            name: "a missing snapshot: no volume, no workload, requeue",
            given: (sb(), with(missing()), now()),
            want: requeue(want(&[], &[], "False/SnapshotNotFound", NOT_SUSPENDED), 2),
        },
        Case {
            name: "a ready snapshot: the volumes and the workload are created",
            given: (sb(), with(RestoreSource::Ready), now()),
            want: want(
                &["ensure_volume data-alice", "create_workload alice"],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "a snapshot not ready yet: no workload, requeue",
            given: (sb(), with(pending()).claim("data-alice"), now()),
            want: requeue(want(&[], &[], "False/SnapshotNotReady", NOT_SUSPENDED), 2),
        },
        Case {
            name: "a ready snapshot: the workload is created",
            given: (sb(), with(RestoreSource::Ready).claim("data-alice"), now()),
            want: want(
                &["create_workload alice"],
                &[],
                "False/DependenciesNotReady",
                NOT_SUSPENDED,
            ),
        },
        Case {
            name: "a running fork does not care about its snapshot any more",
            given: (
                sb(),
                with(missing())
                    .claim("data-alice")
                    .workload(Workload::ready("alice")),
                now(),
            ),
            want: want(&[], &[], "True/DependenciesReady", NOT_SUSPENDED),
        },
        Case {
            name: "a suspended fork waits for nothing",
            given: (sb().suspended(), with(missing()).claim("data-alice"), now()),
            want: want(&[], &[], "False/SandboxSuspended", "True/PodTerminated"),
        },
    ]);
}

#[test]
fn a_workload_waiting_to_restart_says_why_in_the_ready_message() {
    let sandbox = Sandbox::test("alice");
    let ready = |observed: &Observed| {
        plan(&sandbox, observed, now())
            .status
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .expect("a Ready condition")
    };
    let back_off = "CrashLoopBackOff: back-off 4s restarting the exited workload (restarts: 5, last exit code 3); next start at 2026-01-01T10:00:02.250Z";
    let mut looping = Workload::pending("alice");
    looping.back_off = Some(back_off.to_owned());
    let waiting = ready(&Observed::nothing().workload(looping.clone()));
    // The reason stays upstream's; the message carries the restarts and the next try.
    assert_eq!(waiting.reason, "DependenciesNotReady");
    assert!(waiting.message.ends_with(back_off), "{}", waiting.message);
    // Suspended, it is not about to restart whatever the workload said last.
    let suspended = plan(
        &sandbox.clone().suspended(),
        &Observed::nothing().workload(looping),
        now(),
    );
    assert!(
        !format!("{:?}", suspended.status.conditions).contains("CrashLoopBackOff"),
        "{:?}",
        suspended.status.conditions
    );
}
