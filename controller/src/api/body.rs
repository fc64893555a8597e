//! Reading request bodies: content type, size limit and JSON parsing, each with its own
//! `Status`.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

use super::config::ApiConfig;
use super::status::Failure;

/// Content types a create or replace accepts.
pub(crate) const JSON: &[&str] = &["application/json"];
/// Content types a patch accepts: a merge patch (or plain JSON read as one), a JSON patch or
/// a server-side apply.
pub(crate) const ANY_PATCH: &[&str] = &[
    "application/merge-patch+json",
    "application/json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
];

/// Reads a JSON object body sent as one of `accepted` types, within the config's size and
/// time limits. A body without a `Content-Type` is JSON, as kube-apiserver reads it (the
/// official Python client sends none on POST and PUT).
pub(crate) async fn read_json(
    headers: &HeaderMap,
    body: Body,
    config: &ApiConfig,
    accepted: &[&str],
) -> Result<Value, Failure> {
    let (_, bytes) = read_body(headers, body, config, accepted).await?;
    parse_object(&bytes)
}

/// The media type of the body (lowercase, without parameters; `application/json` when none
/// is given), or 415 when it is not one of `accepted`.
pub(crate) fn media_type(headers: &HeaderMap, accepted: &[&str]) -> Result<String, Failure> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok("application/json".to_owned());
    };
    let content_type = value.to_str().unwrap_or("(not text)");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !accepted.contains(&essence.as_str()) {
        return Err(Failure::unsupported_media_type(content_type, accepted));
    }
    Ok(essence)
}

/// A JSON object from `bytes`, or 400.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Value, Failure> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Failure::bad_request(format!("the request body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Failure::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// The body's media type and bytes, within the config's size and time limits.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    config: &ApiConfig,
    accepted: &[&str],
) -> Result<(String, axum::body::Bytes), Failure> {
    let limit = config.max_body_bytes;
    let essence = media_type(headers, accepted)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(Failure::too_large(limit));
    }
    let collected = tokio::time::timeout(
        config.body_read_timeout,
        Limited::new(body, limit).collect(),
    )
    .await
    .map_err(|_| Failure::timeout(config.body_read_timeout))?;
    let bytes = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(Failure::too_large(limit));
        }
        Err(e) => {
            return Err(Failure::bad_request(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    Ok((essence, bytes))
}
