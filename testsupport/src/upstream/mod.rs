//! Upstream agent-sandbox's end-to-end suites, its controller, and kwok (a simulated node),
//! as `testsupport/upstream/build.sh` builds them from the versions pinned in
//! `testsupport/upstream/go.mod`; and the parts of a cluster they need beside the control plane
//! of [`crate::cluster`]: kube-scheduler, a node kwok plays with kube-controller-manager's
//! node lifecycle controller, static PersistentVolumes bound by its binder. See docs/testing.md, "Upstream's end-to-end suite".

mod components;
mod node;
mod process;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

pub use components::{start_kwok, start_node_controllers, start_scheduler};
pub use node::{KWOK_ANNOTATION, KWOK_NODE, create_kwok_node, create_static_volumes};
pub use process::Supervised;

/// The `go.mod` that pins upstream and kwok.
const GO_MOD: &str = include_str!("../../upstream/go.mod");

/// The version of `module` required in `testsupport/upstream/go.mod`, e.g. `v1.0.1`.
pub fn pinned(module: &str) -> Option<&'static str> {
    GO_MOD.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let mut first = fields.next()?;
        if first == "require" {
            first = fields.next()?;
        }
        (first == module).then(|| fields.next()).flatten()
    })
}

/// The programs `build.sh` makes, by where it puts them.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `go test -c` of `sigs.k8s.io/agent-sandbox/test/e2e`.
    pub e2e: PathBuf,
    /// `go test -c` of `sigs.k8s.io/agent-sandbox/test/e2e/extensions`.
    pub e2e_extensions: PathBuf,
    /// Upstream's `cmd/agent-sandbox-controller`.
    pub controller: PathBuf,
    /// Upstream's `packages/sandboxd/cmd/sandboxd` (static), for the image its test runs.
    pub sandboxd: PathBuf,
    /// `sigs.k8s.io/kwok/cmd/kwok`.
    pub kwok: PathBuf,
    /// kwok's own node and pod stages, and ours (`testsupport/upstream/stages/`).
    pub kwok_stages: PathBuf,
}

impl Programs {
    /// Where `build.sh` puts them, whether they exist or not: under the cache directory of
    /// [`crate::cluster::bin_dir`], in `agent-sandbox-<version>/` and `kwok-<version>/`.
    pub fn paths() -> Self {
        let cache = crate::cluster::bin_dir()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let sandbox = cache.join(format!(
            "agent-sandbox-{}",
            pinned("sigs.k8s.io/agent-sandbox").unwrap_or("unknown")
        ));
        let kwok = cache.join(format!(
            "kwok-{}",
            pinned("sigs.k8s.io/kwok").unwrap_or("unknown")
        ));
        Self {
            e2e: sandbox.join("e2e.test"),
            e2e_extensions: sandbox.join("e2e-extensions.test"),
            controller: sandbox.join("agent-sandbox-controller"),
            sandboxd: sandbox.join("sandboxd"),
            kwok: kwok.join("kwok"),
            kwok_stages: kwok.join("stages.yaml"),
        }
    }

    /// The programs, or which is missing and how to build it.
    pub fn find() -> Result<Self> {
        let programs = Self::paths();
        for path in [
            &programs.e2e,
            &programs.e2e_extensions,
            &programs.controller,
            &programs.sandboxd,
            &programs.kwok,
            &programs.kwok_stages,
        ] {
            if !path.is_file() {
                bail!(
                    "{} missing (build it with testsupport/upstream/build.sh)",
                    path.display()
                );
            }
        }
        Ok(programs)
    }
}

/// `kube-scheduler`, built with the control plane by `testsupport/cluster/build.sh`.
pub fn scheduler() -> Result<PathBuf> {
    let path = crate::cluster::bin_dir().join("kube-scheduler");
    if !path.is_file() {
        bail!(
            "{} missing (build it with testsupport/cluster/build.sh)",
            path.display()
        );
    }
    Ok(path)
}
