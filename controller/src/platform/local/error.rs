//! Errors of the local platform: a sandbox the local runtimes cannot run, a missing runtime,
//! and I/O on the data directory.

use std::path::PathBuf;

/// Result of a local platform call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the local platform could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sandbox's pod template asks for something standalone mode cannot run; the message
    /// names the field and what to change.
    #[error("unsupported in standalone mode: {0}")]
    Unsupported(String),
    /// The runtime named by `runtimeClassName` is not installed.
    #[error("runtime {runtime:?} needs `{program}`, which was not found on PATH; {hint}")]
    RuntimeMissing {
        /// The runtime class asked for.
        runtime: &'static str,
        /// The program it needs.
        program: &'static str,
        /// How to install it.
        hint: &'static str,
    },
    /// The runtime's program is there but cannot be used (too old, or the host lacks what it
    /// needs).
    #[error("runtime {runtime:?} cannot use {program}: {why}; {hint}")]
    RuntimeUnusable {
        /// The runtime class asked for.
        runtime: &'static str,
        /// The program found.
        program: PathBuf,
        /// What is wrong with it.
        why: String,
        /// What to do.
        hint: &'static str,
    },
    /// A directory or file under the data directory could not be prepared.
    #[error("preparing {path}: {source}")]
    DataDir {
        /// The path that failed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No free loopback port could be reserved.
    #[error("reserving a loopback port: {0}")]
    Port(#[source] std::io::Error),
    /// A sandbox's network namespace or veth pair could not be set up.
    #[error("setting up the sandbox network: {0}")]
    Network(String),
    /// A checkpoint or restore of a gvisor sandbox failed.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// The OCI bundle for the gvisor runtime could not be written.
    #[error("writing the OCI bundle: {0}")]
    Bundle(#[source] serde_json::Error),
}

impl Error {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Unsupported(_) => "unsupported",
            Error::RuntimeMissing { .. } => "runtime_missing",
            Error::RuntimeUnusable { .. } => "runtime_unusable",
            Error::DataDir { .. } => "data_dir",
            Error::Port(_) => "port",
            Error::Bundle(_) => "bundle",
            Error::Network(_) => "network",
            Error::Checkpoint(_) => "checkpoint",
        }
    }

    /// An I/O error on `path` under the data directory.
    pub(crate) fn data_dir(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::DataDir {
            path: path.into(),
            source,
        }
    }
}
