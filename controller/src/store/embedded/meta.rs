//! Object metadata rules of the Kubernetes API server, on untyped JSON: what `create` fills in,
//! how a merge patch applies, when `generation` moves, and the random parts (uid,
//! generateName suffix).
//!
//! These are pure functions of the stored object, the request and `now`, so the writer can
//! apply them inside one transaction and the tests can call them without a database.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rouse_shared::names::{validate_dns1123_label, validate_dns1123_subdomain};
use serde_json::{Map, Value};

/// Letters of a generated name suffix: the API server's alphabet (no vowels, no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of a generated name suffix.
pub(crate) const SUFFIX_LEN: usize = 5;
/// Longest `generateName` prefix kept, so the result is a valid label-length name.
const MAX_PREFIX_LEN: usize = 63 - SUFFIX_LEN;

/// Why a request's object or patch was rejected (becomes `StoreError::Invalid`).
pub(crate) type Rejection = String;

/// `metadata` of an object, created empty when missing or not a map.
pub(crate) fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let root = object.as_object_mut().expect("made an object just above");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("made an object just above")
}

/// A string field of `metadata`.
pub(crate) fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The object's labels (non-string values are skipped; the typed check rejects them anyway).
pub(crate) fn labels(object: &Value) -> std::collections::BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The object's finalizers.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The uids named by the object's `ownerReferences`.
pub(crate) fn owner_uids(object: &Value) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the owner reference to `uid`; returns how many references remain.
pub(crate) fn remove_owner(object: &mut Value, uid: &str) -> usize {
    let meta = metadata_mut(object);
    let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") else {
        return 0;
    };
    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
    let left = refs.len();
    if left == 0 {
        meta.remove("ownerReferences");
    }
    left
}

/// `now` as the API server writes timestamps (whole seconds, UTC).
pub(crate) fn timestamp(now: Timestamp) -> Value {
    serde_json::to_value(Time(now)).unwrap_or(Value::Null)
}

/// A random uid in the RFC 4122 version 4 text form.
pub(crate) fn new_uid() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// `prefix` (cut to the API server's limit) plus a random 5-character suffix.
pub(crate) fn generated_name(prefix: &str) -> Result<String, getrandom::Error> {
    let mut b = [0u8; SUFFIX_LEN];
    getrandom::fill(&mut b)?;
    let cut = prefix
        .char_indices()
        .nth(MAX_PREFIX_LEN)
        .map_or(prefix, |(i, _)| &prefix[..i]);
    let suffix: String = b
        .iter()
        .map(|x| char::from(SUFFIX_ALPHABET[usize::from(*x) % SUFFIX_ALPHABET.len()]))
        .collect();
    Ok(format!("{cut}{suffix}"))
}

/// Checks the namespace and the chosen name of a new object.
pub(crate) fn validate_key(namespace: &str, name: &str) -> Result<(), Rejection> {
    validate_dns1123_label(namespace).map_err(|e| format!("metadata.namespace: {e}"))?;
    validate_dns1123_subdomain(name).map_err(|e| format!("metadata.name: {e}"))
}

/// What the caller asked for a new object's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameRequest {
    /// `metadata.name`.
    Fixed(String),
    /// `metadata.generateName`: the store appends a suffix.
    Generate(String),
}

/// The name request of a new object: `name`, else `generateName`, else rejected.
pub(crate) fn name_request(object: &Value) -> Result<NameRequest, Rejection> {
    match (meta_str(object, "name"), meta_str(object, "generateName")) {
        (Some(name), _) if !name.is_empty() => Ok(NameRequest::Fixed(name.to_owned())),
        (_, Some(prefix)) if !prefix.is_empty() => Ok(NameRequest::Generate(prefix.to_owned())),
        _ => Err("metadata.name: name or generateName is required".to_owned()),
    }
}

/// Fills in what the server owns on create: namespace, name, uid, creation time, generation
/// 1, no deletion marks; drops `status` (set only through the status subresource).
pub(crate) fn prepare_create(
    object: &mut Value,
    namespace: &str,
    name: &str,
    uid: String,
    now: Timestamp,
) -> Result<(), Rejection> {
    if meta_str(object, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
        return Err("metadata.resourceVersion: must not be set on create".to_owned());
    }
    if let Some(root) = object.as_object_mut() {
        root.remove("status");
    }
    let meta = metadata_mut(object);
    meta.insert("namespace".into(), Value::String(namespace.to_owned()));
    meta.insert("name".into(), Value::String(name.to_owned()));
    meta.insert("uid".into(), Value::String(uid));
    meta.insert("creationTimestamp".into(), timestamp(now));
    meta.insert("generation".into(), Value::from(1u64));
    // managedFields are the API's to write (server-side apply), so they pass through.
    for server_owned in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        meta.remove(server_owned);
    }
    Ok(())
}

/// Applies a JSON merge patch (RFC 7386): maps merge, `null` removes, anything else replaces.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Which part of an object a patch may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Metadata and spec (everything but `status`).
    Main,
    /// `status` only.
    Status,
}

/// The object after `patch`, with the server-owned metadata of `current` kept; rejects a
/// patch that renames the object, moves it or changes its uid, or adds finalizers to an
/// object being deleted.
pub(crate) fn apply_patch(
    current: &Value,
    patch: &Map<String, Value>,
    part: Part,
) -> Result<Value, Rejection> {
    let mut next = current.clone();
    match part {
        Part::Main => {
            let mut patch = patch.clone();
            patch.remove("status");
            merge(&mut next, &Value::Object(patch));
            if let Some(root) = next.as_object_mut() {
                match current.get("status") {
                    Some(status) => root.insert("status".into(), status.clone()),
                    None => root.remove("status"),
                };
            }
        }
        Part::Status => {
            if let Some(status) = patch.get("status") {
                let root = next.as_object_mut().ok_or("stored object is not a map")?;
                let slot = root.entry("status").or_insert(Value::Null);
                merge(slot, status);
                if slot.is_null() {
                    root.remove("status");
                }
            }
        }
    }
    for field in ["name", "namespace", "uid"] {
        if meta_str(&next, field) != meta_str(current, field) {
            return Err(format!(
                "metadata.{field}: may not be changed (is {:?})",
                meta_str(current, field).unwrap_or_default()
            ));
        }
    }
    let meta = metadata_mut(&mut next);
    let old_meta = current.get("metadata").and_then(Value::as_object);
    // Server-owned fields are not the client's to change; keep the stored ones.
    for owned in [
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    ] {
        match old_meta.and_then(|m| m.get(owned)) {
            Some(v) => meta.insert(owned.into(), v.clone()),
            None => meta.remove(owned),
        };
    }
    if meta_str(current, "deletionTimestamp").is_some() {
        let before = finalizers(current);
        if let Some(added) = finalizers(&next).iter().find(|f| !before.contains(f)) {
            return Err(format!(
                "metadata.finalizers: no new finalizers can be added while the object is being deleted (found {added:?})"
            ));
        }
    }
    Ok(next)
}

/// Whether anything but metadata and status differs (the API server's generation rule).
pub(crate) fn spec_changed(old: &Value, new: &Value) -> bool {
    let rest = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    rest(old) != rest(new)
}

/// `metadata.generation` of an object (0 when missing).
pub(crate) fn generation(object: &Value) -> u64 {
    object
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Sets `metadata.generation`.
pub(crate) fn set_generation(object: &mut Value, generation: u64) {
    metadata_mut(object).insert("generation".into(), Value::from(generation));
}

/// Sets `metadata.resourceVersion`.
pub(crate) fn set_resource_version(object: &mut Value, rv: u64) {
    metadata_mut(object).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

/// Marks an object for deletion (finalizers hold it): timestamp, zero grace, generation + 1.
pub(crate) fn mark_deleting(object: &mut Value, now: Timestamp) {
    let next = generation(object) + 1;
    let meta = metadata_mut(object);
    meta.insert("deletionTimestamp".into(), timestamp(now));
    meta.insert("deletionGracePeriodSeconds".into(), Value::from(0u64));
    set_generation(object, next);
}
