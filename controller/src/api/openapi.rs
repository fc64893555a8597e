//! `/openapi.json`: an OpenAPI 3 description of every route, with the kinds' schemas taken from
//! the generated CRDs so the document and the validation never disagree.

use std::sync::OnceLock;

use axum::Json;
use serde_json::{Map, Value, json};

use super::kinds::Kind;

/// `GET /openapi.json`.
pub(super) async fn serve() -> Json<Value> {
    Json(document().clone())
}

/// The OpenAPI document, built once.
pub(super) fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

fn build() -> Value {
    let mut schemas = Map::new();
    for crd in rouse_shared::crds::all() {
        let kind = crd.spec.names.kind.clone();
        let schema = crd
            .spec
            .versions
            .first()
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({"type": "object"}));
        schemas.insert(kind.clone(), schema);
        schemas.insert(
            format!("{kind}List"),
            json!({
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{kind}")}},
                },
            }),
        );
    }
    schemas.insert("Status".to_owned(), status_schema());
    schemas.insert(
        "WatchEvent".to_owned(),
        json!({
            "type": "object",
            "description": "One line of a watch stream (newline-delimited JSON).",
            "required": ["type", "object"],
            "properties": {
                "type": {"type": "string", "enum": ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]},
                "object": {"type": "object", "description": "The object, or a Status for ERROR."},
            },
        }),
    );
    let mut paths = Map::new();
    for kind in Kind::ALL {
        add_kind_paths(&mut paths, kind);
    }
    paths.insert(
        "/healthz".to_owned(),
        json!({"get": {
            "summary": "Liveness check; needs no token.",
            "security": [],
            "responses": {"200": {"description": "ok", "content": {"text/plain": {}}}},
        }}),
    );
    paths.insert(
        "/readyz".to_owned(),
        json!({"get": {
            "summary": "Readiness check (the store can read and write); needs no token.",
            "security": [],
            "responses": {
                "200": {"description": "ok", "content": {"text/plain": {}}},
                "503": {"description": "not ready, and why", "content": {"text/plain": {}}},
            },
        }}),
    );
    paths.insert(
        "/openapi.json".to_owned(),
        json!({"get": {
            "summary": "This document.",
            "responses": {"200": {"description": "OpenAPI 3 document", "content": {"application/json": {}}}},
        }}),
    );
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Rouse REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The sandbox kinds of agents.x-k8s.io and extensions.agents.x-k8s.io v1beta1 with Kubernetes semantics. Every /v1/... path is also served as /apis/{group}/v1beta1/... with the kind's group.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
        "paths": paths,
    })
}

fn status_schema() -> Value {
    json!({
        "type": "object",
        "description": "A Kubernetes Status object describing a failure.",
        "properties": {
            "kind": {"type": "string", "enum": ["Status"]},
            "apiVersion": {"type": "string", "enum": ["v1"]},
            "status": {"type": "string", "enum": ["Failure"]},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "code": {"type": "integer"},
            "details": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "group": {"type": "string"},
                    "kind": {"type": "string"},
                    "causes": {"type": "array", "items": {"type": "object", "properties": {
                        "reason": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"},
                    }}},
                },
            },
        },
    })
}

fn add_kind_paths(paths: &mut Map<String, Value>, kind: Kind) {
    let k = kind.kind();
    let object = json!({"$ref": format!("#/components/schemas/{k}")});
    let ok = |description: &str, schema: &Value| json!({"description": description, "content": {"application/json": {"schema": schema}}});
    let errors = |codes: &[&str]| -> Map<String, Value> {
        codes
            .iter()
            .map(|c| {
                (
                    (*c).to_owned(),
                    json!({"description": "Status", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}}),
                )
            })
            .collect()
    };
    let with = |mut base: Map<String, Value>, extra: &[(&str, Value)]| {
        for (code, response) in extra {
            base.insert((*code).to_owned(), response.clone());
        }
        Value::Object(base)
    };
    let ns = json!({"name": "ns", "in": "path", "required": true, "schema": {"type": "string"}});
    let name =
        json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}});
    let query = |n: &str, t: &str, d: &str| json!({"name": n, "in": "query", "schema": {"type": t}, "description": d});
    let list_params = vec![
        query(
            "labelSelector",
            "string",
            "Kubernetes label selector, e.g. app=web,tier!=db",
        ),
        query(
            "fieldSelector",
            "string",
            "Only metadata.name=<name> is supported",
        ),
        query(
            "watch",
            "boolean",
            "Stream newline-delimited WatchEvent objects instead of a list",
        ),
        query(
            "resourceVersion",
            "string",
            "With watch: start after this version; empty or 0 starts with ADDED events for every object",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "With watch: end the stream after this long",
        ),
        query(
            "allowWatchBookmarks",
            "boolean",
            "With watch: send BOOKMARK events",
        ),
    ];
    let list_response = with(
        errors(&["400", "401", "503"]),
        &[(
            "200",
            json!({"description": format!("{k}List, or with watch=true a stream of WatchEvent lines"), "content": {
                "application/json": {"schema": {"$ref": format!("#/components/schemas/{k}List")}},
                "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/WatchEvent"}},
            }}),
        )],
    );
    let body = |types: &[&str]| {
        let content: Map<String, Value> = types
            .iter()
            .map(|t| ((*t).to_owned(), json!({"schema": {"type": "object"}})))
            .collect();
        json!({"required": true, "content": content})
    };
    let plural = kind.plural();
    paths.insert(
        format!("/v1/{plural}"),
        json!({"get": {"summary": format!("List or watch {k} objects in all namespaces"), "parameters": list_params, "responses": list_response}}),
    );
    let mut ns_params = vec![ns.clone()];
    ns_params.extend(list_params);
    paths.insert(
        format!("/v1/namespaces/{{ns}}/{plural}"),
        json!({
            "get": {"summary": format!("List or watch {k} objects in a namespace"), "parameters": ns_params, "responses": list_response},
            "post": {
                "summary": format!("Create a {k}"),
                "parameters": [ns],
                "requestBody": {"required": true, "content": {"application/json": {"schema": object}}},
                "responses": with(errors(&["400", "401", "409", "413", "415", "422"]), &[("201", ok("created", &object))]),
            },
        }),
    );
    let one = format!("/v1/namespaces/{{ns}}/{plural}/{{name}}");
    let params = json!([ns, name]);
    let merge = ["application/merge-patch+json", "application/json"];
    paths.insert(
        one.clone(),
        json!({
            "parameters": params,
            "get": {"summary": format!("Read a {k}"), "responses": with(errors(&["401", "404"]), &[("200", ok("the object", &object))])},
            "put": {
                "summary": format!("Replace a {k}'s metadata and spec; metadata.resourceVersion is a precondition"),
                "requestBody": {"required": true, "content": {"application/json": {"schema": object}}},
                "responses": with(errors(&["400", "401", "404", "409", "413", "415", "422"]), &[("200", ok("the stored object", &object))]),
            },
            "patch": {
                "summary": format!("Merge-patch a {k}'s metadata and spec"),
                "requestBody": body(&merge),
                "responses": with(errors(&["400", "401", "404", "409", "413", "415", "422"]), &[("200", ok("the stored object", &object))]),
            },
            "delete": {
                "summary": format!("Delete a {k}"),
                "parameters": [{"name": "propagationPolicy", "in": "query", "schema": {"type": "string", "enum": ["Background", "Foreground", "Orphan"]}}],
                "responses": with(errors(&["400", "401", "404"]), &[
                    ("200", ok("deleted; the last state", &object)),
                    ("202", ok("marked for deletion; finalizers hold it", &object)),
                ]),
            },
        }),
    );
    paths.insert(
        format!("{one}/status"),
        json!({
            "parameters": params,
            "get": {"summary": format!("Read a {k} (status subresource)"), "responses": with(errors(&["401", "404"]), &[("200", ok("the object", &object))])},
            "patch": {
                "summary": format!("Merge-patch a {k}'s status"),
                "requestBody": body(&merge),
                "responses": with(errors(&["400", "401", "404", "409", "413", "415", "422"]), &[("200", ok("the stored object", &object))]),
            },
        }),
    );
    if kind == Kind::Sandbox {
        for (action, mode) in [("suspend", "Suspended"), ("resume", "Running")] {
            paths.insert(
                format!("{one}/{action}"),
                json!({"parameters": params, "post": {
                    "summary": format!("Set spec.operatingMode to {mode}"),
                    "responses": with(errors(&["401", "404", "409"]), &[("200", ok("the stored object", &object))]),
                }}),
            );
        }
        paths.insert(
            format!("{one}/log"),
            json!({"parameters": params, "get": {
                "summary": "The workload's output",
                "parameters": [
                    query("tailLines", "integer", "Only the last N lines"),
                    query("follow", "boolean", "Keep streaming appended output"),
                    query("timeoutSeconds", "integer", "With follow: end the stream after this long"),
                ],
                "responses": with(errors(&["400", "401", "404", "503"]), &[
                    ("200", json!({"description": "log bytes", "content": {"text/plain": {}}})),
                ]),
            }}),
        );
    }
}
