//! Checks of `metadata`: the fields an object may carry there, name and namespace syntax,
//! and label and annotation syntax.

use serde_json::Value;

use super::{FieldPath, Findings, schema};
use crate::names;

/// Fields of `ObjectMeta`; anything else under `metadata` would be dropped by the API server.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Length of the random suffix the API server appends to `generateName`.
const GENERATED_SUFFIX_LEN: usize = 5;

/// The API server's limit on the total size of an object's annotations.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// A name syntax check.
pub(super) type NameRule = fn(&str) -> Result<(), names::NameError>;

/// Which name rule a kind's objects must follow, and why.
fn name_rule(kind: &str) -> (NameRule, &'static str) {
    match kind {
        "Sandbox" => (
            names::validate_dns1123_label,
            "a sandbox name is a hostname label",
        ),
        "SandboxClaim" => (
            names::validate_dns1123_label,
            "a claim's cold-start sandbox is named like the claim",
        ),
        "SandboxWarmPool" => (
            names::validate_dns1123_label,
            "pool members are named after the pool",
        ),
        _ => (
            names::validate_dns1123_subdomain,
            "object names are DNS subdomains",
        ),
    }
}

/// Checks `metadata` of an object of `kind`.
pub(super) fn check(meta: Option<&Value>, kind: &str, out: &mut Findings) {
    let path = FieldPath::of(&["metadata"]);
    let Some(meta) = meta.filter(|m| !m.is_null()) else {
        out.error(&path, "required field is missing".to_owned());
        return;
    };
    let Some(object) = meta.as_object() else {
        out.error(
            &path,
            format!("must be a mapping, got {}", schema::describe(meta)),
        );
        return;
    };
    for key in object.keys() {
        if !OBJECT_META_FIELDS.contains(&key.as_str()) {
            out.error(
                &path.field(key),
                schema::unknown_field(key, &OBJECT_META_FIELDS),
            );
        }
    }
    let (rule, why) = name_rule(kind);
    let name = string_field(object.get("name"), &path.field("name"), out);
    let generate_name = string_field(object.get("generateName"), &path.field("generateName"), out);
    match (name, generate_name) {
        (Some(name), _) => {
            if let Err(e) = rule(name) {
                out.error(&path.field("name"), format!("{e} ({why})"));
            }
        }
        (None, Some(prefix)) => {
            // The server appends five random characters; check what it will produce.
            let sample = format!("{prefix}{}", "x".repeat(GENERATED_SUFFIX_LEN));
            let truncated: String = if sample.len() > names::DNS1123_LABEL_MAX_LEN {
                let keep = names::DNS1123_LABEL_MAX_LEN - GENERATED_SUFFIX_LEN;
                let head: String = prefix.chars().take(keep).collect();
                format!("{head}{}", "x".repeat(GENERATED_SUFFIX_LEN))
            } else {
                sample
            };
            if let Err(e) = rule(&truncated) {
                out.error(
                    &path.field("generateName"),
                    format!("generated names would be invalid: {e} ({why})"),
                );
            }
        }
        (None, None) => out.error(
            &path.field("name"),
            "required field is missing (or set generateName)".to_owned(),
        ),
    }
    if let Some(ns) = string_field(object.get("namespace"), &path.field("namespace"), out)
        && let Err(e) = names::validate_dns1123_label(ns)
    {
        out.error(&path.field("namespace"), e.to_string());
    }
    if let Some(labels) = object.get("labels") {
        check_labels(labels, &path.field("labels"), out);
    }
    if let Some(annotations) = object.get("annotations") {
        check_annotations(annotations, &path.field("annotations"), out);
    }
}

fn string_field<'a>(
    value: Option<&'a Value>,
    path: &FieldPath,
    out: &mut Findings,
) -> Option<&'a str> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(v) => {
            out.error(
                path,
                format!("must be a string, got {}", schema::describe(v)),
            );
            None
        }
    }
}

/// Checks a label map: string keys and values, each of valid syntax.
pub(super) fn check_labels(labels: &Value, path: &FieldPath, out: &mut Findings) {
    for_each_string_entry(labels, path, out, |key, value, out| {
        if let Err(e) = names::validate_label_key(key) {
            out.error(&path.key(key), format!("invalid label key: {e}"));
        }
        if let Err(e) = names::validate_label_value(value) {
            out.error(
                &path.key(key),
                format!("invalid label value \"{value}\": {e}"),
            );
        }
    });
}

/// Checks an annotation map: string keys of valid syntax, string values, total size bounded.
pub(super) fn check_annotations(annotations: &Value, path: &FieldPath, out: &mut Findings) {
    let mut total = 0;
    for_each_string_entry(annotations, path, out, |key, value, out| {
        total += key.len() + value.len();
        if let Err(e) = names::validate_annotation_key(key) {
            out.error(&path.key(key), format!("invalid annotation key: {e}"));
        }
    });
    if total > MAX_ANNOTATIONS_BYTES {
        out.error(
            path,
            format!("annotations total {total} bytes; the limit is {MAX_ANNOTATIONS_BYTES}"),
        );
    }
}

fn for_each_string_entry(
    map: &Value,
    path: &FieldPath,
    out: &mut Findings,
    mut f: impl FnMut(&str, &str, &mut Findings),
) {
    if map.is_null() {
        return;
    }
    let Some(map) = map.as_object() else {
        out.error(
            path,
            format!("must be a mapping, got {}", schema::describe(map)),
        );
        return;
    };
    for (key, value) in map {
        match value.as_str() {
            Some(v) => f(key, v, out),
            None => {
                let hint = if value.is_number() || value.is_boolean() {
                    "; quote the value to make it a string".to_owned()
                } else {
                    String::new()
                };
                out.error(
                    &path.key(key),
                    format!("must be a string, got {}{hint}", schema::describe(value)),
                );
            }
        }
    }
}
