//! Errors of the fake API server, rendered as Kubernetes `Status` objects with the same
//! `code`, `reason` and `details` shapes a real API server returns.

use serde_json::{Value, json};

use super::registry::ResourceType;

/// A failed request: the HTTP code and the `Status` body describing it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, `AlreadyExists`, `Invalid`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the `Status`, when the error is about one object.
    pub details: Option<Value>,
}

/// Result of a fake API server operation.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

fn details(rt: &ResourceType, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": rt.plural});
    if !rt.group.is_empty() {
        d["group"] = json!(rt.group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String, details: Option<Value>) -> Self {
        Self {
            code,
            reason,
            message,
            details,
        }
    }

    /// 404 for a missing object.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", rt.qualified());
        Self::new(404, "NotFound", message, Some(details(rt, name)))
    }

    /// 404 for a path that names no served resource.
    pub fn no_route(path: &str) -> Self {
        let message = format!("the server could not find the requested resource ({path})");
        Self::new(404, "NotFound", message, None)
    }

    /// 409 for a create of an existing name.
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", rt.qualified());
        Self::new(409, "AlreadyExists", message, Some(details(rt, name)))
    }

    /// 409 for a stale resourceVersion or failed precondition.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            rt.qualified()
        );
        Self::new(409, "Conflict", message, Some(details(rt, name)))
    }

    /// 409 for a write with a resourceVersion older than the stored one.
    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 for an object that fails validation; `field` is the offending path.
    pub fn invalid(rt: &ResourceType, name: &str, field: &str, why: &str) -> Self {
        let message = format!(
            "{} \"{name}\" is invalid: {field}: {why}",
            rt.qualified_kind()
        );
        let mut d = json!({
            "name": name,
            "kind": rt.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}],
        });
        if !rt.group.is_empty() {
            d["group"] = json!(rt.group);
        }
        Self::new(422, "Invalid", message, Some(d))
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({what})"),
            None,
        )
    }

    /// 410 for a watch from a resourceVersion older than the kept history.
    pub fn expired(asked: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {asked} ({oldest})"),
            None,
        )
    }

    /// 413 for a body over the size limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body exceeds {limit} bytes"),
            None,
        )
    }

    /// 415 for a patch type the resource does not accept.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message.into(), None)
    }

    /// 500 for an internal failure of the fake itself.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message.into(), None)
    }

    /// An error a test asked the server to answer with (see `FakeApiServer::fail_requests`).
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(
            code,
            reason,
            format!("injected failure ({code} {reason})"),
            None,
        )
    }

    /// The `Status` object a Kubernetes API server sends for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
