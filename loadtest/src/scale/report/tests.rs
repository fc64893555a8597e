//! The report's table and checks from hand-made runs (no cluster).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::super::SizeReport;
use super::super::apimetrics::{Counts, Timing};
use super::super::measure::{Latency, PhaseReport};
use super::super::process::{Usage, Which};
use super::{RunReport, render};

fn burst(per_sec_items: usize, seconds: u64, cpu: f64, posts: f64) -> PhaseReport {
    PhaseReport {
        phase: "burst",
        items: per_sec_items,
        elapsed: Duration::from_secs(seconds),
        latency: Latency {
            n: per_sec_items,
            p50: Duration::from_millis(400),
            p99: Duration::from_millis(900),
        },
        requests: Counts {
            by_verb: BTreeMap::from([("POST".to_owned(), posts)]),
            service_accounts: posts * 2.0,
            patch_by: BTreeMap::from([(
                "sandboxes".to_owned(),
                Timing {
                    seconds: posts / 100.0,
                    count: posts,
                },
            )]),
            ..Counts::default()
        },
        usage: Usage {
            cpu_seconds: cpu,
            peak_rss: 64 << 20,
        },
        ..PhaseReport::default()
    }
}

#[test]
fn the_table_puts_the_controllers_side_by_side_with_ratios_and_the_baseline() {
    let mut upstream = RunReport::new(Which::Upstream, 100);
    upstream.phases.push(burst(100, 10, 4.0, 300.0));
    let mut rouse = RunReport::new(Which::Rouse, 100);
    rouse.phases.push(burst(100, 5, 1.0, 200.0));
    rouse.usage.cpu_seconds = 1.0;
    upstream.usage.cpu_seconds = 4.0;
    // Upstream bound one sandbox to two claims and left a pod behind.
    upstream.double_bindings = vec!["s-1: {\"c-1\", \"c-2\"}".to_owned()];
    upstream.leftovers = vec!["pods: 1".to_owned()];
    let baseline = PhaseReport {
        phase: "baseline",
        items: 100,
        elapsed: Duration::from_secs(2),
        requests: Counts {
            by_verb: BTreeMap::from([("POST".to_owned(), 200.0)]),
            ..Counts::default()
        },
        ..PhaseReport::default()
    };
    let text = render(&[SizeReport {
        n: 100,
        baseline: vec![baseline],
        runs: vec![upstream, rouse],
    }]);

    assert!(text.contains("### N = 100"), "{text}");
    assert!(
        text.contains(
            "baseline: 100 in 2.0 s = 50/s (bare writes, no controller; per item: POST 2.0)"
        ),
        "{text}"
    );
    assert!(
        text.contains("| metric | unit | upstream | rouse | rouse / upstream |"),
        "{text}"
    );
    // Twice the rate (higher is better), half the time, a quarter of the CPU.
    assert!(
        text.contains("| burst: per second | /s | 10.0 | 20.0 | 2.00 |"),
        "{text}"
    );
    assert!(
        text.contains("| burst: time to all Ready (gone) | s | 10.0 | 5.00 | 0.50 |"),
        "{text}"
    );
    assert!(
        text.contains("| burst: controller CPU per item | ms | 40.0 | 10.0 | 0.25 |"),
        "{text}"
    );
    assert!(
        text.contains("| burst: controller requests per item |  | 6.00 | 4.00 | 0.67 |"),
        "{text}"
    );
    assert!(
        text.contains("| burst: controller peak RSS | MiB | 64.0 | 64.0 | 1.00 |"),
        "{text}"
    );
    // The API server's time per PATCH: 10 ms each for both.
    assert!(
        text.contains("| burst: API server time per PATCH (mean) | ms | 10.0 | 10.0 | 1.00 |"),
        "{text}"
    );
    assert!(
        text.contains(
            "| burst: API server time per PATCH of sandboxes (mean) | ms | 10.0 | 10.0 | 1.00 |"
        ),
        "{text}"
    );
    // No request of either was seen queued: no row.
    assert!(!text.contains("wait in API server queues"), "{text}");
    assert!(
        text.contains("| run: correctness violations |  | 2.00 | 0 | 0.00 |"),
        "{text}"
    );
    assert!(
        text.contains("upstream: 2 correctness violations:"),
        "{text}"
    );
    assert!(text.contains("  - double binding: s-1"), "{text}");
    assert!(text.contains("  - left after deletion: pods: 1"), "{text}");
    assert!(text.contains("rouse: no correctness violation"), "{text}");
    // Phases nobody ran have no rows.
    assert!(!text.contains("refill:"), "{text}");
}

#[test]
fn a_worse_ratio_is_marked() {
    let mut upstream = RunReport::new(Which::Upstream, 10);
    upstream.phases.push(burst(10, 1, 1.0, 10.0));
    let mut rouse = RunReport::new(Which::Rouse, 10);
    rouse.phases.push(burst(10, 2, 3.0, 10.0));
    let text = render(&[SizeReport {
        n: 10,
        baseline: Vec::new(),
        runs: vec![upstream, rouse],
    }]);
    assert!(
        text.contains("| burst: per second | /s | 10.0 | 5.00 | 0.50 (worse) |"),
        "{text}"
    );
    let rows: BTreeSet<&str> = text.lines().filter(|l| l.starts_with("| burst")).collect();
    assert!(rows.len() > 5, "{text}");
}
