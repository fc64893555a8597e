//! The `Platform` port: where a sandbox's workload, volumes and Service physically live.
//!
//! The reconciler observes through it and applies [`Action`]s through it, and knows nothing
//! else about the platform. Implementations: [`kube`] (Pods, PVCs, headless Services) and the
//! local one of standalone mode (processes or `runsc`, directories).

pub mod kube;
pub mod local;

pub use crate::sandbox::port::{Platform, PlatformError, Result};
