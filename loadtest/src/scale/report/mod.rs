//! One controller's run as numbers, its correctness checks, and the Markdown table that
//! puts the controllers side by side with their ratios and the bare-write baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use super::SizeReport;
use super::apimetrics::Counts;
use super::measure::PhaseReport;
use super::process::{Usage, Which};
use super::tracker::Tracker;

/// One controller's run at one size.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Which controller.
    pub which: Which,
    /// N.
    pub n: usize,
    /// The phases run, in order.
    pub phases: Vec<PhaseReport>,
    /// Sandboxes named by two claims.
    pub double_bindings: Vec<String>,
    /// The most pool members at once.
    pub max_members: usize,
    /// Pool members created beyond the pool's size plus one per warm adoption.
    pub excess_members: usize,
    /// What was left after a deletion (`kind: count`).
    pub leftovers: Vec<String>,
    /// Phases that did not finish (deadline passed, controller exited): `phase: why`.
    pub failures: Vec<String>,
    /// CPU seconds of the whole run and the highest peak of any phase.
    pub usage: Usage,
    /// The pool's size.
    pub pool: usize,
}

impl RunReport {
    /// An empty report.
    pub fn new(which: Which, n: usize) -> Self {
        Self {
            which,
            n,
            phases: Vec::new(),
            double_bindings: Vec::new(),
            max_members: 0,
            excess_members: 0,
            leftovers: Vec::new(),
            failures: Vec::new(),
            usage: Usage::default(),
            pool: 0,
        }
    }

    /// Fills in the correctness checks from what the watches saw.
    pub fn check(&mut self, tracker: &Tracker, pool: usize) {
        self.pool = pool;
        tracker.with(|seen| {
            self.double_bindings = seen.double_bindings();
            self.max_members = seen.max_members;
            let warm: BTreeSet<&String> = seen
                .claim_sandbox
                .values()
                .filter(|s| seen.launch.get(*s).is_some_and(|l| l == "warm"))
                .filter(|s| seen.ever_members.contains(*s))
                .collect();
            let needed = if seen.ever_members.is_empty() {
                0
            } else {
                pool + warm.len()
            };
            self.excess_members = seen.ever_members.len().saturating_sub(needed);
        });
        self.usage.peak_rss = self
            .phases
            .iter()
            .map(|p| p.usage.peak_rss)
            .max()
            .unwrap_or(0);
    }

    /// The correctness violations found (empty: none).
    pub fn violations(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .double_bindings
            .iter()
            .map(|d| format!("double binding: {d}"))
            .collect();
        if self.pool > 0 && self.max_members > self.pool {
            out.push(format!(
                "pool over-created: {} members at once for {} replicas",
                self.max_members, self.pool
            ));
        }
        if self.excess_members > 0 {
            out.push(format!(
                "{} pool members created beyond the pool's size plus one per warm adoption",
                self.excess_members
            ));
        }
        out.extend(
            self.leftovers
                .iter()
                .map(|l| format!("left after deletion: {l}")),
        );
        out
    }

    fn phase(&self, name: &str) -> Option<&PhaseReport> {
        self.phases.iter().find(|p| p.phase == name)
    }
}

/// A table row: a label, a value per run, and whether higher is better (for the ratio).
struct Row {
    label: String,
    values: Vec<Option<f64>>,
    unit: &'static str,
    higher_is_better: bool,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The rows of every phase, one column per run.
/// The keys any run's `phase` has in the map `of` picks from its request counts.
fn keys<V>(
    runs: &[RunReport],
    phase: &str,
    of: impl Fn(&Counts) -> &BTreeMap<String, V>,
) -> BTreeSet<String> {
    runs.iter()
        .filter_map(|r| r.phase(phase))
        .flat_map(|p| of(&p.requests).keys().cloned())
        .collect()
}

fn rows(runs: &[RunReport]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut row = |label: String, unit, higher_is_better, f: &dyn Fn(&RunReport) -> Option<f64>| {
        let values: Vec<Option<f64>> = runs.iter().map(f).collect();
        if values.iter().any(Option::is_some) {
            rows.push(Row {
                label,
                values,
                unit,
                higher_is_better,
            });
        }
    };
    for phase in [
        "rate",
        "delete-rate",
        "burst",
        "pool",
        "claims",
        "refill",
        "delete",
    ] {
        let p = |r: &RunReport| r.phase(phase).cloned();
        let items = |r: &RunReport| p(r).map(|p| p.items.max(1) as f64);
        row(
            format!("{phase}: time to all Ready (gone)"),
            "s",
            false,
            &|r| p(r).map(|p| p.elapsed.as_secs_f64()),
        );
        row(format!("{phase}: per second"), "/s", true, &|r| {
            p(r).map(|p| p.per_sec())
        });
        let claims = matches!(phase, "claims" | "refill");
        if matches!(phase, "rate" | "burst" | "claims" | "refill") {
            row(
                format!("{phase}: create → Ready p50"),
                "ms",
                false,
                &|r| p(r).map(|p| ms(p.latency.p50)),
            );
            row(
                format!("{phase}: create → Ready p99"),
                "ms",
                false,
                &|r| p(r).map(|p| ms(p.latency.p99)),
            );
        }
        if claims {
            for (kind, pick) in [("warm", true), ("cold", false)] {
                let lat = move |r: &RunReport| {
                    p(r).map(|p| if pick { p.warm } else { p.cold })
                        .filter(|l| l.n > 0)
                };
                row(format!("{phase}: {kind} claims"), "", false, &|r| {
                    lat(r).map(|l| l.n as f64)
                });
                row(format!("{phase}: {kind} p50"), "ms", false, &|r| {
                    lat(r).map(|l| ms(l.p50))
                });
                row(format!("{phase}: {kind} p99"), "ms", false, &|r| {
                    lat(r).map(|l| ms(l.p99))
                });
            }
        }
        for mark in ["pool refilled", "sandboxes gone"] {
            row(format!("{phase}: {mark}"), "s", false, &|r| {
                p(r)?
                    .marks
                    .iter()
                    .find(|(m, _)| *m == mark)
                    .map(|(_, d)| d.as_secs_f64())
            });
        }
        row(
            format!("{phase}: controller requests per item"),
            "",
            false,
            &|r| Some(p(r)?.requests.service_accounts / items(r)?),
        );
        for verb in keys(runs, phase, |c| &c.by_verb) {
            row(
                format!("{phase}: {verb} per item (all but the benchmark)"),
                "",
                false,
                &|r| Some(p(r)?.requests.by_verb.get(&verb).copied().unwrap_or(0.0) / items(r)?),
            );
        }
        row(
            format!("{phase}: API server time per PATCH (mean)"),
            "ms",
            false,
            &|r| p(r)?.requests.patch_total().mean_ms(),
        );
        for resource in keys(runs, phase, |c| &c.patch_by) {
            row(
                format!("{phase}: API server time per PATCH of {resource} (mean)"),
                "ms",
                false,
                &|r| p(r)?.requests.patch_by.get(&resource)?.mean_ms(),
            );
        }
        row(
            format!("{phase}: controller's wait in API server queues (mean)"),
            "ms",
            false,
            &|r| p(r)?.requests.apf_wait.mean_ms(),
        );
        row(format!("{phase}: controller CPU"), "s", false, &|r| {
            p(r).map(|p| p.usage.cpu_seconds)
        });
        row(
            format!("{phase}: controller CPU per item"),
            "ms",
            false,
            &|r| Some(p(r)?.usage.cpu_seconds * 1e3 / items(r)?),
        );
        row(
            format!("{phase}: controller peak RSS"),
            "MiB",
            false,
            &|r| p(r).map(|p| p.usage.peak_rss as f64 / 1048576.0),
        );
    }
    row("run: controller CPU".into(), "s", false, &|r| {
        Some(r.usage.cpu_seconds)
    });
    row("run: controller peak RSS".into(), "MiB", false, &|r| {
        Some(r.usage.peak_rss as f64 / 1048576.0)
    });
    row("run: most pool members at once".into(), "", false, &|r| {
        (r.pool > 0).then_some(r.max_members as f64)
    });
    row("run: correctness violations".into(), "", false, &|r| {
        Some(r.violations().len() as f64)
    });
    rows
}

/// Prints every size's table (Markdown) and the violations found.
pub fn print(reports: &[SizeReport]) {
    print!("{}", render(reports));
}

/// Every size's table (Markdown) and the violations found, as [`print`] shows them.
pub fn render(reports: &[SizeReport]) -> String {
    // Writing to a String cannot fail: the `fmt::Result`s below are always Ok.
    let mut out = String::new();
    for size in reports {
        let _ = writeln!(out, "### N = {}", size.n);
        let _ = writeln!(out);
        for b in &size.baseline {
            let verbs: Vec<String> = b
                .requests
                .by_verb
                .iter()
                .map(|(v, n)| format!("{v} {:.1}", n / b.items.max(1) as f64))
                .collect();
            let _ = writeln!(
                out,
                "{}: {} in {:.1} s = {:.0}/s (bare writes, no controller; per item: {})",
                b.phase,
                b.items,
                b.elapsed.as_secs_f64(),
                b.per_sec(),
                verbs.join(", ")
            );
        }
        let _ = writeln!(out);
        let distinct: BTreeSet<Which> = size.runs.iter().map(|r| r.which).collect();
        for (round, runs) in size.runs.chunks(distinct.len().max(1)).enumerate() {
            if size.runs.len() > distinct.len() {
                let _ = writeln!(out, "Round {}:", round + 1);
                let _ = writeln!(out);
            }
            table(&mut out, runs);
            let _ = writeln!(out);
        }
        for run in &size.runs {
            for failure in &run.failures {
                let _ = writeln!(out, "{}: did not finish: {failure}", run.which);
            }
            let violations = run.violations();
            if violations.is_empty() {
                let _ = writeln!(out, "{}: no correctness violation", run.which);
            } else {
                let _ = writeln!(
                    out,
                    "{}: {} correctness violations:",
                    run.which,
                    violations.len()
                );
                for v in violations.iter().take(20) {
                    let _ = writeln!(out, "  - {v}");
                }
            }
        }
        let _ = writeln!(out);
    }
    out
}

/// One table: a column per run, and the ratio rouse / upstream when both ran.
fn table(out: &mut String, runs: &[RunReport]) {
    let header: Vec<&str> = runs.iter().map(|r| r.which.name()).collect();
    let rouse = runs.iter().position(|r| r.which == Which::Rouse);
    let upstream = runs.iter().position(|r| r.which == Which::Upstream);
    let ratio = rouse.zip(upstream);
    let _ = write!(out, "| metric | unit | {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "{}",
        if ratio.is_some() {
            " rouse / upstream |"
        } else {
            ""
        }
    );
    let _ = write!(out, "|---|---|{}", "---:|".repeat(header.len()));
    let _ = writeln!(out, "{}", if ratio.is_some() { "---:|" } else { "" });
    for row in rows(runs) {
        let cells: Vec<String> = row
            .values
            .iter()
            .map(|v| v.map_or("–".to_owned(), format_value))
            .collect();
        let _ = write!(
            out,
            "| {} | {} | {} |",
            row.label,
            row.unit,
            cells.join(" | ")
        );
        if let Some((r, u)) = ratio {
            let cell = match (row.values[r], row.values[u]) {
                (Some(r), Some(u)) if u.abs() > 1e-12 => {
                    let better = if row.higher_is_better { r >= u } else { r <= u };
                    format!("{:.2}{}", r / u, if better { "" } else { " (worse)" })
                }
                _ => "–".to_owned(),
            };
            let _ = write!(out, " {cell} |");
        }
        let _ = writeln!(out);
    }
}

fn format_value(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests;
