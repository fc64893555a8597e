//! The CustomResourceDefinitions of every kind, generated from the API types, and their YAML
//! rendering for `rouse crds` and `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, ValidationRule,
};
use kube::CustomResourceExt;

use crate::api::{Sandbox, SandboxClaim, SandboxSnapshot, SandboxTemplate, SandboxWarmPool};

/// Rendering a CRD as YAML failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot render CustomResourceDefinition {name} as YAML")]
pub struct RenderError {
    name: String,
    #[source]
    source: serde_saphyr::SerializeError,
}

/// Every CRD Rouse serves, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        Sandbox::crd(),
        SandboxSnapshot::crd(),
        SandboxTemplate::crd(),
        SandboxWarmPool::crd(),
        SandboxClaim::crd(),
    ];
    for crd in &mut crds {
        strip_embedded_descriptions(crd);
        if crd.spec.names.kind == "Sandbox" {
            add_root_rule(crd, SERVICE_NAME_RULE, SERVICE_NAME_MESSAGE);
        }
    }
    crds
}

/// A sandbox with a Service needs a name the Service can carry: a DNS-1035 label (upstream
/// enforces the same). Root-level, as only there can a rule read `metadata.name`.
const SERVICE_NAME_RULE: &str = "!has(self.spec.service) || !self.spec.service || \
     (size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))";
const SERVICE_NAME_MESSAGE: &str = "with spec.service: true, metadata.name must be a DNS-1035 label (a letter first, at most 63 characters)";

/// Adds a CEL rule to the root schema of every version of `crd`.
fn add_root_rule(crd: &mut CustomResourceDefinition, rule: &str, message: &str) {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .push(ValidationRule {
                    rule: rule.to_owned(),
                    message: Some(message.to_owned()),
                    ..ValidationRule::default()
                });
        }
    }
}

/// Schema locations (JSON pointers below `openAPIV3Schema`) of embedded core Kubernetes types.
///
/// Their generated descriptions are the upstream API reference, hundreds of kilobytes per
/// `PodSpec`; dropping them (as controller-gen's `maxDescLen=0` does upstream) keeps the CRDs
/// small enough for etcd and for `kubectl apply` without changing what validates.
const EMBEDDED_TYPES: [&str; 5] = [
    "/properties/spec/properties/podTemplate/properties/spec",
    "/properties/spec/properties/volumeClaimTemplates/items/properties/spec",
    "/properties/spec/properties/networkPolicy/properties/ingress/items",
    "/properties/spec/properties/networkPolicy/properties/egress/items",
    "/properties/status/properties/conditions/items",
];

fn strip_embedded_descriptions(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        // Round-trips through JSON to address nested schemas by pointer; the schema type is
        // plain data, so serialization cannot fail and deserialization reads what it wrote.
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            continue;
        };
        for pointer in EMBEDDED_TYPES {
            if let Some(node) = value.pointer_mut(pointer) {
                strip_descriptions_below(node);
            }
        }
        if let Ok(stripped) = serde_json::from_value(value) {
            *schema = stripped;
        }
    }
}

/// Removes `description` from every schema nested in `node`, keeping `node`'s own.
fn strip_descriptions_below(node: &mut serde_json::Value) {
    let serde_json::Value::Object(map) = node else {
        return;
    };
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "definitions" => {
                if let serde_json::Value::Object(children) = child {
                    for grandchild in children.values_mut() {
                        strip_description(grandchild);
                    }
                }
            }
            "items" | "additionalProperties" | "not" => strip_description(child),
            "allOf" | "anyOf" | "oneOf" => {
                if let serde_json::Value::Array(children) = child {
                    children.iter_mut().for_each(strip_description);
                }
            }
            _ => {}
        }
    }
}

fn strip_description(node: &mut serde_json::Value) {
    if let serde_json::Value::Object(map) = node {
        map.remove("description");
    }
    strip_descriptions_below(node);
}

/// The file name a CRD is checked in under in `deploy/crds/`: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// One CRD as a YAML document (without a leading `---`).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    serde_saphyr::to_string(crd).map_err(|source| RenderError {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })
}

/// Every CRD as one multi-document YAML stream.
pub fn all_to_yaml() -> Result<String, RenderError> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}
