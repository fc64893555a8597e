//! Which objects a list or watch covers, and what a change looks like to one watcher: an
//! object that starts matching a selector is `Added` for it, one that stops is `Deleted`, as
//! the Kubernetes watch cache does.

use kube::core::SelectorExt;
use rouse_shared::store::ListParams;
use serde_json::Value;

use super::meta::{labels, meta_str};

/// What happened to an object in a committed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeType {
    /// Created.
    Added,
    /// Updated (spec, metadata or status).
    Modified,
    /// Removed.
    Deleted,
}

/// An event as one watcher sees it, before decoding into its kind.
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    /// Added, Modified or Deleted for this watcher.
    pub ty: ChangeType,
    /// The object after the change (for Deleted, its last state).
    pub object: std::sync::Arc<Value>,
    /// The change's resourceVersion.
    pub rv: u64,
}

/// Whether `params` covers `object` (namespace and label selector).
pub(crate) fn selects(params: &ListParams, object: &Value) -> bool {
    if let Some(namespace) = &params.namespace
        && meta_str(object, "namespace") != Some(namespace.as_str())
    {
        return false;
    }
    params.selector.selects_all() || params.selector.matches(&labels(object))
}

/// The event a watcher with `params` sees for a change, if any.
pub(crate) fn event_for(
    params: &ListParams,
    ty: ChangeType,
    object: &std::sync::Arc<Value>,
    previous: Option<&std::sync::Arc<Value>>,
    rv: u64,
) -> Option<RawEvent> {
    let now = selects(params, object);
    let seen_ty = match ty {
        ChangeType::Added | ChangeType::Deleted => now.then_some(ty)?,
        ChangeType::Modified => {
            let before = previous.is_some_and(|p| selects(params, p));
            match (before, now) {
                (true, true) => ChangeType::Modified,
                (false, true) => ChangeType::Added,
                (true, false) => ChangeType::Deleted,
                (false, false) => return None,
            }
        }
    };
    Some(RawEvent {
        ty: seen_ty,
        object: object.clone(),
        rv,
    })
}
