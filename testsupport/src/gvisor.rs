//! The gVisor the tests run: runsc and its containerd shim built by
//! `testsupport/gvisor/build.sh` from the `gvisor.dev/gvisor` pseudo-version pinned in
//! `testsupport/gvisor/go.mod`, into the same cache as the Kubernetes binaries.
//!
//! Tests find runsc with [`runsc`]: `$ROUSE_RUNSC`, else the pinned build, else a `runsc` on
//! `PATH`; [`available`] says whether a gVisor test can run here and, under CI, fails when it
//! cannot (as the real control plane's tests do).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The `go.mod` that pins gVisor.
const GO_MOD: &str = include_str!("../gvisor/go.mod");

/// The `gvisor.dev/gvisor` version pinned in `testsupport/gvisor/go.mod`.
pub fn version() -> &'static str {
    GO_MOD
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let first = fields.next()?;
            let module = if first == "require" {
                fields.next()?
            } else {
                first
            };
            (module == "gvisor.dev/gvisor")
                .then(|| fields.next())
                .flatten()
        })
        .next()
        .unwrap_or("unknown")
}

/// The directory `build.sh` puts gVisor in: `$ROUSE_KUBE_CACHE/gvisor-<version>` (default
/// cache `$XDG_CACHE_HOME/rouse` or `~/.cache/rouse`).
pub fn dir() -> PathBuf {
    crate::cluster::cache_dir().join(format!("gvisor-{}", version()))
}

/// The runsc to test with: `$ROUSE_RUNSC`, else the pinned build when it is there, else the
/// first `runsc` on `PATH`; an error saying how to get one when there is none.
pub fn runsc() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("ROUSE_RUNSC") {
        return Ok(path.into());
    }
    let pinned = dir().join("runsc");
    if pinned.is_file() {
        return Ok(pinned);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("runsc"))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "no runsc: {} missing (build it with testsupport/gvisor/build.sh) and none on PATH",
                pinned.display()
            )
        })
}

/// The containerd shim wrapper `build.sh` writes (`<dir>/shimbin/containerd-shim-runsc-v1`;
/// put its directory first on containerd's `PATH`).
pub fn shim_dir() -> Result<PathBuf> {
    let dir = dir().join("shimbin");
    if !dir.join("containerd-shim-runsc-v1").is_file() {
        bail!(
            "{} missing (build it with testsupport/gvisor/build.sh)",
            dir.display()
        );
    }
    Ok(dir)
}

/// `PATH` with the directory of `runsc` first, for a `rouse up` under test (which looks up
/// `runsc` on its `PATH`).
pub fn path_with(runsc: &Path) -> std::ffi::OsString {
    let mut dirs: Vec<PathBuf> = runsc.parent().map(Path::to_path_buf).into_iter().collect();
    dirs.extend(
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths),
    );
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The runsc a gVisor test runs with, when it can run here: a current runsc and root (each
/// gVisor sandbox gets a network namespace). Otherwise `None` with a printed reason naming
/// `test`, and a panic under CI (`CI` or `ROUSE_KUBE_REQUIRED`), which must run every test.
pub fn available(test: &str) -> Option<PathBuf> {
    let found = runsc().and_then(|runsc| {
        let out = Command::new(&runsc)
            .arg("flags")
            .output()
            .with_context(|| format!("run {}", runsc.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !text.contains("systrap") {
            bail!(
                "{} is too old (no systrap platform): build the pinned one with testsupport/gvisor/build.sh",
                runsc.display()
            );
        }
        if !nix::unistd::geteuid().is_root() {
            bail!("gVisor sandboxes need root (network namespaces)");
        }
        Ok(runsc)
    });
    match found {
        Ok(runsc) => Some(runsc),
        Err(why) => {
            if crate::cluster::required() {
                panic!("{test}: gVisor is required (CI is set): {why:#}");
            }
            eprintln!("skipping {test}: {why:#}");
            None
        }
    }
}
