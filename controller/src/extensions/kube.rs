//! Kubernetes mode for pools, claims and templates.
