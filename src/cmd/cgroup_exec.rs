//! `rouse __cgroup-exec CGROUP_PROCS -- PROGRAM ARGS...` (hidden): the trampoline through which
//! `rouse up` starts every workload where it uses cgroups. It moves itself into the workload's
//! cgroup (writes `0` to that cgroup's `cgroup.procs`), then execs the workload in its place
//! (same pid, process group, environment, directory and output), so every process the workload
//! ever starts is in the cgroup and a stop can kill them all (docs/standalone-runtimes.md).
//!
//! A workload that cannot join its cgroup is not started: the platform checked at start that
//! processes can be moved there, so a failure means the host changed, and running the workload
//! outside would silently lose the guarantee that its stop ends everything it started. The
//! reason goes to stderr, which is the sandbox's log.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

/// The exit code when the cgroup cannot be joined (as runc's 125 for a container not started).
const JOIN_FAILED: u8 = 125;
/// The exit code when the workload cannot be executed (as a shell's "command not found").
const EXEC_FAILED: u8 = 127;

/// Runs the trampoline with the arguments after the subcommand name; returns only on failure.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let usage = "usage: rouse __cgroup-exec CGROUP_PROCS -- PROGRAM ARGS...";
    let (Some(procs), Some(dashes), Some(program)) = (args.next(), args.next(), args.next()) else {
        eprintln!("rouse: __cgroup-exec: missing arguments ({usage})");
        return ExitCode::from(2);
    };
    if dashes != "--" {
        eprintln!("rouse: __cgroup-exec: expected `--` after the cgroup ({usage})");
        return ExitCode::from(2);
    }
    // `0` is the writing process itself, with all its threads (one, here).
    if let Err(error) = std::fs::write(&procs, "0") {
        eprintln!(
            "rouse: cannot join the workload's cgroup ({}): {error}; not starting it",
            procs.to_string_lossy()
        );
        return ExitCode::from(JOIN_FAILED);
    }
    let error = Command::new(&program).args(args).exec();
    eprintln!(
        "rouse: cannot execute {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(EXEC_FAILED)
}
