//! Bounds on what one write may build, checked before the work they bound: the operations of a
//! JSON patch, the bytes its `copy` operations add, the size of the object any write produces,
//! and what the YAML of a server-side apply may expand to.
//!
//! A patch body is small (at most [`ApiConfig::max_body_bytes`]) but may describe a large
//! document: 18 `copy` operations that each copy a map into itself double it 18 times. As
//! kube-apiserver does since CVE-2019-1002100, a JSON patch has at most 10,000 operations
//! (413) and its copies may add at most as many bytes as a request body may hold (422, checked
//! before each copy is made); `add` and `replace` values come from the body, so a patched
//! document is never larger than the object, the body and the copy budget together. The
//! object any write leaves must then fit [`ApiConfig::max_object_bytes`] (413), as etcd
//! refuses objects over its request limit.

use std::cell::Cell;

use serde_json::Value;

use super::config::ApiConfig;
use super::kinds::Kind;
use super::status::{Failure, Reply, Subject};

/// The serialized (compact JSON) size of `value`, or `None` once it passes `limit`; counting
/// stops there, so the cost is bounded by the limit, not by the value.
pub(crate) fn json_size(value: &impl serde::Serialize, limit: usize) -> Option<usize> {
    /// Counts bytes and fails the serialization once past the limit.
    struct Counter {
        bytes: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes = self.bytes.saturating_add(buf.len());
            if self.bytes > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { bytes: 0, limit };
    serde_json::to_writer(&mut counter, value)
        .ok()
        .map(|()| counter.bytes)
}

/// Applies a JSON patch (RFC 6902) to `doc` within the config's bounds: 413 for more than
/// [`ApiConfig::max_json_patch_operations`] operations (before any is applied), 422 before a
/// `copy` that would take the bytes copied past [`ApiConfig::max_json_patch_copy_bytes`], 422
/// for an operation that cannot be applied. `doc` is the caller's scratch copy: on an error it
/// may hold the operations before the failing one.
pub(super) fn apply_json_patch(
    doc: &mut Value,
    ops: &json_patch::Patch,
    config: &ApiConfig,
) -> Reply<()> {
    if ops.0.len() > config.max_json_patch_operations {
        return Err(Failure::too_large_message(format!(
            "The allowed maximum operations in a JSON patch is {}, got {}",
            config.max_json_patch_operations,
            ops.0.len()
        )));
    }
    let budget = config.max_json_patch_copy_bytes;
    let mut copied = 0_usize;
    for (index, op) in ops.0.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(copy) = op
            && let Some(source) = doc.pointer(copy.from.as_str())
        {
            let left = budget.saturating_sub(copied);
            match json_size(source, left) {
                Some(size) => copied += size,
                None => {
                    return Err(Failure::invalid_patch(format!(
                        "the JSON patch cannot be applied: its copy operations would add more than {budget} bytes (operation {index} copies {})",
                        copy.from
                    )));
                }
            }
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|e| {
            Failure::invalid_patch(format!(
                "the JSON patch cannot be applied: operation {index} ({}): {}",
                e.path, e.kind
            ))
        })?;
    }
    Ok(())
}

/// 413 when the object a write would leave is larger than [`ApiConfig::max_object_bytes`].
pub(super) fn check_object_size(
    kind: Kind,
    name: &str,
    object: &impl serde::Serialize,
    config: &ApiConfig,
) -> Reply<()> {
    let limit = config.max_object_bytes;
    match json_size(object, limit) {
        Some(_) => Ok(()),
        None => Err(Failure::too_large_message(format!(
            "{} \"{name}\" would be larger than {limit} bytes, the limit of one object",
            Subject { kind, name }.kind.resource()
        ))),
    }
}

/// The body of a server-side apply as a JSON value: YAML (or JSON) whose anchors and aliases
/// may not expand past the object limit; 413 past it (checked while the value is built, so an
/// alias bomb stops at the limit), 400 when the body is not YAML.
pub(super) fn parse_apply(bytes: &[u8], config: &ApiConfig) -> Reply<Value> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Failure::bad_request("the apply body is not UTF-8"))?;
    let mut options = serde_saphyr::Options::default();
    if let Some(budget) = options.budget.as_mut() {
        budget.max_aliases = APPLY_MAX_ALIASES;
        budget.max_documents = 1;
    }
    let left = Cell::new(config.max_object_bytes);
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde::de::DeserializeSeed::deserialize(BoundedValue { left: &left }, de)
    });
    match parsed {
        Ok(value) => Ok(value),
        Err(_) if left.get() == 0 => Err(Failure::too_large_message(format!(
            "the applied configuration is larger than {} bytes, the limit of one object",
            config.max_object_bytes
        ))),
        Err(e) => Err(Failure::bad_request(format!(
            "the apply body is not YAML or JSON: {e}"
        ))),
    }
}

/// Most aliases (`*name`) one apply body may use.
const APPLY_MAX_ALIASES: usize = 1_000;

/// Deserializes any self-describing input into a JSON value, charging every node against
/// `left` (its compact JSON size, roughly) and failing once it is spent: a YAML alias is
/// charged each time it is expanded, so what is built never passes the budget.
struct BoundedValue<'a> {
    left: &'a Cell<usize>,
}

impl BoundedValue<'_> {
    fn charge<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.left.set(0);
                Err(E::custom("the document is over the size limit"))
            }
        }
    }

    fn again(&self) -> Self {
        BoundedValue { left: self.left }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for BoundedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML or JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(5)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(20)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(20)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(24)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(v.len() + 2)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(v.len() + 2)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.charge(4)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        serde::de::DeserializeSeed::deserialize(self, de)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(2)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.again())? {
            self.charge(1)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(2)?;
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.charge(key.len() + 4)?;
            let value = map.next_value_seed(self.again())?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::json_size;

    #[test]
    fn json_size_counts_compact_json_and_stops_at_the_limit() {
        let value = json!({"a": [1, "x\"y"], "b": null});
        let exact = serde_json::to_vec(&value).expect("json").len();
        assert_eq!(json_size(&value, usize::MAX), Some(exact));
        assert_eq!(json_size(&value, exact), Some(exact));
        assert_eq!(json_size(&value, exact - 1), None);
        assert_eq!(json_size(&json!("x".repeat(10_000)), 100), None);
    }
}
