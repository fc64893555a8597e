//! [`Settings`]: the config part of the `Router` — the config in force, what is
//! derived from it (the hostname parser), and its reloads. A request reads one [`Snapshot`]
//! and keeps it for its whole life, so a reload never changes a request half-way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rouse_shared::names::SandboxDomains;

use crate::config::{Config, ConfigError, ConfigIssue};

/// The config in force and what is derived from it.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The config.
    pub(crate) config: Arc<Config>,
    /// The hostname parser of `routing.domains` and `routing.default_namespace`.
    pub(super) domains: SandboxDomains,
    /// Counts reloads, so what was derived from an older config can be told apart.
    pub(crate) generation: u64,
}

impl Snapshot {
    fn new(config: Config, generation: u64) -> Result<Self, ConfigError> {
        let routing = &config.routing;
        let default_ns =
            (!routing.default_namespace.is_empty()).then_some(&*routing.default_namespace);
        let domains = SandboxDomains::new(&routing.domains, default_ns).map_err(|err| {
            ConfigError::Invalid(vec![ConfigIssue {
                path: "routing.domains".to_owned(),
                line: None,
                message: err.to_string(),
            }])
        })?;
        Ok(Self {
            config: Arc::new(config),
            domains,
            generation,
        })
    }
}

/// The config part of the router: the snapshot in force, swapped whole by a reload.
#[derive(Debug)]
pub(super) struct Settings {
    snapshot: RwLock<Arc<Snapshot>>,
    /// Reloads so far (the generation of the next snapshot).
    reloads: AtomicU64,
}

impl Settings {
    /// Settings with `config` in force (generation 0).
    pub(super) fn new(config: Config) -> Result<Self, ConfigError> {
        Ok(Self {
            snapshot: RwLock::new(Arc::new(Snapshot::new(config, 0)?)),
            reloads: AtomicU64::new(0),
        })
    }

    /// The snapshot in force.
    pub(super) fn current(&self) -> Arc<Snapshot> {
        // Writers only swap the Arc, so a poisoned lock still holds a whole snapshot.
        Arc::clone(&self.snapshot.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts `config` in force and returns its snapshot; a config that does not derive (bad
    /// `routing.domains`) is refused and the one in force stays.
    pub(super) fn reload(&self, config: Config) -> Result<Arc<Snapshot>, ConfigError> {
        let generation = self.reloads.fetch_add(1, Ordering::AcqRel) + 1;
        let snapshot = Arc::new(Snapshot::new(config, generation)?);
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&snapshot);
        Ok(snapshot)
    }
}
