//! What the local platform reports about memory sharing for a sandbox with
//! `spec.memorySharing: Merge`: the state of the `MemorySharing` condition and the bytes KSM
//! merged of its workload (docs/memory-sharing.md).

use rouse_shared::api::{MemorySharing, Sandbox};

use super::ksm::{self, Ksm, KsmState, MERGE_EXEC_COMMAND};
use super::spec::{LaunchSpec, RuntimeKind};
use crate::sandbox::{ObservedMemorySharing, SharingState};

/// Observes memory sharing of `sandbox`, whose current run (if any) is process group `pgid`;
/// `marks` says whether this platform has the trampoline that marks workloads mergeable.
pub(super) fn observe(
    ksm: &Ksm,
    sandbox: &Sandbox,
    pgid: Option<u32>,
    marks: bool,
) -> Option<ObservedMemorySharing> {
    if sandbox.spec.effective_memory_sharing() != MemorySharing::Merge {
        return None;
    }
    let runtime = LaunchSpec::from_sandbox(sandbox).map_or(RuntimeKind::Process, |l| l.runtime);
    let (state, message) = if runtime == RuntimeKind::Gvisor {
        (
            SharingState::Unsupported,
            "the gvisor runtime keeps a sandbox's memory in one shared memory file, which KSM \
             does not merge; use the process runtime (or Kata VM templating on Kubernetes)"
                .to_owned(),
        )
    } else if !marks {
        (
            SharingState::NotMarked,
            "this controller cannot mark workloads mergeable: it runs without the rouse \
             binary's __merge-exec helper"
                .to_owned(),
        )
    } else {
        match ksm.state() {
            KsmState::Unavailable(why) => (SharingState::KsmUnavailable, why),
            KsmState::Running => match pgid.and_then(ksm::usage) {
                Some(usage) if !usage.marked && !still_in_trampoline(pgid) => (
                    SharingState::NotMarked,
                    "the kernel refused to mark the workload mergeable \
                     (PR_SET_MEMORY_MERGE needs Linux 6.4 or later); the sandbox log says why"
                        .to_owned(),
                ),
                _ => (
                    SharingState::Merging,
                    format!("the workload's memory is offered to KSM ({})", ksm.rate()),
                ),
            },
        }
    };
    let merged_bytes = match state {
        SharingState::Unsupported => None,
        _ => pgid.and_then(ksm::usage).map(|u| u.merged_bytes),
    };
    Some(ObservedMemorySharing {
        state,
        message,
        merged_bytes,
    })
}

/// The group leader has not exec'd the workload yet (it is still `rouse __merge-exec`), so
/// an unmarked leader is not yet a refusal.
fn still_in_trampoline(pgid: Option<u32>) -> bool {
    pgid.and_then(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .is_some_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == MERGE_EXEC_COMMAND.as_bytes())
        })
}
