//! Timing in batches and the summary statistics every scenario reports.

use std::time::{Duration, Instant};

/// How long and how many times to run.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Most batches to run of each side.
    pub batches: usize,
    /// Operations per batch; a batch is timed as a whole to keep clock overhead out.
    pub batch_size: usize,
    /// Stop starting new batches after this long per side (both sides: twice this).
    pub max_time: Duration,
}

/// Per-operation latency of one side of a scenario, in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// What was measured.
    pub name: String,
    /// Operations run.
    pub ops: usize,
    /// Median of the batch means.
    pub p50_ns: f64,
    /// 99th percentile of the batch means.
    pub p99_ns: f64,
    /// Slowest batch mean.
    pub max_ns: f64,
}

impl Summary {
    /// Operations per second at the median.
    pub fn ops_per_sec(&self) -> f64 {
        if self.p50_ns > 0.0 {
            1e9 / self.p50_ns
        } else {
            0.0
        }
    }
}

/// Runs `subject` and `baseline` in alternating timed batches within `budget` and summarises
/// each side's per-operation times. Alternating, rather than one side after the other, spreads
/// whatever else the machine does over both sides alike, so the ratio stays meaningful.
/// Each op gets its index, so it can cycle through its inputs.
pub fn compare(
    names: (&str, &str),
    budget: Budget,
    mut subject: impl FnMut(usize),
    mut baseline: impl FnMut(usize),
) -> (Summary, Summary) {
    let started = Instant::now();
    let mut means = (
        Vec::with_capacity(budget.batches),
        Vec::with_capacity(budget.batches),
    );
    let mut ops = 0;
    for _ in 0..budget.batches {
        if started.elapsed() > budget.max_time * 2 && !means.0.is_empty() {
            break;
        }
        means
            .0
            .push(time_batch(budget.batch_size, ops, &mut subject));
        means
            .1
            .push(time_batch(budget.batch_size, ops, &mut baseline));
        ops += budget.batch_size;
    }
    (
        summarize(names.0, ops, means.0),
        summarize(names.1, ops, means.1),
    )
}

/// Mean nanoseconds per operation of one batch, ops numbered from `first`.
fn time_batch(size: usize, first: usize, op: &mut impl FnMut(usize)) -> f64 {
    let t = Instant::now();
    for i in first..first + size {
        op(i);
    }
    t.elapsed().as_nanos() as f64 / size.max(1) as f64
}

fn summarize(name: &str, ops: usize, mut means: Vec<f64>) -> Summary {
    means.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        let i = ((means.len() as f64 - 1.0) * q).round() as usize;
        means.get(i).copied().unwrap_or(0.0)
    };
    Summary {
        name: name.to_owned(),
        ops,
        p50_ns: pick(0.5),
        p99_ns: pick(0.99),
        max_ns: means.last().copied().unwrap_or(0.0),
    }
}

/// Prints a measured side and its baseline with the ratio of their medians.
pub fn print_pair(subject: &Summary, baseline: &Summary) {
    for s in [subject, baseline] {
        println!(
            "{:<34} ops {:>9}  p50 {:>10.1} ns  p99 {:>10.1} ns  max {:>10.1} ns  {:>12.0} ops/s",
            s.name,
            s.ops,
            s.p50_ns,
            s.p99_ns,
            s.max_ns,
            s.ops_per_sec()
        );
    }
    let ratio = if baseline.p50_ns > 0.0 {
        subject.p50_ns / baseline.p50_ns
    } else {
        f64::NAN
    };
    println!("ratio {} / {}: {ratio:.2}x", subject.name, baseline.name);
}
