//! Tests of the template blueprint, its policies and its NetworkPolicy.

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar};
use rouse_shared::api::{
    ClaimEnvVar, InjectionPolicy, NetworkPolicyManagement, PersistentVolumeClaimTemplate,
    SandboxClaimSpec,
};

use super::{TEMPLATE_POD_LABEL, claim_sandbox_spec, network_policy, refusal, sandbox_spec};
use crate::extensions::fixtures::template;

fn env(name: &str, container: Option<&str>) -> ClaimEnvVar {
    ClaimEnvVar {
        name: name.into(),
        value: "claim".into(),
        container_name: container.map(Into::into),
    }
}

fn vct(name: &str) -> PersistentVolumeClaimTemplate {
    let mut v = PersistentVolumeClaimTemplate::default();
    v.metadata.name = name.into();
    v
}

#[test]
fn blueprint_strips_system_metadata_and_defaults_the_token_off() {
    let mut t = template("python");
    let labels = &mut t.spec.pod_template.metadata.labels;
    labels.insert("agents.x-k8s.io/spoof".into(), "x".into());
    labels.insert("app".into(), "py".into());
    let spec = sandbox_spec("python", &t.spec);
    let labels = &spec.pod_template.metadata.labels;
    assert!(!labels.contains_key("agents.x-k8s.io/spoof"));
    assert_eq!(labels.get("app").map(String::as_str), Some("py"));
    assert_eq!(
        labels.get(TEMPLATE_POD_LABEL).map(String::as_str),
        Some("python")
    );
    assert_eq!(
        spec.pod_template.spec.automount_service_account_token,
        Some(false)
    );

    t.spec.pod_template.spec.automount_service_account_token = Some(true);
    let spec = sandbox_spec("python", &t.spec);
    assert_eq!(
        spec.pod_template.spec.automount_service_account_token,
        Some(true),
        "explicit wins"
    );
}

#[test]
fn env_policies() {
    let mut t = template("python");
    t.spec.pod_template.spec.containers[0].env = Some(vec![EnvVar {
        name: "MODE".into(),
        value: Some("template".into()),
        value_from: None,
    }]);
    let claim = |vars: Vec<ClaimEnvVar>| SandboxClaimSpec {
        env: vars,
        ..SandboxClaimSpec::default()
    };
    let reason = |t: &rouse_shared::api::SandboxTemplate, c: &SandboxClaimSpec| {
        claim_sandbox_spec("python", &t.spec, c)
            .err()
            .map(|r| r.reason)
    };

    assert_eq!(
        reason(&t, &claim(vec![env("TASK", None)])),
        Some(refusal::ENV_VARS_INJECTION_REJECTED)
    );
    t.spec.env_vars_injection_policy = Some(InjectionPolicy::Allowed);
    let spec =
        claim_sandbox_spec("python", &t.spec, &claim(vec![env("TASK", None)])).expect("allowed");
    let vars = spec.pod_template.spec.containers[0]
        .env
        .clone()
        .expect("env");
    assert!(
        vars.iter()
            .any(|v| v.name == "TASK" && v.value.as_deref() == Some("claim"))
    );
    assert_eq!(
        reason(&t, &claim(vec![env("MODE", None)])),
        Some(refusal::ENV_VARS_INJECTION_REJECTED),
        "Allowed does not override"
    );
    assert_eq!(
        reason(&t, &claim(vec![env("X", Some("nope"))])),
        Some(refusal::INVALID_CONFIGURATION)
    );

    t.spec.env_vars_injection_policy = Some(InjectionPolicy::Overrides);
    let spec = claim_sandbox_spec("python", &t.spec, &claim(vec![env("MODE", Some("main"))]))
        .expect("overrides");
    let vars = spec.pod_template.spec.containers[0]
        .env
        .clone()
        .expect("env");
    assert_eq!(vars.len(), 1);
    assert_eq!(vars[0].value.as_deref(), Some("claim"));

    t.spec.env_vars_injection_policy = Some(InjectionPolicy::Allowed);
    t.spec.pod_template.spec.containers[0].env_from = Some(vec![EnvFromSource::default()]);
    assert_eq!(
        reason(&t, &claim(vec![env("TASK", None)])),
        Some(refusal::ENV_VARS_INJECTION_REJECTED),
        "envFrom could hide an override"
    );
}

#[test]
fn volume_claim_template_policies() {
    let mut t = template("python");
    t.spec.volume_claim_templates = vec![vct("data")];
    let claim = |names: &[&str]| SandboxClaimSpec {
        volume_claim_templates: names.iter().map(|n| vct(n)).collect(),
        ..SandboxClaimSpec::default()
    };
    let run = |t: &rouse_shared::api::SandboxTemplate, names: &[&str]| {
        claim_sandbox_spec("python", &t.spec, &claim(names))
    };

    assert_eq!(
        run(&t, &["scratch"]).err().map(|r| r.reason),
        Some(refusal::VOLUME_CLAIM_TEMPLATES_ERROR)
    );
    t.spec.volume_claim_templates_policy = Some(InjectionPolicy::Allowed);
    let spec = run(&t, &["scratch"]).expect("allowed");
    assert_eq!(spec.volume_claim_templates.len(), 2);
    assert_eq!(
        run(&t, &["data"]).err().map(|r| r.reason),
        Some(refusal::VOLUME_CLAIM_TEMPLATES_ERROR)
    );
    assert_eq!(
        run(&t, &[""]).err().map(|r| r.reason),
        Some(refusal::VOLUME_CLAIM_TEMPLATES_ERROR)
    );
    t.spec.volume_claim_templates_policy = Some(InjectionPolicy::Overrides);
    assert_eq!(
        run(&t, &["data"])
            .expect("overrides")
            .volume_claim_templates
            .len(),
        1
    );
}

#[test]
fn managed_network_policy_defaults_and_opt_out() {
    let mut t = template("python");
    let policy = network_policy(&t).expect("managed by default");
    assert_eq!(
        policy.metadata.name.as_deref(),
        Some("python-network-policy")
    );
    let spec = policy.spec.expect("spec");
    let selector = spec
        .pod_selector
        .and_then(|s| s.match_labels)
        .expect("selector");
    assert_eq!(
        selector.get(TEMPLATE_POD_LABEL).map(String::as_str),
        Some("python")
    );
    let ingress = spec.ingress.expect("ingress");
    let from = ingress[0].from.as_ref().expect("peers");
    let proxy = from[0]
        .pod_selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        .expect("proxy pods");
    assert_eq!(
        proxy.get("app.kubernetes.io/name").map(String::as_str),
        Some("rouse-proxy")
    );
    let egress = spec.egress.expect("egress");
    let blocks: Vec<_> = egress[0]
        .to
        .as_ref()
        .expect("to")
        .iter()
        .filter_map(|p| p.ip_block.clone())
        .collect();
    let v4 = blocks
        .iter()
        .find(|b| b.cidr == "0.0.0.0/0")
        .expect("internet v4");
    for denied in [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
    ] {
        assert!(
            v4.except
                .as_ref()
                .is_some_and(|e| e.iter().any(|x| x == denied)),
            "{denied}"
        );
    }
    let v6 = blocks
        .iter()
        .find(|b| b.cidr == "::/0")
        .expect("internet v6");
    for denied in ["fc00::/7", "fe80::/10"] {
        assert!(
            v6.except
                .as_ref()
                .is_some_and(|e| e.iter().any(|x| x == denied)),
            "{denied}"
        );
    }
    t.spec.network_policy_management = Some(NetworkPolicyManagement::Unmanaged);
    assert!(network_policy(&t).is_none());
}

#[test]
fn memory_sharing_is_copied_and_changes_the_hash_only_when_set() {
    use rouse_shared::api::MemorySharing;

    let mut t = template("python");
    let unset = super::template_hash(&t.spec);
    assert_eq!(sandbox_spec("python", &t.spec).memory_sharing, None);

    t.spec.memory_sharing = Some(MemorySharing::Merge);
    assert_eq!(
        sandbox_spec("python", &t.spec).memory_sharing,
        Some(MemorySharing::Merge),
        "sandboxes made from the template carry it"
    );
    let merge = super::template_hash(&t.spec);
    assert_ne!(
        merge, unset,
        "pool members made before the change are stale"
    );

    t.spec.memory_sharing = None;
    assert_eq!(
        super::template_hash(&t.spec),
        unset,
        "templates that never set it keep their hash"
    );
}
