//! Upstream agent-sandbox's end-to-end tests that need a real node (running images,
//! port-forward, RuntimeClass handlers), unchanged, against the Helm release on the node:
//! upstream's `e2e-extensions.test` (testsupport/upstream/build.sh) runs inside the node's
//! network namespace, so the fixed local ports its port-forwards listen on (8888, 8080, 9090)
//! are the namespace's own loopback, never the host's; the images it names are stand-ins
//! packed under those exact names (`rouse_testsupport::image::upstream_*`).
//!
//! By hand: `ROUSE_UPSTREAM_NODE_TESTS=TestA,TestB` runs those instead of [`NODE_TESTS`];
//! `ROUSE_UPSTREAM_NODE_CONTROLLER=upstream` scales the release to zero and runs upstream's own
//! controller (`agent-sandbox-controller --extensions`) in its place, to compare.

#[path = "../upstream_support/results.rs"]
mod results;
#[path = "../upstream_support/stand_in.rs"]
mod stand_in;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rouse_testsupport::cluster;
use rouse_testsupport::image;
use rouse_testsupport::node::NODE_NAME;
use rouse_testsupport::upstream::{Programs, Supervised};

use super::{Release, block_on, kubectl};
pub use results::{Outcome, Results};

/// Upstream's tests that need the real node (of `test/e2e` and `test/e2e/extensions`), with
/// the settings below.
/// Not here: `TestRuntimeClassLifecycle`, whose check that the pool reports fewer Ready members
/// than replicas after a claim polls once a second, while a gVisor member here is replaced and
/// Ready within that second: racy whichever controller runs (it fails most runs against
/// upstream's own controller too; see docs/testing.md).
pub const NODE_TESTS: &[&str] = &[
    "TestRunChromeSandbox",
    "TestRunPythonRuntimeSandbox",
    "TestRunPythonRuntimeSandboxClaim",
    "TestRunPythonRuntimeSandboxWarmpool",
    "TestRunSandboxdSandbox",
    "TestRuntimeClassStartupComparison",
    "TestRuntimeClassBurstRecovery",
];

/// The tests to run: [`NODE_TESTS`], or those `ROUSE_UPSTREAM_NODE_TESTS` names.
fn chosen_tests() -> Vec<String> {
    match std::env::var("ROUSE_UPSTREAM_NODE_TESTS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect(),
        _ => NODE_TESTS.iter().map(|t| (*t).to_owned()).collect(),
    }
}

/// The test that needs the Chrome stand-in (Debian's `chromium-headless-shell`).
const CHROME_TEST: &str = "TestRunChromeSandbox";

/// Upstream's knobs for its RuntimeClass tests: gVisor, the pause workload (upstream's
/// `SANDBOX_WORKLOAD_SEC=0`), and one burst of a pool of 2 (four claims, two past the pool).
const SETTINGS: &[(&str, &str)] = &[
    ("SANDBOX_RUNTIME_CLASS", "gvisor"),
    ("SANDBOX_WORKLOAD_SEC", "0"),
    ("SANDBOX_POOL_SIZES", "2"),
];

/// How long the suite may run (upstream's own waits are one to five minutes per step).
const SUITE_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// Runs [`NODE_TESTS`] against `release` and returns each outcome (subtests included), or
/// `None` (printed) when upstream's programs are missing and the run does not require them.
pub fn run(release: &Release, test: &str) -> Option<Vec<(String, Outcome)>> {
    let programs = match Programs::find() {
        Ok(programs) => programs,
        Err(missing) if !cluster::required() => {
            eprintln!("skipping {test}: {missing:#}");
            return None;
        }
        Err(missing) => panic!("{test}: upstream's suites are required (CI is set): {missing:#}"),
    };
    let started = Instant::now();
    let mut tests = chosen_tests();
    let mut images = vec![
        image::upstream_python_runtime_image(),
        image::upstream_sandboxd_image(&programs.sandboxd),
        image::upstream_pause_image(),
    ];
    if tests.iter().any(|t| t == CHROME_TEST) {
        match image::upstream_chrome_image() {
            Ok(chrome) => images.push(Ok(chrome)),
            Err(missing) if !cluster::required() => {
                eprintln!("{test}: not running {CHROME_TEST}: {missing}");
                tests.retain(|t| t != CHROME_TEST);
            }
            Err(missing) => panic!("{test}: {CHROME_TEST} is required (CI is set): {missing}"),
        }
    }
    for built in images {
        let built = built.expect("build a stand-in image");
        release
            .node
            .import_image(&built.archive)
            .unwrap_or_else(|e| panic!("import {}: {e:#}", built.name));
    }
    block_on(async { stand_in::install(&release.client().await).await })
        .expect("install the framework's stand-ins");
    provider_id_stand_in(release);
    eprintln!(
        "{test}: stand-in images imported in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::Builder::new()
        .prefix("rouse-upstream-node-")
        .tempdir()
        .expect("temporary directory");
    let _upstream = (std::env::var("ROUSE_UPSTREAM_NODE_CONTROLLER").as_deref() == Ok("upstream"))
        .then(|| upstream_controller(release, &programs, dir.path()));
    // Both suites with the same pattern: a binary holding none of the tests runs nothing.
    let mut output = String::new();
    for (binary, name) in [
        (&programs.e2e, "e2e-node"),
        (&programs.e2e_extensions, "e2e-extensions-node"),
    ] {
        output.push_str(&run_suite(release, binary, name, &tests, dir.path()));
    }
    let results = Results::parse(&output);
    if tests.iter().any(|t| results.outcome(t) != Outcome::Pass) {
        // The suites' own account of what went wrong, past the test harness's capture.
        let _ = std::io::stderr().write_all(tail_lines(&output, 200).as_bytes());
    }
    let mut outcomes: Vec<(String, Outcome)> = tests
        .iter()
        .map(|name| (name.clone(), results.outcome(name)))
        .collect();
    outcomes.extend(results.subtests().map(|(s, o)| (s.to_owned(), o)));
    Some(outcomes)
}

/// The providerID the node gets when it has none: the framework asks whether the cluster is
/// kind (to collect node logs) and fails the test on a node whose providerID names neither
/// kind nor GCE; a GCE one makes it skip the collection, which needs kind's node containers.
/// Written once (the field is immutable once set); nothing else on the node reads it.
const PROVIDER_ID: &str = "gce://rouse-stand-in/none/rouse-node";

/// Sets the node's providerID to [`PROVIDER_ID`] unless it has one.
fn provider_id_stand_in(release: &Release) {
    let current = release.kubectl(&[
        "get",
        "node",
        NODE_NAME,
        "-o",
        "jsonpath={.spec.providerID}",
    ]);
    if current.trim().is_empty() {
        let patch = format!(r#"{{"spec":{{"providerID":"{PROVIDER_ID}"}}}}"#);
        release.kubectl(&["patch", "node", NODE_NAME, "-p", &patch]);
    }
}

/// Upstream's controller in place of the release's (which is scaled to zero and stays so: the
/// node is this test binary's), for comparing; stopped when dropped.
fn upstream_controller(release: &Release, programs: &Programs, dir: &Path) -> Supervised {
    release.kubectl(&[
        "-n",
        super::RELEASE_NAMESPACE,
        "scale",
        "deployment",
        "--all",
        "--replicas=0",
    ]);
    release.kubectl(&[
        "-n",
        super::RELEASE_NAMESPACE,
        "wait",
        "--for=delete",
        "pod",
        "--all",
        "--timeout=120s",
    ]);
    // In the node's network namespace, its metrics and probe servers off: their default
    // ports (8080, 8081) would take one the sandboxd test forwards.
    Supervised::spawn(
        "agent-sandbox-controller",
        Command::new("nsenter")
            .arg(format!("--net={}", release.node.netns_path()))
            .arg("--")
            .arg(&programs.controller)
            .args(["--extensions", "--leader-elect=false"])
            .args(["--metrics-bind-address=0", "--health-probe-bind-address=0"])
            .env("KUBECONFIG", release.node.kubeconfig()),
        dir,
    )
    .expect("start upstream's controller")
}

/// Upstream's suite `binary` for `tests` in the node's network namespace; its output.
fn run_suite(release: &Release, binary: &Path, name: &str, tests: &[String], dir: &Path) -> String {
    let kubectl_dir = kubectl()
        .parent()
        .map(Path::to_path_buf)
        .filter(|d| !d.as_os_str().is_empty());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = match kubectl_dir {
        Some(d) => std::env::join_paths(std::iter::once(d).chain(std::env::split_paths(&path)))
            .expect("PATH"),
        None => path,
    };
    let pattern = format!("^({})$", tests.join("|"));
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--net={}", release.node.netns_path()))
        .arg("--")
        .arg(binary)
        .arg("-test.v")
        .arg(format!("-test.run={pattern}"))
        .arg("-test.parallel=1")
        .arg("-test.count=1")
        // Our deadline is the one that counts; Go's must not cut in first.
        .arg(format!("-test.timeout={}s", SUITE_DEADLINE.as_secs() + 60))
        .current_dir(dir)
        .env("KUBECONFIG", release.node.kubeconfig())
        .env("PATH", path)
        .env("ARTIFACTS", dir.join("artifacts"))
        .env("SANDBOX_REPORT_DIR", dir.join("reports"))
        .env("SANDBOX_VERSION", "rouse");
    for (key, value) in SETTINGS {
        command.env(key, value);
    }
    let mut run = Supervised::spawn(name, &mut command, dir).expect("start upstream's suite");
    let end = Instant::now() + SUITE_DEADLINE;
    while run.exited().is_none() {
        if Instant::now() >= end {
            let tail = run.log_tail(60);
            drop(run);
            panic!("upstream's {name} suite ran longer than {SUITE_DEADLINE:?}:\n{tail}");
        }
        // A poll with a deadline: the suite's own steps take seconds to minutes.
        std::thread::sleep(Duration::from_millis(500));
    }
    let output = std::fs::read_to_string(run.log()).expect("suite output");
    if let Some(keep) = std::env::var_os("ROUSE_UPSTREAM_E2E_LOGS") {
        let keep = PathBuf::from(keep);
        if std::fs::create_dir_all(&keep).is_ok() {
            let _ = std::fs::copy(run.log(), keep.join(format!("{name}.log")));
        }
    }
    output
}

/// The last `n` lines of `text`.
fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    format!(
        "--- upstream suite output (end)\n{}\n",
        lines[from..].join("\n")
    )
}
