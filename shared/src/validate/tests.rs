//! Table tests of document validation: each case is a manifest and the exact set of findings
//! (severity, field path, a fragment of the message) it must produce.

use super::{Severity, validate};
use crate::validate::quantity;

use Severity::{Error, Warning};

struct Case {
    name: &'static str,
    yaml: &'static str,
    want: &'static [(Severity, &'static str, &'static str)],
}

const SANDBOX_HEAD: &str = "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\n";

fn sandbox(body: &str) -> String {
    format!("{SANDBOX_HEAD}{body}")
}

fn run(name: &str, yaml: &str, want: &[(Severity, &str, &str)]) {
    let doc: serde_json::Value = serde_saphyr::from_str(yaml).expect("test YAML parses");
    let report = validate(&doc);
    let got: Vec<(Severity, String)> = report
        .findings
        .iter()
        .map(|f| (f.severity, f.path.to_string()))
        .collect();
    let expected: Vec<(Severity, String)> =
        want.iter().map(|(s, p, _)| (*s, (*p).to_owned())).collect();
    assert_eq!(got, expected, "{name}: findings {:#?}", report.findings);
    for (finding, (_, _, fragment)) in report.findings.iter().zip(want) {
        assert!(
            finding.message.contains(fragment),
            "{name}: message {:?} lacks {fragment:?}",
            finding.message
        );
    }
}

#[test]
fn sandbox_documents() {
    let minimal = "metadata:\n  name: web\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: app\n        image: nginx\n";
    let cases = [
        Case {
            name: "minimal",
            yaml: "",
            want: &[],
        },
        Case {
            name: "unknown container field",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - {name: app, image: nginx, imagePulPolicy: Always}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[0].imagePulPolicy",
                "did you mean \"imagePullPolicy\"",
            )],
        },
        Case {
            name: "missing podTemplate",
            yaml: "metadata: {name: web}\nspec: {}\n",
            want: &[(Error, "spec.podTemplate", "required field is missing")],
        },
        Case {
            name: "missing spec",
            yaml: "metadata: {name: web}\n",
            want: &[(Error, "spec", "required field is missing")],
        },
        Case {
            name: "enum case",
            yaml: "metadata: {name: web}\nspec:\n  operatingMode: running\n  podTemplate: {spec: {containers: [{name: app, image: nginx}]}}\n",
            want: &[(Error, "spec.operatingMode", "did you mean \"Running\"")],
        },
        Case {
            name: "bad names",
            yaml: "metadata: {name: Web_1, namespace: Team.A}\nspec:\n  podTemplate: {spec: {containers: [{name: App, image: nginx}]}}\n",
            want: &[
                (Error, "metadata.name", "lower case"),
                (Error, "metadata.namespace", "lower case"),
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].name",
                    "lower case",
                ),
            ],
        },
        Case {
            name: "metadata typo",
            yaml: "metadata: {name: web, label: {a: b}}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: nginx}]}}\n",
            want: &[(Error, "metadata.label", "did you mean \"labels\"")],
        },
        Case {
            name: "root typo",
            yaml: "metadata: {name: web}\nspecs: {}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: nginx}]}}\n",
            want: &[(Error, "specs", "did you mean \"spec\"")],
        },
        Case {
            name: "label and annotation syntax",
            yaml: "metadata:\n  name: web\n  labels: {app: 'not ok', 'a/b/c': x, n: 3}\n  annotations: {ok.example.com/x: anything at all}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: nginx}]}}\n",
            want: &[
                (
                    Error,
                    "metadata.labels[n]",
                    "got integer 3; quote the value",
                ),
                (Error, "metadata.labels[a/b/c]", "second '/'"),
                (Error, "metadata.labels[app]", "invalid label value"),
            ],
        },
        Case {
            name: "ports and mounts",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: app\n        image: nginx\n        ports: [{containerPort: 0}, {containerPort: 8080, name: HTTP}, {containerPort: 70000}]\n        volumeMounts: [{name: data, mountPath: /data}, {name: nope, mountPath: /x}]\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {resources: {requests: {storage: 1Gi}}}\n",
            want: &[
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].ports[0].containerPort",
                    "between 1 and 65535",
                ),
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].ports[1].name",
                    "lower case",
                ),
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].ports[2].containerPort",
                    "between 1 and 65535",
                ),
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].volumeMounts[1].name",
                    "no volume named \"nope\"",
                ),
            ],
        },
        Case {
            name: "duplicate containers",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}, {name: app, image: b}]}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[1].name",
                "duplicate container name",
            )],
        },
        Case {
            name: "no containers",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: []}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers",
                "at least one container",
            )],
        },
        Case {
            name: "volume claim templates",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {resources: {requests: {storage: 10GB}}}\n  - metadata: {}\n    spec: {accessModes: [ReadWriteOnce]}\n",
            want: &[
                (
                    Error,
                    "spec.volumeClaimTemplates[0].spec.resources.requests[storage]",
                    "there is no B",
                ),
                (
                    Error,
                    "spec.volumeClaimTemplates[1].metadata.name",
                    "pod volume name",
                ),
                (
                    Error,
                    "spec.volumeClaimTemplates[1].spec.resources.requests[storage]",
                    "size of the volume",
                ),
            ],
        },
        Case {
            name: "rouse additions",
            yaml: "metadata: {name: web}\nspec:\n  restoreFrom: {}\n  suspension: {idleTimeoutSeconds: -5, strategy: Freeze, wakeOnConnect: 'yes'}\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[
                (
                    Error,
                    "spec.restoreFrom.snapshotName",
                    "required field is missing",
                ),
                (Error, "spec.suspension.idleTimeoutSeconds", "at least 0"),
                (Error, "spec.suspension.strategy", "Stop, Checkpoint"),
                (Error, "spec.suspension.wakeOnConnect", "true or false"),
            ],
        },
        Case {
            name: "memory sharing",
            yaml: "metadata: {name: web}\nspec:\n  memorySharing: Share\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(Error, "spec.memorySharing", "None, Merge")],
        },
        Case {
            name: "memory sharing under gvisor",
            yaml: "metadata: {name: web}\nspec:\n  memorySharing: Merge\n  podTemplate: {spec: {runtimeClassName: gvisor, containers: [{name: app, image: a}]}}\n",
            want: &[(Warning, "spec.memorySharing", "no effect")],
        },
        Case {
            name: "empty snapshot name",
            yaml: "metadata: {name: web}\nspec:\n  restoreFrom: {snapshotName: ''}\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(
                Error,
                "spec.restoreFrom.snapshotName",
                "must name an object",
            )],
        },
        Case {
            name: "shutdown time",
            yaml: "metadata: {name: web}\nspec:\n  shutdownTime: tomorrow\n  shutdownPolicy: Keep\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[
                (Error, "spec.shutdownPolicy", "Retain, Delete"),
                (Error, "spec.shutdownTime", "RFC 3339"),
            ],
        },
        Case {
            name: "reserved pod template labels are stripped",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    metadata: {labels: {agents.x-k8s.io/sandbox-name-hash: x, app: web}}\n    spec: {containers: [{name: app, image: a}]}\n",
            want: &[(
                Warning,
                "spec.podTemplate.metadata.labels[agents.x-k8s.io/sandbox-name-hash]",
                "stripped",
            )],
        },
        Case {
            name: "env value must be a string",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a, env: [{name: PORT, value: 8080}]}]}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[0].env[0].value",
                "got integer 8080; quote the value",
            )],
        },
        Case {
            name: "service name needs a letter first",
            yaml: "metadata: {name: 8080-x}\nspec:\n  service: true\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[
                (Warning, "metadata.name", "reaches port 8080 of sandbox x"),
                (Error, "metadata.name", "Service name"),
            ],
        },
        Case {
            name: "name too long for a hostname label",
            yaml: "metadata: {name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(
                Warning,
                "metadata.name",
                "no more than 63 characters (got 64)",
            )],
        },
        Case {
            name: "no name",
            yaml: "metadata: {}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(Error, "metadata.name", "generateName")],
        },
        Case {
            name: "int or string and quantities",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: app\n        image: a\n        resources: {limits: {cpu: 2, memory: 1Gib}}\n        readinessProbe: {httpGet: {port: [1]}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[0].readinessProbe.httpGet.port",
                "integer or a string",
            )],
        },
        Case {
            name: "quantity syntax after schema passes",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - {name: app, image: a, resources: {limits: {cpu: 2, memory: 1Gib}}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[0].resources.limits[memory]",
                "not a quantity",
            )],
        },
    ];
    for case in cases {
        let yaml = if case.yaml.is_empty() {
            sandbox(minimal)
        } else {
            sandbox(case.yaml)
        };
        run(case.name, &yaml, case.want);
    }
}

#[test]
fn kind_and_version() {
    let cases = [
        Case {
            name: "old version",
            yaml: "apiVersion: agents.x-k8s.io/v1alpha1\nkind: Sandbox\nmetadata: {name: a}\nspec: {}\n",
            want: &[(
                Error,
                "apiVersion",
                "use apiVersion agents.x-k8s.io/v1beta1",
            )],
        },
        Case {
            name: "wrong group",
            yaml: "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: a}\nspec: {}\n",
            want: &[(Error, "apiVersion", "extensions.agents.x-k8s.io/v1beta1")],
        },
        Case {
            name: "kind typo",
            yaml: "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbx\nmetadata: {name: a}\n",
            want: &[(Error, "kind", "did you mean \"Sandbox\"")],
        },
        Case {
            name: "core kind with our name",
            yaml: "apiVersion: v1\nkind: Sandbox\nmetadata: {name: a}\n",
            want: &[(Error, "apiVersion", "belongs to group agents.x-k8s.io")],
        },
        Case {
            name: "missing apiVersion and kind",
            yaml: "metadata: {name: a}\n",
            want: &[
                (Error, "apiVersion", "required"),
                (Error, "kind", "required"),
            ],
        },
        Case {
            name: "kind not a string",
            yaml: "apiVersion: v1\nkind: 7\n",
            want: &[(Error, "kind", "must be a string")],
        },
        Case {
            name: "not a mapping",
            yaml: "- a\n- b\n",
            want: &[(Error, "(document)", "must be a mapping")],
        },
    ];
    for case in cases {
        run(case.name, case.yaml, case.want);
    }
}

#[test]
fn foreign_kinds_are_skipped() {
    let doc: serde_json::Value = serde_saphyr::from_str(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n",
    )
    .expect("yaml");
    let report = validate(&doc);
    assert!(report.skipped);
    assert!(report.is_valid());
    assert_eq!(report.object_ref(), "ConfigMap cfg");
}

#[test]
fn extension_kinds() {
    let cases = [
        Case {
            name: "pool replicas quoted",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: pool}\nspec: {replicas: '3', sandboxTemplateRef: {name: t}}\n",
            want: &[(Error, "spec.replicas", "remove the quotes")],
        },
        Case {
            name: "pool negative replicas and missing template",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: pool}\nspec: {replicas: -1, updateStrategy: {type: Rolling}}\n",
            want: &[
                (Error, "spec.replicas", "at least 0"),
                (Error, "spec.updateStrategy.type", "OnReplenish, Recreate"),
                (Error, "spec.sandboxTemplateRef", "required"),
            ],
        },
        Case {
            name: "pool members by generateName",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {generateName: Pool-}\nspec: {sandboxTemplateRef: {name: t}}\n",
            want: &[(Error, "metadata.generateName", "lower case")],
        },
        Case {
            name: "claim metadata restrictions",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c}\nspec:\n  warmPoolRef: {name: pool}\n  additionalPodMetadata:\n    labels: {agents.x-k8s.io/launch-type: warm}\n    annotations: {kubernetes.io/description: x, cluster-autoscaler.kubernetes.io/safe-to-evict: 'true'}\n  env: [{name: A, value: '1'}, {name: A, value: '2'}, {name: 'B=C', value: x}]\n  lifecycle: {ttlSecondsAfterFinished: -1, shutdownPolicy: Orphan}\n",
            want: &[
                (
                    Error,
                    "spec.lifecycle.shutdownPolicy",
                    "Delete, DeleteForeground, Retain",
                ),
                (
                    Error,
                    "spec.lifecycle.ttlSecondsAfterFinished",
                    "at least 0",
                ),
            ],
        },
        Case {
            name: "claim rules after schema",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c}\nspec:\n  warmPoolRef: {name: pool}\n  additionalPodMetadata:\n    labels: {agents.x-k8s.io/launch-type: warm}\n    annotations: {kubernetes.io/description: x, cluster-autoscaler.kubernetes.io/safe-to-evict: 'true'}\n  env: [{name: A, value: '1'}, {name: A, value: '2'}, {name: 'B=C', value: x}]\n",
            want: &[
                (
                    Error,
                    "spec.additionalPodMetadata.labels[agents.x-k8s.io/launch-type]",
                    "controller rejects",
                ),
                (
                    Error,
                    "spec.additionalPodMetadata.annotations[kubernetes.io/description]",
                    "controller rejects",
                ),
                (Warning, "spec.env[1]", "set twice"),
                (
                    Error,
                    "spec.env[2].name",
                    "not an environment variable name",
                ),
            ],
        },
        Case {
            name: "claim env needs a value",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c}\nspec:\n  warmPoolRef: {}\n  env: [{name: A}]\n",
            want: &[
                (Error, "spec.env[0].value", "required"),
                (Error, "spec.warmPoolRef.name", "required"),
            ],
        },
        Case {
            name: "unmanaged template with a policy",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t}\nspec:\n  networkPolicyManagement: Unmanaged\n  networkPolicy: {egress: [{to: [{ipBlock: {cidr: 0.0.0.0/0}}]}]}\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(Warning, "spec.networkPolicy", "Unmanaged")],
        },
        Case {
            name: "template policy typo",
            yaml: "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: t}\nspec:\n  envVarsInjectionPolicy: Allow\n  networkPolicy: {egres: []}\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[
                (
                    Error,
                    "spec.envVarsInjectionPolicy",
                    "did you mean \"Allowed\"",
                ),
                (Error, "spec.networkPolicy.egres", "did you mean \"egress\""),
            ],
        },
        Case {
            name: "snapshot",
            yaml: "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxSnapshot\nmetadata: {name: s}\nspec: {sandboxName: Web, includeMemory: false}\n",
            want: &[(Error, "spec.sandboxName", "cannot be an object name")],
        },
        Case {
            name: "snapshot without sandbox",
            yaml: "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxSnapshot\nmetadata: {name: s}\nspec: {}\n",
            want: &[(Error, "spec.sandboxName", "required")],
        },
        Case {
            name: "snapshot status",
            yaml: "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxSnapshot\nmetadata: {name: s}\nspec: {sandboxName: web}\nstatus: {phase: Ready, sizeBytes: 1024, takenAt: '2026-12-01T10:00:00Z', provider: gvisor}\n",
            want: &[],
        },
    ];
    for case in cases {
        run(case.name, case.yaml, case.want);
    }
}

#[test]
fn quantities() {
    use quantity::Problem::{Number, Suffix};
    for ok in [
        "1", "1Gi", "500m", "0.5", ".5", "1e3", "1E-3", "+2", "-1", "128Mi", "2k", "1.5Ti",
    ] {
        assert_eq!(quantity::parse(ok), Ok(()), "{ok}");
    }
    for (bad, problem) in [
        ("", Number),
        ("Gi", Number),
        ("1.2.3Gi", Number),
        ("--1", Number),
        ("e3", Number),
        ("1GB", Suffix),
        ("1gi", Suffix),
        ("1e", Suffix),
        ("1e+", Suffix),
        ("1 Gi", Suffix),
        ("1KiB", Suffix),
    ] {
        assert_eq!(quantity::parse(bad), Err(problem), "{bad}");
    }
}

#[test]
fn rfc3339_as_kubernetes_parses_it() {
    use super::schema::is_rfc3339;
    for ok in [
        "2027-06-30T12:00:00Z",
        "2027-06-30T12:00:00+02:00",
        "2027-06-30T12:00:00.123456789-07:30",
        "2028-02-29T00:00:00Z",
    ] {
        assert!(is_rfc3339(ok), "{ok}");
    }
    for bad in [
        "tomorrow",
        "2027-06-30",
        "2027-06-30 12:00:00Z",
        "2027-06-30t12:00:00Z",
        "2027-06-30T12:00Z",
        "2027-06-30T12:00:00",
        "2027-06-30T12:00:00+02",
        "2027-06-30T12:00:00+0200",
        "2027-06-30T12:00:00.Z",
        "2027-06-30T12:00:00Z[UTC]",
        "20270630T120000Z",
        "2027-02-30T12:00:00Z",
        "2027-06-30T25:00:00Z",
        "2027-06-30T12:00:00+24:00",
        "２０２７-06-30T12:00:00Z",
    ] {
        assert!(!is_rfc3339(bad), "{bad}");
    }
}

#[test]
fn metadata_and_blueprint_metadata() {
    let cases = [
        Case {
            name: "metadata types come from ObjectMeta",
            yaml: "metadata: {name: web, finalizers: [1], creationTimestamp: yesterday}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a, ports: [{containerPort: 0}]}]}}\n",
            want: &[
                (Error, "metadata.creationTimestamp", "RFC 3339"),
                (Error, "metadata.finalizers[0]", "must be a string"),
                // A metadata problem does not hide the spec's.
                (
                    Error,
                    "spec.podTemplate.spec.containers[0].ports[0].containerPort",
                    "between 1 and 65535",
                ),
            ],
        },
        Case {
            name: "dotted sandbox name is valid but unroutable",
            yaml: "metadata: {name: my.sandbox, annotations: {Example.COM/Key: v}}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(Warning, "metadata.name", "cannot be reached by hostname")],
        },
        Case {
            name: "name and generateName are both checked",
            yaml: "metadata: {name: web, generateName: Web-}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(Error, "metadata.generateName", "lower case")],
        },
        Case {
            name: "pod template and claim template metadata syntax",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate:\n    metadata: {labels: {'bad key!': 'v v'}, annotations: {x/y/z: a}}\n    spec: {containers: [{name: app, image: a, volumeMounts: [{name: data, mountPath: /d}]}]}\n  volumeClaimTemplates:\n  - metadata: {name: data, labels: {ok: 'bad!'}}\n    spec: {resources: {requests: {storage: 1Gi}}}\n",
            want: &[
                (
                    Error,
                    "spec.podTemplate.metadata.labels[bad key!]",
                    "invalid label key",
                ),
                (
                    Error,
                    "spec.podTemplate.metadata.labels[bad key!]",
                    "invalid label value",
                ),
                (
                    Error,
                    "spec.podTemplate.metadata.annotations[x/y/z]",
                    "second '/'",
                ),
                (
                    Error,
                    "spec.volumeClaimTemplates[0].metadata.labels[ok]",
                    "invalid label value",
                ),
            ],
        },
        Case {
            name: "whole-number floats are integers",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a, ports: [{containerPort: 8080.0}], readinessProbe: {periodSeconds: 1e1, httpGet: {port: 8080.0}}}]}}\n",
            want: &[],
        },
        Case {
            name: "fractions are not integers",
            yaml: "metadata: {name: web}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a, ports: [{containerPort: 80.5}]}]}}\n",
            want: &[(
                Error,
                "spec.podTemplate.spec.containers[0].ports[0].containerPort",
                "must be an integer, got number 80.5",
            )],
        },
        Case {
            name: "control characters are escaped",
            yaml: "metadata: {name: web, labels: {\"a\\nok  Sandbox x\": v}}\nspec:\n  podTemplate: {spec: {containers: [{name: app, image: a}]}}\n",
            want: &[(
                Error,
                "metadata.labels[a\\nok  Sandbox x]",
                "invalid label key",
            )],
        },
    ];
    for case in cases {
        run(case.name, &sandbox(case.yaml), case.want);
    }
}

#[test]
fn other_groups_may_reuse_kind_names() {
    let doc: serde_json::Value = serde_saphyr::from_str(
        "apiVersion: sandbox.example.com/v1\nkind: Sandbox\nmetadata: {name: a}\nspec: {anything: 1}\n",
    )
    .expect("yaml");
    let report = validate(&doc);
    assert!(report.skipped && report.is_valid(), "{report:?}");
    assert_eq!(report.object_ref(), "Sandbox a");
}

#[test]
fn pool_member_names_are_truncated_like_the_api_server_does() {
    let long = "p".repeat(70);
    let yaml = format!(
        "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {{name: {long}}}\nspec: {{sandboxTemplateRef: {{name: t}}}}\n"
    );
    run("long pool name", &yaml, &[]);
    let dotted = "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: a.pool}\nspec: {sandboxTemplateRef: {name: t}}\n";
    run(
        "dotted pool name",
        dotted,
        &[(Warning, "metadata.name", "members")],
    );
}

/// Mutated manifests (bytes flipped, cut, duplicated) never panic the reader or the validator,
/// and every message stays on one line (a quoted newline cannot forge an output line).
/// Deterministic: a fixed-seed xorshift, bounded count.
#[test]
fn mutated_manifests_never_panic() {
    let seeds: Vec<String> = ["sandbox-http.yaml", "warm-pool.yaml", "snapshot.yaml"]
        .iter()
        .map(|f| {
            let path = format!("{}/../deploy/examples/{f}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
        })
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b" \n\t:-[]{}#&*!|>'\"0123456789.aZ\\,?%@`";
    let (mut valid, mut invalid) = (0, 0);
    for round in 0..1500 {
        let seed = &seeds[round % seeds.len()];
        let mut bytes = seed.as_bytes().to_vec();
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % bytes.len().max(1);
            match next() % 4 {
                0 => bytes[at] = ALPHABET[(next() as usize) % ALPHABET.len()],
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, ALPHABET[(next() as usize) % ALPHABET.len()]),
                _ => {
                    let end = (at + (next() as usize) % 64).min(bytes.len());
                    let chunk = bytes[at..end].to_vec();
                    bytes.splice(at..at, chunk);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        for doc in crate::manifest::documents(&text) {
            let doc = match doc {
                Ok(doc) => doc,
                Err(e) => {
                    invalid += 1;
                    assert!(!e.to_string().contains('\n'), "round {round}: {e}");
                    continue;
                }
            };
            let report = validate(&doc.value);
            if report.is_valid() {
                valid += 1;
            } else {
                invalid += 1;
            }
            assert!(!report.object_ref().contains('\n'), "round {round}");
            for f in &report.findings {
                let line = format!("{}: {}", f.path, f.message);
                assert!(
                    !f.message.is_empty(),
                    "round {round}: empty message at {}",
                    f.path
                );
                assert!(
                    !line.contains('\n'),
                    "round {round}: multi-line finding {line:?}"
                );
            }
        }
    }
    // The mutations must exercise both verdicts, or the test checks nothing.
    assert!(
        valid > 100 && invalid > 100,
        "valid {valid}, invalid {invalid}"
    );
}

/// `9999-12-31T23:59:59Z` (a common "never") is a valid time, stored as the last instant the
/// API structs can hold; other strings that look like it, and impossible dates, are not
/// touched or taken.
#[test]
fn times_past_the_representable_end_are_valid_and_clamped() {
    use super::{LAST_TIME, clamp_far_times};
    let yaml = |time: &str| {
        sandbox(&format!(
            "metadata: {{name: web}}\nspec:\n  shutdownTime: \"{time}\"\n  podTemplate: {{spec: {{containers: [{{name: app, image: a, env: [{{name: T, value: \"9999-12-31T23:59:59Z\"}}]}}]}}}}\n"
        ))
    };
    let never: serde_json::Value =
        serde_saphyr::from_str(&yaml("9999-12-31T23:59:59Z")).expect("yaml");
    let report = validate(&never);
    assert!(report.is_valid(), "{:#?}", report.findings);
    let mut clamped = never.clone();
    clamp_far_times("Sandbox", &mut clamped);
    assert_eq!(clamped["spec"]["shutdownTime"], LAST_TIME);
    assert_eq!(
        clamped["spec"]["podTemplate"]["spec"]["containers"][0]["env"][0]["value"],
        "9999-12-31T23:59:59Z",
        "only date-time fields are clamped"
    );
    let typed: crate::api::Sandbox =
        serde_json::from_value(clamped).expect("the clamped object reads as a Sandbox");
    assert!(typed.spec.shutdown_time.is_some());
    for bad in [
        "9999-12-32T00:00:00Z",
        "9999-02-30T00:00:00Z",
        "9999-12-31T24:00:00Z",
    ] {
        let doc: serde_json::Value = serde_saphyr::from_str(&yaml(bad)).expect("yaml");
        assert!(!validate(&doc).is_valid(), "{bad} is not a time");
    }
}
