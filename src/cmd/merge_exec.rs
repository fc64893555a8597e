//! `rouse __merge-exec -- PROGRAM ARGS...` (hidden): the trampoline through which the process
//! runtime starts a sandbox with `spec.memorySharing: Merge`. It marks itself mergeable with
//! `prctl(PR_SET_MEMORY_MERGE, 1)`, which the kernel keeps across fork and exec, then execs the
//! workload in its place (same pid, process group, environment, directory and output), so every
//! process the workload starts is offered to KSM. A kernel that refuses the mark (older than
//! 6.4, or built without KSM) is reported on stderr (the sandbox log) and the workload runs
//! unmarked: memory sharing is an optimisation and never stops a sandbox.
//!
//! The prctl is the only `unsafe` in the project: neither nix nor rustix wraps this option and
//! `CommandExt::pre_exec` (the other way to run it in the child) is itself unsafe; this module is
//! the one place allowed to, and the call is a single integer-only syscall.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use nix::errno::Errno;
use nix::libc;

/// The exit code when the workload cannot be executed (as a shell's "command not found").
const EXEC_FAILED: u8 = 127;

/// Runs the trampoline with the arguments after the subcommand name; returns only on failure.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|a| a == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!(
            "rouse: __merge-exec: no program given (usage: rouse __merge-exec -- PROGRAM ARGS...)"
        );
        return ExitCode::from(2);
    };
    if let Err(errno) = mark_mergeable() {
        eprintln!(
            "rouse: memory sharing: the kernel refused PR_SET_MEMORY_MERGE ({errno}; Linux 6.4 \
             or later with KSM is needed); running without it"
        );
    }
    let error = Command::new(&program).args(args).exec();
    eprintln!(
        "rouse: cannot execute {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(EXEC_FAILED)
}

/// Marks the calling process's memory, and that of every process it becomes or starts,
/// mergeable by KSM.
fn mark_mergeable() -> Result<(), Errno> {
    // The unused arguments must be zero as unsigned longs: prctl is variadic, and the kernel
    // refuses the option when any of them is not 0.
    let (on, unused): (libc::c_ulong, libc::c_ulong) = (1, 0);
    // SAFETY: prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) passes integers only: no pointer is read
    // or written, no memory of this process changes; the kernel sets a flag on the process's
    // memory map (it fails with EINVAL where unsupported, which is handled).
    let result = unsafe { libc::prctl(libc::PR_SET_MEMORY_MERGE, on, unused, unused, unused) };
    Errno::result(result).map(drop)
}
