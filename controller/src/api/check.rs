//! Checks of request bodies: identity against the URL (kind, namespace, name) and validation
//! of whole objects with the manifest validator, so the API and `rouse validate` agree.

use rouse_shared::store::StoreObject;
use serde_json::{Map, Value};

use super::kinds::Kind;
use super::status::{Failure, Reply, Subject};

/// Fills in `apiVersion`, `kind` and `metadata.namespace` from the URL and rejects a body that
/// names another kind, namespace or (for a replace) name.
pub(super) fn prepare(
    kind: Kind,
    value: &mut Value,
    ns: &str,
    url_name: Option<&str>,
) -> Reply<()> {
    let name = object_name(value);
    let subject = Subject { kind, name: &name };
    let Some(object) = value.as_object_mut() else {
        return Err(Failure::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let mut causes = Vec::new();
    for (field, want) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind().to_owned()),
    ] {
        match object.get(field) {
            None | Some(Value::Null) => {
                object.insert(field.to_owned(), Value::String(want));
            }
            Some(Value::String(got)) if *got == want => {}
            Some(got) => causes.push((
                field.to_owned(),
                format!("must be {want:?} to match the URL, got {got}"),
            )),
        }
    }
    if !causes.is_empty() {
        return Err(Failure::invalid(subject, &causes));
    }
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(Failure::invalid(
            subject,
            &[("metadata".to_owned(), "must be an object".to_owned())],
        ));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(given) if given != ns => {
            return Err(Failure::bad_request(format!(
                "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
            )));
        }
        _ => {
            meta.insert("namespace".to_owned(), Value::String(ns.to_owned()));
        }
    }
    if let Some(url_name) = url_name {
        match meta.get("name").and_then(Value::as_str) {
            Some(given) if given != url_name => {
                return Err(Failure::bad_request(format!(
                    "the name of the object ({given}) does not match the name on the URL ({url_name})"
                )));
            }
            _ => {
                meta.insert("name".to_owned(), Value::String(url_name.to_owned()));
            }
        }
    }
    Ok(())
}

/// A merge patch may not move an object to another kind, namespace or name.
pub(super) fn check_patch_identity(kind: Kind, patch: &Value, ns: &str, name: &str) -> Reply<()> {
    let subject = Subject { kind, name };
    let mut causes = Vec::new();
    let api_version = kind.api_version();
    for (pointer, field, want) in [
        ("/apiVersion", "apiVersion", api_version.as_str()),
        ("/kind", "kind", kind.kind()),
        ("/metadata/namespace", "metadata.namespace", ns),
        ("/metadata/name", "metadata.name", name),
    ] {
        if let Some(got) = patch.pointer(pointer)
            && got.as_str() != Some(want)
        {
            causes.push((field.to_owned(), format!("cannot be changed to {got}")));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Failure::invalid(subject, &causes))
    }
}

/// Checks a whole object with the manifest validator (what `rouse validate` runs), then reads
/// it as `K`; any error is a 422 naming the fields.
pub(super) fn validated<K: StoreObject>(kind: Kind, mut value: Value) -> Reply<K> {
    rouse_shared::validate::clamp_far_times(kind.kind(), &mut value);
    let name = object_name(&value);
    let subject = Subject { kind, name: &name };
    // managedFields hold field paths (`f:spec`), not fields: the server writes them and the
    // schema check has nothing to say about them.
    let report = match value.pointer("/metadata/managedFields") {
        Some(_) => {
            let mut checked = value.clone();
            if let Some(meta) = checked.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            rouse_shared::validate::validate(&checked)
        }
        None => rouse_shared::validate::validate(&value),
    };
    let causes: Vec<(String, String)> = report
        .findings
        .iter()
        .filter(|f| f.severity == rouse_shared::validate::Severity::Error)
        .map(|f| (f.path.to_string(), f.message.clone()))
        .collect();
    if !causes.is_empty() {
        return Err(Failure::invalid(subject, &causes));
    }
    serde_json::from_value(value)
        .map_err(|e| Failure::invalid(subject, &[(String::new(), e.to_string())]))
}

/// An object as a JSON map; 500 if it does not serialize to one (a typed object always does).
pub(super) fn to_object<K: serde::Serialize>(object: &K) -> Reply<Map<String, Value>> {
    match serde_json::to_value(object) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Failure::internal(
            "object did not serialize to a JSON object",
        )),
        Err(e) => Err(Failure::internal(format!("cannot serialize object: {e}"))),
    }
}

pub(super) fn resource_version(object: &Map<String, Value>) -> String {
    object
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `metadata.name`, or `generateName*`, for messages.
pub(super) fn object_name(value: &Value) -> String {
    let text = |p: &str| value.pointer(p).and_then(Value::as_str);
    text("/metadata/name")
        .map(str::to_owned)
        .or_else(|| text("/metadata/generateName").map(|g| format!("{g}*")))
        .unwrap_or_default()
}
