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

/// `{data}/logs/{namespace}/{sandbox}.log`: the output of a sandbox's workload (see
/// [`file_name`] for names too long for a file name).
pub fn log_file(data_dir: &Path, namespace: &str, sandbox: &str) -> PathBuf {
    data_dir
        .join("logs")
        .join(namespace)
        .join(file_name(sandbox, "log"))
}

/// `{data}/snapshots/{namespace}/{snapshot}.snapshot/`: a `SandboxSnapshot`'s taken data (its
/// record, memory image and volume copies; see [`file_name`] for long names). Kept apart from
/// the sandbox's directories, so a snapshot outlives its sandbox.
pub fn snapshot_dir(data_dir: &Path, namespace: &str, snapshot: &str) -> PathBuf {
    data_dir
        .join("snapshots")
        .join(namespace)
        .join(file_name(snapshot, "snapshot"))
}

/// The longest file name the usual Linux filesystems take, in bytes.
const NAME_MAX: usize = 255;

/// `{name}.{extension}`, or for a name too long for that (object names go up to 253
/// characters) its first 200 characters, `-` and a 16-digit hash of the whole name, so that
/// every name still gets its own file.
pub fn file_name(name: &str, extension: &str) -> String {
    if name.len() + 1 + extension.len() <= NAME_MAX {
        return format!("{name}.{extension}");
    }
    let mut cut = 200.min(name.len());
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}-{:016x}.{extension}",
        &name[..cut],
        fnv1a(name.as_bytes())
    )
}

/// FNV-1a, 64 bits: a stable hash (unlike `DefaultHasher`, the same in every build).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::file_name;

    #[test]
    fn long_names_get_short_distinct_file_names() {
        assert_eq!(file_name("web", "log"), "web.log");
        let a = "a".repeat(253);
        let mut b = "a".repeat(252);
        b.push('b');
        let (fa, fb) = (file_name(&a, "log"), file_name(&b, "log"));
        assert!(fa.len() <= 255 && fb.len() <= 255, "{fa} {fb}");
        assert_ne!(fa, fb);
        assert!(fa.ends_with(".log"));
        assert_eq!(fa, file_name(&a, "log"), "stable");
        assert_eq!(file_name(&"x".repeat(251), "log").len(), 255);
    }
}
