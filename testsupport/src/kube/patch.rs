//! Patch bodies by content type: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
//! strategic merge patch (applied as a merge patch; refused for custom resources as
//! Kubernetes does) and server-side apply (approximated as a merge patch, see README).

use serde_json::Value;

use super::registry::ResourceType;
use super::status::{ApiError, Result};

/// The patch formats the `Content-Type` of a PATCH selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// The patch kind of a content type, or 415 naming the unsupported one.
    pub fn from_content_type(content_type: &str) -> Result<Self> {
        let base = content_type.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }

    /// The `verb` of request counters for this patch.
    pub fn verb(self) -> &'static str {
        match self {
            PatchKind::Apply => "apply",
            _ => "patch",
        }
    }
}

/// Applies `body` of format `kind` to `current` and returns the patched document.
pub fn apply(
    rt: &ResourceType,
    name: &str,
    kind: PatchKind,
    current: &Value,
    body: &[u8],
) -> Result<Value> {
    let patch: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the patch body is not JSON (YAML apply bodies are not supported): {e}"
        ))
    })?;
    let mut doc = current.clone();
    match kind {
        PatchKind::Strategic if rt.custom => {
            return Err(ApiError::unsupported_media_type(format!(
                "strategic merge patch is not supported for custom resources ({})",
                rt.qualified()
            )));
        }
        PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a merge patch of an object must be a JSON object",
                ));
            }
            json_patch::merge(&mut doc, &patch);
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut doc, &ops).map_err(|e| match e.kind {
                json_patch::PatchErrorKind::TestFailed => {
                    ApiError::invalid(rt, name, &e.path.to_string(), "test operation failed")
                }
                _ => ApiError::invalid(rt, name, &e.path.to_string(), &e.to_string()),
            })?;
        }
    }
    Ok(doc)
}
