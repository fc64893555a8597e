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

/// Runs the controller scenario with 20 sandboxes against `api` and checks its report.
async fn controller_scenario(api: rouse_loadtest::controller::ApiServer) {
    let bench = rouse_loadtest::controller::ControllerBench {
        sandboxes: 20,
        concurrency: 4,
        events: false,
        timeout: Duration::from_secs(120),
        api,
    };
    let report = rouse_loadtest::controller::run(&bench, None)
        .await
        .expect("scenario runs");
    assert_eq!(report.sandboxes, 20);
    assert!(report.ready_latency[0] <= report.ready_latency[1]);
    assert!(report.ready_latency[1] <= report.ready_latency[2]);
    // At least the client's create, the Pod create and one status write per sandbox.
    assert!(report.requests_per_sandbox >= 3.0, "{report:?}");
    assert!(report.reconcile_latency.is_none(), "no recorder was given");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_scenario_brings_every_sandbox_to_ready() {
    controller_scenario(rouse_loadtest::controller::ApiServer::Fake).await;
}

/// The same on the real control plane (skipped without its binaries, outside CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_scenario_on_the_real_api_server() {
    use rouse_testsupport::cluster;
    if let Err(missing) = cluster::Binaries::find() {
        assert!(
            !cluster::required(),
            "the control plane is required under CI: {missing:#}"
        );
        return eprintln!("skipping controller_scenario_on_the_real_api_server: {missing:#}");
    }
    // A bound on the whole scenario (control plane start included), so that a stuck start
    // fails with a message instead of holding the test run.
    tokio::time::timeout(
        Duration::from_secs(600),
        controller_scenario(rouse_loadtest::controller::ApiServer::Real),
    )
    .await
    .expect("the real-API controller scenario finishes within 10 minutes");
}

/// Runs `rouse-loadtest` with `args`; its exit success and stderr.
fn loadtest(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rouse-loadtest"))
        .args(args)
        .output()
        .expect("run rouse-loadtest");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The node scenario refuses a `rouse` binary that is not there before it starts anything,
/// naming it and how to build it (no root or node needed).
#[test]
fn node_scenario_names_a_missing_rouse_binary() {
    let (ok, stderr) = loadtest(&[
        "node",
        "--rouse",
        "/nonexistent/rouse",
        "--node-cycles",
        "1",
    ]);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains(
            "/nonexistent/rouse does not exist; build it first: cargo build --release -p rouse"
        ),
        "{stderr}"
    );
}

/// An unknown runtime class is refused with the ones there are.
#[test]
fn node_scenario_refuses_an_unknown_runtime_class() {
    let (ok, stderr) = loadtest(&["node", "--node-runtimes", "gvisor,kata"]);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("'kata'") && stderr.contains("gvisor") && stderr.contains("runc"),
        "{stderr}"
    );
}
