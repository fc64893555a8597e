//! Copies of directory trees for snapshots and forks: `cp -a --reflink=auto`, which clones
//! the files' extents where the filesystem can (btrfs, XFS: instant, no space used until
//! written) and copies their bytes otherwise, keeping modes, owners and times.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::error::{Error, Result};
use super::layout::ensure_parent;

/// The longest one tree copy may take.
const COPY_DEADLINE: Duration = Duration::from_secs(600);

/// Copies the directory `from` to `to`; what was at `to` is replaced.
pub async fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if let Err(error) = std::fs::remove_dir_all(to)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        return Err(Error::data_dir(to, error));
    }
    ensure_parent(to)?;
    let mut command = Command::new("cp");
    command
        .args(["-a", "--reflink=auto", "--no-target-directory"])
        .arg(from)
        .arg(to)
        .kill_on_drop(true);
    let failed = |message: String| Error::data_dir(to, std::io::Error::other(message));
    match tokio::time::timeout(COPY_DEADLINE, command.output()).await {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(failed(format!(
            "copying {}: {}",
            from.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Ok(Err(error)) => Err(failed(format!("running cp: {error}"))),
        Err(_) => Err(failed(format!(
            "copying {} took longer than {}s",
            from.display(),
            COPY_DEADLINE.as_secs()
        ))),
    }
}

/// The bytes the files under `dir` take on disk (allocated blocks), bounded to a walk of
/// `MAX_ENTRIES` entries.
pub fn disk_usage(dir: &Path) -> u64 {
    const MAX_ENTRIES: usize = 1_000_000;
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(path) = stack.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::{copy_tree, disk_usage};

    #[tokio::test]
    async fn a_tree_is_copied_whole_and_replaces_the_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("sub")).expect("mkdir");
        std::fs::write(from.join("sub/a.txt"), vec![7u8; 10_000]).expect("write");
        let to = dir.path().join("x/to");
        std::fs::create_dir_all(&to).expect("mkdir");
        std::fs::write(to.join("old"), b"old").expect("write");
        copy_tree(&from, &to).await.expect("copy");
        assert_eq!(
            std::fs::read(to.join("sub/a.txt")).expect("read"),
            vec![7u8; 10_000]
        );
        assert!(!to.join("old").exists(), "replaced, not merged");
        assert!(disk_usage(&to) >= 10_000);
        assert!(copy_tree(&dir.path().join("none"), &to).await.is_err());
    }
}
