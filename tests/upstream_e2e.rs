//! Upstream agent-sandbox's own end-to-end suites (`test/e2e` and `test/e2e/extensions` of
//! the version pinned in `testsupport/upstream/go.mod`), unchanged, against the real `rouse
//! controller` binary on the real control plane of `rouse_testsupport::cluster`, with
//! kube-scheduler, kwok playing one node (pods turn Running and Ready by kwok's own stages),
//! and static volumes bound by kube-controller-manager's binder. Every test that needs no
//! running image runs; docs/testing.md lists the others and why, and the framework stand-ins.
//!
//! The result of every test is printed as a table; the test fails naming each upstream test
//! that failed or did not run. Without the binaries (testsupport/cluster/build.sh,
//! testsupport/upstream/build.sh) it is skipped with a message, and fails under CI.

mod upstream_support;

use std::io::Write;
use std::time::Duration;

use upstream_support::{Harness, Outcome, Suite};

/// Upstream's tests of `test/e2e` that need no running image.
const CORE: &[&str] = &[
    "TestSimpleSandbox",
    "TestSandboxSuspendResumeCycleWithOperatingMode",
    "TestSandboxSuspensionWithTerminatingPod",
    "TestSandboxPodDeletionKeepsSuspendedFalse",
    "TestSandboxSuspensionBlockedByUnownedPodConflict",
    "TestParallelSandboxes",
    "TestParallelSandboxClaimsWithSufficientWarmPool",
    "TestParallelSandboxClaimsWithInsufficientWarmPool",
    "TestSandboxShutdownTime",
    "TestSandboxRetainedExpiryPreservesFinishedCondition",
    "TestSandboxVolumeClaimTemplates",
    "TestSandboxVolumeClaimTemplatesImmutable",
    "TestWarmPoolParallelClaim",
];

/// Upstream's tests of `test/e2e/extensions` that need no running image.
const EXTENSIONS: &[&str] = &[
    "TestSandboxClaimObservabilityAnnotation",
    "TestCreateSandboxClaimVolumeClaimTemplates",
    "TestSandboxClaimDeleteForeground",
    "TestSandboxClaimTTLDeleteForegroundAfterFinished",
    "TestSandboxClaimTTLAfterFinished",
    "TestSandboxClaimExpiryUsesEarlierOfShutdownTimeAndTTL",
    "TestSandboxClaimFinishedWithoutTTLIsRetained",
    "TestSandboxClaimTTLZeroRetainPreservesFinishedConditionDuringCleanup",
    "TestWarmPoolRollout",
    "TestWarmPoolRolloutMultiTemplateIsolation",
    "TestWarmPoolRolloutSwitchTemplate",
    "TestWarmPoolRolloutMetadataUpdate",
    "TestWarmPoolSandboxWatcher",
];

/// How long one suite may run (upstream's own waits are 60 s to a few minutes per test).
const SUITE_DEADLINE: Duration = Duration::from_secs(40 * 60);

#[test]
fn upstream_suites_pass_against_rouse() {
    let Some(harness) = Harness::start("upstream_suites_pass_against_rouse") else {
        return;
    };
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    for (suite, tests) in [(Suite::Core, CORE), (Suite::Extensions, EXTENSIONS)] {
        let results = harness.run(suite, tests, SUITE_DEADLINE);
        for name in tests {
            outcomes.push(((*name).to_owned(), results.outcome(name)));
        }
        for (sub, outcome) in results.subtests() {
            outcomes.push((sub.to_owned(), outcome));
        }
    }
    // Written past the test harness's capture, so CI logs show it on success too.
    let mut table = String::from("\nupstream agent-sandbox e2e against rouse controller:\n");
    for (name, outcome) in &outcomes {
        table.push_str(&format!("  {:<7} {name}\n", outcome.label()));
    }
    let _ = std::io::stderr().write_all(table.as_bytes());

    let failed: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| *o != Outcome::Pass)
        .map(|(name, o)| format!("{name} ({})", o.label()))
        .collect();
    assert!(
        failed.is_empty(),
        "upstream tests not passing against Rouse: {}\n--- rouse controller log (end)\n{}",
        failed.join(", "),
        harness.controller_log(80)
    );
}
