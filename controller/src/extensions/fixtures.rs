//! Test fixtures for templates, pools, members and claims.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use rouse_shared::api::keys::condition;
use rouse_shared::api::{
    LocalObjectReference, PodTemplate, Sandbox, SandboxClaim, SandboxClaimSpec, SandboxStatus,
    SandboxTemplate, SandboxTemplateSpec, SandboxWarmPool, SandboxWarmPoolSpec, controller_ref,
};

use crate::pool::member_prototype;

/// The namespace of every fixture.
pub(crate) const NS: &str = "team-a";

/// The fixed "now" of plan tests.
pub(crate) fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("valid timestamp")
}

/// `now()` shifted by `seconds`.
pub(crate) fn at(seconds: i64) -> Timestamp {
    now() + jiff::SignedDuration::from_secs(seconds)
}

/// A template `python` whose container serves on `$PORT`.
pub(crate) fn template(name: &str) -> SandboxTemplate {
    let mut t = SandboxTemplate::new(
        name,
        SandboxTemplateSpec {
            pod_template: PodTemplate {
                spec: PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        command: Some(vec![
                            "sh".into(),
                            "-c".into(),
                            "exec python3 -m http.server --bind 127.0.0.1 $PORT".into(),
                        ]),
                        ports: Some(vec![ContainerPort {
                            container_port: 8080,
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    termination_grace_period_seconds: Some(2),
                    ..PodSpec::default()
                },
                ..PodTemplate::default()
            },
            ..SandboxTemplateSpec::default()
        },
    );
    t.metadata.namespace = Some(NS.into());
    t.metadata.uid = Some(format!("uid-template-{name}"));
    t
}

/// A pool of `replicas` members of template `template`.
pub(crate) fn pool(name: &str, template: &str, replicas: i32) -> SandboxWarmPool {
    let mut p = SandboxWarmPool::new(
        name,
        SandboxWarmPoolSpec {
            replicas,
            sandbox_template_ref: LocalObjectReference {
                name: template.into(),
            },
            update_strategy: None,
            readiness_grace_period_seconds: None,
        },
    );
    p.metadata.namespace = Some(NS.into());
    p.metadata.uid = Some(format!("uid-pool-{name}"));
    p.metadata.generation = Some(1);
    p
}

/// A claim on pool `pool`.
pub(crate) fn claim(name: &str, pool: &str) -> SandboxClaim {
    let mut c = SandboxClaim::new(
        name,
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference { name: pool.into() },
            ..SandboxClaimSpec::default()
        },
    );
    c.metadata.namespace = Some(NS.into());
    c.metadata.uid = Some(format!("uid-claim-{name}"));
    c.metadata.generation = Some(1);
    c.metadata.creation_timestamp = Some(Time(at(-60)));
    c
}

/// A member `name` of `pool`, created `age` seconds before `now()`, Ready or not.
pub(crate) fn member(
    pool: &SandboxWarmPool,
    template: &SandboxTemplate,
    name: &str,
    age: i64,
    ready: bool,
) -> Sandbox {
    let mut s = member_prototype(pool, template);
    s.metadata.name = Some(name.into());
    s.metadata.generate_name = None;
    s.metadata.uid = Some(format!("uid-{name}"));
    s.metadata.resource_version = Some("7".into());
    s.metadata.creation_timestamp = Some(Time(at(-age)));
    if ready {
        s = with_ready(s, "True", "DependenciesReady", at(-age + 1));
    }
    s
}

/// Sets the sandbox's `Ready` condition.
pub(crate) fn with_ready(mut s: Sandbox, status: &str, reason: &str, since: Timestamp) -> Sandbox {
    let st = s.status.get_or_insert_with(SandboxStatus::default);
    st.conditions.retain(|c| c.type_ != condition::READY);
    st.conditions.push(Condition {
        type_: condition::READY.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(since),
    });
    if status == "True" {
        st.pod_ips = vec!["127.0.0.1".into()];
    }
    s
}

/// A sandbox named like the claim, controlled by it.
pub(crate) fn owned_by(claim: &SandboxClaim, name: &str) -> Sandbox {
    let mut s = Sandbox::new(name, Default::default());
    s.metadata.namespace = claim.namespace();
    s.metadata.uid = Some(format!("uid-{name}"));
    s.metadata.owner_references = controller_ref(claim).map(|o| vec![o]);
    s
}
