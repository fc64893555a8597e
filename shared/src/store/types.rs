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
    /// A JSON merge patch (RFC 7386) of the object: maps merge, `null` deletes a key, lists
    /// are replaced.
    Merge(Map<String, Value>),
}

impl Patch {
    /// A merge patch from a JSON value; `None` unless it is an object, as a patch of a
    /// Kubernetes object must be.
    pub fn merge(value: Value) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Patch::Merge(map)),
            _ => None,
        }
    }

    /// Makes the patch conditional: it fails with a conflict unless the stored object still
    /// has this resourceVersion (Kubernetes treats `metadata.resourceVersion` in a merge patch
    /// as a precondition).
    pub fn with_resource_version(self, resource_version: &str) -> Self {
        let Patch::Merge(mut root) = self;
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
        Patch::Merge(root)
    }

    /// The resourceVersion precondition the patch carries, if any.
    pub fn resource_version(&self) -> Option<&str> {
        let Patch::Merge(root) = self;
        root.get("metadata")?.get("resourceVersion")?.as_str()
    }
}

/// Preconditions and cascading of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// Delete only if the stored object has this resourceVersion.
    pub resource_version: Option<String>,
    /// Delete only if the stored object has this uid (not a re-created namesake).
    pub uid: Option<String>,
    /// What happens to the objects this one owns; the store's default (background) if unset.
    pub propagation: Option<Propagation>,
}

/// How deleting an owner affects the objects it owns (Kubernetes `propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes at once; owned objects are deleted afterwards.
    Background,
    /// The owner stays, marked for deletion, until its owned objects are gone.
    Foreground,
    /// Owned objects are kept and lose their owner reference.
    Orphan,
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
