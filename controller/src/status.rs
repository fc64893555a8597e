//! Status writes that touch only what changed: a merge patch of the top-level status fields
//! that differ, so a concurrent writer of another field is never reverted.

use rouse_shared::store::Patch;
use serde::Serialize;
use serde_json::{Map, Value};

/// A merge patch turning status `old` into `new`, one entry per differing top-level field
/// (`null` for a removed one); `None` when they are equal.
pub(crate) fn status_patch<T: Serialize>(old: &T, new: &T) -> Option<Patch> {
    let as_map = |s: &T| match serde_json::to_value(s) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut diff = Map::new();
    for (k, v) in &new {
        if old.get(k) != Some(v) {
            diff.insert(k.clone(), v.clone());
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            diff.insert(k.clone(), Value::Null);
        }
    }
    if diff.is_empty() {
        return None;
    }
    let mut root = Map::new();
    root.insert("status".to_owned(), Value::Object(diff));
    Some(Patch::Merge(root))
}
