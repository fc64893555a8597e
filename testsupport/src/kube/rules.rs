//! Update rules of built-in kinds that a real API server enforces and controllers trip over:
//! a Pod's spec is immutable except images, tolerations and deadlines; a PVC's spec except
//! storage requests; a Service keeps its `clusterIP`.

use serde_json::Value;

use super::registry::ResourceType;
use super::status::{ApiError, Result};

/// Blanks the mutable fields of a pod spec, so two specs differ only in immutable ones.
fn pod_immutable_part(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        for field in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
        ] {
            map.remove(field);
        }
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            if let Some(Value::Array(containers)) = map.get_mut(list) {
                for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                    container.remove("image");
                }
            }
        }
    }
    spec
}

/// Blanks the mutable fields of a PVC spec.
fn pvc_immutable_part(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove("volumeAttributesClassName");
        if let Some(Value::Object(resources)) = map.get_mut("resources") {
            resources.remove("requests");
        }
    }
    spec
}

/// Checks (and completes) an update of the main resource of a built-in kind.
pub fn check_update(rt: &ResourceType, name: &str, old: &Value, next: &mut Value) -> Result<()> {
    if !rt.group.is_empty() {
        return Ok(());
    }
    let null = Value::Null;
    let old_spec = old.get("spec").unwrap_or(&null);
    match rt.plural {
        "pods" => {
            let new_spec = next.get("spec").unwrap_or(&null);
            if pod_immutable_part(old_spec) != pod_immutable_part(new_spec) {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    "spec",
                    "Forbidden: pod updates may not change fields other than \
                     `spec.containers[*].image`, `spec.initContainers[*].image`, \
                     `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to \
                     existing tolerations) or `spec.terminationGracePeriodSeconds`",
                ));
            }
        }
        "persistentvolumeclaims" => {
            let new_spec = next.get("spec").unwrap_or(&null);
            if pvc_immutable_part(old_spec) != pvc_immutable_part(new_spec) {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    "spec",
                    "Forbidden: spec is immutable after creation except resources.requests \
                     and volumeAttributesClassName for bound claims",
                ));
            }
        }
        "services" => {
            let old_ip = old_spec.get("clusterIP").cloned();
            if !next.get("spec").is_some_and(Value::is_object) {
                next["spec"] = serde_json::json!({});
            }
            let spec = &mut next["spec"];
            // An update that leaves the allocated IP out keeps it, as the API server does.
            for field in ["clusterIP", "clusterIPs"] {
                if spec.get(field).is_none()
                    && let Some(value) = old_spec.get(field)
                {
                    spec[field] = value.clone();
                }
            }
            if spec.get("clusterIP").cloned() != old_ip {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    "spec.clusterIP",
                    "Invalid value: field is immutable",
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The `x-kubernetes-validations` rules of the Sandbox CRD (`deploy/crds`), written out by
/// hand since the fake has no CEL: `volumeClaimTemplates` is immutable (absent equals `[]`),
/// and `spec.service: true` needs a DNS-1035 label as name. `old` is `None` on create.
pub fn check_sandbox(
    rt: &ResourceType,
    name: &str,
    old: Option<&Value>,
    next: &Value,
) -> Result<()> {
    if (rt.group, rt.plural) != ("agents.x-k8s.io", "sandboxes") {
        return Ok(());
    }
    let templates = |object: &Value| match object.pointer("/spec/volumeClaimTemplates") {
        None | Some(Value::Null) => Value::Array(Vec::new()),
        Some(value) => value.clone(),
    };
    if let Some(old) = old
        && templates(old) != templates(next)
    {
        return Err(ApiError::invalid(
            rt,
            name,
            "spec",
            "Invalid value: \"object\": volumeClaimTemplates is immutable",
        ));
    }
    let wants_service = next.pointer("/spec/service") == Some(&Value::Bool(true));
    let dns_1035 = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if wants_service && !dns_1035 {
        return Err(ApiError::invalid(
            rt,
            name,
            "<nil>",
            "Invalid value: \"object\": with spec.service: true, metadata.name must be a \
             DNS-1035 label (a letter first, at most 63 characters)",
        ));
    }
    Ok(())
}
