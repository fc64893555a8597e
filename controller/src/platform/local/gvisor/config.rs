//! How the gvisor runtime runs sandboxes: the runsc platform and the restore options, one
//! typed struct with its defaults here (`rouse up`'s `[runtime.gvisor]`, docs/standalone.md).

use serde::Deserialize;

/// gVisor's platform: how the sentry intercepts the workload's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GvisorPlatform {
    /// Seccomp traps and shared-memory stubs: gVisor's default since 2023, and the fastest
    /// without hardware virtualization.
    #[default]
    Systrap,
    /// ptrace(2): slower; works where seccomp's `SECCOMP_RET_TRAP` cannot be used.
    Ptrace,
}

impl GvisorPlatform {
    /// runsc's name of the platform (`--platform=NAME`).
    pub fn as_str(self) -> &'static str {
        match self {
            GvisorPlatform::Systrap => "systrap",
            GvisorPlatform::Ptrace => "ptrace",
        }
    }
}

/// Settings of the gvisor runtime.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GvisorConfig {
    /// The runsc platform. Default `systrap`.
    pub platform: GvisorPlatform,
    /// Restore with `runsc restore --background`: the sandbox runs as soon as its kernel state
    /// is loaded and its memory follows in the background, so a wake does not wait for the
    /// whole image. Used when the runsc offers it. Default true (docs/benchmarks.md,
    /// "restore").
    pub background_restore: bool,
}

impl Default for GvisorConfig {
    fn default() -> Self {
        Self {
            platform: GvisorPlatform::default(),
            background_restore: true,
        }
    }
}
