//! The machine and the process: CPU, kernel, resident memory, file descriptor limit.

use anyhow::Context;

/// `nproc`, the CPU model and the kernel, for the report.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown kernel".to_owned());
    format!("{cpus} CPUs ({model}), Linux {kernel}")
}

/// Resident set size of process `pid` (`self` for this one), in bytes.
pub fn rss_bytes(pid: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc status")?;
    Ok(kb * 1024)
}

/// Raises the soft open-file limit to the hard limit, as the proxy does; returns the new soft
/// limit.
pub fn raise_fd_limit() -> anyhow::Result<u64> {
    Ok(rouse_proxy::open_files::raise()?.now)
}

/// The open-file limit the held-connection measurement asks for: room for 100,000 held
/// connections and more in one process.
pub const FD_TARGET: u64 = 262_144;

/// Raises the open-file limit to `want` (soft and hard; raising the hard limit needs root or
/// `CAP_SYS_RESOURCE`, and at most `fs.nr_open`), else the soft limit to the hard one;
/// returns the soft limit in force.
pub fn raise_fd_limit_to(want: u64) -> anyhow::Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= want {
        return Ok(soft);
    }
    if want > hard && setrlimit(Resource::RLIMIT_NOFILE, want, want).is_ok() {
        return Ok(want);
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(hard)
}

/// Open files of process `pid`.
pub fn open_files(pid: &str) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}
