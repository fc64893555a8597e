//! Table tests of the claim plan, and of the adoption patch.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use rouse_shared::api::keys::{
    LAUNCH_TYPE, LAUNCH_TYPE_COLD, SANDBOX_NAME, SANDBOX_TEMPLATE_HASH, SANDBOX_TEMPLATE_REF,
    WARM_POOL_SANDBOX, condition,
};
use rouse_shared::api::{
    ClaimEnvVar, ClaimLifecycle, ClaimShutdownPolicy, ClaimedSandbox, InjectionPolicy,
    PersistentVolumeClaimTemplate, Sandbox, SandboxClaim, SandboxClaimStatus, SandboxStatus,
    SandboxTemplate, SandboxWarmPool,
};
use rouse_shared::store::{Patch, Propagation};

use super::{Binding, ClaimObserved, ClaimStep, adoption_patch, plan, reason};
use crate::extensions::fixtures::{at, claim, member, now, owned_by, pool, template, with_ready};

/// What a case expects: the step's shape and the Ready reason.
#[derive(Debug, PartialEq)]
enum Want {
    Nothing,
    DeleteClaim(Propagation),
    DeleteSandbox(&'static str),
    Adopt(&'static [&'static str]),
    Create,
}

struct Case {
    name: &'static str,
    claim: SandboxClaim,
    pool: Option<SandboxWarmPool>,
    template: Option<SandboxTemplate>,
    bound: Option<Sandbox>,
    missing: bool,
    members: Vec<Sandbox>,
    want: Want,
    want_reason: &'static str,
    want_sandbox: Option<&'static str>,
    want_requeue: Option<Duration>,
}

fn lifecycle(
    mut c: SandboxClaim,
    shutdown: Option<i64>,
    ttl: Option<i32>,
    policy: ClaimShutdownPolicy,
) -> SandboxClaim {
    c.spec.lifecycle = Some(ClaimLifecycle {
        shutdown_time: shutdown.map(|s| Time(at(s))),
        ttl_seconds_after_finished: ttl,
        shutdown_policy: Some(policy),
    });
    c
}

fn finished(mut s: Sandbox, since: i64) -> Sandbox {
    let st = s.status.get_or_insert_with(SandboxStatus::default);
    st.conditions.push(Condition {
        type_: condition::FINISHED.into(),
        status: "True".into(),
        reason: "PodSucceeded".into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(at(since)),
    });
    s
}

fn with_env(mut c: SandboxClaim, name: &str, container: Option<&str>) -> SandboxClaim {
    c.spec.env.push(ClaimEnvVar {
        name: name.into(),
        value: "v".into(),
        container_name: container.map(Into::into),
    });
    c
}

fn with_vct(mut c: SandboxClaim, name: &str) -> SandboxClaim {
    let mut vct = PersistentVolumeClaimTemplate::default();
    vct.metadata.name = name.into();
    c.spec.volume_claim_templates.push(vct);
    c
}

fn policy(mut t: SandboxTemplate, env: InjectionPolicy, vct: InjectionPolicy) -> SandboxTemplate {
    t.spec.env_vars_injection_policy = Some(env);
    t.spec.volume_claim_templates_policy = Some(vct);
    t
}

fn bound_status(mut c: SandboxClaim, name: &str) -> SandboxClaim {
    c.status = Some(SandboxClaimStatus {
        sandbox: Some(ClaimedSandbox {
            name: name.into(),
            pod_ips: vec![],
            service_fqdn: None,
        }),
        ..SandboxClaimStatus::default()
    });
    c
}

#[test]
fn claim_plan_rules() {
    let t = template("python");
    let p = pool("runners", "python", 3);
    let m = |name: &str, age: i64, ready: bool| member(&p, &t, name, age, ready);
    let c = claim("task", "runners");
    let ours = |c: &SandboxClaim| owned_by(c, "task");
    let ready_ours =
        |c: &SandboxClaim| with_ready(owned_by(c, "task"), "True", "DependenciesReady", at(-5));
    let base = Case {
        name: "",
        claim: c.clone(),
        pool: Some(p.clone()),
        template: Some(t.clone()),
        bound: None,
        missing: false,
        members: vec![],
        want: Want::Nothing,
        want_reason: "",
        want_sandbox: None,
        want_requeue: None,
    };
    let cases = vec![
        Case {
            name: "adopts Ready members, oldest first; never a starting one",
            members: vec![
                m("young", 10, true),
                m("old", 100, true),
                m("starting", 200, false),
            ],
            want: Want::Adopt(&["old", "young"]),
            want_reason: reason::ADOPTION_PENDING,
            ..base_clone(&base)
        },
        Case {
            name: "the member the claim named before a restart first, then oldest first",
            claim: {
                let mut named = c.clone();
                named.metadata.annotations =
                    Some([(SANDBOX_NAME.to_owned(), "young".to_owned())].into());
                named
            },
            members: vec![
                m("young", 10, true),
                m("old", 100, true),
                m("older", 200, true),
            ],
            want: Want::Adopt(&["young", "older", "old"]),
            want_reason: reason::ADOPTION_PENDING,
            ..base_clone(&base)
        },
        Case {
            name: "no Ready member: cold start named like the claim",
            members: vec![m("starting", 10, false)],
            want: Want::Create,
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "members of another pool are not adopted",
            members: vec![member(
                &pool("other", "python", 1),
                &t,
                "foreign",
                100,
                true,
            )],
            want: Want::Create,
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "env forces a cold start (and needs the policy)",
            claim: with_env(c.clone(), "TASK", None),
            template: Some(policy(
                t.clone(),
                InjectionPolicy::Allowed,
                InjectionPolicy::Disallowed,
            )),
            members: vec![m("old", 100, true)],
            want: Want::Create,
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "env refused by a Disallowed template",
            claim: with_env(c.clone(), "TASK", None),
            members: vec![m("old", 100, true)],
            want_reason: "EnvVarsInjectionRejected",
            ..base_clone(&base)
        },
        Case {
            name: "env naming a container the template lacks",
            claim: with_env(c.clone(), "TASK", Some("sidecar")),
            template: Some(policy(
                t.clone(),
                InjectionPolicy::Overrides,
                InjectionPolicy::Disallowed,
            )),
            want_reason: "InvalidConfiguration",
            ..base_clone(&base)
        },
        Case {
            name: "volume claim templates refused by a Disallowed template",
            claim: with_vct(c.clone(), "scratch"),
            want_reason: "VolumeClaimTemplatesError",
            ..base_clone(&base)
        },
        Case {
            name: "volume claim templates allowed: cold start",
            claim: with_vct(c.clone(), "scratch"),
            template: Some(policy(
                t.clone(),
                InjectionPolicy::Disallowed,
                InjectionPolicy::Allowed,
            )),
            want: Want::Create,
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "system-prefixed pod metadata is refused",
            claim: {
                let mut c = c.clone();
                c.spec
                    .additional_pod_metadata
                    .labels
                    .insert("agents.x-k8s.io/evil".into(), "1".into());
                c
            },
            members: vec![m("old", 100, true)],
            want_reason: "InvalidMetadata",
            ..base_clone(&base)
        },
        Case {
            name: "pool missing",
            pool: None,
            template: None,
            want_reason: reason::WARM_POOL_NOT_FOUND,
            want_requeue: Some(super::MISSING_REQUEUE),
            ..base_clone(&base)
        },
        Case {
            name: "template missing",
            template: None,
            want_reason: reason::TEMPLATE_NOT_FOUND,
            want_requeue: Some(super::MISSING_REQUEUE),
            ..base_clone(&base)
        },
        Case {
            name: "bound: the sandbox's Ready is forwarded with its name",
            bound: Some(ready_ours(&c)),
            members: vec![m("old", 100, true)],
            want_reason: "DependenciesReady",
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "bound but not Ready yet",
            bound: Some(ours(&c)),
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "bound sandbox gone",
            claim: bound_status(c.clone(), "runners-x"),
            missing: true,
            want_reason: reason::SANDBOX_MISSING,
            ..base_clone(&base)
        },
        Case {
            name: "shutdownTime ahead: requeue at it",
            claim: lifecycle(c.clone(), Some(90), None, ClaimShutdownPolicy::Delete),
            bound: Some(ready_ours(&c)),
            want_reason: "DependenciesReady",
            want_sandbox: Some("task"),
            want_requeue: Some(Duration::from_secs(90)),
            ..base_clone(&base)
        },
        Case {
            name: "expired with Delete: the claim goes, its sandbox by garbage collection",
            claim: lifecycle(c.clone(), Some(-1), None, ClaimShutdownPolicy::Delete),
            bound: Some(ready_ours(&c)),
            want: Want::DeleteClaim(Propagation::Background),
            want_reason: reason::CLAIM_EXPIRED,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "expired with DeleteForeground",
            claim: lifecycle(
                c.clone(),
                Some(-1),
                None,
                ClaimShutdownPolicy::DeleteForeground,
            ),
            bound: Some(ready_ours(&c)),
            want: Want::DeleteClaim(Propagation::Foreground),
            want_reason: reason::CLAIM_EXPIRED,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "expired with Retain: the sandbox goes, the claim stays",
            claim: lifecycle(c.clone(), Some(-1), None, ClaimShutdownPolicy::Retain),
            bound: Some(ready_ours(&c)),
            want: Want::DeleteSandbox("task"),
            want_reason: reason::CLAIM_EXPIRED,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "TTL after Finished, not yet",
            claim: lifecycle(c.clone(), None, Some(60), ClaimShutdownPolicy::Retain),
            bound: Some(finished(ours(&c), -30)),
            want_reason: reason::SANDBOX_NOT_READY,
            want_sandbox: Some("task"),
            want_requeue: Some(Duration::from_secs(30)),
            ..base_clone(&base)
        },
        Case {
            name: "TTL after Finished passed",
            claim: lifecycle(c.clone(), None, Some(60), ClaimShutdownPolicy::Retain),
            bound: Some(finished(ours(&c), -61)),
            want: Want::DeleteSandbox("task"),
            want_reason: reason::CLAIM_EXPIRED,
            want_sandbox: Some("task"),
            ..base_clone(&base)
        },
        Case {
            name: "being deleted: nothing",
            claim: {
                let mut c = c.clone();
                c.metadata.deletion_timestamp = Some(Time(now()));
                c
            },
            members: vec![m("old", 100, true)],
            ..base_clone(&base)
        },
    ];
    for case in cases {
        let binding = match (&case.bound, case.missing) {
            (Some(s), _) => Binding::Ours(s),
            (None, true) => Binding::Missing,
            (None, false) => Binding::Unbound,
        };
        let observed = ClaimObserved {
            pool: case.pool.as_ref(),
            template: case.template.as_ref(),
            binding,
            members: &case.members,
        };
        let got = plan(&case.claim, &observed, now());
        let name = case.name;
        let step = match &got.step {
            ClaimStep::None => Want::Nothing,
            ClaimStep::DeleteClaim(p) => Want::DeleteClaim(*p),
            ClaimStep::DeleteSandbox { name, .. } => {
                assert_eq!(name, "task", "{}", case.name);
                Want::DeleteSandbox("task")
            }
            ClaimStep::Adopt(names) => {
                let want: Vec<String> = match &case.want {
                    Want::Adopt(w) => w.iter().map(|s| (*s).to_owned()).collect(),
                    _ => vec![],
                };
                assert_eq!(names, &want, "{name}: adoption order");
                case_adopt(&case.want)
            }
            ClaimStep::Create(s) => {
                assert_eq!(s.metadata.name.as_deref(), Some("task"), "{name}");
                assert_eq!(
                    s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LAUNCH_TYPE))
                        .map(String::as_str),
                    Some(LAUNCH_TYPE_COLD),
                    "{name}"
                );
                let owner = &s.metadata.owner_references.as_ref().expect("owned")[0];
                assert_eq!(
                    (
                        owner.uid.as_str(),
                        owner.controller,
                        owner.block_owner_deletion
                    ),
                    ("uid-claim-task", Some(true), Some(true)),
                    "{name}: a foreground deletion of the claim waits for its sandbox"
                );
                assert_eq!(
                    s.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(SANDBOX_TEMPLATE_REF))
                        .map(String::as_str),
                    Some("python"),
                    "{name}: the template is named as upstream does"
                );
                Want::Create
            }
        };
        assert_eq!(step, case.want, "{name}: step");
        let ready = got
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == condition::READY)
            .map(|c| c.reason.as_str())
            .unwrap_or_default();
        assert_eq!(ready, case.want_reason, "{name}: Ready reason");
        if !case.want_reason.is_empty() {
            let gen_ = got
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == condition::READY)
                .and_then(|c| c.observed_generation);
            assert_eq!(gen_, Some(1), "{name}: observedGeneration");
        }
        assert_eq!(
            got.status.sandbox.as_ref().map(|s| s.name.as_str()),
            case.want_sandbox,
            "{name}: status.sandbox"
        );
        assert_eq!(got.requeue_after, case.want_requeue, "{name}: requeue");
        if case.want_reason == reason::CLAIM_EXPIRED {
            let expired = got
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == condition::CLAIM_EXPIRED);
            assert_eq!(
                expired.map(|c| c.status.as_str()),
                Some("True"),
                "{name}: ClaimExpired"
            );
        }
    }
}

fn case_adopt(want: &Want) -> Want {
    match want {
        Want::Adopt(w) => Want::Adopt(w),
        _ => Want::Adopt(&[]),
    }
}

fn base_clone(base: &Case) -> Case {
    Case {
        name: base.name,
        claim: base.claim.clone(),
        pool: base.pool.clone(),
        template: base.template.clone(),
        bound: base.bound.clone(),
        missing: base.missing,
        members: base.members.clone(),
        want: Want::Nothing,
        want_reason: base.want_reason,
        want_sandbox: base.want_sandbox,
        want_requeue: base.want_requeue,
    }
}

#[test]
fn adoption_patch_reowns_relabels_and_is_conditional() {
    let mut t = template("python");
    t.spec.suspension = Some(rouse_shared::api::Suspension {
        idle_timeout_seconds: Some(600),
        ..Default::default()
    });
    let p = pool("runners", "python", 1);
    let m = member(&p, &t, "runners-abc", 60, true);
    let mut c = claim("task", "runners");
    c.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    c.spec
        .additional_pod_metadata
        .annotations
        .insert("example.com/task".into(), "42".into());
    let patch = adoption_patch(&c, Some(&t), &m);
    assert_eq!(
        patch.resource_version(),
        Some("7"),
        "conditional on the member's version"
    );
    let Patch::Merge(root) = patch;
    let meta = &root["metadata"];
    assert_eq!(meta["labels"][WARM_POOL_SANDBOX], serde_json::Value::Null);
    assert_eq!(
        meta["labels"][SANDBOX_TEMPLATE_HASH],
        serde_json::Value::Null
    );
    assert_eq!(meta["labels"][LAUNCH_TYPE], "warm");
    assert_eq!(meta["labels"]["team"], "a");
    let owners = meta["ownerReferences"].as_array().expect("owners");
    assert_eq!(owners.len(), 1, "the claim is the only owner");
    assert_eq!(owners[0]["uid"], "uid-claim-task");
    assert_eq!(owners[0]["controller"], true);
    assert_eq!(owners[0]["blockOwnerDeletion"], true);
    assert_eq!(
        root["spec"]["podTemplate"]["metadata"]["annotations"]["example.com/task"],
        "42"
    );
    assert_eq!(root["spec"]["suspension"]["idleTimeoutSeconds"], 600);
}
