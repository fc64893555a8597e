//! Checks a document against the structural OpenAPI schema of its CRD, the way the API server
//! would, except that unknown fields are reported instead of silently pruned.
//!
//! Supported: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
//! `format` (`int32`, `int64`, `date-time`), `minimum`/`maximum` (and their exclusive forms),
//! `minLength`/`maxLength`, `minItems`/`maxItems`, `nullable`,
//! `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields` and the uniqueness of
//! `x-kubernetes-list-type: map | set` lists. CEL rules (`x-kubernetes-validations`) are left
//! to the API server: the immutability rule only constrains updates, and the Service-name rule
//! is checked by `rules` directly.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::text::quote;
use super::{FieldPath, Findings, suggest};

/// Checks `value` at `path` against `schema`, appending what is wrong to `out`.
pub(super) fn check(value: &Value, schema: &Value, path: &FieldPath, out: &mut Findings) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    if value.is_null() {
        // The API server prunes nulls of non-nullable fields; absence is checked by the parent.
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if as_integer(value).is_none() && !value.is_string() {
            out.error(
                path,
                format!("must be an integer or a string, got {}", describe(value)),
            );
        }
        return;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => check_object(value, schema, path, out),
        Some("array") => check_array(value, schema, path, out),
        Some("string") => check_string(value, schema, path, out),
        Some("integer") => check_integer(value, schema, path, out),
        Some("number") => {
            if value.is_number() {
                check_bounds(value, schema, path, out);
            } else {
                out.error(path, format!("must be a number, got {}", describe(value)));
            }
        }
        Some("boolean") if !value.is_boolean() => {
            let hint = match value.as_str() {
                Some("true" | "false") => "; remove the quotes",
                _ => "",
            };
            out.error(
                path,
                format!("must be true or false, got {}{hint}", describe(value)),
            );
        }
        _ => {}
    }
}

fn check_object(value: &Value, schema: &Map<String, Value>, path: &FieldPath, out: &mut Findings) {
    let Some(object) = value.as_object() else {
        out.error(path, format!("must be a mapping, got {}", describe(value)));
        return;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    for (key, child) in object {
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            check(child, child_schema, &path.field(key), out);
        } else if let Some(item_schema) = additional.filter(|a| a.is_object()) {
            check(child, item_schema, &path.key(key), out);
        } else if !(preserve || additional.and_then(Value::as_bool) == Some(true)) {
            let known = properties.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>());
            out.error(
                &path.field(key),
                unknown_field(key, known.as_deref().unwrap_or(&[])),
            );
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if object.get(name).is_none_or(Value::is_null) {
                out.error(&path.field(name), "required field is missing".to_owned());
            }
        }
    }
}

/// The message for a field the schema does not know.
pub(super) fn unknown_field(key: &str, known: &[&str]) -> String {
    let mut msg = format!("unknown field {}", quote(key));
    if let Some(best) = suggest(key, known.iter().copied()) {
        msg.push_str(&format!(" (did you mean \"{best}\"?)"));
    }
    msg.push_str("; the API server would drop it");
    msg
}

fn check_array(value: &Value, schema: &Map<String, Value>, path: &FieldPath, out: &mut Findings) {
    let Some(items) = value.as_array() else {
        out.error(path, format!("must be a list, got {}", describe(value)));
        return;
    };
    let len = items.len() as u64;
    if let Some(min) = schema
        .get("minItems")
        .and_then(Value::as_u64)
        .filter(|m| len < *m)
    {
        out.error(path, format!("must have at least {min} items, has {len}"));
    }
    if let Some(max) = schema
        .get("maxItems")
        .and_then(Value::as_u64)
        .filter(|m| len > *m)
    {
        out.error(path, format!("must have at most {max} items, has {len}"));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item, item_schema, &path.index(i), out);
        }
    }
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            check_unique(items, path, out, |item| {
                keys.iter()
                    .map(|k| item.get(*k).map(Value::to_string).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", ")
            });
        }
        Some("set") => check_unique(items, path, out, Value::to_string),
        _ => {}
    }
}

fn check_unique(
    items: &[Value],
    path: &FieldPath,
    out: &mut Findings,
    key: impl Fn(&Value) -> String,
) {
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let k = key(item);
        if !seen.insert(k.clone()) {
            out.error(&path.index(i), format!("duplicate entry {k}"));
        }
    }
}

fn check_string(value: &Value, schema: &Map<String, Value>, path: &FieldPath, out: &mut Findings) {
    let Some(s) = value.as_str() else {
        let hint = if value.is_number() || value.is_boolean() {
            "; quote the value to make it a string".to_owned()
        } else {
            String::new()
        };
        out.error(
            path,
            format!("must be a string, got {}{hint}", describe(value)),
        );
        return;
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        if !names.contains(&s) {
            let mut msg = format!("must be one of {}, got {}", names.join(", "), quote(s));
            if let Some(best) = suggest(s, names.iter().copied()) {
                msg.push_str(&format!(" (did you mean \"{best}\"?)"));
            }
            out.error(path, msg);
        }
    }
    let chars = s.chars().count() as u64;
    if let Some(max) = schema
        .get("maxLength")
        .and_then(Value::as_u64)
        .filter(|m| chars > *m)
    {
        out.error(
            path,
            format!("must be at most {max} characters, has {chars}"),
        );
    }
    if let Some(min) = schema
        .get("minLength")
        .and_then(Value::as_u64)
        .filter(|m| chars < *m)
    {
        out.error(
            path,
            format!("must be at least {min} characters, has {chars}"),
        );
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time") && !is_rfc3339(s) {
        out.error(
            path,
            format!(
                "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got {}",
                quote(s)
            ),
        );
    }
}

fn check_integer(value: &Value, schema: &Map<String, Value>, path: &FieldPath, out: &mut Findings) {
    let Some(n) = as_integer(value) else {
        let message = if value.is_u64() {
            format!("must fit in a 64-bit integer, got {value}")
        } else {
            let hint = match value.as_str() {
                Some(s) if s.parse::<i64>().is_ok() => "; remove the quotes",
                _ => "",
            };
            format!("must be an integer, got {}{hint}", describe(value))
        };
        out.error(path, message);
        return;
    };
    let int32 = schema.get("format").and_then(Value::as_str) == Some("int32");
    if int32 && i32::try_from(n).is_err() {
        out.error(path, format!("must fit in a 32-bit integer, got {n}"));
    } else {
        check_bounds(value, schema, path, out);
    }
}

/// The value as an integer: an integer, or a whole-number float (`8080.0`, `1e3`), which the
/// API server takes as one too. `None` for anything else, or beyond what an `i64` holds.
pub(super) fn as_integer(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            // In range by the filter, so the cast is exact.
            .map(|f| f as i64)
    })
}

fn check_bounds(value: &Value, schema: &Map<String, Value>, path: &FieldPath, out: &mut Findings) {
    let Some(n) = value.as_f64() else {
        return;
    };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let exclusive = flag(schema, "exclusiveMinimum");
        if n < min || (exclusive && n == min) {
            let bound = if exclusive {
                "greater than"
            } else {
                "at least"
            };
            out.error(path, format!("must be {bound} {}, got {value}", show(min)));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let exclusive = flag(schema, "exclusiveMaximum");
        if n > max || (exclusive && n == max) {
            let bound = if exclusive { "less than" } else { "at most" };
            out.error(path, format!("must be {bound} {}, got {value}", show(max)));
        }
    }
}

fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Formats a schema bound without a pointless `.0`.
fn show(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// True for an RFC 3339 date-time as Kubernetes parses it:
/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, with a real calendar date.
pub(super) fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    let zone_ok = rest == "Z"
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3].bytes().all(|c| c.is_ascii_digit())
            && rest[4..6].bytes().all(|c| c.is_ascii_digit())
            && rest[1..3] <= *"23"
            && rest[4..6] <= *"59");
    // The shape is right; the calendar (month 13, February 30, hour 25) is jiff's to judge.
    zone_ok
        && (s.parse::<k8s_openapi::jiff::Timestamp>().is_ok()
            || super::far_time::is_past_the_end(s))
}

/// A short description of a JSON value for error messages, e.g. `string "3"`.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(s) => format!("string {}", quote(s)),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
    }
}
