//! JSON merge patches (RFC 7386): applying one (`json_patch::merge`), and computing the one
//! that turns an object into another (how a replace becomes a store patch).

use serde_json::{Map, Value};

/// Applies `patch` to `target` as a JSON merge patch: objects merge, `null` removes a key,
/// anything else replaces. The size and depth of what it builds are bounded by the callers
/// (`bounds::check_object_size` on the result, the body limit on the patch).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// The merge patch that turns `from` into `to` (both objects): changed keys with their new
/// value, removed keys as `null`, nested objects recursively.
pub(crate) fn diff(from: &Map<String, Value>, to: &Map<String, Value>) -> Map<String, Value> {
    let mut patch = Map::new();
    for (key, old) in from {
        match to.get(key) {
            None => {
                patch.insert(key.clone(), Value::Null);
            }
            Some(new) if new == old => {}
            Some(Value::Object(new)) => match old {
                Value::Object(old) => {
                    patch.insert(key.clone(), Value::Object(diff(old, new)));
                }
                _ => {
                    patch.insert(key.clone(), Value::Object(new.clone()));
                }
            },
            Some(new) => {
                patch.insert(key.clone(), new.clone());
            }
        }
    }
    for (key, new) in to {
        if !from.contains_key(key) {
            patch.insert(key.clone(), new.clone());
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{diff, merge_patch};

    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!(["a"]), json!({"a": "b"}), json!({"a": "b"})),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
        ];
        for (mut target, patch, want) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn diff_round_trips() {
        let from = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1], "f": "x"});
        let to = json!({"a": 1, "b": {"c": 4}, "e": [2], "g": {"h": true}});
        let patch = diff(
            from.as_object().expect("object"),
            to.as_object().expect("object"),
        );
        assert_eq!(
            serde_json::Value::Object(patch.clone()),
            json!({"b": {"c": 4, "d": null}, "e": [2], "f": null, "g": {"h": true}})
        );
        let mut applied = from.clone();
        merge_patch(&mut applied, &serde_json::Value::Object(patch));
        assert_eq!(applied, to);
    }
}
