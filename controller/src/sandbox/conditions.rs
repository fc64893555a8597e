//! Building a sandbox's conditions: keeping `lastTransitionTime` across reconciles when the
//! status does not change, and listing the transitions that are worth an Event.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `True`, `False` or `Unknown`.
pub(crate) const TRUE: &str = "True";
/// See [`TRUE`].
pub(crate) const FALSE: &str = "False";
/// See [`TRUE`].
pub(crate) const UNKNOWN: &str = "Unknown";

/// A condition the plan wants, before its transition time is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Want {
    pub type_: &'static str,
    pub status: &'static str,
    /// A reason of ours, or one copied from the pod (`PodScheduled`).
    pub reason: String,
    pub message: String,
}

impl Want {
    pub(crate) fn new(
        type_: &'static str,
        status: &'static str,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// The condition, keeping the previous transition time when the status is unchanged.
    pub(crate) fn into_condition(
        self,
        previous: &[Condition],
        generation: Option<i64>,
        now: Timestamp,
    ) -> Condition {
        let last_transition_time = match find(previous, self.type_) {
            Some(prev) if prev.status == self.status => prev.last_transition_time.clone(),
            _ => Time(now),
        };
        Condition {
            type_: self.type_.to_owned(),
            status: self.status.to_owned(),
            reason: self.reason,
            message: self.message,
            observed_generation: generation,
            last_transition_time,
        }
    }
}

/// `status` as one of [`TRUE`], [`FALSE`] or [`UNKNOWN`]; anything else is `Unknown`.
pub(crate) fn status_of(status: &str) -> &'static str {
    match status {
        TRUE => TRUE,
        FALSE => FALSE,
        _ => UNKNOWN,
    }
}

/// The condition of that type, if present.
pub(crate) fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// A condition whose status or reason changed in a reconcile; each becomes an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Condition type (`Ready`, `Suspended`, ...).
    pub type_: String,
    /// The new status.
    pub status: String,
    /// The new reason.
    pub reason: String,
    /// The new message.
    pub message: String,
}

/// The conditions in `new` whose status or reason differs from `old` (or that are new).
pub(crate) fn transitions(old: &[Condition], new: &[Condition]) -> Vec<Transition> {
    new.iter()
        .filter(|c| {
            find(old, &c.type_).is_none_or(|o| o.status != c.status || o.reason != c.reason)
        })
        .map(|c| Transition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        })
        .collect()
}
