//! The `gvisor` runtime: the workload runs under `runsc --platform=ptrace --network=host`
//! from an OCI bundle generated per sandbox. The root filesystem is the host's `/` (or the
//! directory of `image: dir:///path`) with an in-memory overlay, so writes outside volumes
//! never reach the host; volume directories are bind-mounted at their `mountPath`.

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
        })
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
        );
        let path = bundle.join("config.json");
        let text = serde_json::to_vec_pretty(&config).map_err(Error::Bundle)?;
        std::fs::write(&path, text).map_err(|e| Error::data_dir(&path, e))?;
        let mut args = self.global_args();
        args.extend([
            "--platform=ptrace".to_owned(),
            "--network=host".to_owned(),
            // Root writes go to memory: the host's filesystem is never changed.
            "--overlay2=root:memory".to_owned(),
            "--ignore-cgroups".to_owned(),
            "run".to_owned(),
            "--bundle".to_owned(),
            bundle.display().to_string(),
            Self::container_id(key),
        ]);
        Ok(Launch {
            program: self.program.clone(),
            args,
            env: vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())],
            cwd: bundle,
        })
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
        match tokio::time::timeout(RUNSC_CALL, command.output()).await {
            Ok(Ok(out)) if out.status.success() => Some(out.stdout),
            Ok(Ok(out)) => {
                tracing::debug!(runsc.args = ?args, stderr = %String::from_utf8_lossy(&out.stderr).trim(), "runsc call failed");
                None
            }
            Ok(Err(error)) => {
                tracing::warn!(runsc.args = ?args, %error, "runsc call could not run");
                None
            }
            Err(_) => {
                tracing::warn!(runsc.args = ?args, "runsc call timed out");
                None
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
) -> Value {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
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
        // No network namespace: `--network=host` shares the host's loopback with the proxy.
        "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]},
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
