//! Kubernetes-style `Status` objects: every error the API returns, with its HTTP code and
//! reason, built from store errors and request problems.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rouse_shared::store::StoreError;
use serde_json::{Value, json};

use super::kinds::Kind;

/// A failed request, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// HTTP status code.
    pub code: StatusCode,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Invalid`, ...).
    pub reason: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// `details`: the object's name, group and kind and per-field causes.
    pub details: Option<Value>,
}

/// Which object a failure is about, for `details` and messages.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// Its kind.
    pub kind: Kind,
    /// Its name (may be empty for a create with generateName).
    pub name: &'a str,
}

impl Failure {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn about(mut self, subject: Subject<'_>, causes: Option<Vec<Value>>) -> Self {
        let mut details = json!({
            "name": subject.name,
            "group": subject.kind.group(),
            "kind": subject.kind.plural(),
        });
        if let Some(causes) = causes {
            details["causes"] = Value::Array(causes);
        }
        self.details = Some(details);
        self
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 401: no or a wrong bearer token.
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 404 for a path that names no route.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 404: the object does not exist.
    pub fn not_found(subject: Subject<'_>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{} \"{}\" not found", subject.kind.resource(), subject.name),
        )
        .about(subject, None)
    }

    /// 405: the route exists but not with this method.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 408: the request body did not arrive in time.
    pub fn timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "Timeout",
            format!("the request body did not arrive within {limit:?}"),
        )
    }

    /// 409: the resourceVersion precondition failed.
    pub fn conflict(subject: Subject<'_>, detail: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {detail}",
                subject.kind.resource(),
                subject.name
            ),
        )
        .about(subject, None)
    }

    /// 409: the name is taken.
    pub fn already_exists(subject: Subject<'_>) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!(
                "{} \"{}\" already exists",
                subject.kind.resource(),
                subject.name
            ),
        )
        .about(subject, None)
    }

    /// 410: a watch asked for a resourceVersion the store no longer has.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    /// 422: a patch that cannot be applied (a failed JSON patch `test`, a missing path).
    pub fn invalid_patch(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
    }

    /// 409: a server-side apply changes fields other managers own; `causes` are
    /// `(field, message)` pairs, reported as `FieldManagerConflict` causes.
    pub fn apply_conflict(message: impl Into<String>, causes: &[(String, String)]) -> Self {
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, message)| {
                json!({"reason": "FieldManagerConflict", "message": message, "field": field})
            })
            .collect();
        let mut failure = Self::new(StatusCode::CONFLICT, "Conflict", message);
        failure.details = Some(json!({"causes": causes}));
        failure
    }

    /// 413: the body is larger than the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("request body is larger than {limit} bytes"),
        )
    }

    /// 413 for a request that would build more than a limit allows (a JSON patch's
    /// operations, the object a write leaves).
    pub fn too_large_message(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            message,
        )
    }

    /// 429: too many requests of this sort in progress; retry after a second.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        let mut failure = Self::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message);
        failure.details = Some(json!({"retryAfterSeconds": 1}));
        failure
    }

    /// 415: the body's content type is not one the route reads.
    pub fn unsupported_media_type(got: &str, accepted: &[&str]) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({got}); accepted: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 422: the object is invalid; `causes` are `(field, message)` pairs.
    pub fn invalid(subject: Subject<'_>, causes: &[(String, String)]) -> Self {
        let listed: Vec<String> = causes
            .iter()
            .map(|(field, message)| match field.as_str() {
                "" => message.clone(),
                f => format!("{f}: {message}"),
            })
            .collect();
        let message = format!(
            "{}.{} \"{}\" is invalid: {}",
            subject.kind.kind(),
            subject.kind.group(),
            subject.name,
            listed.join("; ")
        );
        let causes = causes
            .iter()
            .map(|(field, message)| {
                json!({"reason": "FieldValueInvalid", "message": message, "field": field})
            })
            .collect();
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message).about(subject, Some(causes))
    }

    /// 500: something failed inside the server.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// 503: the store or a limit makes the server unable to answer now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    /// 504 `Timeout`: a watch from a resourceVersion newer than the store's, as kube-apiserver
    /// reports it (clients retry after a second).
    pub fn too_large_resource_version(message: impl Into<String>) -> Self {
        let mut failure = Self::new(StatusCode::GATEWAY_TIMEOUT, "Timeout", message);
        failure.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        failure
    }

    /// 504 `Timeout` for an exact list at a version the store has not reached, answered at
    /// once as etcd answers a future revision (no retry advice).
    pub fn too_large_resource_version_now(asked: u64, current: u64) -> Self {
        let mut failure = Self::too_large_resource_version(format!(
            "Too large resource version: {asked}, current: {current}"
        ));
        if let Some(details) = failure.details.as_mut().and_then(Value::as_object_mut) {
            details.remove("retryAfterSeconds");
        }
        failure
    }

    /// 422 for request options kube-apiserver refuses (`what` is e.g. `ListOptions`);
    /// `causes` are `(field, message)` pairs whose message starts with the error type
    /// (`Forbidden: ...`, `Unsupported value: ...`).
    pub fn invalid_options(what: &str, causes: &[(String, String)]) -> Self {
        let listed: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let message = format!(
            "{what}.meta.k8s.io \"\" is invalid: {}",
            if listed.len() == 1 {
                listed[0].clone()
            } else {
                format!("[{}]", listed.join(", "))
            }
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, message)| {
                let reason = if message.starts_with("Forbidden") {
                    "FieldValueForbidden"
                } else if message.starts_with("Unsupported value") {
                    "FieldValueNotSupported"
                } else {
                    "FieldValueInvalid"
                };
                json!({"reason": reason, "message": message, "field": field})
            })
            .collect();
        let mut failure = Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message);
        failure.details = Some(json!({"group": "meta.k8s.io", "kind": what, "causes": causes}));
        failure
    }

    /// The failure a store error stands for.
    pub fn from_store(kind: Kind, err: &StoreError) -> Self {
        match err {
            StoreError::NotFound { key, .. } => Self::not_found(Subject {
                kind,
                name: &key.name,
            }),
            StoreError::AlreadyExists { key, .. } => Self::already_exists(Subject {
                kind,
                name: &key.name,
            }),
            StoreError::Conflict { key, message, .. } => Self::conflict(
                Subject {
                    kind,
                    name: &key.name,
                },
                &format!(
                    "the object has been modified; please apply your changes to the latest version and try again ({message})"
                ),
            ),
            StoreError::Invalid { key, message, .. } => Self::invalid(
                Subject {
                    kind,
                    name: &key.name,
                },
                &[(String::new(), message.clone())],
            ),
            StoreError::Expired { .. } => Self::expired(err.to_string()),
            StoreError::TooLargeResourceVersion { .. } => {
                Self::too_large_resource_version(err.to_string())
            }
            StoreError::Unavailable { .. } => Self::unavailable(err.to_string()),
        }
    }

    /// The `Status` object.
    pub fn to_json(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        // As kube-apiserver: retry advice in the status is also a `Retry-After` header.
        let retry = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
            .filter(|s| *s > 0);
        let mut response = (self.code, axum::Json(self.to_json())).into_response();
        if let Some(seconds) = retry
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if self.code == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A handler's result: a response, or a `Status` failure.
pub type Reply<T> = Result<T, Failure>;
