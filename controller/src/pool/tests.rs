//! Table tests of the warm pool plan.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use rouse_shared::api::keys::{SANDBOX_TEMPLATE_HASH, WARM_POOL_SANDBOX};
use rouse_shared::api::{
    Sandbox, SandboxTemplate, SandboxWarmPool, WarmPoolUpdateStrategy, WarmPoolUpdateStrategyType,
};

use super::{Expectations, PoolObserved, member_prototype, plan};
use crate::extensions::fixtures::{at, member, now, pool, template, with_ready};
use crate::template::template_hash;

const STUCK: Duration = Duration::from_secs(300);

struct Case {
    name: &'static str,
    pool: SandboxWarmPool,
    template: Option<SandboxTemplate>,
    members: Vec<Sandbox>,
    creates_in_flight: usize,
    deletes_in_flight: &'static [&'static str],
    want_create: usize,
    want_delete: &'static [&'static str],
    want_ready: i32,
    want_replicas: i32,
    want_requeue: Option<Duration>,
}

fn strategy(mut p: SandboxWarmPool, type_: WarmPoolUpdateStrategyType) -> SandboxWarmPool {
    p.spec.update_strategy = Some(WarmPoolUpdateStrategy { type_ });
    p
}

fn grace(mut p: SandboxWarmPool, seconds: i32) -> SandboxWarmPool {
    p.spec.readiness_grace_period_seconds = Some(seconds);
    p
}

/// A member whose pod the scheduler cannot place.
fn unschedulable(mut s: Sandbox) -> Sandbox {
    let status = s.status.get_or_insert_with(Default::default);
    status
        .conditions
        .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: "Unschedulable".into(),
            message: "0/1 nodes are available".into(),
            observed_generation: Some(1),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(-300)),
        });
    s
}

/// A member made from an older version of its template: another hash, another command.
fn stale(mut s: Sandbox) -> Sandbox {
    s.labels_mut()
        .insert(SANDBOX_TEMPLATE_HASH.into(), "0ld0ld00".into());
    s.spec.pod_template.spec.containers[0].command = Some(vec!["old".into()]);
    s
}

#[test]
fn pool_plan_rules() {
    let t = template("python");
    let p = pool("runners", "python", 3);
    let m = |name: &str, age: i64, ready: bool| member(&p, &t, name, age, ready);
    let cases = vec![
        Case {
            name: "empty pool creates all replicas",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 3,
            want_delete: &[],
            want_ready: 0,
            want_replicas: 0,
            want_requeue: None,
        },
        Case {
            name: "full pool does nothing",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![m("a", 60, true), m("b", 60, true), m("c", 60, true)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 3,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "creates in flight are counted: a lagging view never over-creates",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![m("a", 60, true)],
            creates_in_flight: 2,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 1,
            want_replicas: 1,
            want_requeue: None,
        },
        Case {
            name: "a delete in flight is not counted twice",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![m("a", 60, true), m("b", 60, true), m("c", 60, true)],
            creates_in_flight: 0,
            deletes_in_flight: &["c"],
            want_create: 1,
            want_delete: &[],
            want_ready: 2,
            want_replicas: 2,
            want_requeue: None,
        },
        Case {
            name: "surplus: not-Ready first, then newest",
            pool: pool("runners", "python", 1),
            template: Some(t.clone()),
            members: vec![
                m("old", 600, true),
                m("new", 10, true),
                m("starting", 100, false),
            ],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &["new", "starting"],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "scaled to zero deletes every member",
            pool: pool("runners", "python", 0),
            template: Some(t.clone()),
            members: vec![m("a", 60, true)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &["a"],
            want_ready: 1,
            want_replicas: 1,
            want_requeue: None,
        },
        Case {
            name: "a member stuck not-Ready past the grace period is replaced",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![m("a", 60, true), m("b", 60, true), m("stuck", 301, false)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 1,
            want_delete: &["stuck"],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "the pool's readinessGracePeriodSeconds overrides the controller's",
            pool: grace(p.clone(), 600),
            template: Some(t.clone()),
            members: vec![m("a", 60, true), m("b", 60, true), m("slow", 301, false)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: Some(Duration::from_secs(299)),
        },
        Case {
            name: "a shorter readinessGracePeriodSeconds replaces sooner",
            pool: grace(p.clone(), 30),
            template: Some(t.clone()),
            members: vec![m("a", 60, true), m("b", 60, true), m("slow", 31, false)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 1,
            want_delete: &["slow"],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "an unschedulable member past the grace period is held, looked at every minute",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![
                m("a", 60, true),
                m("b", 60, true),
                unschedulable(m("waiting", 301, false)),
            ],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: Some(Duration::from_secs(60)),
        },
        Case {
            name: "a member still starting within the grace period requeues at its deadline",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![
                m("a", 60, true),
                m("b", 60, true),
                m("starting", 100, false),
            ],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: Some(Duration::from_secs(200)),
        },
        Case {
            name: "a member that stopped being Ready counts from then",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![
                m("a", 60, true),
                m("b", 60, true),
                with_ready(
                    m("flaky", 3600, true),
                    "False",
                    "DependenciesNotReady",
                    at(-400),
                ),
            ],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 1,
            want_delete: &["flaky"],
            want_ready: 2,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "OnReplenish keeps stale members",
            pool: p.clone(),
            template: Some(t.clone()),
            members: vec![stale(m("a", 60, true)), m("b", 60, true), m("c", 60, true)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 3,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "Recreate replaces stale members",
            pool: strategy(p.clone(), WarmPoolUpdateStrategyType::Recreate),
            template: Some(t.clone()),
            members: vec![
                stale(m("a", 60, true)),
                m("b", 60, true),
                stale(m("c", 60, true)),
            ],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 2,
            want_delete: &["a", "c"],
            want_ready: 3,
            want_replicas: 3,
            want_requeue: None,
        },
        Case {
            name: "no template: nothing is created",
            pool: p.clone(),
            template: None,
            members: vec![m("a", 60, true)],
            creates_in_flight: 0,
            deletes_in_flight: &[],
            want_create: 0,
            want_delete: &[],
            want_ready: 1,
            want_replicas: 1,
            want_requeue: None,
        },
    ];
    for case in cases {
        let deletes: BTreeSet<String> = case
            .deletes_in_flight
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let observed = PoolObserved {
            template: case.template.as_ref(),
            members: &case.members,
            creates_in_flight: case.creates_in_flight,
            deletes_in_flight: &deletes,
        };
        let got = plan(&case.pool, &observed, STUCK, now());
        let name = case.name;
        assert_eq!(got.create, case.want_create, "{name}: create");
        assert_eq!(
            got.prototype.is_some(),
            case.want_create > 0,
            "{name}: prototype"
        );
        let mut deleted: Vec<&str> = got.delete.iter().map(|(n, _)| n.as_str()).collect();
        deleted.sort_unstable();
        assert_eq!(deleted, case.want_delete, "{name}: delete");
        assert_eq!(
            got.status.ready_replicas, case.want_ready,
            "{name}: readyReplicas"
        );
        assert_eq!(got.status.replicas, case.want_replicas, "{name}: replicas");
        assert_eq!(
            got.status.observed_generation,
            Some(1),
            "{name}: observedGeneration"
        );
        assert_eq!(
            got.status.selector.as_deref(),
            Some(
                format!(
                    "{WARM_POOL_SANDBOX}={}",
                    rouse_shared::names::sandbox_name_hash("runners")
                )
                .as_str()
            ),
            "{name}: selector"
        );
        assert_eq!(got.requeue_after, case.want_requeue, "{name}: requeue");
    }
}

#[test]
fn members_are_labelled_owned_and_not_idle_suspended() {
    let mut t = template("python");
    t.spec.suspension = Some(rouse_shared::api::Suspension {
        idle_timeout_seconds: Some(60),
        ..Default::default()
    });
    let p = pool("runners", "python", 2);
    let m = member_prototype(&p, &t);
    assert_eq!(m.metadata.generate_name.as_deref(), Some("runners-"));
    assert_eq!(m.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        m.labels().get(SANDBOX_TEMPLATE_HASH),
        Some(&template_hash(&t.spec))
    );
    assert_eq!(
        m.labels().get(WARM_POOL_SANDBOX),
        Some(&rouse_shared::names::sandbox_name_hash("runners"))
    );
    let owner = &m.owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("SandboxWarmPool", Some(true), Some(true))
    );
    assert_eq!(m.spec.suspension, None, "members wait unsuspended");
    assert_eq!(
        m.spec.pod_template.spec.automount_service_account_token,
        Some(false)
    );
}

#[test]
fn template_hash_follows_the_blueprint_only() {
    let a = template("python");
    let mut b = a.clone();
    b.spec.env_vars_injection_policy = Some(rouse_shared::api::InjectionPolicy::Allowed);
    assert_eq!(
        template_hash(&a.spec),
        template_hash(&b.spec),
        "policies are not the blueprint"
    );
    b.spec.pod_template.spec.containers[0].image = Some("python:3.13".into());
    assert_ne!(template_hash(&a.spec), template_hash(&b.spec));
}

#[test]
fn expectations_settle_when_seen_and_expire() {
    let e = Expectations::default();
    let key = rouse_shared::store::ObjectKey::new("team-a", "runners");
    e.created(&key, "runners-a");
    e.created(&key, "runners-b");
    e.deleted(&key, "runners-old");
    let flight = e.in_flight(&key, &["runners-a".into(), "runners-old".into()]);
    assert_eq!(flight.creates, 1, "runners-a is seen");
    assert_eq!(flight.deletes.len(), 1, "runners-old is still seen");
    // Adopted before the pool saw it: seen by the sandbox watch.
    e.seen("team-a", "runners-b");
    e.gone("team-a", "runners-old");
    assert_eq!(e.in_flight(&key, &[]), Default::default());
    e.forget(&key);
}
