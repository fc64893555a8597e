//! The pod-spec checks, `$(VAR)` expansion and the environment a workload gets.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EnvVarSource, HTTPGetAction, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::env::resolve;
use super::super::{Error, PortMap, ProbeAction, RestartPolicy, RuntimeKind, env_suffix, expand};
use super::*;

#[test]
fn a_full_pod_reads_into_a_launch_spec() {
    let mut pod = pod("serve");
    pod.containers[0].args = Some(vec!["--flag".into()]);
    pod.restart_policy = Some("OnFailure".into());
    pod.termination_grace_period_seconds = Some(10_000);
    let spec = LaunchSpec::from_pod(&pod).expect("valid");
    assert_eq!(spec.runtime, RuntimeKind::Process);
    assert_eq!(spec.argv, ["sh", "-c", "serve", "--flag"]);
    assert_eq!(spec.restart_policy, RestartPolicy::OnFailure);
    assert_eq!(spec.grace, Duration::from_secs(120), "grace is bounded");
    assert_eq!(spec.ports[0].container_port, 8080);
    assert_eq!(spec.volumes[0].name, "data");
    assert_eq!(spec.volumes[0].mount_path.as_deref(), Some("/data"));
    assert_eq!(spec.readiness.action, ProbeAction::Connect);
}

#[test]
fn unsupported_pods_fail_with_the_field_named() {
    struct Case {
        name: &'static str,
        change: fn(&mut PodSpec),
        want: &'static str,
    }
    let cases = [
        Case {
            name: "args without command",
            change: |p| {
                p.containers[0].command = None;
                p.containers[0].args = Some(vec!["x".into()]);
            },
            want: "containers[0].command is empty",
        },
        Case {
            name: "valueFrom",
            change: |p| {
                p.containers[0].env.get_or_insert_default()[0].value_from =
                    Some(EnvVarSource::default());
            },
            want: "env[0] (GREETING): valueFrom is not supported",
        },
        Case {
            name: "unknown runtime class",
            change: |p| p.runtime_class_name = Some("kata".into()),
            want: "runtimeClassName \"kata\"",
        },
        Case {
            name: "configMap volume",
            change: |p| {
                p.volumes.get_or_insert_default().push(Volume {
                    name: "cfg".into(),
                    config_map: Some(ConfigMapVolumeSource::default()),
                    ..Volume::default()
                })
            },
            want: "volumes[1] (cfg)",
        },
        Case {
            name: "volume name that is not a label",
            change: |p| p.volumes.get_or_insert_default()[0].name = "../escape".into(),
            want: "volumes[0].name \"../escape\"",
        },
        Case {
            name: "mount of an undeclared volume",
            change: |p| p.volumes = None,
            want: "volume \"data\" is not declared",
        },
        Case {
            name: "probe on an undeclared port",
            change: |p| {
                p.containers[0].readiness_probe = Some(Probe {
                    tcp_socket: Some(TCPSocketAction {
                        port: IntOrString::Int(9999),
                        host: None,
                    }),
                    ..Probe::default()
                })
            },
            want: "readinessProbe port 9999",
        },
        Case {
            name: "https probe",
            change: |p| {
                p.containers[0].readiness_probe = Some(Probe {
                    http_get: Some(HTTPGetAction {
                        port: IntOrString::Int(8080),
                        scheme: Some("HTTPS".into()),
                        ..HTTPGetAction::default()
                    }),
                    ..Probe::default()
                })
            },
            want: "scheme \"HTTPS\"",
        },
        Case {
            name: "exec probe",
            change: |p| p.containers[0].readiness_probe = Some(Probe::default()),
            want: "httpGet and tcpSocket probes only",
        },
        Case {
            name: "relative dir:// rootfs",
            change: |p| {
                p.runtime_class_name = Some("gvisor".into());
                p.containers[0].image = Some("dir://srv/rootfs".into());
            },
            want: "must name an absolute path",
        },
        Case {
            name: "missing dir:// rootfs",
            change: |p| {
                p.runtime_class_name = Some("gvisor".into());
                p.containers[0].image = Some("dir:///nonexistent/rouse-rootfs".into());
            },
            want: "the root filesystem /nonexistent/rouse-rootfs is not a directory",
        },
        Case {
            name: "bad restart policy",
            change: |p| p.restart_policy = Some("Sometimes".into()),
            want: "restartPolicy \"Sometimes\"",
        },
    ];
    for case in cases {
        let mut pod = pod("serve");
        (case.change)(&mut pod);
        let error = LaunchSpec::from_pod(&pod).expect_err(case.name);
        assert!(matches!(error, Error::Unsupported(_)), "{}", case.name);
        let message = error.to_string();
        assert!(message.contains(case.want), "{}: {message}", case.name);
    }
}

#[test]
fn probe_schedules_are_bounded() {
    let mut pod = pod("serve");
    pod.containers[0].readiness_probe = Some(Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("http".into()),
            host: None,
        }),
        period_seconds: Some(0),
        timeout_seconds: Some(10_000),
        failure_threshold: Some(-1),
        initial_delay_seconds: Some(2),
        ..Probe::default()
    });
    let readiness = LaunchSpec::from_pod(&pod).expect("valid").readiness;
    assert_eq!(
        readiness.action,
        ProbeAction::Tcp {
            container_port: Some(8080)
        }
    );
    assert_eq!(readiness.period, Duration::from_secs(1));
    assert_eq!(readiness.timeout, Duration::from_secs(60));
    assert_eq!(readiness.failure_threshold, 1);
    assert_eq!(readiness.initial_delay, Duration::from_secs(2));
}

#[test]
fn expand_follows_kubernetes_rules() {
    let lookup = |name: &str| (name == "PORT").then(|| "4000".to_owned());
    let cases = [
        ("$(PORT)", "4000"),
        ("http.server $(PORT) x", "http.server 4000 x"),
        ("$$(PORT)", "$(PORT)"),
        ("$(MISSING)", "$(MISSING)"),
        ("$PORT", "$PORT"),
        ("$(PORT", "$(PORT"),
        ("cost $5", "cost $5"),
        ("end$", "end$"),
    ];
    for (input, want) in cases {
        assert_eq!(expand(input, lookup), want, "{input}");
    }
}

#[test]
fn rouse_variables_win_and_env_values_expand() {
    let mut pod = pod("serve $(PORT) $(GREETING)");
    pod.containers[0].env.get_or_insert_default().push(EnvVar {
        name: "PORT".into(),
        value: Some("1".into()),
        value_from: None,
    });
    let spec = LaunchSpec::from_pod(&pod).expect("valid");
    let ports = PortMap {
        host: std::net::Ipv4Addr::LOCALHOST,
        default_port: 4000,
        mapped: vec![(8080, 4000)],
    };
    let volumes = [("my-data".to_owned(), "/v".to_owned())];
    let resolved = resolve(
        &spec,
        vec![("PATH".into(), "/bin".into())],
        &ports,
        &volumes,
    );
    let get = |name: &str| {
        resolved
            .env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("PORT"), Some("4000"));
    assert_eq!(get("ROUSE_PORT_8080"), Some("4000"));
    assert_eq!(get("ROUSE_VOLUME_MY_DATA"), Some("/v"));
    assert_eq!(get("GREETING"), Some("hello from 4000"));
    assert_eq!(get("PATH"), Some("/bin"));
    assert_eq!(resolved.env.iter().filter(|(n, _)| n == "PORT").count(), 1);
    assert_eq!(resolved.argv[2], "serve 4000 hello from 4000");
}

#[test]
fn env_suffixes() {
    assert_eq!(env_suffix("my-data.v1"), "MY_DATA_V1");
    assert_eq!(env_suffix("work"), "WORK");
}
