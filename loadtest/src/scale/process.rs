//! The controller under test as a process of its own (so its CPU time and memory are its
//! own): upstream's `agent-sandbox-controller` or `rouse controller`, each as its
//! ServiceAccount, with the settings a user gets by default (leader election off, metrics and
//! probes on free local ports), and its usage read from `/proc`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use rouse_testsupport::upstream::Supervised;

/// Which controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Which {
    /// Upstream agent-sandbox's `agent-sandbox-controller --extensions`.
    Upstream,
    /// `rouse controller`.
    Rouse,
}

impl Which {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Which::Upstream => "upstream",
            Which::Rouse => "rouse",
        }
    }
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// CPU time and peak memory of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User plus system CPU seconds.
    pub cpu_seconds: f64,
    /// Peak resident set (`VmHWM`), bytes.
    pub peak_rss: u64,
}

/// A running controller; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Controller {
    /// Which one.
    pub which: Which,
    process: Supervised,
}

impl Controller {
    /// Starts `which` (`binary`) with `kubeconfig`, its log in `dir`.
    pub fn start(which: Which, binary: &Path, kubeconfig: &Path, dir: &Path) -> Result<Self> {
        let mut command = Command::new(binary);
        match which {
            Which::Upstream => {
                command.args([
                    "--extensions",
                    "--leader-elect=false",
                    // Port 0 turns them off; neither is read here.
                    "--metrics-bind-address=0",
                    "--health-probe-bind-address=0",
                ]);
            }
            Which::Rouse => {
                command.args([
                    "controller",
                    "--leader-election=false",
                    "--metrics-address",
                    "127.0.0.1:0",
                ]);
                command.env("RUST_LOG", "warn");
            }
        }
        command
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        let process = Supervised::spawn(&format!("{which}-controller"), &mut command, dir)?;
        Ok(Self { which, process })
    }

    /// Fails with its log when it has exited.
    pub fn check(&mut self) -> Result<()> {
        match self.process.exited() {
            Some(exited) => anyhow::bail!("{exited}"),
            None => Ok(()),
        }
    }

    /// Its CPU time and peak memory so far.
    pub fn usage(&self) -> Result<Usage> {
        usage(self.process.id())
    }

    /// Starts a new peak of its memory (the kernel's `clear_refs`); false when the kernel
    /// refused (the peak then covers the whole run).
    pub fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.process.id()), "5").is_ok()
    }

    /// The end of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// CPU time (`utime + stime` of `/proc/<pid>/stat`) and `VmHWM` of process `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    parse_usage(&stat, &status, ticks_per_second())
        .with_context(|| format!("parse /proc/{pid}/stat and status"))
}

fn ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

/// Parses the two files; the command name in `stat` may hold spaces and parentheses, so the
/// fields are counted from its closing parenthesis.
fn parse_usage(stat: &str, status: &str, ticks: f64) -> Option<Usage> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of stat(5), utime 14 and stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(Usage {
        cpu_seconds: (utime + stime) / ticks,
        peak_rss: hwm_kib * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_and_peak_memory() {
        let stat = "4242 (agent (sandbox)) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 12 0 100 0 0";
        let status = "Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n";
        let usage = parse_usage(stat, status, 100.0).expect("parses");
        assert!((usage.cpu_seconds - 3.0).abs() < 1e-9, "{usage:?}");
        assert_eq!(usage.peak_rss, 51200 * 1024);
        assert!(parse_usage("garbage", status, 100.0).is_none());
    }

    #[test]
    fn reads_this_process() {
        let usage = usage(std::process::id()).expect("own /proc");
        assert!(usage.peak_rss > 0);
    }
}
