//! The typed error of every `Store` call, classified the way Kubernetes API statuses are.

use super::ObjectKey;

/// Result of a store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist (HTTP 404).
    #[error("{kind} {key} not found")]
    NotFound {
        /// Kind of the object.
        kind: String,
        /// Namespace and name.
        key: ObjectKey,
    },
    /// A precondition failed: the resourceVersion or uid given is not the stored one (409).
    #[error("{kind} {key} was changed concurrently: {message}")]
    Conflict {
        /// Kind of the object.
        kind: String,
        /// Namespace and name.
        key: ObjectKey,
        /// What the store said.
        message: String,
    },
    /// An object of that name exists already (409 `AlreadyExists`).
    #[error("{kind} {key} already exists")]
    AlreadyExists {
        /// Kind of the object.
        kind: String,
        /// Namespace and name.
        key: ObjectKey,
    },
    /// The object or patch was rejected as invalid (422, or 400 for a malformed patch).
    #[error("{kind} {key} is invalid: {message}")]
    Invalid {
        /// Kind of the object.
        kind: String,
        /// Namespace and name.
        key: ObjectKey,
        /// Which field is wrong and why.
        message: String,
    },
    /// A watch or list started from a resourceVersion the store no longer has (410); list
    /// again and watch from the new version.
    #[error("resource version {resource_version} is too old; list again")]
    Expired {
        /// The version that was asked for.
        resource_version: String,
    },
    /// A watch asked for a resourceVersion newer than any the store has issued (504 `Timeout`
    /// on the API, as kube-apiserver answers "Too large resource version").
    #[error("Too large resource version: {resource_version}, current: {current}")]
    TooLargeResourceVersion {
        /// The version that was asked for.
        resource_version: String,
        /// The newest version the store has.
        current: String,
    },
    /// The store cannot be reached or failed internally (5xx, timeouts, I/O).
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What failed.
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl StoreError {
    /// A fixed label for metrics (`rouse_store_errors_total{kind=...}`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "not_found",
            StoreError::Conflict { .. } => "conflict",
            StoreError::AlreadyExists { .. } => "already_exists",
            StoreError::Invalid { .. } => "invalid",
            StoreError::Expired { .. } => "expired",
            StoreError::TooLargeResourceVersion { .. } => "too_large_resource_version",
            StoreError::Unavailable { .. } => "unavailable",
        }
    }

    /// True when the same call may succeed later unchanged (after a backoff), or after
    /// re-reading the object (a conflict).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Conflict { .. }
                | StoreError::Unavailable { .. }
                | StoreError::TooLargeResourceVersion { .. }
        )
    }

    /// True for [`StoreError::NotFound`], which callers often treat as "already gone".
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }
}
