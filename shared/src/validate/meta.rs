//! Checks of `metadata`: its structure against the `ObjectMeta` schema, the name rules of each
//! kind, and label and annotation syntax (shared with the embedded metadata of pod and volume
//! claim templates).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::text::quote;
use super::{FieldPath, Findings, schema};
use crate::api::keys;
use crate::names;

/// Length of the random suffix the API server appends to `generateName`.
const GENERATED_SUFFIX_LEN: usize = 5;

/// The API server keeps at most this much of a `generateName` prefix.
const MAX_GENERATE_NAME_PREFIX: usize = names::DNS1123_LABEL_MAX_LEN - GENERATED_SUFFIX_LEN;

/// The API server's limit on the total size of an object's annotations.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The structural schema of `ObjectMeta`, generated the way kube generates CRD schemas.
fn object_meta_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let generator = schemars::generate::SchemaSettings::openapi3()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .with_transform(schemars::transform::AddNullable::default())
            .with_transform(kube::core::schema::StructuralSchemaRewriter)
            .into_generator();
        // Plain data: serializing a schema to a JSON value cannot fail.
        serde_json::to_value(generator.into_root_schema_for::<ObjectMeta>()).unwrap_or_default()
    })
}

/// Checks `metadata` of an object of `kind`.
pub(super) fn check(meta: Option<&Value>, kind: &str, out: &mut Findings) {
    let path = FieldPath::of(&["metadata"]);
    let Some(meta) = meta.filter(|m| !m.is_null()) else {
        out.error(&path, "required field is missing".to_owned());
        return;
    };
    schema::check(meta, object_meta_schema(), &path, out);
    let Some(object) = meta.as_object() else {
        return;
    };
    let text = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    match (text("name"), text("generateName")) {
        (None, None) => out.error(
            &path.field("name"),
            "required field is missing (or set generateName)".to_owned(),
        ),
        (name, prefix) => {
            if let Some(name) = name {
                object_name(name, kind, &path.field("name"), out);
            }
            if let Some(prefix) = prefix {
                object_name(
                    &generated_name(prefix),
                    kind,
                    &path.field("generateName"),
                    out,
                );
            }
        }
    }
    if let Some(ns) = text("namespace")
        && let Err(e) = names::validate_dns1123_label(ns)
    {
        out.error(&path.field("namespace"), e.to_string());
    }
    let strings = |field: &str| -> BTreeMap<&str, &str> {
        object
            .get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
            .collect()
    };
    labels(&strings("labels"), &path.field("labels"), out);
    annotations(&strings("annotations"), &path.field("annotations"), out);
}

/// A name the API server may generate from `prefix`: the prefix cut to what it keeps, then
/// five random characters (stood in for by `x`).
fn generated_name(prefix: &str) -> String {
    let kept: String = prefix.chars().take(MAX_GENERATE_NAME_PREFIX).collect();
    format!("{kept}{}", "x".repeat(GENERATED_SUFFIX_LEN))
}

/// Checks an object's name (or a name `generateName` will produce): errors for what the API
/// server rejects, warnings for what Rouse cannot route to.
fn object_name(name: &str, kind: &str, path: &FieldPath, out: &mut Findings) {
    if let Err(e) = names::validate_dns1123_subdomain(name) {
        out.error(path, e.to_string());
        return;
    }
    // The name of the sandbox that will carry this name, as the proxy must route to it.
    let (what, name) = match kind {
        "Sandbox" => ("the sandbox", name.to_owned()),
        "SandboxClaim" => (
            "the claim's cold-start sandbox (named like the claim)",
            name.to_owned(),
        ),
        "SandboxWarmPool" => (
            "the pool's members (generateName <pool>-)",
            generated_name(&format!("{name}-")),
        ),
        _ => return,
    };
    let name = name.as_str();
    if let Err(e) = names::validate_dns1123_label(name) {
        out.warn(
            path,
            format!(
                "{what} cannot be reached by hostname ({{name}}.{{namespace}}.{{domain}} needs \
                 a single DNS label): {e}"
            ),
        );
    } else if let Some((port, rest)) = names::port_prefix(name) {
        out.warn(
            path,
            format!(
                "hostnames read the leading \"{port}-\" as a port: {name}.<namespace>.<domain> \
                 reaches port {port} of sandbox {rest}; reach this one as \
                 80-{name}.<namespace>.<domain> (any port prefix)"
            ),
        );
    }
}

/// Checks the syntax of a label map.
pub(super) fn labels<K: AsRef<str>, V: AsRef<str>>(
    map: &BTreeMap<K, V>,
    path: &FieldPath,
    out: &mut Findings,
) {
    for (key, value) in map {
        let (key, value) = (key.as_ref(), value.as_ref());
        if let Err(e) = names::validate_label_key(key) {
            out.error(&path.key(key), format!("invalid label key: {e}"));
        }
        if let Err(e) = names::validate_label_value(value) {
            out.error(
                &path.key(key),
                format!("invalid label value {}: {e}", quote(value)),
            );
        }
    }
}

/// Checks the syntax and total size of an annotation map.
pub(super) fn annotations<K: AsRef<str>, V: AsRef<str>>(
    map: &BTreeMap<K, V>,
    path: &FieldPath,
    out: &mut Findings,
) {
    let mut total = 0;
    for (key, value) in map {
        let key = key.as_ref();
        total += key.len() + value.as_ref().len();
        if let Err(e) = names::validate_annotation_key(key) {
            out.error(&path.key(key), format!("invalid annotation key: {e}"));
        }
    }
    if total > MAX_ANNOTATIONS_BYTES {
        out.error(
            path,
            format!("annotations total {total} bytes; the limit is {MAX_ANNOTATIONS_BYTES}"),
        );
    }
}

/// True for keys under the prefixes reserved for the controller.
pub(super) fn is_system_key(key: &str) -> bool {
    keys::SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p))
}
