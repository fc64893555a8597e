//! The redb tables of the embedded store and the reads shared by readers and the writer.
//!
//! File layout (format 1):
//! - `objects`: `(kind, namespace, name)` → the object as JSON bytes. Tuple keys keep objects
//!   ordered by kind, then namespace, then name, so a list is one range scan.
//! - `owners`: `(owner uid, kind, namespace, name)` → `()`: who each owner reference points
//!   at, so a cascading delete finds dependents without scanning every kind.
//! - `meta`: `"resource_version"` (the last version handed out), `"reserved_version"` (versions
//!   up to it may have been seen before they were durable; see `writer`) and `"format"`.

use redb::{ReadableTable, TableDefinition};
use rouse_shared::store::StoreError;
use serde_json::Value;

/// Objects by `(kind, namespace, name)`.
pub(crate) const OBJECTS: TableDefinition<(&str, &str, &str), &[u8]> =
    TableDefinition::new("objects");
/// Owner index: `(owner uid, dependent kind, namespace, name)`.
pub(crate) const OWNERS: TableDefinition<(&str, &str, &str, &str), ()> =
    TableDefinition::new("owners");
/// Store-wide counters.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// `meta` key of the last resourceVersion handed out.
pub(crate) const RESOURCE_VERSION: &str = "resource_version";
/// `meta` key of the highest version that may have been published before its commit was
/// durable: a reopened store hands out versions above it, so none is ever seen twice.
pub(crate) const RESERVED_VERSION: &str = "reserved_version";
/// `meta` key of the file format version.
pub(crate) const FORMAT: &str = "format";
/// The file format this code writes and reads.
pub(crate) const FORMAT_VERSION: u64 = 1;

/// A storage failure as the store reports it.
pub(crate) fn unavailable(what: &str, err: impl Into<redb::Error>) -> StoreError {
    let err: redb::Error = err.into();
    StoreError::Unavailable {
        message: format!("{what}: {err}"),
        source: Some(Box::new(err)),
    }
}

/// A stored object that is not valid JSON: the file was damaged or written by other code.
fn corrupt(kind: &str, namespace: &str, name: &str, err: serde_json::Error) -> StoreError {
    StoreError::Unavailable {
        message: format!("stored {kind} {namespace}/{name} is not valid JSON: {err}"),
        source: Some(Box::new(err)),
    }
}

/// One object, if stored.
pub(crate) fn get_object(
    table: &impl ReadableTable<(&'static str, &'static str, &'static str), &'static [u8]>,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, StoreError> {
    let Some(guard) = table
        .get((kind, namespace, name))
        .map_err(|e| unavailable("read object", e))?
    else {
        return Ok(None);
    };
    serde_json::from_slice(guard.value())
        .map(Some)
        .map_err(|e| corrupt(kind, namespace, name, e))
}

/// All objects of a kind, in one namespace or all, ordered by namespace then name.
pub(crate) fn list_objects(
    table: &impl ReadableTable<(&'static str, &'static str, &'static str), &'static [u8]>,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Vec<Value>, StoreError> {
    let start = (kind, namespace.unwrap_or(""), "");
    let mut out = Vec::new();
    for entry in table
        .range(start..)
        .map_err(|e| unavailable("list objects", e))?
    {
        let (key, value) = entry.map_err(|e| unavailable("list objects", e))?;
        let (k, ns, name) = key.value();
        if k != kind || namespace.is_some_and(|want| want != ns) {
            break;
        }
        out.push(serde_json::from_slice(value.value()).map_err(|e| corrupt(k, ns, name, e))?);
    }
    Ok(out)
}

/// The last resourceVersion handed out (0 for a new store).
pub(crate) fn resource_version(
    table: &impl ReadableTable<&'static str, u64>,
) -> Result<u64, StoreError> {
    Ok(table
        .get(RESOURCE_VERSION)
        .map_err(|e| unavailable("read resource version", e))?
        .map_or(0, |v| v.value()))
}

/// The reserved version (see [`RESERVED_VERSION`]; 0 when none was reserved).
pub(crate) fn reserved_version(
    table: &impl ReadableTable<&'static str, u64>,
) -> Result<u64, StoreError> {
    Ok(table
        .get(RESERVED_VERSION)
        .map_err(|e| unavailable("read reserved version", e))?
        .map_or(0, |v| v.value()))
}
