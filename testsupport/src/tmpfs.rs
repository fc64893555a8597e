//! A small tmpfs that a test mounts on a directory it created, so that a disk fills up on
//! purpose: mount it, grow it (`mount -o remount,size=...`), and unmount it when dropped.
//!
//! Mounting needs root (`CAP_SYS_ADMIN`). Without it [`Tmpfs::mount_or_skip`] prints why and
//! returns `None`, so the test skips; under CI (`CI` set) it panics instead, since CI runs as
//! root. Only the mount this value made is ever unmounted, by its path.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted on drop.
#[derive(Debug)]
pub struct Tmpfs {
    mountpoint: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `2m`, `64m`) on `at`, a directory the test
    /// owns (created when missing), or `None` (with a message naming `test`) when this process
    /// may not mount and the run is not under CI.
    pub fn mount_or_skip(test: &str, at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).expect("the mount point");
        let options = format!("size={size},mode=0755");
        match mount(&["-t", "tmpfs", "-o", &options, "tmpfs"], at) {
            Ok(()) => Some(Tmpfs {
                mountpoint: at.to_owned(),
            }),
            Err(why) if required() => {
                panic!("{test}: mounting a tmpfs is required under CI: {why}")
            }
            Err(why) => {
                eprintln!("skipping {test}: cannot mount a tmpfs (needs root): {why}");
                None
            }
        }
    }

    /// Where the tmpfs is mounted.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// Changes its size (grows it, so a full disk has room again).
    pub fn resize(&self, size: &str) {
        if let Err(why) = mount(&["-o", &format!("remount,size={size}")], &self.mountpoint) {
            panic!("resizing the tmpfs at {}: {why}", self.mountpoint.display());
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.mountpoint).status();
        match unmounted {
            Ok(status) if status.success() => {}
            // Busy: a process of the test still has a file open there; detach it, so the
            // mount goes once that process ends.
            _ => {
                let lazy = Command::new("umount")
                    .arg("-l")
                    .arg(&self.mountpoint)
                    .status();
                if !lazy.is_ok_and(|s| s.success()) {
                    eprintln!(
                        "could not unmount the test tmpfs at {}",
                        self.mountpoint.display()
                    );
                }
            }
        }
    }
}

/// Runs `mount ARGS... TARGET`; the error says what `mount` printed.
fn mount(args: &[&str], target: &Path) -> Result<(), String> {
    let output = Command::new("mount")
        .args(args)
        .arg(target)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// Whether the run must be able to mount: under CI.
fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}
