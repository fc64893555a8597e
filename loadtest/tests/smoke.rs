//! The scenarios run end to end on tiny budgets; timing is not asserted (benchmarks are for
//! release builds), only that each side did its work.

use std::time::Duration;

use rouse_loadtest::measure::Budget;
use rouse_loadtest::scenarios;

const TINY: Budget = Budget {
    batches: 3,
    batch_size: 4,
    max_time: Duration::from_secs(5),
};

#[test]
fn hostnames_scenario_runs_both_sides() {
    let (rouse, baseline) = scenarios::hostnames(TINY).expect("scenario runs");
    assert_eq!((rouse.ops, baseline.ops), (12, 12));
    assert!(rouse.p50_ns <= rouse.p99_ns && rouse.p99_ns <= rouse.max_ns);
}

#[test]
fn validation_scenario_runs_on_valid_documents() {
    let (checked, parsed) = scenarios::validation(TINY).expect("sample manifests are valid");
    assert_eq!((checked.ops, parsed.ops), (12, 12));
}

#[test]
fn sample_hosts_cover_every_form() {
    let domains = rouse_shared::names::SandboxDomains::new(
        [
            "sandbox.localhost",
            "sandbox.example.com",
            "eu.sandbox.example.com",
        ],
        Some("default"),
    )
    .expect("domains");
    let results: Vec<bool> = scenarios::sample_hosts(5)
        .iter()
        .map(|h| domains.parse(h).is_ok())
        .collect();
    // Four valid forms (plain, port prefix with case and trailing dot, default namespace,
    // overlapping domain) and one invalid label.
    assert_eq!(results, [true, true, true, true, false]);
}
