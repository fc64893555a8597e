//! What one phase measured, and the measuring around it: the API server's request counts
//! and the controller's CPU time and peak memory before and after, latencies from create
//! and Ready instants.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::apimetrics::Counts;
use super::process::{Controller, Usage};

/// p50, p99 and count of a set of latencies.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
}

impl Latency {
    /// The quantiles of `samples` (empty: zeros).
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let pick = |q: f64| {
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len().max(1));
            samples.get(rank - 1).copied().unwrap_or_default()
        };
        Self {
            n: samples.len(),
            p50: pick(0.5),
            p99: pick(0.99),
        }
    }
}

/// What one phase of one controller's run measured.
#[derive(Debug, Clone, Default)]
pub struct PhaseReport {
    /// The phase (`rate`, `burst`, `claims`, `refill`, `delete`).
    pub phase: &'static str,
    /// Sandboxes or claims the phase created (deleted, for `delete`).
    pub items: usize,
    /// From the first create to the last Ready (or, for `delete`, to the last object gone).
    pub elapsed: Duration,
    /// Create → Ready of every item.
    pub latency: Latency,
    /// Claims that got a warm pool member: claim → Ready.
    pub warm: Latency,
    /// Claims that got a sandbox of their own: claim → Ready.
    pub cold: Latency,
    /// Named durations of the phase besides `elapsed` (the pool filled, refilled).
    pub marks: Vec<(&'static str, Duration)>,
    /// The controller's requests (and the cluster's, but the benchmark's own) by verb.
    pub requests: Counts,
    /// The controller's CPU time in the phase and its peak memory in it.
    pub usage: Usage,
}

impl PhaseReport {
    /// Items per second over `elapsed`.
    pub fn per_sec(&self) -> f64 {
        self.items as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Readings taken at the start of a phase.
pub struct Probe {
    counts: Counts,
    usage: Usage,
    /// Requests the benchmark itself made, by verb (subtracted at the end).
    pub own: BTreeMap<String, f64>,
}

impl Probe {
    /// Reads the counters and starts a new memory peak of `controller`.
    pub async fn start(client: &kube::Client, controller: Option<&Controller>) -> Result<Self> {
        let usage = match controller {
            Some(c) => {
                c.reset_peak();
                c.usage()?
            }
            None => Usage::default(),
        };
        Ok(Self {
            counts: Counts::read(client).await?,
            usage,
            own: BTreeMap::new(),
        })
    }

    /// Counts `n` requests of `verb` made by the benchmark.
    pub fn own(&mut self, verb: &str, n: usize) {
        *self.own.entry(verb.to_owned()).or_default() += n as f64;
    }

    /// The requests and usage since the start.
    pub async fn finish(
        &self,
        client: &kube::Client,
        controller: Option<&Controller>,
    ) -> Result<(Counts, Usage)> {
        let counts = Counts::read(client)
            .await?
            .since(&self.counts)
            .without(&self.own);
        let usage = match controller {
            Some(c) => {
                let now = c.usage()?;
                Usage {
                    cpu_seconds: now.cpu_seconds - self.usage.cpu_seconds,
                    peak_rss: now.peak_rss,
                }
            }
            None => Usage::default(),
        };
        Ok((counts, usage))
    }
}

/// Create → Ready of each created name that became Ready, and the last Ready instant.
pub fn latencies(
    created: &HashMap<String, Instant>,
    ready: &HashMap<String, Instant>,
) -> (Vec<Duration>, Option<Instant>) {
    let mut last = None;
    let samples = created
        .iter()
        .filter_map(|(name, at)| {
            let r = ready.get(name)?;
            last = last.max(Some(*r));
            Some(r.saturating_duration_since(*at))
        })
        .collect();
    (samples, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let l = Latency::of((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(
            (l.n, l.p50, l.p99),
            (100, Duration::from_millis(50), Duration::from_millis(99))
        );
        assert_eq!(Latency::of(Vec::new()), Latency::default());
    }
}
