//! The standalone data directory: where it is by default and where each file lives in it.
//!
//! `rouse up` and the CLI both resolve the directory here, so a CLI started without flags finds
//! the token the server wrote.

use std::path::{Path, PathBuf};

/// The default data directory: `$XDG_DATA_HOME/rouse`, else `$HOME/.local/share/rouse`; `None`
/// when neither variable is set to an absolute path.
pub fn default_data_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_DATA_HOME")
        .map(|d| d.join("rouse"))
        .or_else(|| absolute("HOME").map(|h| h.join(".local/share/rouse")))
}

/// `{data}/token`: the REST API's bearer token (mode 0600).
pub fn token_file(data_dir: &Path) -> PathBuf {
    data_dir.join("token")
}

/// `{data}/kubeconfig`: a kubeconfig for the REST API (server, CA, token; mode 0600), written
/// by `rouse up` and read by the CLI.
pub fn kubeconfig_file(data_dir: &Path) -> PathBuf {
    data_dir.join("kubeconfig")
}

/// `{data}/tls/`: the REST API's CA (`ca.crt`, `ca.key`) made on first start.
pub fn tls_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("tls")
}

/// `{data}/logs/{namespace}/{sandbox}.log`: the output of a sandbox's workload.
pub fn log_file(data_dir: &Path, namespace: &str, sandbox: &str) -> PathBuf {
    data_dir
        .join("logs")
        .join(namespace)
        .join(format!("{sandbox}.log"))
}
