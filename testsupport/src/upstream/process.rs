//! A child process a test starts, with its output in a log file, stopped when dropped and by a
//! watchdog when the test process exits first (a panic that aborts, a killed test run).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How long a stopped process may take to exit after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running child process; SIGTERM (then SIGKILL) on drop.
#[derive(Debug)]
pub struct Supervised {
    name: String,
    log: PathBuf,
    child: Child,
    /// Stops `child` if this process exits without dropping us; killed first on drop, so it
    /// never signals a pid that was reused after `child` exited.
    watchdog: Child,
}

impl Supervised {
    /// Starts `command` as `name`, its stdout and stderr in `<dir>/<name>.log`.
    pub fn spawn(name: &str, command: &mut Command, dir: &Path) -> Result<Self> {
        let log = dir.join(format!("{name}.log"));
        let file = File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("start {name} ({:?})", command.get_program()))?;
        // `tail --pid` returns when this process exits; the watchdog then stops the child.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(
                "tail --pid=\"$1\" -f /dev/null; kill -TERM \"$2\" 2>/dev/null; \
                 for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 \"$2\" 2>/dev/null || exit 0; sleep 1; done; \
                 kill -KILL \"$2\" 2>/dev/null",
            )
            .arg("rouse-upstream-watchdog")
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start the watchdog")?;
        Ok(Self {
            name: name.to_owned(),
            log,
            child,
            watchdog,
        })
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` when the process has exited, with the end of its log.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} exited with {status}:\n{}",
                self.name,
                tail(&self.log, 40)
            )),
            _ => None,
        }
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let end = Instant::now() + STOP_GRACE;
        while Instant::now() < end {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a file.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
