//! Server-side printing: `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` answers with a
//! `Table` whose columns are the CRD's printer columns (as kube-apiserver prints custom
//! resources), so `kubectl get` shows the same columns as on a cluster;
//! `as=PartialObjectMetadata` answers with the objects' metadata only.

use axum::Json;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::discovery::crds;
use super::kinds::Kind;

/// What the client asked the answer to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Accept {
    /// The objects themselves.
    #[default]
    Object,
    /// A `meta.k8s.io/v1` `Table`.
    Table,
    /// `PartialObjectMetadata`(`List`).
    Metadata,
}

impl Accept {
    /// The first form the `Accept` header asks for that the server can give.
    pub(super) fn from_headers(headers: &HeaderMap) -> Self {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Accept::Object;
        };
        for choice in accept.split(',') {
            let params: Vec<&str> = choice.split(';').map(str::trim).collect();
            let has = |p: &str| params.iter().any(|x| x.eq_ignore_ascii_case(p));
            let meta = has("g=meta.k8s.io") && (has("v=v1") || has("v=v1beta1"));
            if meta && has("as=Table") {
                return Accept::Table;
            }
            if meta && has("as=PartialObjectMetadata") || has("as=PartialObjectMetadataList") {
                return Accept::Metadata;
            }
            if !params.iter().any(|p| p.starts_with("as=")) {
                return Accept::Object;
            }
        }
        Accept::Object
    }
}

/// The answer for `value` (an object or a list) in the asked form.
pub(super) fn respond(kind: Kind, value: Value, accept: &Accept) -> Response {
    match accept {
        Accept::Object => Json(value).into_response(),
        Accept::Table => Json(table(kind, &value, true)).into_response(),
        Accept::Metadata => Json(metadata(&value)).into_response(),
    }
}

/// `value` in the asked form, for one watch event; column definitions only in the first.
pub(super) fn convert(kind: Kind, value: Value, accept: &Accept, first: bool) -> Value {
    match accept {
        Accept::Object => value,
        Accept::Table => table(kind, &value, first),
        Accept::Metadata => metadata(&value),
    }
}

fn is_list(value: &Value) -> bool {
    value.get("items").is_some_and(Value::is_array)
}

fn partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn metadata(value: &Value) -> Value {
    if !is_list(value) {
        return partial(value);
    }
    let items: Vec<Value> = value["items"]
        .as_array()
        .map(|items| items.iter().map(partial).collect())
        .unwrap_or_default();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "items": items,
    })
}

/// The printer columns of `kind`, as the CRD declares them.
fn columns(kind: Kind) -> Vec<Value> {
    crds()
        .iter()
        .find(|c| c.spec.names.kind == kind.kind())
        .and_then(|c| c.spec.versions.first())
        .and_then(|v| v.additional_printer_columns.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect()
}

fn table(kind: Kind, value: &Value, with_columns: bool) -> Value {
    let columns = columns(kind);
    let objects: Vec<&Value> = if is_list(value) {
        value["items"]
            .as_array()
            .map(|i| i.iter().collect())
            .unwrap_or_default()
    } else {
        vec![value]
    };
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![
                object
                    .pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::Null),
            ];
            for column in &columns {
                let path = column["jsonPath"].as_str().unwrap_or_default();
                let found = evaluate(object, path);
                cells.push(cell(
                    found,
                    column["type"].as_str().unwrap_or("string"),
                    now,
                ));
            }
            json!({"cells": cells, "object": partial(object)})
        })
        .collect();
    let mut out = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": value.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!(""))},
        "rows": rows,
    });
    if let Some(token) = value.pointer("/metadata/continue") {
        out["metadata"]["continue"] = token.clone();
    }
    if with_columns {
        let mut definitions = vec![json!({
            "name": "Name", "type": "string", "format": "name", "priority": 0,
            "description": "Name must be unique within a namespace.",
        })];
        for column in &columns {
            definitions.push(json!({
                "name": column["name"],
                "type": column["type"],
                "format": column.get("format").cloned().unwrap_or(json!("")),
                "description": column.get("description").cloned().unwrap_or(json!("")),
                "priority": column.get("priority").cloned().unwrap_or(json!(0)),
            }));
        }
        out["columnDefinitions"] = Value::Array(definitions);
    } else {
        out["columnDefinitions"] = Value::Null;
    }
    out
}

/// One cell: `date` columns as an age (`5m`), as kube-apiserver prints them; lists and maps
/// as JSON; nothing found as null (kubectl prints `<none>`).
fn cell(found: Vec<&Value>, kind: &str, now: jiff::Timestamp) -> Value {
    let Some(first) = found.first() else {
        return Value::Null;
    };
    if kind == "date" {
        return match first
            .as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        {
            Some(at) => json!(human_age(now.as_second() - at.as_second())),
            None => Value::Null,
        };
    }
    if found.len() > 1 {
        let parts: Vec<String> = found.iter().map(|v| scalar_text(v)).collect();
        return json!(parts.join(","));
    }
    match first {
        Value::Array(_) | Value::Object(_) => json!(first.to_string()),
        other => (*other).clone(),
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An age as kubectl writes it: `45s`, `12m`, `3h`, `2d`, `1y`.
fn human_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        172_800..31_536_000 => format!("{}d", s / 86_400),
        _ => format!("{}y", s / 31_536_000),
    }
}

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `[N]`, `[*]` and
/// `[?(@.field=='value')]`.
fn evaluate<'a>(root: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![root];
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let field = &after[..end];
            current = current.iter().filter_map(|v| v.get(field)).collect();
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return Vec::new();
            };
            let selector = &after[..end];
            rest = &after[end + 1..];
            current = current
                .iter()
                .filter_map(|v| v.as_array())
                .flat_map(|items| select(items, selector))
                .collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn select<'a>(items: &'a [Value], selector: &str) -> Vec<&'a Value> {
    if selector == "*" {
        return items.iter().collect();
    }
    if let Ok(index) = selector.parse::<usize>() {
        return items.get(index).into_iter().collect();
    }
    let Some(filter) = selector
        .strip_prefix("?(@.")
        .and_then(|f| f.strip_suffix(')'))
    else {
        return Vec::new();
    };
    let Some((field, want)) = filter.split_once("==") else {
        return Vec::new();
    };
    let want = want.trim().trim_matches(|c| c == '\'' || c == '"');
    items
        .iter()
        .filter(|item| item.get(field.trim()).map(scalar_text).as_deref() == Some(want))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn jsonpath_subset() {
        let object = json!({"status": {"conditions": [
            {"type": "Suspended", "status": "False"},
            {"type": "Ready", "status": "True", "reason": "DependenciesReady"},
        ], "podIPs": ["10.0.0.1"]}});
        let ready = super::evaluate(&object, ".status.conditions[?(@.type=='Ready')].status");
        assert_eq!(ready, vec![&json!("True")]);
        assert_eq!(
            super::evaluate(&object, ".status.podIPs[0]"),
            vec![&json!("10.0.0.1")]
        );
        assert!(super::evaluate(&object, ".spec.operatingMode").is_empty());
        assert_eq!(super::human_age(59), "59s");
        assert_eq!(super::human_age(3600), "60m");
        assert_eq!(super::human_age(90_000), "25h");
    }

    #[test]
    fn sandbox_table_has_the_printer_columns() {
        let list = json!({"metadata": {"resourceVersion": "7"}, "items": [
            {"metadata": {"name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
             "spec": {"operatingMode": "Running"}},
        ]});
        let table = super::table(super::Kind::Sandbox, &list, true);
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(&names[..4], ["Name", "Ready", "Reason", "Mode"]);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[0], "web");
        assert_eq!(cells[3], "Running");
        assert!(cells[1].is_null());
    }

    #[test]
    fn accept_header_forms() {
        let accept = |v: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::ACCEPT, v.parse().expect("header"));
            super::Accept::from_headers(&headers)
        };
        assert_eq!(
            accept(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            super::Accept::Table
        );
        assert_eq!(accept("application/json"), super::Accept::Object);
        assert_eq!(
            accept("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
            super::Accept::Metadata
        );
    }
}
