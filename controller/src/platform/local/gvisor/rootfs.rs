//! The root filesystem of a gVisor sandbox without a `dir://` image: a directory of the data
//! directory (`{data}/run/rootfs`) holding the host's top-level symlinks (`bin -> usr/bin` on
//! a merged-/usr system) and empty directories, with the host's system directories (`/usr`,
//! `/etc`, `/opt`, and `/bin`, `/sbin`, `/lib*` where they are real directories) bind-mounted
//! read-only over them by the OCI spec.
//!
//! Why not the host's `/` itself: current runsc mounts a volume over the root's own copy of its
//! mount point when the root is `/`, so the workload saw (and created) a host directory such
//! as `/data` instead of its volume. Why these directories only: the workload gets the
//! programs and libraries it runs with, not the host's `/root`, `/home`, `/tmp`, `/var` or the
//! data directory. Everything outside the read-only directories is writable, into the
//! sandbox's memory (`--overlay2=root:memory`), and kept by a checkpoint.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::super::error::{Error, Result};
use super::super::layout::{Layout, ensure_dir};

/// Host directories the sandbox sees read-only, where they are real directories.
const SYSTEM_DIRS: [&str; 9] = [
    "usr", "etc", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
];
/// Empty directories the root has, so programs find them (written into memory). `tmp` gets
/// the sticky, world-writable mode.
const EMPTY_DIRS: [&str; 8] = ["tmp", "root", "home", "var", "run", "mnt", "srv", "media"];

/// The host-view root directory, made (idempotently) with its symlinks and empty
/// directories; the read-only mounts that complete it come from [`system_mounts`].
pub fn ensure(layout: &Layout) -> Result<PathBuf> {
    let root = layout.data().join("run").join("rootfs");
    ensure_dir(&root)?;
    for name in SYSTEM_DIRS {
        let host = Path::new("/").join(name);
        let ours = root.join(name);
        match std::fs::symlink_metadata(&host) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&host).map_err(|e| Error::data_dir(&host, e))?;
                if std::fs::read_link(&ours).ok().as_deref() != Some(target.as_path()) {
                    let _ = std::fs::remove_file(&ours);
                    let _ = std::fs::remove_dir(&ours);
                    std::os::unix::fs::symlink(&target, &ours)
                        .map_err(|e| Error::data_dir(&ours, e))?;
                }
            }
            Ok(meta) if meta.is_dir() => ensure_dir(&ours)?,
            _ => {}
        }
    }
    for name in EMPTY_DIRS {
        ensure_dir(&root.join(name))?;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = root.join("tmp");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| Error::data_dir(&tmp, e))?;
    Ok(root)
}

/// The read-only bind mounts of the host's system directories (real directories only: a
/// symlink such as `/bin -> usr/bin` is recreated in the root instead).
pub fn system_mounts() -> Vec<Value> {
    SYSTEM_DIRS
        .iter()
        .map(|name| Path::new("/").join(name))
        .filter(|host| std::fs::symlink_metadata(host).is_ok_and(|m| m.is_dir()))
        .map(|host| {
            json!({"destination": host, "type": "bind", "source": host,
                   "options": ["rbind", "ro", "nosuid", "nodev"]})
        })
        .collect()
}

/// Whether a volume's `mountPath` falls inside one of the read-only system directories, where
/// runsc cannot make its mount point.
pub fn under_system_dir(mount_path: &str) -> Option<&'static str> {
    let first = Path::new(mount_path).components().find_map(|c| match c {
        std::path::Component::Normal(name) => name.to_str(),
        _ => None,
    })?;
    SYSTEM_DIRS.iter().copied().find(|dir| *dir == first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_mirrors_the_hosts_symlinks_and_mounts_its_system_directories() {
        let data = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(data.path());
        let root = ensure(&layout).expect("root made");
        // Twice: idempotent.
        assert_eq!(ensure(&layout).expect("again"), root);
        for name in SYSTEM_DIRS {
            let host = Path::new("/").join(name);
            let ours = root.join(name);
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => assert_eq!(
                    std::fs::read_link(&ours).ok(),
                    std::fs::read_link(&host).ok(),
                    "{name}"
                ),
                Ok(m) if m.is_dir() => assert!(ours.is_dir(), "{name}"),
                _ => assert!(!ours.exists(), "{name}"),
            }
        }
        let mounts = system_mounts();
        assert!(
            mounts.iter().any(|m| m["destination"] == "/usr"),
            "{mounts:?}"
        );
        assert!(mounts.iter().all(|m| m["options"][1] == "ro"), "{mounts:?}");
        assert!(root.join("tmp").is_dir() && root.join("root").is_dir());
    }

    #[test]
    fn volumes_under_system_directories_are_named() {
        assert_eq!(under_system_dir("/usr/src/app"), Some("usr"));
        assert_eq!(under_system_dir("/etc"), Some("etc"));
        assert_eq!(under_system_dir("/data"), None);
        assert_eq!(under_system_dir("/workspace/usr"), None);
    }
}
