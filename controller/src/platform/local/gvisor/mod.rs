//! The `gvisor` runtime: the workload runs under `runsc --platform=ptrace --network=host`
//! from an OCI bundle generated per sandbox. The root filesystem is the host's `/` (or the
//! directory of `image: dir:///path`) with an in-memory overlay, so writes outside volumes
//! never reach the host; volume directories are bind-mounted at their `mountPath`.
//!
//! A sandbox that may be checkpointed runs with `--network=sandbox` in a network namespace of
//! its own (see [`super::netns`]) instead: this runsc refuses to checkpoint host networking.
//! It misreads every network namespace as the host's (it looks at
//! `/proc/sys/net/core/rmem_default`), so each call that touches the sandbox goes through
//! `nsenter --net=NETNS`, and `run`/`restore` additionally through `unshare -m` with a tmpfs
//! over `/proc/sys/net/core` (not `ip netns exec`, which remounts `/sys`).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use rouse_shared::store::ObjectKey;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::env::{SANDBOX_PATH, resolve};
use super::error::{Error, Result};
use super::launch::{KILL_WAIT, Launch, signal_group};
use super::layout::{Layout, ensure_dir};
use super::ports::PortMap;
use super::spec::{GVISOR_RUNTIME_CLASS, LaunchSpec};

/// How to install runsc, for the error when it is missing.
pub const INSTALL_HINT: &str =
    "install gVisor's runsc (Debian/Ubuntu: `apt-get install runsc`) or set its path in the config";
/// Deadline of one `runsc kill`/`delete`/`list` call.
const RUNSC_CALL: Duration = Duration::from_secs(15);

/// The `runsc` binary and its state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runsc {
    program: PathBuf,
    root: PathBuf,
    rootless: bool,
    /// The sandbox's own network namespace (`--network=sandbox`), or `None` for host
    /// networking.
    netns: Option<PathBuf>,
}

impl Runsc {
    /// Finds `program` (a path, or a name searched on `PATH`); a clear error if it is missing.
    pub fn locate(program: &Path, layout: &Layout) -> Result<Self> {
        let program = find_program(program).ok_or(Error::RuntimeMissing {
            runtime: GVISOR_RUNTIME_CLASS,
            program: "runsc",
            hint: INSTALL_HINT,
        })?;
        Ok(Self {
            program,
            root: layout.runsc_root(),
            rootless: !nix::unistd::geteuid().is_root(),
            netns: None,
        })
    }

    /// The same runsc for a sandbox in the network namespace at `netns`.
    pub fn in_netns(&self, netns: PathBuf) -> Self {
        Self {
            netns: Some(netns),
            ..self.clone()
        }
    }

    /// The network namespace the sandbox runs in, if not the host's.
    pub fn netns(&self) -> Option<&Path> {
        self.netns.as_deref()
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
        let root = spec.rootfs.clone().unwrap_or_else(|| PathBuf::from("/"));
        let config = bundle_config(
            &resolved.argv,
            &resolved.env,
            &cwd,
            &root,
            &key.name,
            mounts,
            self.netns.as_deref(),
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
        let network = if self.netns.is_some() {
            "--network=sandbox"
        } else {
            "--network=host"
        };
        args.extend([
            "--platform=ptrace".to_owned(),
            network.to_owned(),
            // Root writes go to memory: the host's filesystem is never changed (and a
            // checkpoint keeps them, with the rest of the sandbox's memory).
            "--overlay2=root:memory".to_owned(),
            "--ignore-cgroups".to_owned(),
        ]);
        match restore {
            Some(image) => args.extend([
                "restore".to_owned(),
                "--image-path".to_owned(),
                image.display().to_string(),
            ]),
            None => args.push("run".to_owned()),
        }
        args.extend([
            "--bundle".to_owned(),
            bundle.display().to_string(),
            Self::container_id(key),
        ]);
        let env = vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())];
        let Some(netns) = &self.netns else {
            return Launch {
                program: self.program.clone(),
                args,
                env,
                cwd: bundle,
            };
        };
        let mut wrapped = vec![
            format!("--net={}", netns.display()),
            "unshare".to_owned(),
            "-m".to_owned(),
            "--propagation".to_owned(),
            "private".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            // The tmpfs hides rmem_default, so runsc sees a namespace of its own.
            "mount -t tmpfs tmpfs /proc/sys/net/core && exec \"$0\" \"$@\"".to_owned(),
            self.program.display().to_string(),
        ];
        wrapped.extend(args);
        Launch {
            program: PathBuf::from("nsenter"),
            args: wrapped,
            env,
            cwd: bundle,
        }
    }

    /// Checkpoints a running sandbox into `image` (memory and the in-memory root overlay);
    /// the sandbox exits once it is saved. Never `--leave-running`: it hangs in this runsc.
    pub async fn checkpoint(&self, key: &ObjectKey, image: &Path) -> Result<()> {
        ensure_dir(image)?;
        let image_arg = image.display().to_string();
        self.call_result(&[
            "checkpoint",
            "--image-path",
            &image_arg,
            &Self::container_id(key),
        ])
        .await
        .map(|_| ())
        .map_err(Error::Checkpoint)
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
        let mut args = vec!["--root".to_owned(), self.root.display().to_string()];
        if self.rootless {
            args.push("--rootless".to_owned());
        }
        args
    }

    /// Runs one runsc management command with a deadline; its stdout on success.
    async fn call(&self, args: &[&str]) -> Option<Vec<u8>> {
        let mut command = Command::new(&self.program);
        command
            .args(self.global_args())
            .args(args)
            .kill_on_drop(true);
        self.call_result(args).await.ok()
    }

    /// Runs one runsc management command with a deadline (under `nsenter --net` when the
    /// sandbox has its own namespace); its stdout, or why it failed.
    async fn call_result(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = match &self.netns {
            Some(netns) => {
                let mut command = Command::new("nsenter");
                command
                    .arg(format!("--net={}", netns.display()))
                    .arg(&self.program);
                command
            }
            None => Command::new(&self.program),
        };
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

fn bundle_config(
    argv: &[String],
    env: &[(String, String)],
    cwd: &str,
    root: &Path,
    hostname: &str,
    mounts: Vec<Value>,
    netns: Option<&Path>,
) -> Value {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    // Without a network namespace, `--network=host` shares the host's loopback with the
    // proxy; with one, the sandbox's own stack takes the namespace's veth.
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if let Some(netns) = netns {
        namespaces.push(json!({"type": "network", "path": netns}));
    }
    json!({
        "ociVersion": "1.0.0",
        "process": {
            "terminal": false,
            "user": {
                "uid": nix::unistd::geteuid().as_raw(),
                "gid": nix::unistd::getegid().as_raw(),
            },
            "args": argv,
            "env": env,
            "cwd": cwd,
        },
        "root": {"path": root, "readonly": false},
        "hostname": hostname,
        "mounts": mounts,
        "linux": {"namespaces": namespaces},
    })
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
