//! Where the local platform keeps things under the data directory: volumes, logs, scratch
//! working directories and runtime state (see the standalone data dir layout in the docs).

use std::path::{Path, PathBuf};

use rouse_shared::store::ObjectKey;

use super::error::{Error, Result};

/// Paths under the standalone data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    data: PathBuf,
}

impl Layout {
    /// The layout under data directory `data`.
    pub fn new(data: impl Into<PathBuf>) -> Self {
        Self { data: data.into() }
    }

    /// The data directory itself.
    pub fn data(&self) -> &Path {
        &self.data
    }

    /// `{data}/volumes/{namespace}/{sandbox}/{volume}`: one volume's directory, kept across
    /// suspend, resume and restarts.
    pub fn volume_dir(&self, key: &ObjectKey, volume: &str) -> PathBuf {
        self.data
            .join("volumes")
            .join(&key.namespace)
            .join(&key.name)
            .join(volume)
    }

    /// `{data}/logs/{namespace}/{sandbox}.log`: the workload's stdout and stderr (the file the
    /// API serves; see [`rouse_shared::datadir::log_file`]).
    pub fn log_file(&self, key: &ObjectKey) -> PathBuf {
        rouse_shared::datadir::log_file(&self.data, &key.namespace, &key.name)
    }

    /// `{data}/scratch/{namespace}/{sandbox}`: the working directory when there is no volume.
    pub fn scratch_dir(&self, key: &ObjectKey) -> PathBuf {
        self.data
            .join("scratch")
            .join(&key.namespace)
            .join(&key.name)
    }

    /// `{data}/checkpoints/{namespace}/{sandbox}`: the memory image of a sandbox suspended by
    /// checkpoint, restored on its next start (see `super::checkpoint`).
    pub fn checkpoint_dir(&self, key: &ObjectKey) -> PathBuf {
        self.data
            .join("checkpoints")
            .join(&key.namespace)
            .join(&key.name)
    }

    /// `{data}/run/forks/{namespace}/{sandbox}`: the UID of a sandbox seeded from its
    /// `spec.restoreFrom` snapshot, so it is seeded once.
    pub fn fork_marker(&self, key: &ObjectKey) -> PathBuf {
        self.data
            .join("run")
            .join("forks")
            .join(&key.namespace)
            .join(&key.name)
    }

    /// `{data}/run/runsc`: the runsc state root.
    pub fn runsc_root(&self) -> PathBuf {
        self.data.join("run").join("runsc")
    }

    /// `{data}/run/bundles/{namespace}/{sandbox}`: the OCI bundle of a gvisor workload.
    pub fn bundle_dir(&self, key: &ObjectKey) -> PathBuf {
        self.data
            .join("run")
            .join("bundles")
            .join(&key.namespace)
            .join(&key.name)
    }

    /// `{data}/run/pids/{namespace}/{sandbox}.pid`: the running workload's process group, so
    /// a restart after a crash can stop what the previous run left behind.
    pub fn pid_file(&self, key: &ObjectKey) -> PathBuf {
        self.data
            .join("run")
            .join("pids")
            .join(&key.namespace)
            .join(rouse_shared::datadir::file_name(&key.name, "pid"))
    }

    /// Every pid file of every sandbox.
    pub fn pid_dir(&self) -> PathBuf {
        self.data.join("run").join("pids")
    }
}

/// Creates `dir` and its parents.
pub(crate) fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::data_dir(dir, e))
}

/// Creates the parent directory of `file`.
pub(crate) fn ensure_parent(file: &Path) -> Result<()> {
    match file.parent() {
        Some(parent) => ensure_dir(parent),
        None => Ok(()),
    }
}

/// The environment variable suffix for a name: upper-cased, every character other than an
/// ASCII letter or digit replaced by `_` (`my-data` → `MY_DATA`).
pub fn env_suffix(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}
