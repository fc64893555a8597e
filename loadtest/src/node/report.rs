//! The node scenario's report as Markdown tables (what docs/benchmarks.md quotes).

use std::fmt::{self, Write};
use std::time::Duration;

use super::NodeReport;
use super::memory::MemorySide;
use super::wake::WakeSide;
use crate::wake::{Latencies, quantile_ms};

/// Prints [`render`] of `report` to stdout.
pub fn print(report: &NodeReport) {
    print!("{}", render(report));
}

/// The report as Markdown: the machine line, then the wake, claim and memory tables.
pub fn render(report: &NodeReport) -> String {
    let mut out = String::new();
    // Writing into a String never fails.
    let _ = write_report(&mut out, report);
    out
}

/// Milliseconds of `d`.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn write_report(out: &mut String, report: &NodeReport) -> fmt::Result {
    writeln!(
        out,
        "node Ready in {:.1} s, helm install {:.1} s; load average {:.1} before, {:.1} after; {} CPUs",
        report.node_start.as_secs_f64(),
        report.install.as_secs_f64(),
        report.load.0,
        report.load.1,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )?;
    writeln!(out)?;
    writeln!(out, "### Wake on connect through the cluster")?;
    writeln!(out)?;
    writeln!(out, "| runtime | side | n | p50 ms | p99 ms | max ms |")?;
    writeln!(out, "|---|---|---:|---:|---:|---:|")?;
    for side in &report.wake {
        write_wake(out, side)?;
    }
    writeln!(out)?;
    writeln!(out, "### Claims (pool of {})", report.claims.pool)?;
    writeln!(out)?;
    writeln!(out, "| path | n | p50 ms | p99 ms | max ms |")?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    for l in [&report.claims.warm, &report.claims.cold] {
        writeln!(out, "| {} | {} |{}", l.name, l.samples.len(), quantiles(l))?;
    }
    writeln!(out)?;
    write_memory(out, &report.memory)
}

/// ` p50 | p99 | max |` of `l` in ms.
fn quantiles(l: &Latencies) -> String {
    format!(
        " {:.0} | {:.0} | {:.0} |",
        ms(l.quantile(0.5)),
        ms(l.quantile(0.99)),
        ms(l.quantile(1.0))
    )
}

/// One runtime class's rows: the four measurements, the overhead and ratio per percentile,
/// and the overhead per cycle.
fn write_wake(out: &mut String, side: &WakeSide) -> fmt::Result {
    let runtime = side.runtime.name();
    for l in [&side.bare, &side.bare_ip, &side.wake, &side.wake_ip] {
        writeln!(
            out,
            "| {runtime} | {} | {} |{}",
            l.name,
            l.samples.len(),
            quantiles(l)
        )?;
    }
    let (wake, bare) = (|q| ms(side.wake.quantile(q)), |q| ms(side.bare.quantile(q)));
    writeln!(
        out,
        "| {runtime} | overhead: wake − bare, per percentile | | {:.0} | {:.0} | |",
        wake(0.5) - bare(0.5),
        wake(0.99) - bare(0.99)
    )?;
    let ratio = |q| wake(q) / bare(q).max(f64::MIN_POSITIVE);
    writeln!(
        out,
        "| {runtime} | ratio: wake / bare, per percentile | | {:.2}× | {:.2}× | |",
        ratio(0.5),
        ratio(0.99)
    )?;
    let paired = side.paired_overhead_ms();
    writeln!(
        out,
        "| {runtime} | overhead per cycle (wake − the bare start before it) | {} | {:.0} | {:.0} | {:.0} |",
        paired.len(),
        quantile_ms(&paired, 0.5),
        quantile_ms(&paired, 0.99),
        quantile_ms(&paired, 1.0)
    )
}

/// The memory table: working set and RSS of each release pod, at rest and with the
/// sandboxes, and the difference per sandbox.
fn write_memory(out: &mut String, memory: &MemorySide) -> fmt::Result {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let per = |before: u64, after: u64| {
        (after as f64 - before as f64) / 1024.0 / memory.sandboxes.max(1) as f64
    };
    writeln!(
        out,
        "### Memory with {} sandboxes (all Ready and counted by the release after {:.1} s)",
        memory.sandboxes,
        memory.fill.as_secs_f64()
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| pod | RSS at rest → with sandboxes | per sandbox | working set at rest → with sandboxes | per sandbox |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    for pod in &memory.pods {
        writeln!(
            out,
            "| {} `{}` | {:.1} → {:.1} MiB | {:.1} KiB | {:.1} → {:.1} MiB | {:.1} KiB |",
            pod.role,
            pod.pod,
            mib(pod.before.rss),
            mib(pod.after.rss),
            per(pod.before.rss, pod.after.rss),
            mib(pod.before.working_set),
            mib(pod.after.working_set),
            per(pod.before.working_set, pod.after.working_set)
        )?;
    }
    Ok(())
}
