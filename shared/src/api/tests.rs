//! The API types against upstream manifests and the CRD contract: nothing an upstream
//! manifest says is lost or renamed, defaults are upstream's, and the CRDs carry the names,
//! scopes and subresources of API.md.

use serde_json::Value;

use super::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../tests/fixtures/upstream/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every leaf of `want` is present with the same value in `got`.
fn assert_subset(want: &Value, got: &Value, path: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                // Empty maps and lists are omitted when serialized, like Go's omitempty.
                let empty = matches!(v, Value::Object(m) if m.is_empty())
                    || matches!(v, Value::Array(a) if a.is_empty());
                match g.get(k) {
                    Some(gv) => assert_subset(v, gv, &format!("{path}.{k}")),
                    None if empty => {}
                    None => panic!("{path}.{k} was lost in the round trip"),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{path}: list length");
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                assert_subset(wv, gv, &format!("{path}[{i}]"));
            }
        }
        (Value::String(w), Value::String(g)) if w != g => {
            // Times are normalized to UTC, as Kubernetes does; the instant must be the same.
            let instant = |s: &str| s.parse::<k8s_openapi::jiff::Timestamp>().ok();
            assert!(
                instant(w).is_some() && instant(w) == instant(g),
                "{path}: {w:?} became {g:?}"
            );
        }
        _ => assert_eq!(want, got, "{path}"),
    }
}

fn round_trip<K: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) {
    let typed: K = serde_json::from_value(doc.clone()).expect("upstream manifest decodes");
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_subset(doc, &back, "");
}

fn round_trip_any(doc: &Value) {
    match doc["kind"].as_str() {
        Some("Sandbox") => round_trip::<Sandbox>(doc),
        Some("SandboxTemplate") => round_trip::<SandboxTemplate>(doc),
        Some("SandboxWarmPool") => round_trip::<SandboxWarmPool>(doc),
        Some("SandboxClaim") => round_trip::<SandboxClaim>(doc),
        Some("List") => doc["items"]
            .as_array()
            .expect("items")
            .iter()
            .for_each(round_trip_any),
        other => panic!("unexpected kind {other:?}"),
    }
}

#[test]
fn upstream_manifests_round_trip_unchanged() {
    for file in [
        "claimed-sandbox-service.yaml",
        "sandbox-with-volumes.yaml",
        "warm-pool-defaults.yaml",
    ] {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&fixture(file)).expect("yaml");
        assert!(!docs.is_empty(), "{file}");
        docs.iter().for_each(round_trip_any);
    }
    let json: Value =
        serde_json::from_str(&fixture("suspended-sandbox-from-kubectl.json")).expect("json");
    round_trip_any(&json);
}

#[test]
fn defaults_are_upstreams() {
    let pool: SandboxWarmPoolSpec =
        serde_json::from_value(serde_json::json!({"sandboxTemplateRef": {"name": "t"}}))
            .expect("decodes");
    assert_eq!(pool.replicas, 1);
    assert_eq!(pool.update_strategy, None);
    let strategy: WarmPoolUpdateStrategy =
        serde_json::from_value(serde_json::json!({})).expect("decodes");
    assert_eq!(strategy.type_, WarmPoolUpdateStrategyType::OnReplenish);

    let sandbox: SandboxSpec =
        serde_json::from_value(serde_json::json!({"podTemplate": {"spec": {"containers": []}}}))
            .expect("decodes");
    assert_eq!(sandbox.effective_operating_mode(), OperatingMode::Running);
    assert_eq!(sandbox.effective_shutdown_policy(), ShutdownPolicy::Retain);

    let suspension: Suspension =
        serde_json::from_value(serde_json::json!({"idleTimeoutSeconds": 60})).expect("decodes");
    assert_eq!(
        suspension,
        Suspension {
            idle_timeout_seconds: Some(60),
            wake_on_connect: true,
            strategy: SuspensionStrategy::Stop
        }
    );
    let snapshot: SandboxSnapshotSpec =
        serde_json::from_value(serde_json::json!({"sandboxName": "a"})).expect("decodes");
    assert!(snapshot.include_memory);
}

#[test]
fn crds_follow_the_api_contract() {
    struct Want {
        kind: &'static str,
        group: &'static str,
        plural: &'static str,
        short: &'static str,
        status: bool,
        scale: bool,
        columns: &'static [&'static str],
    }
    let wants = [
        Want {
            kind: "Sandbox",
            group: GROUP,
            plural: "sandboxes",
            short: "sandbox",
            status: true,
            scale: false,
            columns: &["Ready", "Reason", "Mode", "Age"],
        },
        Want {
            kind: "SandboxSnapshot",
            group: GROUP,
            plural: "sandboxsnapshots",
            short: "sbxsnap",
            status: true,
            scale: false,
            columns: &["Sandbox", "Phase", "Age"],
        },
        Want {
            kind: "SandboxTemplate",
            group: EXTENSIONS_GROUP,
            plural: "sandboxtemplates",
            short: "sandboxtemplate",
            status: false,
            scale: false,
            columns: &["Age"],
        },
        Want {
            kind: "SandboxWarmPool",
            group: EXTENSIONS_GROUP,
            plural: "sandboxwarmpools",
            short: "swp",
            status: true,
            scale: true,
            columns: &["Ready", "Desired", "Age"],
        },
        Want {
            kind: "SandboxClaim",
            group: EXTENSIONS_GROUP,
            plural: "sandboxclaims",
            short: "sandboxclaim",
            status: true,
            scale: false,
            columns: &["Ready", "Sandbox", "Reason", "Age"],
        },
    ];
    let crds = crate::crds::all();
    assert_eq!(crds.len(), wants.len());
    for want in wants {
        let crd = crds
            .iter()
            .find(|c| c.spec.names.kind == want.kind)
            .unwrap_or_else(|| panic!("no CRD for {}", want.kind));
        let k = want.kind;
        assert_eq!(crd.spec.group, want.group, "{k}");
        assert_eq!(crd.spec.scope, "Namespaced", "{k}");
        assert_eq!(crd.spec.names.plural, want.plural, "{k}");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&[want.short.to_owned()][..]),
            "{k}"
        );
        assert_eq!(crd.spec.versions.len(), 1, "{k}");
        let v = &crd.spec.versions[0];
        assert_eq!(
            (v.name.as_str(), v.served, v.storage),
            (VERSION, true, true),
            "{k}"
        );
        let sub = v.subresources.as_ref();
        assert_eq!(
            sub.and_then(|s| s.status.as_ref()).is_some(),
            want.status,
            "{k} status"
        );
        assert_eq!(
            sub.and_then(|s| s.scale.as_ref()).is_some(),
            want.scale,
            "{k} scale"
        );
        let columns: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .filter(|c| c.priority.unwrap_or(0) == 0)
            .map(|c| c.name.as_str())
            .collect();
        for column in want.columns {
            assert!(
                columns.contains(column),
                "{k}: column {column} in {columns:?}"
            );
        }
    }
}

#[test]
fn schema_defaults_and_enums() {
    let crds = crate::crds::all();
    let schema = |kind: &str| -> Value {
        let crd = crds
            .iter()
            .find(|c| c.spec.names.kind == kind)
            .expect("crd");
        serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
        )
        .expect("json")
    };
    let sandbox = schema("Sandbox");
    let spec = &sandbox["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["podTemplate"]));
    assert_eq!(spec["properties"]["operatingMode"]["default"], "Running");
    assert_eq!(
        spec["properties"]["operatingMode"]["enum"],
        serde_json::json!(["Running", "Suspended"])
    );
    assert_eq!(spec["properties"]["shutdownPolicy"]["default"], "Retain");
    assert_eq!(
        spec["x-kubernetes-validations"][0]["message"],
        "volumeClaimTemplates is immutable"
    );
    let root_rule = sandbox["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .expect("a root rule");
    assert!(root_rule.contains("self.metadata.name"), "{root_rule}");
    let pool = schema("SandboxWarmPool");
    let replicas = &pool["properties"]["spec"]["properties"]["replicas"];
    assert_eq!(replicas["default"], 1);
    assert_eq!(replicas["minimum"], 0.0);
    let template = schema("SandboxTemplate");
    let tspec = &template["properties"]["spec"]["properties"];
    for (field, default) in [
        ("networkPolicyManagement", "Managed"),
        ("envVarsInjectionPolicy", "Disallowed"),
        ("volumeClaimTemplatesPolicy", "Disallowed"),
    ] {
        assert_eq!(tspec[field]["default"], default, "{field}");
    }
}
