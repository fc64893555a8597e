//! Kubernetes discovery: `/api`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}` and
//! `/version`, built from the generated CRDs so kubectl and client libraries find the kinds
//! with the same names, short names, verbs and subresources as on a cluster.
//!
//! Aggregated discovery (`Accept: ...;as=APIGroupDiscoveryList`) is answered with the legacy
//! documents as `application/json`; clients fall back to them, as they do with older servers.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use rouse_shared::api::{EXTENSIONS_GROUP, GROUP, VERSION};
use serde_json::{Value, json};

use super::status::Failure;

/// The Kubernetes version whose API semantics the server follows (k8s-openapi's oldest
/// supported one, see README "Kubernetes versions").
const KUBE_MAJOR: &str = "1";
const KUBE_MINOR: &str = "33";

/// The groups served, in the order `/apis` lists them.
const GROUPS: [&str; 2] = [GROUP, EXTENSIONS_GROUP];

/// Verbs on a kind's main resource. `deletecollection` is not served.
const VERBS: [&str; 7] = [
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// `GET /version`.
pub(super) async fn version() -> Json<Value> {
    Json(json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0+rouse-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    }))
}

/// The architecture as Go names it, as clients print it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `GET /api`: the core group, which Rouse does not serve (no versions).
pub(super) async fn core_versions() -> Json<Value> {
    Json(json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []}))
}

/// `GET /apis`.
pub(super) async fn groups() -> Json<Value> {
    let groups: Vec<Value> = GROUPS.iter().map(|g| group_doc(g)).collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// `GET /apis/{group}`.
pub(super) async fn group(Path(group): Path<String>) -> Response {
    if !GROUPS.contains(&group.as_str()) {
        return Failure::no_route(&format!("/apis/{group}")).into_response();
    }
    let mut doc = group_doc(&group);
    if let Some(object) = doc.as_object_mut() {
        object.insert("kind".to_owned(), json!("APIGroup"));
        object.insert("apiVersion".to_owned(), json!("v1"));
    }
    Json(doc).into_response()
}

/// `GET /apis/{group}/{version}`: the APIResourceList.
pub(super) async fn resources(Path((group, version)): Path<(String, String)>) -> Response {
    if !GROUPS.contains(&group.as_str()) || version != VERSION {
        return Failure::no_route(&format!("/apis/{group}/{version}")).into_response();
    }
    Json(resource_list(&group)).into_response()
}

fn group_doc(group: &str) -> Value {
    let version = json!({"groupVersion": format!("{group}/{VERSION}"), "version": VERSION});
    json!({"name": group, "versions": [version], "preferredVersion": version})
}

/// The generated CRDs, built once.
pub(super) fn crds() -> &'static [CustomResourceDefinition] {
    static CRDS: OnceLock<Vec<CustomResourceDefinition>> = OnceLock::new();
    CRDS.get_or_init(rouse_shared::crds::all)
}

/// The APIResourceList of `group`: each kind, its `status` and (for warm pools) `scale`.
pub(super) fn resource_list(group: &str) -> Value {
    let mut resources = Vec::new();
    for crd in crds().iter().filter(|c| c.spec.group == group) {
        let names = &crd.spec.names;
        let namespaced = crd.spec.scope == "Namespaced";
        resources.push(json!({
            "name": names.plural,
            "singularName": names.singular.clone().unwrap_or_default(),
            "namespaced": namespaced,
            "kind": names.kind,
            "verbs": VERBS,
            "shortNames": names.short_names.clone().unwrap_or_default(),
            "categories": names.categories.clone().unwrap_or_default(),
        }));
        let subresources = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == VERSION)
            .and_then(|v| v.subresources.as_ref());
        if subresources.is_some_and(|s| s.status.is_some()) {
            resources.push(json!({
                "name": format!("{}/status", names.plural),
                "singularName": "",
                "namespaced": namespaced,
                "kind": names.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if subresources.is_some_and(|s| s.scale.is_some()) {
            resources.push(json!({
                "name": format!("{}/scale", names.plural),
                "singularName": "",
                "namespaced": namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/{VERSION}"),
        "resources": resources,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn lists_kinds_with_subresources() {
        let list = super::resource_list(rouse_shared::api::EXTENSIONS_GROUP);
        let names: Vec<&str> = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for want in [
            "sandboxtemplates",
            "sandboxwarmpools",
            "sandboxwarmpools/status",
            "sandboxwarmpools/scale",
            "sandboxclaims",
            "sandboxclaims/status",
        ] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        let core = super::resource_list(rouse_shared::api::GROUP);
        let sandbox = &core["resources"][0];
        assert_eq!(sandbox["kind"], "Sandbox");
        assert_eq!(sandbox["namespaced"], Value::Bool(true));
        assert!(
            sandbox["verbs"]
                .as_array()
                .expect("verbs")
                .contains(&"watch".into())
        );
    }
}
