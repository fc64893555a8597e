//! `spec.restoreFrom` in standalone mode: the driver reads the named `SandboxSnapshot` from
//! the store and hands where it stands to the pure plan through [`Restoring`], a thin
//! [`Platform`] over the local one; the local platform seeds the sandbox from the snapshot's
//! data on its first start (see `platform::local::snapshots`).

use kube::Resource;
use rouse_shared::api::{Sandbox, SandboxSnapshot, SnapshotPhase};
use rouse_shared::store::{ObjectKey, Store, StoreError};

use crate::platform::local::LocalPlatform;
use crate::platform::{Platform, Result};
use crate::sandbox::{Action, Observed, RestoreSource};

/// The local platform, with where the sandbox's `restoreFrom` snapshot stands added to what
/// it observes.
pub(crate) struct Restoring {
    /// The local platform.
    pub platform: LocalPlatform,
    /// Where the snapshot stands; `None` for a sandbox without `restoreFrom`.
    pub restore: Option<RestoreSource>,
}

impl Platform for Restoring {
    async fn observe(&self, sandbox: &Sandbox) -> Result<Observed> {
        let mut observed = self.platform.observe(sandbox).await?;
        observed.restore = self.restore.clone();
        Ok(observed)
    }

    async fn apply(&self, sandbox: &Sandbox, action: &Action) -> Result<()> {
        self.platform.apply(sandbox, action).await
    }
}

/// Where the snapshot `sandbox` starts from stands: `Ready` once the sandbox was seeded from
/// it, else as the stored `SandboxSnapshot` and its data say.
pub(crate) async fn restore_source<S: Store<SandboxSnapshot>>(
    store: &S,
    platform: &LocalPlatform,
    sandbox: &Sandbox,
) -> Result<Option<RestoreSource>, StoreError> {
    let Some(from) = &sandbox.spec.restore_from else {
        return Ok(None);
    };
    if platform.seeded(sandbox) {
        return Ok(Some(RestoreSource::Ready));
    }
    let namespace = sandbox.meta().namespace.clone().unwrap_or_default();
    let key = ObjectKey::new(namespace, from.snapshot_name.clone());
    let name = &from.snapshot_name;
    let snapshot = match store.get(&key).await {
        Ok(snapshot) => snapshot,
        Err(error) if error.is_not_found() => {
            return Ok(Some(RestoreSource::NotFound(format!(
                "snapshot {name} does not exist; the sandbox starts once it is Ready"
            ))));
        }
        Err(error) => return Err(error),
    };
    let status = snapshot.status.unwrap_or_default();
    let source = match status.phase {
        Some(SnapshotPhase::Ready) if platform.snapshot_record(&key).is_some() => {
            RestoreSource::Ready
        }
        Some(SnapshotPhase::Ready) => {
            RestoreSource::NotReady(format!("snapshot {name} has no data on this machine"))
        }
        Some(SnapshotPhase::Failed) => RestoreSource::NotReady(format!(
            "snapshot {name} failed: {}",
            status.message.unwrap_or_default()
        )),
        _ => RestoreSource::NotReady(format!(
            "snapshot {name} is not taken yet; the sandbox starts once it is Ready"
        )),
    };
    Ok(Some(source))
}
