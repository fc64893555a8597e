//! Directories of sandboxes that no longer exist: removed on start, and never handed to a new
//! sandbox of the same name.
//!
//! A delete removes the sandbox's volume and scratch directories only after its workload
//! stopped, so a crash during a slow stop (or a delete before the driver first listed the
//! store) would leave them behind, and the next sandbox of that name would find the old data
//! in its volumes. Two guards close that: the driver's first list sweeps every directory with
//! no Sandbox object ([`stale_keys`]), and each sandbox's directories carry its UID in an owner
//! record (`{data}/run/owners/{namespace}/{sandbox}`), so directories of another UID are wiped
//! before a sandbox uses them ([`Claim`]).

use std::collections::HashSet;
use std::path::PathBuf;

use rouse_shared::store::ObjectKey;

use super::layout::{Layout, ensure_parent};

/// Whose the directories of a sandbox name are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// They are this sandbox's (or it has none yet, now recorded as its).
    Ours,
    /// They belonged to a deleted sandbox of the same name.
    Stale,
}

/// The owner record of a sandbox name's directories.
fn owner_file(layout: &Layout, key: &ObjectKey) -> PathBuf {
    layout
        .data()
        .join("run")
        .join("owners")
        .join(&key.namespace)
        .join(&key.name)
}

/// Checks the owner record against `uid`, writing it when there is none.
pub fn claim(layout: &Layout, key: &ObjectKey, uid: &str) -> Claim {
    let file = owner_file(layout, key);
    match std::fs::read_to_string(&file) {
        Ok(owner) if owner.trim() == uid => Claim::Ours,
        Ok(_) => Claim::Stale,
        Err(_) => {
            let written = ensure_parent(&file)
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|()| std::fs::write(&file, uid));
            if let Err(error) = written {
                tracing::warn!(path = %file.display(), %error, "writing a sandbox's owner record failed");
            }
            Claim::Ours
        }
    }
}

/// Removes a sandbox name's volume, scratch and bundle directories and its owner record (the
/// log stays for `rouse logs`).
pub fn remove_dirs(layout: &Layout, key: &ObjectKey) {
    for dir in [
        layout
            .data()
            .join("volumes")
            .join(&key.namespace)
            .join(&key.name),
        layout.scratch_dir(key),
        layout.bundle_dir(key),
        layout.checkpoint_dir(key),
    ] {
        if let Err(error) = std::fs::remove_dir_all(&dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(sandbox.key = %key, path = %dir.display(), %error, "removing a deleted sandbox's directory failed");
        }
    }
    super::netns::Netns::remove(layout, key);
    let _ = std::fs::remove_file(layout.fork_marker(key));
    // Last: a crash before this leaves the record, and the next claim of another UID wipes.
    let _ = std::fs::remove_file(owner_file(layout, key));
}

/// Sandbox names with volume, scratch or owner directories that are not in `existing`.
pub fn stale_keys(layout: &Layout, existing: &HashSet<ObjectKey>) -> Vec<ObjectKey> {
    let mut stale = HashSet::new();
    for root in [
        layout.data().join("volumes"),
        layout.data().join("scratch"),
        layout.data().join("run").join("owners"),
    ] {
        let Ok(namespaces) = std::fs::read_dir(&root) else {
            continue;
        };
        for namespace in namespaces.flatten() {
            let Ok(names) = std::fs::read_dir(namespace.path()) else {
                continue;
            };
            for name in names.flatten() {
                let (Some(ns), Some(n)) = (
                    namespace.file_name().to_str().map(str::to_owned),
                    name.file_name().to_str().map(str::to_owned),
                ) else {
                    continue;
                };
                let key = ObjectKey::new(ns, n);
                if !existing.contains(&key) {
                    stale.insert(key);
                }
            }
        }
    }
    stale.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rouse_shared::store::ObjectKey;

    use super::{Claim, claim, remove_dirs, stale_keys};
    use crate::platform::local::Layout;

    #[test]
    fn a_new_uid_finds_the_old_directories_stale_and_sweeps_find_orphans() {
        let data = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(data.path());
        let key = ObjectKey::new("default", "box");
        let volume = layout.volume_dir(&key, "work");
        std::fs::create_dir_all(&volume).expect("volume");
        assert_eq!(claim(&layout, &key, "uid-1"), Claim::Ours);
        assert_eq!(claim(&layout, &key, "uid-1"), Claim::Ours);
        assert_eq!(claim(&layout, &key, "uid-2"), Claim::Stale);

        let other = ObjectKey::new("team", "gone");
        std::fs::create_dir_all(layout.scratch_dir(&other)).expect("scratch");
        let existing: HashSet<ObjectKey> = [key.clone()].into_iter().collect();
        assert_eq!(stale_keys(&layout, &existing), vec![other.clone()]);
        remove_dirs(&layout, &other);
        assert!(stale_keys(&layout, &existing).is_empty());
        remove_dirs(&layout, &key);
        assert!(!volume.exists());
        assert_eq!(
            claim(&layout, &key, "uid-2"),
            Claim::Ours,
            "the record went too"
        );
    }
}
