//! Unit tests of the node scenario's pure parts.

use std::time::Duration;

use super::memory::{stat_value, status_kib};
use super::objects::{Runtime, runtime_pod_spec, sum_metric};
use super::wake::WakeSide;
use crate::wake::Latencies;

#[test]
fn metrics_sum_over_label_sets_that_include_the_wanted_labels() {
    let page = "# HELP rouse_proxy_routes Sandboxes\n\
                rouse_proxy_routes 12\n\
                rouse_proxy_routes_total 99\n\
                rouse_controller_sandboxes{state=\"ready\",operating_mode=\"Running\"} 10\n\
                rouse_controller_sandboxes{state=\"ready\",operating_mode=\"Suspended\"} 1\n\
                rouse_controller_sandboxes{state=\"suspended\",operating_mode=\"Suspended\"} 3\n\
                rouse_controller_sandboxes_ready{state=\"ready\"} 50\n";
    assert_eq!(sum_metric(page, "rouse_proxy_routes", &[]), 12.0);
    assert_eq!(sum_metric(page, "rouse_controller_sandboxes", &[]), 14.0);
    let ready = [("state", "ready")];
    assert_eq!(sum_metric(page, "rouse_controller_sandboxes", &ready), 11.0);
    let both = [("state", "ready"), ("operating_mode", "Running")];
    assert_eq!(sum_metric(page, "rouse_controller_sandboxes", &both), 10.0);
    assert_eq!(
        sum_metric(page, "rouse_controller_sandboxes", &[("state", "gone")]),
        0.0
    );
    assert_eq!(sum_metric(page, "rouse_missing", &[]), 0.0);
}

#[test]
fn cgroup_and_proc_values_are_read_by_key() {
    let stat = "cache 100\ninactive_file 7\ntotal_cache 200\ntotal_inactive_file 4096\n";
    assert_eq!(stat_value(stat, "total_inactive_file"), Some(4096));
    assert_eq!(stat_value(stat, "inactive_file"), Some(7));
    assert_eq!(stat_value(stat, "total_rss"), None);
    let status = "Name:\trouse\nVmHWM:\t   9000 kB\nVmRSS:\t   8192 kB\n";
    assert_eq!(status_kib(status, "VmRSS:"), Some(8192));
    assert_eq!(status_kib(status, "VmSwap:"), None);
}

#[test]
fn only_gvisor_names_a_runtime_class() {
    assert_eq!(
        runtime_pod_spec(Runtime::Gvisor)["runtimeClassName"],
        "gvisor"
    );
    assert!(
        runtime_pod_spec(Runtime::Runc)
            .get("runtimeClassName")
            .is_none()
    );
    assert_eq!(Runtime::Runc.to_string(), "runc");
}

#[test]
fn the_paired_overhead_subtracts_each_cycles_own_bare_start() {
    let ms = Duration::from_millis;
    let side = WakeSide {
        runtime: Runtime::Gvisor,
        bare: Latencies {
            name: "b",
            samples: vec![ms(900), ms(1000), ms(1100)],
        },
        wake: Latencies {
            name: "w",
            samples: vec![ms(1000), ms(1300), ms(1150)],
        },
        bare_ip: Latencies {
            name: "bi",
            samples: Vec::new(),
        },
        wake_ip: Latencies {
            name: "wi",
            samples: Vec::new(),
        },
    };
    let paired: Vec<i64> = side
        .paired_overhead_ms()
        .iter()
        .map(|v| v.round() as i64)
        .collect();
    assert_eq!(paired, vec![50, 100, 300]);
}

/// A report with made-up numbers, one runtime class and one pod.
fn report() -> super::NodeReport {
    use super::claims::ClaimSides;
    use super::memory::{Memory, MemorySide, PodMemory};
    let ms = Duration::from_millis;
    let latencies = |name, samples: &[u64]| Latencies {
        name,
        samples: samples.iter().map(|&m| ms(m)).collect(),
    };
    super::NodeReport {
        node_start: ms(9_800),
        install: ms(3_500),
        load: (1.5, 2.5),
        memory: MemorySide {
            sandboxes: 100,
            fill: ms(40_000),
            pods: vec![PodMemory {
                role: "proxy",
                pod: "rouse-proxy-x".into(),
                before: Memory {
                    working_set: 2 << 20,
                    rss: 18 << 20,
                },
                after: Memory {
                    working_set: 3 << 20,
                    rss: 28 << 20,
                },
            }],
        },
        wake: vec![WakeSide {
            runtime: Runtime::Gvisor,
            bare: latencies("bare", &[1000, 1200]),
            wake: latencies("wake", &[1100, 1500]),
            bare_ip: latencies("bare ip", &[500, 600]),
            wake_ip: latencies("wake ip", &[550, 700]),
        }],
        claims: ClaimSides {
            pool: 2,
            warm: latencies("warm", &[30, 40]),
            cold: latencies("cold", &[2000, 2100]),
        },
    }
}

#[test]
fn the_report_gives_overhead_ratio_claims_and_memory_per_sandbox() {
    let text = super::render(&report());
    let lines: Vec<&str> = text.lines().collect();
    for expected in [
        "node Ready in 9.8 s, helm install 3.5 s; load average 1.5 before, 2.5 after;",
        "| gvisor | bare | 2 | 1200 | 1200 | 1200 |",
        "| gvisor | wake | 2 | 1500 | 1500 | 1500 |",
        "| gvisor | overhead: wake − bare, per percentile | | 300 | 300 | |",
        "| gvisor | ratio: wake / bare, per percentile | | 1.25× | 1.25× | |",
        "| gvisor | overhead per cycle (wake − the bare start before it) | 2 | 300 | 300 | 300 |",
        "### Claims (pool of 2)",
        "| warm | 2 | 40 | 40 | 40 |",
        "| cold | 2 | 2100 | 2100 | 2100 |",
        "### Memory with 100 sandboxes (all Ready and counted by the release after 40.0 s)",
        // 10 MiB more RSS over 100 sandboxes: 102.4 KiB each.
        "| proxy `rouse-proxy-x` | 18.0 → 28.0 MiB | 102.4 KiB | 2.0 → 3.0 MiB | 10.2 KiB |",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(expected)),
            "no line starting {expected:?} in:\n{text}"
        );
    }
}
