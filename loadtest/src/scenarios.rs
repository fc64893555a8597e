//! The scenarios: what is measured against which baseline.
//!
//! - `hostnames`: `SandboxDomains::parse` (what the proxy runs per request) against a naive
//!   parser that lower-cases, splits and allocates without validating — the price of strict
//!   validation.
//! - `validate`: reading and validating sandbox manifests against reading them only — the
//!   price of validation over YAML parsing.

use std::hint::black_box;

use rouse_shared::names::SandboxDomains;
use rouse_shared::{manifest, validate};

use crate::measure::{self, Budget, Summary};

/// Hosts of every grammar form, some invalid, cycled through by the hostname scenario.
pub fn sample_hosts(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| match i % 5 {
            0 => format!("sandbox-{i}.team-{}.sandbox.localhost", i % 17),
            1 => format!(
                "{}-agent-{i}.team-{}.Sandbox.Localhost.",
                1024 + i % 60000,
                i % 9
            ),
            2 => format!("web-{i}.sandbox.localhost"),
            3 => format!("x{i}.eu.sandbox.example.com"),
            _ => format!("bad_label-{i}.team.sandbox.localhost"),
        })
        .collect()
}

/// Parses hosts with Rouse's parser and with the naive baseline; returns (rouse, baseline).
pub fn hostnames(budget: Budget) -> anyhow::Result<(Summary, Summary)> {
    let domains = SandboxDomains::new(
        [
            "sandbox.localhost",
            "sandbox.example.com",
            "eu.sandbox.example.com",
        ],
        Some("default"),
    )?;
    let hosts = sample_hosts(4096);
    Ok(measure::compare(
        ("SandboxDomains::parse", "naive split (baseline)"),
        budget,
        |i| {
            let _ = black_box(domains.parse(black_box(&hosts[i % hosts.len()])));
        },
        |i| {
            black_box(naive_parse(black_box(&hosts[i % hosts.len()])));
        },
    ))
}

/// Lower-case, strip a known suffix, split on dots: no label or port validation.
fn naive_parse(host: &str) -> Option<(String, String, Option<u16>)> {
    let host = host.to_lowercase();
    let host = host.trim_end_matches('.');
    let rest = [
        "eu.sandbox.example.com",
        "sandbox.example.com",
        "sandbox.localhost",
    ]
    .iter()
    .find_map(|d| host.strip_suffix(d)?.strip_suffix('.'))?;
    let labels: Vec<String> = rest.split('.').map(str::to_owned).collect();
    let (first, ns) = match labels.as_slice() {
        [name] => (name.clone(), "default".to_owned()),
        [name, ns] => (name.clone(), ns.clone()),
        _ => return None,
    };
    match first.split_once('-') {
        Some((port, name)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            Some((ns, name.to_owned(), port.parse().ok()))
        }
        _ => Some((ns, first, None)),
    }
}

/// A multi-document stream of `count` valid sandboxes.
pub fn sample_manifest(count: usize) -> String {
    let mut out = String::new();
    for i in 0..count {
        out.push_str(&format!(
            "---\napiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: sbx-{i}\n  \
             namespace: team-{}\n  labels: {{app: web}}\nspec:\n  suspension: {{idleTimeoutSeconds: 300}}\n  \
             podTemplate:\n    spec:\n      containers:\n      - name: app\n        image: python:3.12-slim\n        \
             ports: [{{containerPort: 8080}}]\n        resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}\n        \
             volumeMounts: [{{name: data, mountPath: /data}}]\n  volumeClaimTemplates:\n  - metadata: {{name: data}}\n    \
             spec: {{resources: {{requests: {{storage: 1Gi}}}}}}\n",
            i % 50
        ));
    }
    out
}

/// Reads and validates documents, against reading only; returns (validate, baseline) per
/// document. Fails if any sample document is not valid, which would measure the wrong path.
pub fn validation(budget: Budget) -> anyhow::Result<(Summary, Summary)> {
    let docs: Vec<String> = sample_manifest(256)
        .split("---\n")
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .collect();
    for doc in manifest::documents(&docs.join("---\n")) {
        let report = validate::validate(&doc?.value);
        anyhow::ensure!(
            report.is_valid(),
            "sample is invalid: {:?}",
            report.findings
        );
    }
    Ok(measure::compare(
        ("read + validate", "read only (baseline)"),
        budget,
        |i| {
            for doc in manifest::documents(&docs[i % docs.len()]).flatten() {
                black_box(validate::validate(&doc.value));
            }
        },
        |i| {
            for doc in manifest::documents(&docs[i % docs.len()]).flatten() {
                black_box(doc);
            }
        },
    ))
}
