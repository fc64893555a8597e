//! End to end test of memory sharing (`spec.memorySharing: Merge`) on the process runtime of
//! `rouse up`: eight identical sandboxes each fill `FILL_MIB` of memory with the same
//! (page-by-page distinct) bytes; KSM merges them across the sandboxes, which the summed PSS
//! shows, and each sandbox's `status.memorySharing.mergedBytes` and `MemorySharing` condition
//! report it. A ninth sandbox without `Merge` stays unmarked.
//!
//! Needs KSM (`/sys/kernel/mm/ksm`, Linux 6.4 or later for `PR_SET_MEMORY_MERGE`) and root to
//! turn it on (unless it already runs); under `CI` their absence fails the test.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse, condition, sandbox};

/// How many identical sandboxes share memory.
const SANDBOXES: usize = 8;
/// How much memory each fills with identical bytes.
const FILL_MIB: u64 = 48;
/// The summed PSS must fall below this share of the summed RSS. Unmerged, each workload's PSS
/// is nearly its RSS (its fill is private; only the interpreter's file pages are shared): the
/// measured ratio is about 0.95. Fully merged, the fill is kept once for all eight, so each
/// workload's PSS is its private interpreter memory plus an eighth of the fill: measured about
/// 0.25 (docs/memory-sharing.md). Half is far from both.
const MAX_PSS_SHARE: f64 = 0.5;

/// Python filling `FILL_MIB` with bytes that are the same in every sandbox (a fixed seed) but
/// differ from page to page (so only merging across sandboxes saves memory), then serving
/// HTTP on `PORT` for readiness.
fn script() -> String {
    format!(
        r#"exec python3 -c '
import http.server, os, random
data = random.Random(7).randbytes({FILL_MIB} << 20)
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), http.server.BaseHTTPRequestHandler).serve_forever()
'"#
    )
}

/// Whether KSM can be used here: present, mergeable-by-prctl (`ksm_stat` has
/// `ksm_merge_any`), and running or root to turn it on. Under CI its absence fails.
fn ksm_available() -> bool {
    let run = std::fs::read_to_string("/sys/kernel/mm/ksm/run").ok();
    let merge_any =
        std::fs::read_to_string("/proc/self/ksm_stat").is_ok_and(|s| s.contains("ksm_merge_any"));
    let root = nix::unistd::geteuid().is_root();
    let usable = merge_any && run.as_deref().is_some_and(|r| r.trim() == "1" || root);
    if !usable {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the memory sharing test: KSM run file: {run:?}, ksm_merge_any: \
             {merge_any}, root: {root} (.ci/run turns KSM on)"
        );
        eprintln!("skipping the memory sharing test: needs KSM (Linux 6.4+) and root");
    }
    usable
}

/// Summed `Pss` and `Rss` (bytes) of these processes, from `/proc/PID/smaps_rollup`.
fn pss_and_rss(pids: &[i32]) -> (u64, u64) {
    let mut pss = 0;
    let mut rss = 0;
    for pid in pids {
        let Ok(rollup) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        for line in rollup.lines() {
            let mut fields = line.split_whitespace();
            let (Some(key), Some(kib)) = (fields.next(), fields.next()) else {
                continue;
            };
            let bytes = kib.parse::<u64>().unwrap_or(0) * 1024;
            match key {
                "Pss:" => pss += bytes,
                "Rss:" => rss += bytes,
                _ => {}
            }
        }
    }
    (pss, rss)
}

/// The workload processes of the Merge sandboxes (every workload but `plain`'s).
fn merge_workloads(rouse: &Rouse, plain: &[i32]) -> Vec<i32> {
    support::workload_processes(&rouse.data)
        .into_iter()
        .filter(|pid| !plain.contains(pid))
        .collect()
}

fn merged_bytes(sandbox: &Value) -> u64 {
    sandbox["status"]["memorySharing"]["mergedBytes"]
        .as_u64()
        .unwrap_or(0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn ksm_marked(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/ksm_stat"))
        .is_ok_and(|s| s.contains("ksm_merge_any: yes"))
}

#[tokio::test]
async fn identical_merge_sandboxes_share_their_memory() {
    if !ksm_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(
        dir.path(),
        &Options {
            no_auth: true,
            // Fast scanning keeps the test in seconds (the default rate takes longer).
            config: "[runtime.ksm]\npages_to_scan = 5000\nsleep_millisecs = 20\n".to_owned(),
            ..Options::default()
        },
    );

    // One sandbox without Merge first: its processes must stay unmarked.
    rouse.create(&sandbox("plain", &script(), json!({}))).await;
    rouse.wait_condition("plain", "Ready", "True", None).await;
    let plain = support::workload_processes(&rouse.data);
    assert!(!plain.is_empty(), "the plain sandbox's workload is found");
    assert!(
        plain.iter().all(|pid| !ksm_marked(*pid)),
        "a sandbox without memorySharing is not marked mergeable"
    );

    let started = Instant::now();
    let names: Vec<String> = (0..SANDBOXES).map(|i| format!("merge-{i}")).collect();
    for name in &names {
        let spec = json!({"memorySharing": "Merge"});
        rouse.create(&sandbox(name, &script(), spec)).await;
    }
    for name in &names {
        rouse.wait_condition(name, "Ready", "True", None).await;
        rouse
            .wait_condition(name, "MemorySharing", "True", Some("Merging"))
            .await;
    }
    let ready = started.elapsed();
    let pids = merge_workloads(&rouse, &plain);
    assert!(
        pids.len() >= SANDBOXES,
        "every Merge workload is found: {pids:?}"
    );
    assert!(
        pids.iter().all(|pid| ksm_marked(*pid)),
        "every Merge workload is marked mergeable"
    );
    let (first_pss, first_rss) = pss_and_rss(&pids);

    // KSM merges in the background: wait for the summed PSS to drop below the threshold.
    let until = Instant::now() + DEADLINE;
    let (pss, rss) = loop {
        let (pss, rss) = pss_and_rss(&pids);
        if rss > 0 && (pss as f64) < MAX_PSS_SHARE * rss as f64 {
            break (pss, rss);
        }
        assert!(
            Instant::now() < until,
            "the summed PSS stayed at {:.0} MiB of {:.0} MiB RSS for {DEADLINE:?}; \
             /sys/kernel/mm/ksm: {}",
            mib(pss),
            mib(rss),
            ksm_summary()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let merged_after = started.elapsed();

    // The status reports it too (refreshed every few seconds).
    let fill = FILL_MIB << 20;
    for name in &names {
        let sandbox = rouse
            .wait_for(name, "reporting merged memory", |s| {
                s.is_some_and(|s| merged_bytes(s) >= fill / 2)
            })
            .await
            .expect("exists");
        let condition = condition(&sandbox, "MemorySharing").expect("condition");
        assert_eq!(condition["reason"], "Merging", "{condition}");
    }
    let plain_sandbox = rouse.sandbox("plain").await.expect("plain exists");
    assert!(condition(&plain_sandbox, "MemorySharing").is_none());
    assert!(plain_sandbox["status"].get("memorySharing").is_none());

    eprintln!(
        "memory sharing: {SANDBOXES} × {FILL_MIB} MiB: PSS {:.0} MiB (RSS {:.0} MiB) when ready \
         after {ready:.1?} → PSS {:.0} MiB (RSS {:.0} MiB) after {merged_after:.1?}; ksm: {}",
        mib(first_pss),
        mib(first_rss),
        mib(pss),
        mib(rss),
        ksm_summary()
    );
}

/// KSM's counters, for messages.
fn ksm_summary() -> String {
    [
        "run",
        "pages_to_scan",
        "sleep_millisecs",
        "pages_shared",
        "pages_sharing",
        "full_scans",
    ]
    .iter()
    .map(|f| {
        let value = std::fs::read_to_string(format!("/sys/kernel/mm/ksm/{f}")).unwrap_or_default();
        format!("{f}={}", value.trim())
    })
    .collect::<Vec<_>>()
    .join(" ")
}
