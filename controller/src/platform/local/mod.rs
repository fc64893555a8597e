//! The local platform of standalone mode: sandboxes run as host processes (`process`
//! runtime) or under gVisor's `runsc` (`gvisor` runtime), volumes are directories under the
//! data directory, and each sandbox's output goes to a log file.

mod activity;
mod backoff;
mod cgroup;
mod checkpoint;
mod contain;
mod copy;
mod direct;
mod env;
mod error;
mod gvisor;
mod ksm;
mod launch;
mod layout;
mod live;
mod netns;
mod pidfile;
mod platform;
mod ports;
mod probe;
mod process;
mod readiness;
mod sharing;
mod snapshots;
mod spec;
mod supervisor;
mod sweep;

pub use activity::ActivityView;
pub use backoff::BackOff;
pub use cgroup::CGROUP_EXEC_COMMAND;
pub use direct::{DirectStart, NotDirect, accepting};
pub use error::{Error, Result};
pub use gvisor::{
    GvisorConfig, GvisorPlatform, INSTALL_HINT, RUNSC_HINT, Runsc, RunscInfo,
    inspect as inspect_runsc,
};
pub use ksm::{
    DEFAULT_PAGES_TO_SCAN, DEFAULT_SLEEP_MILLISECS, KSM_SYSFS, Ksm, KsmConfig, KsmState,
    MERGE_EXEC_COMMAND,
};
pub use launch::MAX_LOG_BYTES;
pub use launch::WORKLOAD_ENV;
pub use layout::{Layout, env_suffix};
pub use pidfile::write as write_pid_file;
pub use platform::{CHANGES_CAPACITY, LOOPBACK, LocalConfig, LocalPlatform, NODE_NAME};
pub use ports::PortMap;
pub use readiness::{ProbeAction, Readiness};
pub use snapshots::TakeError;
pub use spec::{LaunchSpec, PortSpec, RestartPolicy, RuntimeKind, VolumeSpec, expand};
pub use supervisor::{LiveSnapshots, Notify, Workload, WorkloadPhase, WorkloadStatus};

#[cfg(test)]
mod tests;
