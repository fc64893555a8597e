//! Loading archives into containerd (`ctr images import`), and a private containerd for tests:
//! its own root, state and socket in a temporary directory, stopped by PID, with every mount
//! under that directory undone at the end.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::command::{output_within, run_within};
use super::{Error, Result, normalized_name};

/// How long an import may take (a large layer is unpacked into the snapshotter).
const IMPORT_DEADLINE: Duration = Duration::from_secs(300);

/// How long a short `ctr` call (list, version, kill) may take.
const CTR_DEADLINE: Duration = Duration::from_secs(30);

/// How long the private containerd may take to answer after its start.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// The containerd namespace the CRI plugin (and so the kubelet) uses.
pub const K8S_NAMESPACE: &str = "k8s.io";

/// Imports the docker archive `archive` into the `k8s.io` namespace of the containerd at
/// `socket` (unpacked into the default snapshotter, as the kubelet needs it) and checks that
/// containerd then lists the image. Returns the name containerd stores.
pub fn import(archive: &Path, socket: &Path) -> Result<String> {
    let name = normalized_name(&super::read::image_name(archive)?);
    run_within(
        ctr(socket).args(["images", "import"]).arg(archive),
        &format!("ctr images import {}", archive.display()),
        IMPORT_DEADLINE,
    )?;
    if !listed_images(socket)?.contains(&name) {
        return Err(Error::NotImported {
            name,
            socket: socket.to_owned(),
        });
    }
    Ok(name)
}

/// The image names containerd at `socket` lists in the `k8s.io` namespace.
pub fn listed_images(socket: &Path) -> Result<Vec<String>> {
    let output = run_within(
        ctr(socket).args(["images", "ls", "-q"]),
        "ctr images ls",
        CTR_DEADLINE,
    )?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `ctr --address <socket> -n k8s.io`.
fn ctr(socket: &Path) -> Command {
    let mut command = Command::new("ctr");
    command
        .arg("--address")
        .arg(socket)
        .args(["-n", K8S_NAMESPACE]);
    command
}

/// A containerd of this test process's own, without the CRI plugin. Stopped when dropped.
#[derive(Debug)]
pub struct ScratchContainerd {
    dir: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
    watchdog: Option<Child>,
}

/// A started [`ScratchContainerd`], or `None` (with a message naming `test`) when this host
/// cannot run one (not root, `containerd` or `ctr` missing) and the run does not
/// [require](crate::cluster::required) it. Panics when required but unavailable, or when it
/// does not start.
pub fn containerd_or_skip(test: &str) -> Option<ScratchContainerd> {
    if let Err(why) = ScratchContainerd::available() {
        if crate::cluster::required() {
            panic!("{test}: containerd is required (CI is set): {why}");
        }
        eprintln!("skipping {test}: {why}");
        return None;
    }
    match ScratchContainerd::start() {
        Ok(containerd) => Some(containerd),
        Err(e) => panic!("{test}: the private containerd did not start: {e}"),
    }
}

impl ScratchContainerd {
    /// Whether one can run here: root, and `containerd` and `ctr` on `PATH` (Debian's
    /// `containerd` package has both).
    pub fn available() -> Result<()> {
        if !nix::unistd::geteuid().is_root() {
            return Err(Error::Unavailable("not root".to_owned()));
        }
        for program in ["containerd", "ctr"] {
            if on_path(program).is_none() {
                return Err(Error::Unavailable(format!(
                    "{program} not on PATH (apt-get install containerd)"
                )));
            }
        }
        Ok(())
    }

    /// Starts containerd with root, state, socket and log in a new temporary directory and
    /// waits until it answers.
    pub fn start() -> Result<Self> {
        Self::available()?;
        let dir = tempfile::Builder::new()
            .prefix("rouse-containerd-")
            .tempdir()
            .map_err(|e| write_error(Path::new("temporary directory"), e))?
            .keep();
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        let text = format!(
            "version = 2\nroot = {root:?}\nstate = {state:?}\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = {socket:?}\n[ttrpc]\n  address = {ttrpc:?}\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = {opt:?}\n",
            root = dir.join("root").display().to_string(),
            state = dir.join("state").display().to_string(),
            socket = socket.display().to_string(),
            ttrpc = dir.join("containerd.sock.ttrpc").display().to_string(),
            opt = dir.join("opt").display().to_string(),
        );
        std::fs::write(&config, text).map_err(|e| write_error(&config, e))?;
        let log_path = dir.join("containerd.log");
        let log = File::create(&log_path).map_err(|e| write_error(&log_path, e))?;
        let log_err = log.try_clone().map_err(|e| write_error(&log_path, e))?;
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| Error::Command {
                program: "containerd".to_owned(),
                detail: format!("cannot start: {e}"),
            })?;
        // Stops containerd when this process exits without dropping us (a static, a kill);
        // `stop` ends it first, so it never signals a PID that was reused meanwhile.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg("tail --pid=\"$1\" -f /dev/null; kill -TERM \"$2\" 2>/dev/null")
            .arg("rouse-containerd-watchdog")
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let mut containerd = Self {
            dir,
            socket,
            child: Some(child),
            watchdog,
        };
        containerd.wait_ready()?;
        Ok(containerd)
    }

    /// containerd's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The temporary directory holding root, state, socket and `containerd.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Imports `archive` (see [`import`]).
    pub fn import(&self, archive: &Path) -> Result<String> {
        import(archive, &self.socket)
    }

    /// Runs a new container `id` of `image` under runc (`ctr run --rm`, its own network
    /// namespace with loopback only) and returns its output, killing it after `deadline`.
    /// `args` is the whole command line (as with `ctr run`, the image's entrypoint is not
    /// prepended); none runs the image's entrypoint and command.
    pub fn run(&self, image: &str, id: &str, args: &[&str], deadline: Duration) -> Result<Output> {
        let result = output_within(
            ctr(&self.socket)
                .args(["run", "--rm", "--runtime", "io.containerd.runc.v2"])
                .arg(normalized_name(image))
                .arg(id)
                .args(args),
            &format!("ctr run {image} {}", args.join(" ")),
            deadline,
        );
        if result.is_err() {
            self.remove_container(id);
        }
        result
    }

    fn wait_ready(&mut self) -> Result<()> {
        let end = Instant::now() + START_DEADLINE;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(Error::Command {
                    program: "containerd".to_owned(),
                    detail: format!("exited with {status}:\n{}", self.log_tail()),
                });
            }
            let answer = output_within(
                ctr(&self.socket).arg("version"),
                "ctr version",
                CTR_DEADLINE,
            );
            if answer.is_ok_and(|o| o.status.success()) {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(Error::Deadline {
                    what: format!("containerd start (log:\n{})", self.log_tail()),
                    deadline: START_DEADLINE,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills and removes container `id` after a failed or timed-out run.
    fn remove_container(&self, id: &str) {
        let _ = output_within(
            ctr(&self.socket).args(["tasks", "kill", "--signal", "SIGKILL", id]),
            "ctr tasks kill",
            CTR_DEADLINE,
        );
        let _ = output_within(
            ctr(&self.socket).args(["tasks", "delete", "--force", id]),
            "ctr tasks delete",
            CTR_DEADLINE,
        );
        let _ = output_within(
            ctr(&self.socket).args(["containers", "delete", id]),
            "ctr containers delete",
            CTR_DEADLINE,
        );
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Removes leftover containers, stops containerd (SIGTERM, SIGKILL after 10 s), unmounts
    /// what is mounted under its directory (deepest first) and removes the directory.
    fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(output) = output_within(
            ctr(&self.socket).args(["containers", "ls", "-q"]),
            "ctr containers ls",
            CTR_DEADLINE,
        ) {
            for id in String::from_utf8_lossy(&output.stdout).lines() {
                self.remove_container(id.trim());
            }
        }
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let end = Instant::now() + Duration::from_secs(10);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        for mountpoint in mounts_under(&self.dir) {
            let _ = output_within(
                Command::new("umount").arg(&mountpoint),
                "umount",
                CTR_DEADLINE,
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ScratchContainerd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Mount points at or below `dir` (this process's mount namespace), deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(field.replace("\\040", " ")))
        .filter(|mountpoint| mountpoint.starts_with(dir))
        .collect();
    found.sort();
    found.dedup();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

/// The first `program` on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn write_error(path: &Path, source: std::io::Error) -> Error {
    Error::Write {
        path: path.to_owned(),
        source,
    }
}
