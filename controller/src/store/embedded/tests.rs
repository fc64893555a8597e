//! Unit tests of the pure metadata rules.

use serde_json::{Value, json};

use super::meta::{Part, apply_patch, generated_name, merge, new_uid, spec_changed};

#[test]
fn merge_patch_follows_rfc_7386() {
    // The examples of RFC 7386, appendix A.
    let cases: [(Value, Value, Value); 13] = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (
            json!({"a": "b"}),
            json!({"b": "c"}),
            json!({"a": "b", "b": "c"}),
        ),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (
            json!({"a": "b", "b": "c"}),
            json!({"a": null}),
            json!({"b": "c"}),
        ),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (
            json!({"a": {"b": "c"}}),
            json!({"a": {"b": "d", "c": null}}),
            json!({"a": {"b": "d"}}),
        ),
        (
            json!({"a": [{"b": "c"}]}),
            json!({"a": [1]}),
            json!({"a": [1]}),
        ),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (
            json!({"e": null}),
            json!({"a": 1}),
            json!({"e": null, "a": 1}),
        ),
        (
            json!([1, 2]),
            json!({"a": "b", "c": null}),
            json!({"a": "b"}),
        ),
    ];
    for (i, (mut target, patch, want)) in cases.into_iter().enumerate() {
        merge(&mut target, &patch);
        assert_eq!(target, want, "example {i}");
    }
    let mut nested = json!({});
    merge(&mut nested, &json!({"a": {"bb": {"ccc": null}}}));
    assert_eq!(nested, json!({"a": {"bb": {}}}));
}

#[test]
fn generated_names_and_uids() {
    let name = generated_name("web-").expect("random");
    assert_eq!(name.len(), 9);
    assert!(name.starts_with("web-"));
    let long = generated_name(&"x".repeat(80)).expect("random");
    assert_eq!(long.len(), 63, "the prefix is cut to 58 characters");
    let uid = new_uid().expect("random");
    let parts: Vec<usize> = uid.split('-').map(str::len).collect();
    assert_eq!(parts, vec![8, 4, 4, 4, 12], "{uid}");
    assert!(
        matches!(&uid[19..20], "8" | "9" | "a" | "b"),
        "RFC 4122 variant: {uid}"
    );
    assert_ne!(uid, new_uid().expect("random"));
}

#[test]
fn status_patches_and_spec_changes() {
    let stored = json!({
        "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "3", "generation": 2},
        "spec": {"x": 1},
        "status": {"phase": "Running", "ip": "10.0.0.1"},
    });
    let patch =
        json!({"status": {"ip": null}, "spec": {"x": 2}, "metadata": {"labels": {"l": "v"}}});
    let got = apply_patch(&stored, patch.as_object().expect("map"), Part::Status).expect("apply");
    assert_eq!(got["status"], json!({"phase": "Running"}));
    assert_eq!(got["spec"], stored["spec"]);
    assert_eq!(got["metadata"], stored["metadata"]);
    assert!(!spec_changed(&stored, &got));

    let patch = json!({"status": {"phase": "Gone"}, "spec": {"y": true}});
    let got = apply_patch(&stored, patch.as_object().expect("map"), Part::Main).expect("apply");
    assert_eq!(got["status"], stored["status"], "main patches keep status");
    assert_eq!(got["spec"], json!({"x": 1, "y": true}));
    assert!(spec_changed(&stored, &got));

    let cleared = json!({"status": null});
    let got = apply_patch(&stored, cleared.as_object().expect("map"), Part::Status).expect("apply");
    assert!(got.get("status").is_none(), "null removes the whole status");
}
