//! Table tests of the Sandbox → route state mapping.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use rouse_shared::api::{
    Endpoint as ApiEndpoint, EndpointPort, OperatingMode, Sandbox, SandboxSpec, SandboxStatus,
    Suspension,
};

use super::*;

fn sandbox() -> Sandbox {
    Sandbox::new("alice", SandboxSpec::default())
}

fn ready(status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: "Ready".to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

fn with_status(mut sb: Sandbox, conditions: Vec<Condition>, endpoint: bool) -> Sandbox {
    sb.status = Some(SandboxStatus {
        conditions,
        endpoint: endpoint.then(|| ApiEndpoint {
            address: "127.0.0.1".to_owned(),
            ports: vec![EndpointPort {
                name: None,
                container_port: 80,
                port: 31000,
            }],
        }),
        ..SandboxStatus::default()
    });
    sb
}

fn endpoint() -> Endpoint {
    Endpoint {
        address: "127.0.0.1".to_owned(),
        ports: vec![PortMapping {
            container_port: 80,
            port: 31000,
        }],
    }
}

struct Case {
    name: &'static str,
    given: Sandbox,
    want: RouteState,
}

#[test]
fn route_state_table() {
    let suspended = |wake: Option<bool>| {
        let mut sb = sandbox();
        sb.spec.operating_mode = Some(OperatingMode::Suspended);
        sb.spec.suspension = wake.map(|w| Suspension {
            wake_on_connect: w,
            ..Suspension::default()
        });
        sb
    };
    let mut deleting = with_status(
        sandbox(),
        vec![ready("True", "DependenciesReady", "")],
        true,
    );
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    let cases = [
        Case {
            name: "new sandbox without status",
            given: sandbox(),
            want: RouteState::Starting { endpoint: None },
        },
        Case {
            name: "ready with endpoint",
            given: with_status(
                sandbox(),
                vec![ready("True", "DependenciesReady", "")],
                true,
            ),
            want: RouteState::Running {
                endpoint: endpoint(),
            },
        },
        Case {
            name: "ready without endpoint waits",
            given: with_status(
                sandbox(),
                vec![ready("True", "DependenciesReady", "")],
                false,
            ),
            want: RouteState::Starting { endpoint: None },
        },
        Case {
            name: "not ready yet with endpoint dials early",
            given: with_status(
                sandbox(),
                vec![ready("False", "DependenciesNotReady", "")],
                true,
            ),
            want: RouteState::Starting {
                endpoint: Some(endpoint()),
            },
        },
        Case {
            name: "suspended wakes by default",
            given: suspended(None),
            want: RouteState::suspended(true),
        },
        Case {
            name: "suspended without wake on connect",
            given: suspended(Some(false)),
            want: RouteState::suspended(false),
        },
        Case {
            name: "pod failed",
            given: with_status(sandbox(), vec![ready("False", "PodFailed", "exit 3")], true),
            want: RouteState::Failed {
                reason: "PodFailed: exit 3".to_owned(),
            },
        },
        Case {
            name: "expired",
            given: with_status(sandbox(), vec![ready("False", "SandboxExpired", "")], false),
            want: RouteState::Failed {
                reason: "SandboxExpired".to_owned(),
            },
        },
        Case {
            name: "being deleted",
            given: deleting,
            want: RouteState::Missing,
        },
    ];
    for Case { name, given, want } in cases {
        assert_eq!(route_state(&given), want, "{name}");
    }
}

#[test]
fn pod_ip_and_template_ports_without_an_endpoint() {
    let mut sb = sandbox();
    sb.spec.pod_template.spec.containers = vec![k8s_openapi::api::core::v1::Container {
        name: "main".to_owned(),
        ports: Some(vec![k8s_openapi::api::core::v1::ContainerPort {
            container_port: 8080,
            ..Default::default()
        }]),
        ..Default::default()
    }];
    let mut sb = with_status(sb, vec![ready("True", "DependenciesReady", "")], false);
    if let Some(status) = sb.status.as_mut() {
        status.pod_ips = vec!["10.1.2.3".to_owned()];
    }
    assert_eq!(
        route_state(&sb),
        RouteState::Running {
            endpoint: Endpoint {
                address: "10.1.2.3".to_owned(),
                ports: vec![PortMapping {
                    container_port: 8080,
                    port: 8080
                }],
            }
        }
    );
}
