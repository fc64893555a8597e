//! Rules a structural schema cannot express, per kind: references by name, Service naming,
//! the managed NetworkPolicy's name, a claim's metadata and environment. The blueprint rules
//! (pod template, volume claim templates) live in `pod`.
//!
//! Run only on documents whose spec passed the schema, decoded into the typed API.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::text::quote;
use super::{FieldPath, Findings, meta, pod, schema};
use crate::api::{
    MemorySharing, NetworkPolicyManagement, PodMetadata, PodTemplate, Sandbox, SandboxClaim,
    SandboxSnapshot, SandboxTemplate, SandboxWarmPool,
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

/// Decodes the typed object. Its metadata is reduced to the name the rules read, so a
/// metadata problem (already reported) does not keep the spec from being checked.
fn decode<T: DeserializeOwned>(doc: &Value, out: &mut Findings) -> Option<T> {
    let mut doc = doc.clone();
    let name = doc
        .pointer("/metadata/name")
        .filter(|n| n.is_string())
        .cloned();
    if let Some(object) = doc.as_object_mut() {
        object.insert("metadata".to_owned(), json!({ "name": name }));
    }
    whole_floats_to_integers(&mut doc);
    match serde_json::from_value(doc) {
        Ok(typed) => Some(typed),
        Err(e) => {
            out.error(&FieldPath::root(), format!("cannot decode: {e}"));
            None
        }
    }
}

/// Turns `8080.0` into `8080`, as the API server reads whole-number floats where integers
/// belong (the schema pass accepted them); serde would refuse them for an `i32`.
fn whole_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(i) = schema::as_integer(value) {
                *value = Value::from(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(whole_floats_to_integers),
        _ => {}
    }
}

fn sandbox(s: &Sandbox, out: &mut Findings) {
    let name = s.metadata.name.as_deref();
    pod::check_blueprint(
        &s.spec.pod_template,
        &s.spec.volume_claim_templates,
        name,
        out,
    );
    memory_sharing(s.spec.memory_sharing, &s.spec.pod_template, out);
    if let Some(restore) = &s.spec.restore_from {
        let path = FieldPath::of(&["spec", "restoreFrom", "snapshotName"]);
        reference(&restore.snapshot_name, &path, out);
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

fn template(t: &SandboxTemplate, out: &mut Findings) {
    pod::check_blueprint(
        &t.spec.pod_template,
        &t.spec.volume_claim_templates,
        None,
        out,
    );
    memory_sharing(t.spec.memory_sharing, &t.spec.pod_template, out);
    if t.spec.network_policy_management == Some(NetworkPolicyManagement::Unmanaged)
        && t.spec.network_policy.is_some()
    {
        out.warn(
            &FieldPath::of(&["spec", "networkPolicy"]),
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

/// `memorySharing: Merge` under gVisor merges nothing (its memory is one shared file): valid,
/// but worth saying before the sandbox's condition does.
fn memory_sharing(sharing: Option<MemorySharing>, pod: &PodTemplate, out: &mut Findings) {
    if sharing == Some(MemorySharing::Merge)
        && pod.spec.runtime_class_name.as_deref() == Some("gvisor")
    {
        out.warn(
            &FieldPath::of(&["spec", "memorySharing"]),
            "has no effect with runtimeClassName gvisor: its memory is one shared file that KSM \
             does not merge (the sandbox reports MemorySharing=False/Unsupported)"
                .to_owned(),
        );
    }
}

fn warm_pool(p: &SandboxWarmPool, out: &mut Findings) {
    let path = FieldPath::of(&["spec", "sandboxTemplateRef", "name"]);
    reference(&p.spec.sandbox_template_ref.name, &path, out);
}

fn claim(c: &SandboxClaim, out: &mut Findings) {
    let spec = FieldPath::of(&["spec"]);
    reference(
        &c.spec.warm_pool_ref.name,
        &spec.field("warmPoolRef").field("name"),
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
                format!("{} is not an environment variable name", quote(&var.name)),
            );
        }
        if let Some(container) = &var.container_name
            && let Err(e) = names::validate_dns1123_label(container)
        {
            out.error(&path.field("containerName"), e.to_string());
        }
        if !seen.insert((var.container_name.as_deref(), var.name.as_str())) {
            out.warn(
                &path,
                format!("{} is set twice; the last value wins", quote(&var.name)),
            );
        }
    }
    pod::check_claims(
        &c.spec.volume_claim_templates,
        c.metadata.name.as_deref(),
        &spec.field("volumeClaimTemplates"),
        out,
    );
}

fn snapshot(s: &SandboxSnapshot, out: &mut Findings) {
    reference(
        &s.spec.sandbox_name,
        &FieldPath::of(&["spec", "sandboxName"]),
        out,
    );
}

/// A reference by name: present and a valid object name.
fn reference(name: &str, path: &FieldPath, out: &mut Findings) {
    if name.is_empty() {
        out.error(path, "must name an object, got an empty string".to_owned());
    } else if let Err(e) = names::validate_dns1123_subdomain(name) {
        out.error(
            path,
            format!("{} cannot be an object name: {e}", quote(name)),
        );
    }
}

/// A claim's extra pod metadata: valid syntax, and nothing the controller rejects.
fn additional_pod_metadata(metadata: &PodMetadata, path: &FieldPath, out: &mut Findings) {
    meta::labels(&metadata.labels, &path.field("labels"), out);
    meta::annotations(&metadata.annotations, &path.field("annotations"), out);
    for key in metadata.labels.keys().filter(|k| meta::is_system_key(k)) {
        out.error(
            &path.field("labels").key(key),
            "the controller rejects keys under agents.x-k8s.io/ and extensions.agents.x-k8s.io/"
                .to_owned(),
        );
    }
    for key in metadata.annotations.keys() {
        if meta::is_system_key(key) || is_restricted_annotation(key) {
            out.error(
                &path.field("annotations").key(key),
                "the controller rejects annotations under agents.x-k8s.io/, \
                 extensions.agents.x-k8s.io/, kubernetes.io/ and k8s.io/ (except \
                 cluster-autoscaler.kubernetes.io/safe-to-evict)"
                    .to_owned(),
            );
        }
    }
}

/// Upstream rejects claim annotations in the Kubernetes domains, with a short allow-list.
fn is_restricted_annotation(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    let restricted = ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")));
    restricted && !ALLOWED_RESTRICTED_ANNOTATIONS.contains(&key)
}
