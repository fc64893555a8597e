//! The `gvisor` runtime: the workload runs under gVisor's `runsc` (systrap platform by
//! default) from an OCI bundle generated per sandbox, in a network namespace of its own with
//! gVisor's network stack (`--network=sandbox`), so it listens on its declared container
//! ports as in a pod and can be checkpointed with its connections. The root filesystem is the
//! host's `/` (or the directory of `image: dir:///path`) with an in-memory overlay, so writes
//! outside volumes never reach the host; volume directories are bind-mounted at their
//! `mountPath`.
//!
//! The runsc must be current (see [`probe`]): Debian's 2022 build lacks systrap and fails to
//! checkpoint sandboxes that served traffic in the last minute.

mod bundle;
mod config;
mod probe;
pub(super) mod rootfs;

pub use config::{GvisorConfig, GvisorPlatform};
pub use probe::{RUNSC_HINT, RunscInfo, probe};

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use rouse_shared::store::ObjectKey;
use serde_json::json;
use tokio::process::{Child, Command};

use super::env::{SANDBOX_PATH, resolve};
use super::error::{Error, Result};
use super::launch::{KILL_WAIT, Launch, signal_group};
use super::layout::{Layout, ensure_dir};
use super::ports::PortMap;
use super::spec::{GVISOR_RUNTIME_CLASS, LaunchSpec};

/// How to install runsc, for the error when it is missing.
pub const INSTALL_HINT: &str = RUNSC_HINT;
/// Deadline of one `runsc kill`/`delete`/`list` call.
const RUNSC_CALL: Duration = Duration::from_secs(15);

/// The `runsc` binary, its state directory and how it runs sandboxes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runsc {
    program: PathBuf,
    info: RunscInfo,
    root: PathBuf,
    config: GvisorConfig,
    /// The sandbox's own network namespace (`--network=sandbox`); `None` for calls that
    /// touch no one sandbox (listing what a crashed run left).
    netns: Option<PathBuf>,
}

impl Runsc {
    /// Finds `program` (a path, or a name searched on `PATH`) and checks that Rouse can use
    /// it; a clear error naming what is missing otherwise.
    pub fn locate(program: &Path, layout: &Layout, config: &GvisorConfig) -> Result<Self> {
        let (program, info) = inspect(program)?;
        if !nix::unistd::geteuid().is_root() {
            return Err(Error::RuntimeUnusable {
                runtime: GVISOR_RUNTIME_CLASS,
                program,
                why: "each gVisor sandbox runs in a network namespace of its own, which only \
                      root can make"
                    .to_owned(),
                hint: "run `rouse up` as root to use runtimeClassName: gvisor",
            });
        }
        Ok(Self {
            program,
            info,
            root: layout.runsc_root(),
            config: config.clone(),
            netns: None,
        })
    }

    /// The same runsc for one sandbox, in the network namespace at `netns`.
    pub fn for_sandbox(&self, netns: PathBuf) -> Self {
        Self {
            netns: Some(netns),
            ..self.clone()
        }
    }

    /// The network namespace the sandbox runs in.
    pub fn netns(&self) -> Option<&Path> {
        self.netns.as_deref()
    }

    /// What the binary offers.
    pub fn info(&self) -> &RunscInfo {
        &self.info
    }

    /// The runsc container id of a sandbox (runsc keeps `{id}.state` files: a long name is
    /// shortened with a hash so that the file name fits).
    pub fn container_id(key: &ObjectKey) -> String {
        let id = format!("rouse_{}_{}", key.namespace, key.name);
        let file = rouse_shared::datadir::file_name(&id, "state");
        file.strip_suffix(".state").unwrap_or(&file).to_owned()
    }

    /// Writes the sandbox's OCI bundle and returns the `runsc run` command line.
    pub fn prepare(
        &self,
        layout: &Layout,
        key: &ObjectKey,
        spec: &LaunchSpec,
        ports: &PortMap,
    ) -> Result<Launch> {
        let bundle = layout.bundle_dir(key);
        ensure_dir(&bundle)?;
        ensure_dir(&self.root)?;
        let mut mounts = vec![
            json!({"destination": "/proc", "type": "proc", "source": "proc"}),
            json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}),
            json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
                   "options": ["nosuid", "noexec", "nodev", "ro"]}),
        ];
        let root = match &spec.rootfs {
            Some(dir) => dir.clone(),
            None => {
                // The host's system directories, read-only, under a root of our own.
                mounts.extend(rootfs::system_mounts());
                rootfs::ensure(layout)?
            }
        };
        let mut visible = Vec::new();
        for volume in &spec.volumes {
            let dir = layout.volume_dir(key, &volume.name);
            ensure_dir(&dir)?;
            let Some(target) = &volume.mount_path else {
                continue;
            };
            let mode = if volume.read_only { "ro" } else { "rw" };
            mounts.push(json!({"destination": target, "type": "bind",
                               "source": dir, "options": ["bind", mode]}));
            visible.push((volume.name.clone(), target.clone()));
        }
        let base = vec![
            ("PATH".to_owned(), SANDBOX_PATH.to_owned()),
            ("HOME".to_owned(), "/root".to_owned()),
        ];
        let resolved = resolve(spec, base, ports, &visible);
        let cwd = spec
            .working_dir
            .clone()
            .or_else(|| visible.first().map(|(_, target)| target.clone()))
            .unwrap_or_else(|| "/".to_owned());

        let netns = self.netns.as_deref().ok_or_else(|| {
            Error::Network("a gVisor sandbox needs its network namespace".to_owned())
        })?;
        let config = bundle::config(
            &resolved.argv,
            &resolved.env,
            &cwd,
            &root,
            &key.name,
            mounts,
            netns,
        );
        let path = bundle.join("config.json");
        let text = serde_json::to_vec_pretty(&config).map_err(Error::Bundle)?;
        std::fs::write(&path, text).map_err(|e| Error::data_dir(&path, e))?;
        Ok(self.launch(layout, key, None))
    }

    /// The command line that starts the prepared bundle: `runsc run`, or `runsc restore` from
    /// the checkpoint image in `restore`.
    pub fn launch(&self, layout: &Layout, key: &ObjectKey, restore: Option<&Path>) -> Launch {
        let bundle = layout.bundle_dir(key);
        let mut args = self.global_args();
        args.extend([
            format!("--platform={}", self.config.platform.as_str()),
            "--network=sandbox".to_owned(),
            // Root writes go to memory: the host's filesystem is never changed (and a
            // checkpoint keeps them, with the rest of the sandbox's memory).
            "--overlay2=root:memory".to_owned(),
            "--ignore-cgroups".to_owned(),
        ]);
        if self.info.gofer_network_namespace {
            // A fresh empty namespace per gofer: the default shares one pinned by a bind
            // mount under the runsc root, which would outlive every sandbox (and block the
            // removal of the data directory).
            args.push("--gofer-network-namespace=new".to_owned());
        }
        match restore {
            Some(image) => {
                args.extend([
                    "restore".to_owned(),
                    "--image-path".to_owned(),
                    image.display().to_string(),
                ]);
                if self.background_restore() {
                    args.push("--background".to_owned());
                }
            }
            None => args.push("run".to_owned()),
        }
        args.extend([
            "--bundle".to_owned(),
            bundle.display().to_string(),
            Self::container_id(key),
        ]);
        Launch {
            program: self.program.clone(),
            args,
            env: vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())],
            cwd: bundle,
        }
    }

    /// Whether restores load memory in the background (configured, and offered by runsc).
    fn background_restore(&self) -> bool {
        self.config.background_restore && self.info.restore_background
    }

    /// Checkpoints a running sandbox into `image` (memory and the in-memory root overlay,
    /// uncompressed so that a restore can load it in the background); the sandbox exits once
    /// it is saved, or runs on with `leave_running`.
    pub async fn checkpoint(
        &self,
        key: &ObjectKey,
        image: &Path,
        leave_running: bool,
    ) -> Result<()> {
        ensure_dir(image)?;
        let image_arg = image.display().to_string();
        let id = Self::container_id(key);
        let mut args = vec![
            "checkpoint",
            "--compression=none",
            "--image-path",
            &image_arg,
        ];
        if leave_running {
            args.push("--leave-running");
        }
        args.push(&id);
        self.call_result(&args)
            .await
            .map(|_| ())
            .map_err(Error::Checkpoint)
    }

    /// Whether the container still runs (a failed checkpoint may have ended it).
    pub async fn running(&self, key: &ObjectKey) -> bool {
        let Some(out) = self.call(&["state", &Self::container_id(key)]).await else {
            return false;
        };
        serde_json::from_slice::<serde_json::Value>(&out)
            .ok()
            .and_then(|state| {
                state
                    .get("status")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
            })
            .is_some_and(|status| status == "running")
    }

    /// Stops a running container: SIGTERM to it, SIGKILL to all its processes after `grace`,
    /// then the `runsc run` process group, and removes the container.
    pub async fn terminate(
        &self,
        key: &ObjectKey,
        child: &mut Child,
        grace: Duration,
    ) -> Option<ExitStatus> {
        let id = Self::container_id(key);
        self.call(&["kill", &id, "15"]).await;
        let status = match tokio::time::timeout(grace, child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                self.call(&["kill", "--all", &id, "9"]).await;
                match tokio::time::timeout(KILL_WAIT, child.wait()).await {
                    Ok(status) => status.ok(),
                    Err(_) => {
                        if let Some(pgid) = child.id() {
                            signal_group(pgid, Signal::SIGKILL);
                        }
                        child.wait().await.ok()
                    }
                }
            }
        };
        self.delete(key).await;
        status
    }

    /// Removes a sandbox's container, running or not (after an exit, or one a crashed run
    /// left behind).
    pub async fn delete(&self, key: &ObjectKey) {
        self.call(&["delete", "--force", &Self::container_id(key)])
            .await;
    }

    /// [`Runsc::delete`] when runsc has a state file of the container (a start's path: most
    /// starts find none, and a `runsc delete` costs a process of its own).
    pub async fn delete_if_present(&self, key: &ObjectKey) {
        let id = Self::container_id(key);
        // `{sandbox}_sandbox:{container}.state` (the sandbox is the container here), or the
        // older `{container}.state`.
        let suffix = format!(":{id}.state");
        let plain = format!("{id}.state");
        let present = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.ends_with(&suffix) || name == plain
            });
        if present {
            self.delete(key).await;
        }
    }

    /// Removes every container under the runsc root (left by a previous run of the
    /// controller); returns how many there were.
    pub async fn delete_all(&self) -> usize {
        let Some(out) = self.call(&["list", "--quiet"]).await else {
            return 0;
        };
        let ids: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(str::trim)
            .filter(|id| id.starts_with("rouse_"))
            .map(str::to_owned)
            .collect();
        for id in &ids {
            self.call(&["delete", "--force", id]).await;
        }
        ids.len()
    }

    fn global_args(&self) -> Vec<String> {
        vec!["--root".to_owned(), self.root.display().to_string()]
    }

    /// Runs one runsc management command with a deadline; its stdout on success.
    async fn call(&self, args: &[&str]) -> Option<Vec<u8>> {
        self.call_result(args).await.ok()
    }

    /// Runs one runsc management command with a deadline; its stdout, or why it failed.
    async fn call_result(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = Command::new(&self.program);
        command
            .args(self.global_args())
            .args(args)
            .kill_on_drop(true);
        let verb = args.first().copied().unwrap_or("");
        match tokio::time::timeout(RUNSC_CALL, command.output()).await {
            Ok(Ok(out)) if out.status.success() => Ok(out.stdout),
            Ok(Ok(out)) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                // runsc's own error is the first line; the rest is a Go stack.
                let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let message: String = first.chars().take(400).collect();
                tracing::debug!(runsc.args = ?args, stderr = %message, "runsc call failed");
                Err(format!("runsc {verb} failed: {message}"))
            }
            Ok(Err(error)) => {
                tracing::warn!(runsc.args = ?args, %error, "runsc call could not run");
                Err(format!("runsc {verb} could not run: {error}"))
            }
            Err(_) => {
                tracing::warn!(runsc.args = ?args, "runsc call timed out");
                Err(format!("runsc {verb} timed out"))
            }
        }
    }
}

/// Finds `program` (a path, or a name searched on `PATH`) and probes it: its path and what it
/// offers, or why Rouse cannot use it (missing, not runsc, too old).
pub fn inspect(program: &Path) -> Result<(PathBuf, RunscInfo)> {
    let program = find_program(program).ok_or(Error::RuntimeMissing {
        runtime: GVISOR_RUNTIME_CLASS,
        program: "runsc",
        hint: INSTALL_HINT,
    })?;
    let info = probe(&program)
        .and_then(|info| info.check().map(|()| info))
        .map_err(|why| Error::RuntimeUnusable {
            runtime: GVISOR_RUNTIME_CLASS,
            program: program.clone(),
            why,
            hint: INSTALL_HINT,
        })?;
    Ok((program, info))
}

/// A program path as given, or the first executable of that name on `PATH`.
fn find_program(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return executable(program).then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}
