//! `/openapi/v3` and `/openapi/v3/apis/{group}/{version}`: the Kubernetes OpenAPI v3 documents
//! kubectl reads for `kubectl explain` and for `kubectl apply`'s validation. Schemas come from
//! the generated CRDs, named and tagged with `x-kubernetes-group-version-kind` as
//! kube-apiserver names custom resources, and the write operations declare the
//! `fieldValidation` parameter so kubectl leaves validation to the server.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use rouse_shared::api::{EXTENSIONS_GROUP, GROUP, VERSION};
use serde_json::{Map, Value, json};

use super::discovery::crds;
use super::status::Failure;

/// `GET /openapi/v3`: where each group version's document is.
pub(super) async fn index() -> Json<Value> {
    let mut paths = Map::new();
    for group in [GROUP, EXTENSIONS_GROUP] {
        paths.insert(
            format!("apis/{group}/{VERSION}"),
            json!({"serverRelativeURL": format!("/openapi/v3/apis/{group}/{VERSION}")}),
        );
    }
    Json(json!({"paths": paths}))
}

/// `GET /openapi/v3/apis/{group}/{version}`.
pub(super) async fn group_version(Path((group, version)): Path<(String, String)>) -> Response {
    let doc = match (group.as_str(), version.as_str()) {
        (GROUP, VERSION) => documents().0.clone(),
        (EXTENSIONS_GROUP, VERSION) => documents().1.clone(),
        _ => {
            return Failure::no_route(&format!("/openapi/v3/apis/{group}/{version}"))
                .into_response();
        }
    };
    Json(doc).into_response()
}

/// The two documents, built once.
fn documents() -> &'static (Value, Value) {
    static DOCS: OnceLock<(Value, Value)> = OnceLock::new();
    DOCS.get_or_init(|| (document(GROUP), document(EXTENSIONS_GROUP)))
}

/// The schema name kube-apiserver gives a custom resource: the group reversed, then version
/// and kind (`io.x-k8s.agents.v1beta1.Sandbox`).
pub(super) fn schema_name(group: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{VERSION}.{kind}", reversed.join("."))
}

fn document(group: &str) -> Value {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for crd in crds().iter().filter(|c| c.spec.group == group) {
        let kind = &crd.spec.names.kind;
        let plural = &crd.spec.names.plural;
        let gvk = json!([{"group": group, "version": VERSION, "kind": kind}]);
        let list_gvk = json!([{"group": group, "version": VERSION, "kind": format!("{kind}List")}]);
        let mut schema = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == VERSION)
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({"type": "object"}));
        schema["x-kubernetes-group-version-kind"] = gvk.clone();
        let name = schema_name(group, kind);
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        schemas.insert(name.clone(), schema);
        schemas.insert(
            format!("{name}List"),
            json!({
                "type": "object",
                "description": format!("A list of {kind}."),
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "items": {"type": "array", "items": reference},
                },
                "x-kubernetes-group-version-kind": list_gvk,
            }),
        );
        let json_body = |r: &Value| json!({"content": {"application/json": {"schema": r}}});
        let ok = json!({"200": json_body(&reference)});
        let field_validation = json!({
            "name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true},
            "description": "Strict: unknown or duplicate fields are rejected (always the case here).",
        });
        let dry_run = json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let field_manager = json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let operation = |action: &str, body: bool| {
            let mut op = json!({
                "operationId": format!("{action}{kind}"),
                "responses": ok,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": {"group": group, "version": VERSION, "kind": kind},
            });
            if body {
                op["requestBody"] = json_body(&reference);
                op["parameters"] = json!([field_validation, dry_run, field_manager]);
            }
            op
        };
        paths.insert(
            format!("/apis/{group}/{VERSION}/namespaces/{{namespace}}/{plural}"),
            json!({"get": operation("list", false), "post": operation("post", true)}),
        );
        paths.insert(
            format!("/apis/{group}/{VERSION}/namespaces/{{namespace}}/{plural}/{{name}}"),
            json!({
                "get": operation("get", false),
                "put": operation("put", true),
                "patch": operation("patch", true),
                "delete": operation("delete", false),
            }),
        );
        paths.insert(
            format!("/apis/{group}/{VERSION}/{plural}"),
            json!({"get": operation("list", false)}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Rouse", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn schemas_carry_their_kind() {
        let (agents, _) = super::documents();
        let name = super::schema_name(rouse_shared::api::GROUP, "Sandbox");
        assert_eq!(name, "io.x-k8s.agents.v1beta1.Sandbox");
        let schema = &agents["components"]["schemas"][&name];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"][0]["kind"],
            "Sandbox"
        );
        assert!(schema["properties"]["spec"].is_object(), "{schema}");
    }
}
