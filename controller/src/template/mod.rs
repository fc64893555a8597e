//! The SandboxTemplate as a blueprint: the sandbox spec it stamps out (with its secure
//! defaults), the hash that tells a warm pool which members are stale, and the policies that
//! decide what a claim may add (`env`, `volumeClaimTemplates`, pod metadata).
//!
//! Everything here is pure; the pool and claim plans call it, and so does the Kubernetes
//! adapter for the template's managed NetworkPolicy ([`network_policy`]).

mod network;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use rouse_shared::api::keys::SYSTEM_PREFIXES;
use rouse_shared::api::{
    InjectionPolicy, PersistentVolumeClaimTemplate, PodMetadata, SandboxClaimSpec, SandboxSpec,
    SandboxTemplateSpec,
};
use rouse_shared::names::fnv1a_32;
use serde::Serialize;

pub use network::{NETWORK_POLICY_SUFFIX, TEMPLATE_POD_LABEL, network_policy};

/// Why a claim's request cannot be served from its template: the `Ready=False` reason
/// (upstream's) and a message naming what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The condition reason: `EnvVarsInjectionRejected`, `VolumeClaimTemplatesError`,
    /// `InvalidMetadata` or `InvalidConfiguration`.
    pub reason: &'static str,
    /// What was refused and why.
    pub message: String,
}

/// Condition reasons of refused claims (upstream's values).
pub mod refusal {
    /// The claim's `env` is not allowed by the template's `envVarsInjectionPolicy`.
    pub const ENV_VARS_INJECTION_REJECTED: &str = "EnvVarsInjectionRejected";
    /// The claim's `volumeClaimTemplates` are not allowed or invalid.
    pub const VOLUME_CLAIM_TEMPLATES_ERROR: &str = "VolumeClaimTemplatesError";
    /// The claim's `additionalPodMetadata` uses a system prefix or conflicts with the template.
    pub const INVALID_METADATA: &str = "InvalidMetadata";
    /// The template and claim together do not make a valid sandbox.
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
}

fn refuse(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
    }
}

/// The part of a template that its sandboxes are made of, hashed for staleness.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blueprint<'a> {
    pod_template: &'a rouse_shared::api::PodTemplate,
    volume_claim_templates: &'a [PersistentVolumeClaimTemplate],
    service: Option<bool>,
    suspension: Option<&'a rouse_shared::api::Suspension>,
    // Left out while unset, so the hashes of templates that never set it stay as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_sharing: Option<rouse_shared::api::MemorySharing>,
}

/// The hash of a template's blueprint (pod template, volume claim templates, service,
/// suspension, memory sharing) as 8 hex digits: a pool member whose `sandbox-template-hash` label differs
/// was made from an older version.
pub fn template_hash(spec: &SandboxTemplateSpec) -> String {
    let blueprint = Blueprint {
        pod_template: &spec.pod_template,
        volume_claim_templates: &spec.volume_claim_templates,
        service: spec.service,
        suspension: spec.suspension.as_ref(),
        memory_sharing: spec.memory_sharing,
    };
    // Serializing plain data structures cannot fail; an empty input would still hash.
    let bytes = serde_json::to_vec(&blueprint).unwrap_or_default();
    format!("{:08x}", fnv1a_32(&bytes))
}

/// The sandbox spec a template stamps out: its blueprint, system-prefixed pod metadata
/// stripped, the template label for its NetworkPolicy, and
/// `automountServiceAccountToken: false` unless the template sets it.
pub fn sandbox_spec(template_name: &str, spec: &SandboxTemplateSpec) -> SandboxSpec {
    let mut pod_template = spec.pod_template.clone();
    pod_template.metadata.labels = strip_system(&pod_template.metadata.labels);
    pod_template.metadata.annotations = strip_system(&pod_template.metadata.annotations);
    pod_template
        .metadata
        .labels
        .insert(TEMPLATE_POD_LABEL.to_owned(), template_name.to_owned());
    if pod_template.spec.automount_service_account_token.is_none() {
        pod_template.spec.automount_service_account_token = Some(false);
    }
    SandboxSpec {
        pod_template,
        volume_claim_templates: spec.volume_claim_templates.clone(),
        service: spec.service,
        suspension: spec.suspension.clone(),
        memory_sharing: spec.memory_sharing,
        ..SandboxSpec::default()
    }
}

/// True when `key` is under one of the system prefixes.
pub fn is_system_key(key: &str) -> bool {
    SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p))
}

fn strip_system(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter()
        .filter(|(k, _)| !is_system_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Checks a claim's `additionalPodMetadata`: no system prefixes, and no key the pod already
/// has with another value.
pub fn check_pod_metadata(extra: &PodMetadata, pod: &PodMetadata) -> Result<(), Refusal> {
    for (what, extra, have) in [
        ("label", &extra.labels, &pod.labels),
        ("annotation", &extra.annotations, &pod.annotations),
    ] {
        for (key, value) in extra {
            if is_system_key(key) {
                return Err(refuse(
                    refusal::INVALID_METADATA,
                    format!("{what} {key:?} uses a system prefix, which claims may not set"),
                ));
            }
            if let Some(existing) = have.get(key)
                && existing != value
            {
                return Err(refuse(
                    refusal::INVALID_METADATA,
                    format!(
                        "{what} {key:?} is {existing:?} in the template; the claim asks for {value:?}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Merges a claim's `additionalPodMetadata` into pod metadata (after [`check_pod_metadata`]).
pub fn merge_pod_metadata(pod: &mut PodMetadata, extra: &PodMetadata) {
    pod.labels
        .extend(extra.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    pod.annotations.extend(
        extra
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
}

/// The spec of a cold-started sandbox for a claim: the template's, with the claim's pod
/// metadata, `env` and `volumeClaimTemplates` applied as the template's policies allow.
pub fn claim_sandbox_spec(
    template_name: &str,
    template: &SandboxTemplateSpec,
    claim: &SandboxClaimSpec,
) -> Result<SandboxSpec, Refusal> {
    let mut spec = sandbox_spec(template_name, template);
    if spec.pod_template.spec.containers.is_empty() {
        return Err(refuse(
            refusal::INVALID_CONFIGURATION,
            format!("template {template_name:?} has no containers"),
        ));
    }
    check_pod_metadata(&claim.additional_pod_metadata, &spec.pod_template.metadata)?;
    merge_pod_metadata(
        &mut spec.pod_template.metadata,
        &claim.additional_pod_metadata,
    );
    inject_env(&mut spec, template, claim)?;
    spec.volume_claim_templates = merge_volume_claim_templates(
        &template.volume_claim_templates,
        &claim.volume_claim_templates,
        template.volume_claim_templates_policy.unwrap_or_default(),
    )?;
    Ok(spec)
}

/// Applies the claim's `env` to the containers it names (all containers when it names none).
fn inject_env(
    spec: &mut SandboxSpec,
    template: &SandboxTemplateSpec,
    claim: &SandboxClaimSpec,
) -> Result<(), Refusal> {
    if claim.env.is_empty() {
        return Ok(());
    }
    let policy = template.env_vars_injection_policy.unwrap_or_default();
    if policy == InjectionPolicy::Disallowed {
        return Err(refuse(
            refusal::ENV_VARS_INJECTION_REJECTED,
            "environment variable injection is not allowed by the template's envVarsInjectionPolicy",
        ));
    }
    let containers = &mut spec.pod_template.spec.containers;
    for var in &claim.env {
        if let Some(name) = &var.container_name
            && !containers.iter().any(|c| &c.name == name)
        {
            return Err(refuse(
                refusal::INVALID_CONFIGURATION,
                format!(
                    "environment variable {:?} targets container {name:?}, which the template does not have",
                    var.name
                ),
            ));
        }
    }
    for container in containers.iter_mut() {
        if policy == InjectionPolicy::Allowed
            && container.env_from.as_ref().is_some_and(|e| !e.is_empty())
        {
            return Err(refuse(
                refusal::ENV_VARS_INJECTION_REJECTED,
                format!(
                    "container {:?} uses envFrom; the Allowed policy cannot rule out overriding its variables",
                    container.name
                ),
            ));
        }
        let env = container.env.get_or_insert_with(Vec::new);
        for var in &claim.env {
            if var
                .container_name
                .as_ref()
                .is_some_and(|n| n != &container.name)
            {
                continue;
            }
            let value = EnvVar {
                name: var.name.clone(),
                value: Some(var.value.clone()),
                value_from: None,
            };
            match env.iter_mut().find(|e| e.name == var.name) {
                Some(_) if policy == InjectionPolicy::Allowed => {
                    return Err(refuse(
                        refusal::ENV_VARS_INJECTION_REJECTED,
                        format!(
                            "environment variable {:?} is set by the template; overriding it needs envVarsInjectionPolicy: Overrides",
                            var.name
                        ),
                    ));
                }
                Some(existing) => *existing = value,
                None => env.push(value),
            }
        }
    }
    Ok(())
}

/// The template's volume claim templates with the claim's added (or, with `Overrides`,
/// replacing those of the same name).
fn merge_volume_claim_templates(
    template: &[PersistentVolumeClaimTemplate],
    claim: &[PersistentVolumeClaimTemplate],
    policy: InjectionPolicy,
) -> Result<Vec<PersistentVolumeClaimTemplate>, Refusal> {
    let mut merged = template.to_vec();
    if claim.is_empty() {
        return Ok(merged);
    }
    if policy == InjectionPolicy::Disallowed {
        return Err(refuse(
            refusal::VOLUME_CLAIM_TEMPLATES_ERROR,
            "volume claim templates are not allowed by the template's volumeClaimTemplatesPolicy",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for vct in claim {
        let name = &vct.metadata.name;
        if name.is_empty() {
            return Err(refuse(
                refusal::VOLUME_CLAIM_TEMPLATES_ERROR,
                "a volume claim template of the claim has no metadata.name",
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(refuse(
                refusal::VOLUME_CLAIM_TEMPLATES_ERROR,
                format!("the claim names volume claim template {name:?} twice"),
            ));
        }
        match merged.iter_mut().find(|t| &t.metadata.name == name) {
            Some(_) if policy == InjectionPolicy::Allowed => {
                return Err(refuse(
                    refusal::VOLUME_CLAIM_TEMPLATES_ERROR,
                    format!(
                        "volume claim template {name:?} is the template's; replacing it needs volumeClaimTemplatesPolicy: Overrides"
                    ),
                ));
            }
            Some(existing) => *existing = vct.clone(),
            None => merged.push(vct.clone()),
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests;
