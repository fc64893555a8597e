//! Why the embedded store could not be opened.

use std::path::PathBuf;

/// Result of opening the store.
pub type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Why [`EmbeddedStore::open`](super::EmbeddedStore::open) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process (or handle) has the database open.
    #[error(
        "store {path} is locked: another process has it open (is another `rouse up` using this data dir?)"
    )]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// The file could not be opened or created.
    #[error("cannot open store {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        #[source]
        source: redb::DatabaseError,
    },
    /// The file opened but its tables could not be read or initialised.
    #[error("cannot initialise store {path}: {source}")]
    Init {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        #[source]
        source: redb::Error,
    },
    /// The file was written in a format this version does not know.
    #[error("store {path} has format {found}; this version reads format {supported}")]
    Format {
        /// The database file.
        path: PathBuf,
        /// The format recorded in the file.
        found: u64,
        /// The format this version reads and writes.
        supported: u64,
    },
    /// A stored object is unreadable.
    #[error("store {path} is damaged: {message}")]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The writer thread could not be started.
    #[error("cannot start the store writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl OpenError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            OpenError::Locked { .. } => "locked",
            OpenError::Open { .. } => "open",
            OpenError::Init { .. } => "init",
            OpenError::Format { .. } => "format",
            OpenError::Damaged { .. } => "damaged",
            OpenError::Thread(_) => "thread",
        }
    }
}
