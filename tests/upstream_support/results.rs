//! Each test's result, read from a Go test binary's `-test.v` output (`--- PASS: Name (1.2s)`,
//! indented for subtests).

use std::collections::BTreeMap;

/// What became of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `--- PASS`.
    Pass,
    /// `--- FAIL`.
    Fail,
    /// `--- SKIP`: upstream skipped it itself.
    Skip,
    /// No result line: it never ran (renamed upstream, or the run was cut short).
    NotRun,
}

impl Outcome {
    /// How the table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "SKIP",
            Outcome::NotRun => "NOT RUN",
        }
    }
}

/// The results of one suite run.
#[derive(Debug, Default)]
pub struct Results {
    outcomes: BTreeMap<String, Outcome>,
}

impl Results {
    /// Reads every `--- PASS/FAIL/SKIP: Name` line.
    pub fn parse(output: &str) -> Self {
        let mut outcomes = BTreeMap::new();
        for line in output.lines() {
            let line = line.trim_start();
            let Some(rest) = line.strip_prefix("--- ") else {
                continue;
            };
            let (outcome, rest) = if let Some(r) = rest.strip_prefix("PASS: ") {
                (Outcome::Pass, r)
            } else if let Some(r) = rest.strip_prefix("FAIL: ") {
                (Outcome::Fail, r)
            } else if let Some(r) = rest.strip_prefix("SKIP: ") {
                (Outcome::Skip, r)
            } else {
                continue;
            };
            if let Some(name) = rest.split_whitespace().next() {
                outcomes.insert(name.to_owned(), outcome);
            }
        }
        Self { outcomes }
    }

    /// The outcome of top-level test `name`.
    pub fn outcome(&self, name: &str) -> Outcome {
        self.outcomes.get(name).copied().unwrap_or(Outcome::NotRun)
    }

    /// Every subtest (`Parent/case`) with its outcome, in name order.
    pub fn subtests(&self) -> impl Iterator<Item = (&str, Outcome)> {
        self.outcomes
            .iter()
            .filter(|(name, _)| name.contains('/'))
            .map(|(name, outcome)| (name.as_str(), *outcome))
    }
}

#[test]
fn reads_tests_and_subtests() {
    let output = "=== RUN   TestA\n--- PASS: TestA (1.02s)\n=== RUN   TestB\n    --- FAIL: TestB/case_one (0.50s)\n    --- PASS: TestB/case_two (0.10s)\n--- FAIL: TestB (0.60s)\n--- SKIP: TestC (0.00s)\nFAIL\n";
    let results = Results::parse(output);
    assert_eq!(results.outcome("TestA"), Outcome::Pass);
    assert_eq!(results.outcome("TestB"), Outcome::Fail);
    assert_eq!(results.outcome("TestC"), Outcome::Skip);
    assert_eq!(results.outcome("TestD"), Outcome::NotRun);
    let subtests: Vec<_> = results.subtests().collect();
    assert_eq!(
        subtests,
        [
            ("TestB/case_one", Outcome::Fail),
            ("TestB/case_two", Outcome::Pass)
        ]
    );
}
