//! Rules a structural schema cannot express: name syntax of references, reserved label
//! prefixes, volume and port consistency of pod templates, quantity syntax.
//!
//! Run only on documents that passed the schema, decoded into the typed API.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::meta::NameRule;
use super::{FieldPath, Findings};
use crate::api::{
    NetworkPolicyManagement, PersistentVolumeClaimTemplate, PodMetadata, PodTemplate, Sandbox,
    SandboxClaim, SandboxSnapshot, SandboxTemplate, SandboxWarmPool, keys,
};
use crate::names;

/// Annotation keys a claim may set even though their domain is restricted (upstream rule).
const ALLOWED_RESTRICTED_ANNOTATIONS: [&str; 1] =
    ["cluster-autoscaler.kubernetes.io/safe-to-evict"];

/// Runs the rules of `kind` on `doc`.
pub(super) fn check(doc: &Value, kind: &str, out: &mut Findings) {
    match kind {
        "Sandbox" => decode(doc, out).map(|s| sandbox(&s, out)),
        "SandboxTemplate" => decode(doc, out).map(|t| template(&t, out)),
        "SandboxWarmPool" => decode(doc, out).map(|p| warm_pool(&p, out)),
        "SandboxClaim" => decode(doc, out).map(|c| claim(&c, out)),
        "SandboxSnapshot" => decode(doc, out).map(|s| snapshot(&s, out)),
        _ => None,
    };
}

fn decode<T: DeserializeOwned>(doc: &Value, out: &mut Findings) -> Option<T> {
    match serde_json::from_value(doc.clone()) {
        Ok(typed) => Some(typed),
        Err(e) => {
            // Metadata errors already reported can make decoding fail; say nothing more then.
            if out.error_count() == 0 {
                out.error(&FieldPath::root(), format!("cannot decode: {e}"));
            }
            None
        }
    }
}

fn sandbox(s: &Sandbox, out: &mut Findings) {
    let spec = FieldPath::of(&["spec"]);
    let name = s.metadata.name.as_deref();
    blueprint(
        &s.spec.pod_template,
        &s.spec.volume_claim_templates,
        name,
        out,
    );
    if let Some(restore) = &s.spec.restore_from {
        let path = spec.field("restoreFrom").field("snapshotName");
        reference(
            &restore.snapshot_name,
            names::validate_dns1123_subdomain,
            &path,
            out,
        );
    }
    if s.spec.service == Some(true)
        && let Some(name) = name
        && let Err(e) = names::validate_dns1035_label(name)
    {
        out.error(
            &FieldPath::of(&["metadata", "name"]),
            format!("with spec.service: true the name is also a Service name: {e}"),
        );
    }
}

/// The pod template and volume claim templates a Sandbox or SandboxTemplate spec holds.
fn blueprint(
    pod: &PodTemplate,
    claims: &[PersistentVolumeClaimTemplate],
    sandbox: Option<&str>,
    out: &mut Findings,
) {
    let spec = FieldPath::of(&["spec"]);
    pod_template(pod, claims, &spec.field("podTemplate"), out);
    volume_claim_templates(claims, sandbox, &spec.field("volumeClaimTemplates"), out);
}

fn template(t: &SandboxTemplate, out: &mut Findings) {
    let spec = FieldPath::of(&["spec"]);
    blueprint(
        &t.spec.pod_template,
        &t.spec.volume_claim_templates,
        None,
        out,
    );
    if t.spec.network_policy_management == Some(NetworkPolicyManagement::Unmanaged)
        && t.spec.network_policy.is_some()
    {
        out.warn(
            &spec.field("networkPolicy"),
            "ignored: networkPolicyManagement is Unmanaged, so no NetworkPolicy is created"
                .to_owned(),
        );
    }
    if let Some(name) = &t.metadata.name {
        let policy = format!("{name}-network-policy");
        if let Err(e) = names::validate_dns1123_subdomain(&policy) {
            out.error(
                &FieldPath::of(&["metadata", "name"]),
                format!("the managed NetworkPolicy would be named \"{policy}\": {e}"),
            );
        }
    }
}

fn warm_pool(p: &SandboxWarmPool, out: &mut Findings) {
    let path = FieldPath::of(&["spec", "sandboxTemplateRef", "name"]);
    reference(
        &p.spec.sandbox_template_ref.name,
        names::validate_dns1123_subdomain,
        &path,
        out,
    );
}

fn claim(c: &SandboxClaim, out: &mut Findings) {
    let spec = FieldPath::of(&["spec"]);
    let pool = spec.field("warmPoolRef").field("name");
    reference(
        &c.spec.warm_pool_ref.name,
        names::validate_dns1123_label,
        &pool,
        out,
    );
    additional_pod_metadata(
        &c.spec.additional_pod_metadata,
        &spec.field("additionalPodMetadata"),
        out,
    );
    let mut seen = BTreeSet::new();
    for (i, var) in c.spec.env.iter().enumerate() {
        let path = spec.field("env").index(i);
        if var.name.is_empty() || var.name.contains('=') {
            out.error(
                &path.field("name"),
                format!("\"{}\" is not an environment variable name", var.name),
            );
        }
        if let Some(container) = &var.container_name
            && let Err(e) = names::validate_dns1123_label(container)
        {
            out.error(&path.field("containerName"), e.to_string());
        }
        if !seen.insert((var.container_name.as_deref(), var.name.as_str())) {
            out.error(&path, format!("duplicate variable {}", var.name));
        }
    }
    volume_claim_templates(
        &c.spec.volume_claim_templates,
        c.metadata.name.as_deref(),
        &spec.field("volumeClaimTemplates"),
        out,
    );
}

fn snapshot(s: &SandboxSnapshot, out: &mut Findings) {
    let path = FieldPath::of(&["spec", "sandboxName"]);
    reference(
        &s.spec.sandbox_name,
        names::validate_dns1123_label,
        &path,
        out,
    );
}

/// A reference by name: present and of the syntax the referenced kind requires.
fn reference(name: &str, rule: NameRule, path: &FieldPath, out: &mut Findings) {
    if name.is_empty() {
        out.error(path, "must name an object, got an empty string".to_owned());
    } else if let Err(e) = rule(name) {
        out.error(path, format!("\"{name}\" cannot be an object name: {e}"));
    }
}

fn pod_template(
    template: &PodTemplate,
    claims: &[PersistentVolumeClaimTemplate],
    path: &FieldPath,
    out: &mut Findings,
) {
    let meta = path.field("metadata");
    for (field, map) in [
        ("labels", &template.metadata.labels),
        ("annotations", &template.metadata.annotations),
    ] {
        for key in map.keys().filter(|k| is_system_key(k)) {
            out.warn(
                &meta.field(field).key(key),
                "ignored: keys under agents.x-k8s.io/ and extensions.agents.x-k8s.io/ are \
                 reserved for the controller and stripped from pod templates"
                    .to_owned(),
            );
        }
    }
    pod_spec(&template.spec, claims, &path.field("spec"), out);
}

fn pod_spec(
    spec: &PodSpec,
    claims: &[PersistentVolumeClaimTemplate],
    path: &FieldPath,
    out: &mut Findings,
) {
    if spec.containers.is_empty() {
        out.error(
            &path.field("containers"),
            "must have at least one container".to_owned(),
        );
    }
    let volumes: BTreeSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .chain(claims.iter().map(|c| c.metadata.name.as_str()))
        .collect();
    let mut names_seen = BTreeSet::new();
    let groups = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (field, containers) in groups {
        for (i, c) in containers.iter().enumerate() {
            let cpath = path.field(field).index(i);
            if let Err(e) = names::validate_dns1123_label(&c.name) {
                out.error(&cpath.field("name"), e.to_string());
            } else if !names_seen.insert(c.name.as_str()) {
                out.error(
                    &cpath.field("name"),
                    format!("duplicate container name {}", c.name),
                );
            }
            container(c, &volumes, &cpath, out);
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let vpath = path.field("volumes").index(i);
        if let Err(e) = names::validate_dns1123_label(&v.name) {
            out.error(&vpath.field("name"), e.to_string());
        }
        if let Some(limit) = v.empty_dir.as_ref().and_then(|d| d.size_limit.as_ref()) {
            quantity(&limit.0, &vpath.field("emptyDir").field("sizeLimit"), out);
        }
    }
}

fn container(c: &Container, volumes: &BTreeSet<&str>, path: &FieldPath, out: &mut Findings) {
    let mut port_names = BTreeSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let ppath = path.field("ports").index(i);
        if !(1..=65535).contains(&port.container_port) {
            out.error(
                &ppath.field("containerPort"),
                format!("must be between 1 and 65535, got {}", port.container_port),
            );
        }
        if let Some(host_port) = port.host_port.filter(|p| !(0..=65535).contains(p)) {
            out.error(
                &ppath.field("hostPort"),
                format!("must be between 0 and 65535, got {host_port}"),
            );
        }
        if let Some(name) = &port.name {
            if let Some(problem) = port_name_problem(name) {
                out.error(
                    &ppath.field("name"),
                    format!("invalid port name \"{name}\": {problem}"),
                );
            } else if !port_names.insert(name.as_str()) {
                out.error(&ppath.field("name"), format!("duplicate port name {name}"));
            }
        }
    }
    for (i, mount) in c.volume_mounts.iter().flatten().enumerate() {
        if !volumes.contains(mount.name.as_str()) {
            out.error(
                &path.field("volumeMounts").index(i).field("name"),
                format!(
                    "no volume named \"{}\" in the pod's volumes or volumeClaimTemplates",
                    mount.name
                ),
            );
        }
    }
    if let Some(resources) = &c.resources {
        resource_requirements(resources, &path.field("resources"), out);
    }
}

/// What is wrong with a port name under the IANA service-name rules Kubernetes applies.
fn port_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 15 {
        Some("must be 1 to 15 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("must consist of lower case letters, digits and '-'")
    } else if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        Some("must contain at least one letter")
    } else if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        Some("must not start or end with '-' or contain '--'")
    } else {
        None
    }
}

fn resource_requirements(r: &ResourceRequirements, path: &FieldPath, out: &mut Findings) {
    resource_maps(&r.limits, &r.requests, path, out);
}

type QuantityMap = Option<std::collections::BTreeMap<String, Quantity>>;

fn resource_maps(
    limits: &QuantityMap,
    requests: &QuantityMap,
    path: &FieldPath,
    out: &mut Findings,
) {
    for (field, map) in [("limits", limits), ("requests", requests)] {
        for (name, q) in map.iter().flatten() {
            quantity(&q.0, &path.field(field).key(name), out);
        }
    }
}

fn volume_claim_templates(
    claims: &[PersistentVolumeClaimTemplate],
    sandbox: Option<&str>,
    path: &FieldPath,
    out: &mut Findings,
) {
    let mut seen = BTreeSet::new();
    for (i, claim) in claims.iter().enumerate() {
        let cpath = path.index(i);
        let name = claim.metadata.name.as_str();
        let npath = cpath.field("metadata").field("name");
        if name.is_empty() {
            out.error(
                &npath,
                "required field is missing (the pod volume name)".to_owned(),
            );
        } else if let Err(e) = names::validate_dns1123_label(name) {
            out.error(&npath, e.to_string());
        } else if !seen.insert(name) {
            out.error(&npath, format!("duplicate volume claim template {name}"));
        } else if let Some(sandbox) = sandbox {
            let pvc = format!("{name}-{sandbox}");
            if let Err(e) = names::validate_dns1123_subdomain(&pvc) {
                out.error(&npath, format!("the claim would be named \"{pvc}\": {e}"));
            }
        }
        let rpath = cpath.field("spec").field("resources");
        let requests = claim
            .spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref());
        if !requests.is_some_and(|r| r.contains_key("storage")) {
            out.error(
                &rpath.field("requests").key("storage"),
                "required field is missing (the size of the volume, e.g. 1Gi)".to_owned(),
            );
        }
        if let Some(r) = &claim.spec.resources {
            resource_maps(&r.limits, &r.requests, &rpath, out);
        }
    }
}

fn additional_pod_metadata(meta: &PodMetadata, path: &FieldPath, out: &mut Findings) {
    for (key, value) in &meta.labels {
        let kpath = path.field("labels").key(key);
        if let Err(e) = names::validate_label_key(key) {
            out.error(&kpath, format!("invalid label key: {e}"));
        } else if is_system_key(key) {
            out.error(
                &kpath,
                "keys under agents.x-k8s.io/ are reserved".to_owned(),
            );
        }
        if let Err(e) = names::validate_label_value(value) {
            out.error(&kpath, format!("invalid label value \"{value}\": {e}"));
        }
    }
    for key in meta.annotations.keys() {
        let kpath = path.field("annotations").key(key);
        if let Err(e) = names::validate_annotation_key(key) {
            out.error(&kpath, format!("invalid annotation key: {e}"));
        } else if is_system_key(key) || is_restricted_annotation(key) {
            out.error(
                &kpath,
                "annotations under agents.x-k8s.io/, kubernetes.io/ and k8s.io/ are reserved"
                    .to_owned(),
            );
        }
    }
}

fn is_system_key(key: &str) -> bool {
    keys::SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Upstream rejects claim annotations in the Kubernetes domains, with a short allow-list.
fn is_restricted_annotation(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let restricted = ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")));
    restricted && !ALLOWED_RESTRICTED_ANNOTATIONS.contains(&key)
}

/// Checks Kubernetes quantity syntax: `<sign><number><suffix>`, e.g. `500m`, `1.5Gi`, `1e3`.
fn quantity(q: &str, path: &FieldPath, out: &mut Findings) {
    if !is_quantity(q) {
        let hint = match q.to_ascii_lowercase().trim_end_matches('b') {
            s if s.ends_with("gi") || s.ends_with("mi") || s.ends_with('g') || s.ends_with('m') => {
                " (binary units are Ki, Mi, Gi, Ti; decimal k, M, G, T; there is no B)"
            }
            _ => "",
        };
        out.error(
            path,
            format!("\"{q}\" is not a quantity such as 500m, 128Mi or 10Gi{hint}"),
        );
    }
}

fn is_quantity(q: &str) -> bool {
    let unsigned = q.strip_prefix(['+', '-']).unwrap_or(q);
    let digits_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(digits_end);
    let valid_number = number.chars().filter(|c| *c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit());
    if !valid_number {
        return false;
    }
    const SUFFIXES: [&str; 16] = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    // Decimal exponent: e|E followed by a signed integer.
    let Some(exp) = suffix.strip_prefix(['e', 'E']) else {
        return false;
    };
    let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
pub(super) fn quantity_ok(q: &str) -> bool {
    is_quantity(q)
}
