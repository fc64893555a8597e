//! Date-times past the end of the representable range. Kubernetes takes any RFC 3339 time up
//! to `9999-12-31T23:59:59Z` (a common "never"), but the time type of the API structs ends
//! at `9999-12-30T22:00:00.999999999Z`. Such times are accepted and stored as its last whole
//! second, which means the same: never in practice.

use serde_json::Value;

/// The last whole second the API structs can hold, as Kubernetes writes times.
pub const LAST_TIME: &str = "9999-12-30T22:00:00Z";

/// True for a well-formed date-time with a real calendar date in year 9999 that lies past
/// [`LAST_TIME`].
pub(super) fn is_past_the_end(s: &str) -> bool {
    s.starts_with("9999-")
        && s.parse::<jiff::Timestamp>().is_err()
        && s.get(..19)
            .is_some_and(|civil| civil.parse::<jiff::civil::DateTime>().is_ok())
}

/// True when any string in `value` starts with year 9999: only then can a time need clamping.
pub(super) fn mentions_year_9999(value: &Value) -> bool {
    match value {
        Value::String(s) => s.starts_with("9999-"),
        Value::Array(items) => items.iter().any(mentions_year_9999),
        Value::Object(fields) => fields.values().any(mentions_year_9999),
        _ => false,
    }
}

/// Replaces every `date-time` field of a `kind` object (or of a patch of one) that lies past
/// [`LAST_TIME`] with it; other fields and kinds are left as they are.
pub fn clamp_far_times(kind: &str, doc: &mut Value) {
    let Some(schema) = super::kinds().iter().find(|k| k.kind == kind) else {
        return;
    };
    let Some(object) = doc.as_object_mut() else {
        return;
    };
    for part in ["spec", "status"] {
        if let (Some(value), Some(part_schema)) = (
            object.get_mut(part),
            schema.schema.pointer(&format!("/properties/{part}")),
        ) {
            clamp(value, part_schema);
        }
    }
}

fn clamp(value: &mut Value, schema: &Value) {
    match value {
        Value::String(s)
            if schema.get("format").and_then(Value::as_str) == Some("date-time")
                && is_past_the_end(s) =>
        {
            *s = LAST_TIME.to_owned();
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    clamp(item, item_schema);
                }
            }
        }
        Value::Object(fields) => {
            let properties = schema.get("properties");
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in fields.iter_mut() {
                if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
                    clamp(child, child_schema);
                }
            }
        }
        _ => {}
    }
}
