//! What a readiness check is ([`Readiness`]: the probe's action and its schedule), read from a
//! pod's `readinessProbe` with Kubernetes' defaults and bounds; [`super::probe`] runs it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Probe;

/// What a probe checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// No probe declared: a TCP connect to `PORT`.
    Connect,
    /// `tcpSocket`: a TCP connect to the port (`None` = `PORT`).
    Tcp {
        /// The declared container port probed.
        container_port: Option<u16>,
    },
    /// `httpGet`: an HTTP/1.1 GET answered with a status in 200..400.
    Http {
        /// The declared container port probed.
        container_port: Option<u16>,
        /// The request path.
        path: String,
        /// Extra request headers.
        headers: Vec<(String, String)>,
    },
}

/// A readiness check and its schedule, bounded so a bad manifest cannot stall a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// What is checked.
    pub action: ProbeAction,
    /// Wait before the first check (at most 5 minutes).
    pub initial_delay: Duration,
    /// Time between checks once ready (1 s to 5 minutes).
    pub period: Duration,
    /// Deadline of one check (1 s to 1 minute).
    pub timeout: Duration,
    /// Consecutive successes that make the workload ready (1 to 100).
    pub success_threshold: u32,
    /// Consecutive failures that make it unready again (1 to 100).
    pub failure_threshold: u32,
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            action: ProbeAction::Connect,
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: 1,
            failure_threshold: 3,
        }
    }
}

impl Readiness {
    /// The schedule of a pod probe, with Kubernetes defaults and bounds applied.
    pub fn from_probe(action: ProbeAction, probe: &Probe) -> Self {
        let secs = |v: Option<i32>, default: i32, min: i32, max: i32| {
            Duration::from_secs(u64::try_from(v.unwrap_or(default).clamp(min, max)).unwrap_or(0))
        };
        let count = |v: Option<i32>, default: i32| {
            u32::try_from(v.unwrap_or(default).clamp(1, 100)).unwrap_or(1)
        };
        Self {
            action,
            initial_delay: secs(probe.initial_delay_seconds, 0, 0, 300),
            period: secs(probe.period_seconds, 10, 1, 300),
            timeout: secs(probe.timeout_seconds, 1, 1, 60),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}
