//! The values `Store` calls take and return: object keys, list parameters, patches,
//! deletion outcomes and watch events.

use std::fmt;

use kube::ResourceExt;
use kube::core::Selector;
use serde_json::{Map, Value};

/// Namespace and name of an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Namespace of the object.
    pub namespace: String,
    /// Name of the object.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of an object; an unset namespace counts as `default`.
    pub fn of<K: kube::Resource>(object: &K) -> Self {
        Self {
            namespace: object.namespace().unwrap_or_else(|| "default".to_owned()),
            name: object.name_any(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Which objects a list or watch covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// One namespace, or all when `None`.
    pub namespace: Option<String>,
    /// Only objects whose labels match; the default selects all.
    pub selector: Selector,
}

impl ListParams {
    /// All objects of one namespace.
    pub fn namespace(namespace: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            selector: Selector::default(),
        }
    }
}

/// The objects of a list and the version of the store they were read at.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectList<K> {
    /// The objects, ordered by namespace then name.
    pub items: Vec<K>,
    /// Where a watch continuing this list starts.
    pub resource_version: String,
}

/// A change to apply to an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// A JSON merge patch (RFC 7386): maps merge, `null` deletes a key, lists are replaced.
    Merge(Value),
}

impl Patch {
    /// Makes the patch conditional: it fails with a conflict unless the stored object still
    /// has this resourceVersion (Kubernetes treats `metadata.resourceVersion` in a merge patch
    /// as a precondition).
    pub fn with_resource_version(self, resource_version: &str) -> Self {
        let Patch::Merge(mut value) = self;
        if !value.is_object() {
            value = Value::Object(Map::new());
        }
        if let Value::Object(root) = &mut value {
            let meta = root
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            if let Value::Object(meta) = meta {
                meta.insert(
                    "resourceVersion".to_owned(),
                    Value::String(resource_version.to_owned()),
                );
            }
        }
        Patch::Merge(value)
    }

    /// The resourceVersion precondition the patch carries, if any.
    pub fn resource_version(&self) -> Option<&str> {
        let Patch::Merge(value) = self;
        value.pointer("/metadata/resourceVersion")?.as_str()
    }
}

/// Preconditions of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// Delete only if the stored object has this resourceVersion.
    pub resource_version: Option<String>,
    /// Delete only if the stored object has this uid (not a re-created namesake).
    pub uid: Option<String>,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion<K> {
    /// The object is gone.
    Deleted(K),
    /// Finalizers hold it: it is marked with a `deletionTimestamp` and goes when they clear.
    Pending(K),
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<K> {
    /// An object appeared.
    Added(K),
    /// An object changed.
    Modified(K),
    /// An object went away (its last state).
    Deleted(K),
    /// Nothing changed for the watched objects up to this version; resume from here.
    Bookmark {
        /// The version to resume from.
        resource_version: String,
    },
}
