//! Test fixtures: builders for sandboxes, workloads and observations.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerPort, PersistentVolumeClaimSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use rouse_shared::api::{
    EmbeddedObjectMetadata, EndpointPort, OperatingMode, PersistentVolumeClaimTemplate, Sandbox,
    SandboxSpec, SandboxStatus, ShutdownPolicy, Suspension,
};

use super::observed::{
    Observed, ObservedService, ObservedVolume, Ownership, Workload, WorkloadPhase,
};

/// The fixed "now" of plan tests.
pub(crate) fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().expect("valid timestamp")
}

/// `now()` shifted by `seconds`.
pub(crate) fn at(seconds: i64) -> Timestamp {
    now() + jiff::SignedDuration::from_secs(seconds)
}

/// Builders on `Sandbox` for tests.
pub(crate) trait SandboxBuilder: Sized {
    /// A running sandbox `team-a/<name>` with one container listening on 8080, created an
    /// hour before `now()`.
    fn test(name: &str) -> Sandbox;
    fn suspended(self) -> Self;
    fn running(self) -> Self;
    fn idle_after(self, seconds: i64) -> Self;
    fn shutdown_at(self, t: Timestamp, policy: Option<ShutdownPolicy>) -> Self;
    fn service(self, service: Option<bool>) -> Self;
    fn volume(self, name: &str) -> Self;
    fn pod_volume(self, name: &str) -> Self;
    fn label(self, key: &str, value: &str) -> Self;
    fn annotation(self, key: &str, value: &str) -> Self;
    fn sandbox_annotation(self, key: &str, value: &str) -> Self;
    fn status(self, status: SandboxStatus) -> Self;
    fn condition(self, type_: &str, status: &str, reason: &str, since: Timestamp) -> Self;
    fn last_activity(self, t: Timestamp) -> Self;
    fn deleting(self) -> Self;
}

impl SandboxBuilder for Sandbox {
    fn test(name: &str) -> Sandbox {
        let container = Container {
            name: "main".to_owned(),
            image: Some("busybox".to_owned()),
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                name: Some("http".to_owned()),
                ..ContainerPort::default()
            }]),
            ..Container::default()
        };
        let mut sandbox = Sandbox::new(name, SandboxSpec::running(container));
        sandbox.metadata = ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("team-a".to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".to_owned()),
            generation: Some(1),
            creation_timestamp: Some(Time(at(-3600))),
            ..ObjectMeta::default()
        };
        sandbox
    }

    fn suspended(mut self) -> Self {
        self.spec.operating_mode = Some(OperatingMode::Suspended);
        self
    }

    fn running(mut self) -> Self {
        self.spec.operating_mode = Some(OperatingMode::Running);
        self
    }

    fn idle_after(mut self, seconds: i64) -> Self {
        self.spec.suspension = Some(Suspension {
            idle_timeout_seconds: Some(seconds),
            ..Suspension::default()
        });
        self
    }

    fn shutdown_at(mut self, t: Timestamp, policy: Option<ShutdownPolicy>) -> Self {
        self.spec.shutdown_time = Some(Time(t));
        self.spec.shutdown_policy = policy;
        self
    }

    fn service(mut self, service: Option<bool>) -> Self {
        self.spec.service = service;
        self
    }

    fn volume(mut self, name: &str) -> Self {
        self.spec
            .volume_claim_templates
            .push(PersistentVolumeClaimTemplate {
                metadata: EmbeddedObjectMetadata {
                    name: name.to_owned(),
                    ..EmbeddedObjectMetadata::default()
                },
                spec: PersistentVolumeClaimSpec::default(),
            });
        self
    }

    fn pod_volume(mut self, name: &str) -> Self {
        self.spec
            .pod_template
            .spec
            .volumes
            .get_or_insert_with(Vec::new)
            .push(Volume {
                name: name.to_owned(),
                ..Volume::default()
            });
        self
    }

    fn label(mut self, key: &str, value: &str) -> Self {
        self.spec
            .pod_template
            .metadata
            .labels
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn annotation(mut self, key: &str, value: &str) -> Self {
        self.spec
            .pod_template
            .metadata
            .annotations
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn sandbox_annotation(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn status(mut self, status: SandboxStatus) -> Self {
        self.status = Some(status);
        self
    }

    fn condition(mut self, type_: &str, status: &str, reason: &str, since: Timestamp) -> Self {
        let conditions = &mut self
            .status
            .get_or_insert_with(SandboxStatus::default)
            .conditions;
        conditions.retain(|c| c.type_ != type_);
        conditions.push(Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(since),
        });
        self
    }

    fn last_activity(mut self, t: Timestamp) -> Self {
        self.status
            .get_or_insert_with(SandboxStatus::default)
            .last_activity_time = Some(Time(t));
        self
    }

    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(now()));
        self
    }
}

impl Workload {
    /// An owned, running, ready workload with IP 10.0.0.7 on node-1.
    pub(crate) fn ready(name: &str) -> Self {
        Workload {
            name: name.to_owned(),
            ownership: Ownership::Owned,
            owner: None,
            phase: WorkloadPhase::Running,
            ready: true,
            ips: vec!["10.0.0.7".to_owned()],
            node_name: Some("node-1".to_owned()),
            ports: vec![EndpointPort {
                name: Some("http".to_owned()),
                container_port: 8080,
                port: 8080,
            }],
            terminating: false,
            scheduled: None,
            template_hash: None,
            back_off: None,
        }
    }

    /// An owned workload that is pending: no IP, not ready, no node.
    pub(crate) fn pending(name: &str) -> Self {
        Workload {
            phase: WorkloadPhase::Pending,
            ready: false,
            ips: Vec::new(),
            node_name: None,
            ..Workload::ready(name)
        }
    }

    pub(crate) fn phase(mut self, phase: WorkloadPhase) -> Self {
        self.phase = phase;
        self
    }

    pub(crate) fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub(crate) fn no_ip(mut self) -> Self {
        self.ips.clear();
        self
    }

    pub(crate) fn owned_by(mut self, ownership: Ownership) -> Self {
        self.ownership = ownership;
        self
    }

    pub(crate) fn terminating(mut self) -> Self {
        self.terminating = true;
        self
    }

    pub(crate) fn scheduled(mut self, status: &str, reason: &str) -> Self {
        self.scheduled = Some(Condition {
            type_: "PodScheduled".to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(-10)),
        });
        self
    }
}

impl Observed {
    /// Nothing exists yet.
    pub(crate) fn nothing() -> Self {
        Observed {
            cluster_domain: "cluster.local".to_owned(),
            ..Observed::default()
        }
    }

    /// The platform's live view says traffic was last seen at `at`.
    pub(crate) fn live(mut self, at: Timestamp) -> Self {
        self.activity = Some(at);
        self
    }

    pub(crate) fn workload(mut self, workload: Workload) -> Self {
        self.workloads.push(workload);
        self
    }

    pub(crate) fn claim(mut self, claim_name: &str) -> Self {
        self.volumes.push(ObservedVolume {
            claim_name: claim_name.to_owned(),
        });
        self
    }

    pub(crate) fn service(mut self, name: &str, owned: bool) -> Self {
        self.service = Some(ObservedService {
            name: name.to_owned(),
            owned,
        });
        self
    }
}
