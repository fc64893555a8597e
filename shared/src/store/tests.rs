//! Tests of the store's value types and error classification.

use serde_json::json;

use super::{Patch, StoreError};
use crate::api::Sandbox;
use crate::store::ObjectKey;

#[test]
fn conditional_merge_patch() {
    struct Case {
        name: &'static str,
        given: serde_json::Value,
        want: serde_json::Value,
    }
    let cases = [
        Case {
            name: "adds metadata",
            given: json!({"spec": {"operatingMode": "Running"}}),
            want: json!({"spec": {"operatingMode": "Running"}, "metadata": {"resourceVersion": "7"}}),
        },
        Case {
            name: "keeps other metadata",
            given: json!({"metadata": {"labels": {"a": "b"}}}),
            want: json!({"metadata": {"labels": {"a": "b"}, "resourceVersion": "7"}}),
        },
        Case {
            name: "replaces a stale version",
            given: json!({"metadata": {"resourceVersion": "3"}}),
            want: json!({"metadata": {"resourceVersion": "7"}}),
        },
    ];
    for case in cases {
        let got = Patch::merge(case.given)
            .expect("an object")
            .with_resource_version("7");
        assert_eq!(got.resource_version(), Some("7"), "{}", case.name);
        assert_eq!(Some(got), Patch::merge(case.want), "{}", case.name);
    }
    let plain = Patch::merge(json!({"spec": {}})).expect("an object");
    assert_eq!(plain.resource_version(), None);
    assert_eq!(Patch::merge(json!(null)), None);
    assert_eq!(Patch::merge(json!([1])), None);
}

#[test]
fn error_classification() {
    let key = ObjectKey::new("team-a", "alice");
    let cases: [(StoreError, &str, bool); 6] = [
        (
            StoreError::NotFound {
                kind: "Sandbox".into(),
                key: key.clone(),
            },
            "not_found",
            false,
        ),
        (
            StoreError::Conflict {
                kind: "Sandbox".into(),
                key: key.clone(),
                message: "resourceVersion 3 is not 4".into(),
            },
            "conflict",
            true,
        ),
        (
            StoreError::AlreadyExists {
                kind: "Sandbox".into(),
                key: key.clone(),
            },
            "already_exists",
            false,
        ),
        (
            StoreError::Invalid {
                kind: "Sandbox".into(),
                key: key.clone(),
                message: "spec.podTemplate: required".into(),
            },
            "invalid",
            false,
        ),
        (
            StoreError::Expired {
                resource_version: "12".into(),
            },
            "expired",
            false,
        ),
        (
            StoreError::Unavailable {
                message: "connection refused".into(),
                source: None,
            },
            "unavailable",
            true,
        ),
    ];
    for (err, label, retryable) in cases {
        assert_eq!(err.metric_label(), label, "{err}");
        assert_eq!(err.is_retryable(), retryable, "{err}");
        assert_eq!(err.is_not_found(), label == "not_found", "{err}");
    }
    let err = StoreError::NotFound {
        kind: "Sandbox".into(),
        key,
    };
    assert_eq!(err.to_string(), "Sandbox team-a/alice not found");
}

#[test]
fn object_key_of_an_object() {
    let mut sandbox = Sandbox::new("alice", Default::default());
    assert_eq!(ObjectKey::of(&sandbox).to_string(), "default/alice");
    sandbox.metadata.namespace = Some("team-a".into());
    assert_eq!(ObjectKey::of(&sandbox), ObjectKey::new("team-a", "alice"));
}
