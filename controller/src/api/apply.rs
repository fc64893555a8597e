//! Server-side apply (`PATCH` with `application/apply-patch+yaml`): create-on-apply, field
//! ownership per manager in `metadata.managedFields`, conflicts with other appliers and the
//! removal of fields a manager stopped applying.
//!
//! Ownership is tracked at the granularity of maps: every leaf (a scalar or a whole list) under
//! `metadata.labels`, `metadata.annotations` and `spec` (or `status` on the status
//! subresource) that an apply sets belongs to its manager, recorded as `FieldsV1` (`f:` keys)
//! as Kubernetes does. Lists are owned as a whole (Kubernetes merges lists with keys item by
//! item). Writes that are not applies leave the recorded ownership as it is.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rouse_shared::store::{ObjectKey, Store, StoreError, StoreObject};
use serde_json::{Map, Value, json};

use super::check::{check_patch_identity, prepare, resource_version, to_object, validated};
use super::kinds::{Kind, dispatch};
use super::query::Options;
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply};
use super::write::{Part, patch_object};

/// A path of map keys from the object's root.
type FieldPath = Vec<String>;

/// `PATCH` with `application/apply-patch+yaml`.
pub(super) async fn apply<S: ApiStore>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    bytes: &[u8],
    part: Part,
    options: &Options,
) -> Reply<Response> {
    let applied = super::bounds::parse_apply(bytes, &state.config)?;
    if !applied.is_object() {
        return Err(Failure::bad_request("the apply body must be an object"));
    }
    check_patch_identity(kind, &applied, &key.namespace, &key.name)?;
    let Some(manager) = options.field_manager.clone() else {
        return Err(Failure::bad_request(
            "PATCH requests with the apply content type require fieldManager",
        ));
    };
    dispatch!(
        kind,
        apply_object(state, kind, key, applied, part, options, &manager)
    )
}

async fn apply_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    applied: Value,
    part: Part,
    options: &Options,
    manager: &str,
) -> Reply<Response> {
    let owned = leaves(&applied, part);
    let current = match state.store.get(key).await {
        Ok(current) => to_object::<K>(&current)?,
        Err(StoreError::NotFound { .. }) if part == Part::Spec => {
            return create(state, kind, key, applied, owned, options, manager).await;
        }
        Err(e) => return Err(Failure::from_store(kind, &e)),
    };
    let current_value = Value::Object(current.clone());
    let mut entries = managed_fields(&current_value);
    // Conflicts: fields this apply changes that another applier owns.
    let mut conflicts = Vec::new();
    for entry in entries
        .iter_mut()
        .filter(|e| e.manager != manager && e.apply)
    {
        let theirs: Vec<FieldPath> = entry
            .fields
            .iter()
            .filter(|p| owned.contains(p) && at(&current_value, p) != at(&applied, p))
            .cloned()
            .collect();
        if options.force {
            entry.fields.retain(|p| !theirs.contains(p));
        } else {
            conflicts.extend(theirs.into_iter().map(|p| (entry.manager.clone(), p)));
        }
    }
    if !conflicts.is_empty() {
        return Err(conflict(&conflicts));
    }
    let mine_before = entries
        .iter()
        .find(|e| e.manager == manager && e.apply)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut patch = Map::new();
    for root in roots(part) {
        if let Some(value) = at(&applied, &root) {
            set(&mut patch, &root, value.clone());
        }
    }
    // Fields this manager applied before and no longer does go, unless another owns them.
    for path in mine_before.iter().filter(|p| !owned.contains(p)) {
        let shared = entries
            .iter()
            .any(|e| e.manager != manager && e.fields.contains(path));
        if !shared && at(&Value::Object(patch.clone()), path).is_none() {
            set(&mut patch, path, Value::Null);
        }
    }
    entries.retain(|e| !(e.manager == manager && e.apply));
    entries.push(Entry::new(manager, kind, owned, part));
    set(
        &mut patch,
        &["metadata".to_owned(), "managedFields".to_owned()],
        Value::Array(entries.iter().map(Entry::to_json).collect()),
    );
    set(
        &mut patch,
        &["metadata".to_owned(), "resourceVersion".to_owned()],
        json!(resource_version(&current)),
    );
    patch_object::<K, S>(
        state,
        kind,
        key,
        Value::Object(patch),
        part,
        options.dry_run,
    )
    .await
}

/// Create-on-apply: the applied object, owned wholly by its manager.
async fn create<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    mut applied: Value,
    owned: Vec<FieldPath>,
    options: &Options,
    manager: &str,
) -> Reply<Response> {
    prepare(kind, &mut applied, &key.namespace, Some(&key.name))?;
    if let Some(object) = applied.as_object_mut() {
        object.remove("status");
        let meta = object
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| Failure::bad_request("metadata must be an object"))?;
        meta.insert("name".to_owned(), json!(key.name));
        meta.insert(
            "managedFields".to_owned(),
            json!([Entry::new(manager, kind, owned, Part::Spec).to_json()]),
        );
    }
    let object: K = validated(kind, applied)?;
    if options.dry_run {
        return Ok((StatusCode::CREATED, Json(object)).into_response());
    }
    let created = state
        .store
        .create(&object)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    apply: bool,
    raw: Value,
    fields: Vec<FieldPath>,
}

impl Entry {
    fn new(manager: &str, kind: Kind, fields: Vec<FieldPath>, part: Part) -> Self {
        let mut raw = json!({
            "manager": manager,
            "operation": "Apply",
            "apiVersion": kind.api_version(),
            "time": jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now()).to_string(),
            "fieldsType": "FieldsV1",
        });
        if part == Part::Status {
            raw["subresource"] = json!("status");
        }
        Self {
            manager: manager.to_owned(),
            apply: true,
            raw,
            fields,
        }
    }

    fn to_json(&self) -> Value {
        let mut raw = self.raw.clone();
        raw["fieldsV1"] = fields_v1(&self.fields);
        raw
    }
}

/// The entries of `metadata.managedFields`, with their field sets.
fn managed_fields(object: &Value) -> Vec<Entry> {
    let Some(list) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|raw| {
            let manager = raw.get("manager")?.as_str()?.to_owned();
            let apply = raw.get("operation").and_then(Value::as_str) == Some("Apply");
            let mut fields = Vec::new();
            if let Some(v1) = raw.get("fieldsV1") {
                collect_v1(v1, &mut Vec::new(), &mut fields);
            }
            Some(Entry {
                manager,
                apply,
                raw: raw.clone(),
                fields,
            })
        })
        .collect()
}

/// Where an apply's fields live.
fn roots(part: Part) -> Vec<FieldPath> {
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<FieldPath>();
    match part {
        Part::Spec => vec![
            path(&["metadata", "labels"]),
            path(&["metadata", "annotations"]),
            path(&["spec"]),
        ],
        Part::Status => vec![path(&["status"])],
    }
}

/// Every leaf path (scalar or list) the applied object sets under the part's roots.
fn leaves(applied: &Value, part: Part) -> Vec<FieldPath> {
    let mut out = Vec::new();
    for root in roots(part) {
        if let Some(value) = at(applied, &root) {
            walk(value, &mut root.clone(), &mut out);
        }
    }
    out
}

fn walk(value: &Value, path: &mut FieldPath, out: &mut Vec<FieldPath>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(k.clone());
                walk(v, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

/// The value at `path`, if any.
fn at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(k))
}

/// Sets `path` in `map`, making the maps on the way.
fn set(map: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = map;
    for key in parents {
        let next = here.entry(key.clone()).or_insert_with(|| json!({}));
        if !next.is_object() {
            *next = json!({});
        }
        let Value::Object(inner) = next else {
            return;
        };
        here = inner;
    }
    here.insert(last.clone(), value);
}

/// Field paths as `FieldsV1` (`{"f:spec":{"f:replicas":{}}}`).
fn fields_v1(paths: &[FieldPath]) -> Value {
    let mut root = Map::new();
    for path in paths {
        let keyed: Vec<String> = path.iter().map(|k| format!("f:{k}")).collect();
        set(&mut root, &keyed, json!({}));
    }
    Value::Object(root)
}

/// The leaf paths of a `FieldsV1` value (`.` entries and non-`f:` keys are skipped).
fn collect_v1(value: &Value, path: &mut FieldPath, out: &mut Vec<FieldPath>) {
    let Value::Object(map) = value else { return };
    let children: Vec<(&String, &Value)> =
        map.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    if children.is_empty() {
        if !path.is_empty() {
            out.push(path.clone());
        }
        return;
    }
    for (k, v) in children {
        path.push(k.trim_start_matches("f:").to_owned());
        collect_v1(v, path, out);
        path.pop();
    }
}

/// The 409 Kubernetes answers an apply with when other managers own fields it changes.
fn conflict(conflicts: &[(String, FieldPath)]) -> Failure {
    let describe = |(manager, path): &(String, FieldPath)| {
        format!("conflict with \"{manager}\": .{}", path.join("."))
    };
    let lines: Vec<String> = conflicts.iter().map(describe).collect();
    let message = if lines.len() == 1 {
        format!("Apply failed with 1 conflict: {}", lines[0])
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            lines.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<(String, String)> = conflicts
        .iter()
        .map(|(manager, path)| {
            (
                format!(".{}", path.join(".")),
                format!("conflict with \"{manager}\""),
            )
        })
        .collect();
    Failure::apply_conflict(message, &causes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Part, collect_v1, fields_v1, leaves};

    #[test]
    fn field_sets_round_trip_through_fields_v1() {
        let applied = json!({
            "apiVersion": "x", "kind": "y",
            "metadata": {"name": "a", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"name": "t"}, "list": [1, 2]},
        });
        let mut paths = leaves(&applied, Part::Spec);
        paths.sort();
        let want: Vec<Vec<String>> = [
            vec!["metadata", "labels", "app"],
            vec!["spec", "list"],
            vec!["spec", "replicas"],
            vec!["spec", "template", "name"],
        ]
        .iter()
        .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
        .collect();
        assert_eq!(paths, want);
        let v1 = fields_v1(&paths);
        assert_eq!(v1["f:spec"]["f:replicas"], json!({}));
        let mut back = Vec::new();
        collect_v1(&v1, &mut Vec::new(), &mut back);
        back.sort();
        assert_eq!(back, want);
    }
}
