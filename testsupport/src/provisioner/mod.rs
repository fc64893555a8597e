//! A dynamic volume provisioner for the test node: claims of a StorageClass with
//! `provisioner: rouse.dev/local-path` get a `hostPath` PersistentVolume in a directory of the
//! node, and a released volume's directory and object are removed.
//!
//! A real node built from the Kubernetes binaries has no provisioner, so PVCs (a Sandbox's
//! `volumeClaimTemplates`) would stay Pending. This one runs in the test process as two
//! kube-runtime controllers (claims, volumes) on a tokio task, with a stop handle:
//!
//! - a claim of one of our classes, not yet bound, gets the PV `pvc-<claim uid>`: capacity,
//!   access and volume modes from the claim, a `hostPath` (`DirectoryOrCreate`) in
//!   `<base_dir>/pvc-<uid>_<namespace>_<claim>` (created mode 0777 so any pod user can write),
//!   a node affinity to the node (`kubernetes.io/hostname`), the class's reclaim policy
//!   (default `Delete`) and a `claimRef` to the claim, so kube-controller-manager's
//!   `persistentvolume-binder` binds the claim to it. With `WaitForFirstConsumer` the claim
//!   waits for the scheduler's `volume.kubernetes.io/selected-node` annotation naming our node;
//! - a volume we made that is `Released` with policy `Delete` loses its directory, then its
//!   object (`pv-protection` then lets it go).
//!
//! One provisioner per cluster: two with different directories would race for the same
//! claims. Test-only: no metrics; each reconcile has a deadline and errors are retried.
//!
//! # Example
//! ```no_run
//! # async fn f(client: kube::Client) -> Result<(), rouse_testsupport::provisioner::Error> {
//! use rouse_testsupport::provisioner::{LocalPathProvisioner, ProvisionerConfig};
//! let config = ProvisionerConfig::new("node-1", "/tmp/node-1/volumes");
//! let provisioner = LocalPathProvisioner::start(client, config).await?;
//! // ... PVCs without a class now get the default class `rouse-local` and are provisioned ...
//! provisioner.stop().await;
//! # Ok(()) }
//! ```

mod plan;
mod reconcile;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The `provisioner` of the StorageClasses this provisioner serves.
pub const PROVISIONER: &str = "rouse.dev/local-path";

/// The StorageClass [`install_storage_class`] writes: the cluster's default.
pub const STORAGE_CLASS: &str = "rouse-local";

/// The annotation that makes a StorageClass the default one.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The annotation the scheduler puts on a `WaitForFirstConsumer` claim: the chosen node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The annotation naming the provisioner of a dynamically provisioned volume.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";

/// How long [`LocalPathProvisioner::stop`] waits for the controllers to finish their work.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// When a claim's volume is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingMode {
    /// Once the scheduler has picked a node for the first pod that uses the claim.
    WaitForFirstConsumer,
    /// As soon as the claim exists.
    Immediate,
}

impl BindingMode {
    /// The StorageClass's `volumeBindingMode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WaitForFirstConsumer => "WaitForFirstConsumer",
            Self::Immediate => "Immediate",
        }
    }
}

/// What the provisioner needs to know; [`ProvisionerConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct ProvisionerConfig {
    /// The node whose disk holds the volumes (its `kubernetes.io/hostname` label, which the
    /// kubelet sets to the node name).
    pub node_name: String,
    /// The directory volumes are made in, one sub-directory each; node-local.
    pub base_dir: PathBuf,
    /// The `volumeBindingMode` of the StorageClass [`STORAGE_CLASS`]. Default
    /// `WaitForFirstConsumer`.
    pub binding_mode: BindingMode,
    /// How many claims, and how many volumes, are worked on at once. Default 4.
    pub concurrency: u16,
    /// How long one reconcile (its API calls and directory work) may take. Default 30 s.
    pub reconcile_deadline: Duration,
    /// How long to wait before retrying a failed reconcile, or looking again for a missing
    /// StorageClass. Default 2 s.
    pub retry_after: Duration,
}

impl ProvisionerConfig {
    /// The defaults, for volumes of node `node_name` in `base_dir`.
    pub fn new(node_name: impl Into<String>, base_dir: impl Into<PathBuf>) -> Self {
        Self {
            node_name: node_name.into(),
            base_dir: base_dir.into(),
            binding_mode: BindingMode::WaitForFirstConsumer,
            concurrency: 4,
            reconcile_deadline: Duration::from_secs(30),
            retry_after: Duration::from_secs(2),
        }
    }
}

/// A failure of the provisioner; each names the object or path it was working on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done (`create PersistentVolume pvc-...`).
        action: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A claim of our class has no `spec.resources.requests.storage`.
    #[error("claim {claim} requests no storage (spec.resources.requests.storage)")]
    NoStorageRequest {
        /// `namespace/name`.
        claim: String,
    },
    /// A claim of our class wants something a directory cannot be.
    #[error("claim {claim}: {reason}")]
    Unsupported {
        /// `namespace/name`.
        claim: String,
        /// What is not supported (`volumeMode Block`, a selector).
        reason: &'static str,
    },
    /// A volume we made points outside the base directory: it is left alone.
    #[error("volume {volume}: path {path} is not a directory under {base}", path = path.display(), base = base.display())]
    OutsideBaseDir {
        /// The PersistentVolume's name.
        volume: String,
        /// Its `hostPath.path`.
        path: PathBuf,
        /// The provisioner's base directory.
        base: PathBuf,
    },
    /// A volume's directory could not be made or removed.
    #[error("{action} {path}: {source}", path = path.display())]
    Directory {
        /// `create` or `remove`.
        action: &'static str,
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A reconcile did not finish in time.
    #[error("{what} did not finish within {deadline:?}")]
    Deadline {
        /// The object being reconciled.
        what: String,
        /// The deadline it had.
        deadline: Duration,
    },
    /// The StorageClass exists with another binding mode (immutable; delete it first).
    #[error("StorageClass {name} exists with volumeBindingMode {found}, not {wanted}")]
    StorageClassConflict {
        /// The class.
        name: String,
        /// Its binding mode.
        found: String,
        /// The one asked for.
        wanted: &'static str,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Creates the default StorageClass [`STORAGE_CLASS`] (provisioner [`PROVISIONER`], reclaim
/// policy `Delete`, binding `mode`) unless it exists; an existing one with another binding mode
/// is [`Error::StorageClassConflict`].
pub async fn install_storage_class(client: &Client, mode: BindingMode) -> Result<StorageClass> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let api = |action: &str| {
        let action = format!("{action} StorageClass {STORAGE_CLASS}");
        move |source| Error::Api { action, source }
    };
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(STORAGE_CLASS.to_owned()),
            annotations: Some([(DEFAULT_CLASS_ANNOTATION.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        provisioner: PROVISIONER.to_owned(),
        reclaim_policy: Some("Delete".to_owned()),
        volume_binding_mode: Some(mode.as_str().to_owned()),
        ..StorageClass::default()
    };
    let existing = match classes.create(&PostParams::default(), &class).await {
        Ok(created) => return Ok(created),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            classes.get(STORAGE_CLASS).await.map_err(api("get"))?
        }
        Err(e) => return Err(api("create")(e)),
    };
    let found = existing.volume_binding_mode.clone().unwrap_or_default();
    if found != mode.as_str() {
        return Err(Error::StorageClassConflict {
            name: STORAGE_CLASS.to_owned(),
            found,
            wanted: mode.as_str(),
        });
    }
    Ok(existing)
}

/// The running provisioner; [`stop`](Self::stop) ends it (dropping it stops it too, without
/// waiting).
#[derive(Debug)]
pub struct LocalPathProvisioner {
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl LocalPathProvisioner {
    /// Installs the StorageClass [`STORAGE_CLASS`] with the configured binding mode, then
    /// starts the claim and volume controllers on a tokio task. `client` needs cluster-wide
    /// rights on PVCs, PVs and StorageClasses.
    pub async fn start(client: Client, config: ProvisionerConfig) -> Result<Self> {
        install_storage_class(&client, config.binding_mode).await?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(reconcile::run(client, config, stop.clone()));
        Ok(Self {
            stop,
            task: Some(task),
        })
    }

    /// Stops the controllers and waits (at most 10 s, then aborts) until they have.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_DEADLINE, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for LocalPathProvisioner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests;
