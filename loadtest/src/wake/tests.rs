//! Unit tests of the wake scenario's pure parts.

use super::up::banner_addr;
use super::*;

#[test]
fn quantiles_are_nearest_rank() {
    let latencies = Latencies {
        name: "t",
        samples: (1..=100).rev().map(Duration::from_millis).collect(),
    };
    assert_eq!(latencies.quantile(0.5), Duration::from_millis(51));
    assert_eq!(latencies.quantile(0.99), Duration::from_millis(99));
    assert_eq!(latencies.quantile(1.0), Duration::from_millis(100));
    let empty = Latencies {
        name: "e",
        samples: Vec::new(),
    };
    assert_eq!(empty.quantile(0.5), Duration::ZERO);
    assert_eq!(
        latencies.row(4, 1),
        "t    n  100  p50     51.0 ms  p99     99.0 ms  max    100.0 ms"
    );
}

#[test]
fn banner_lines_give_addresses() {
    let line = "proxy: http://127.0.0.1:8080 (http://NAME.NAMESPACE.sandbox.localhost:8080)";
    assert_eq!(
        banner_addr(line, "proxy: http://"),
        Some(SocketAddr::from(([127, 0, 0, 1], 8080)))
    );
    assert_eq!(
        banner_addr("metrics: http://127.0.0.1:9/metrics", "metrics: http://"),
        Some(SocketAddr::from(([127, 0, 0, 1], 9)))
    );
    assert_eq!(banner_addr("press Ctrl-C to stop", "api: http://"), None);
}

#[test]
fn the_paired_overhead_subtracts_each_cycles_own_baseline() {
    let ms = Duration::from_millis;
    let side = WakeSide {
        path: WakePath::Direct,
        backend: Latencies {
            name: "b",
            samples: vec![ms(4), ms(10), ms(5)],
        },
        wake: Latencies {
            name: "w",
            samples: vec![ms(5), ms(12), ms(3)],
        },
        warm: Latencies {
            name: "r",
            samples: Vec::new(),
        },
        means: Vec::new(),
    };
    // Whole microseconds: the subtraction of seconds is not exact in binary.
    let us = |ms: f64| (ms * 1e3).round() as i64;
    let paired = side.paired_overhead_ms();
    let got: Vec<i64> = paired.iter().copied().map(us).collect();
    assert_eq!(got, vec![-2000, 1000, 2000], "per cycle, sorted");
    assert_eq!(us(quantile_ms(&paired, 0.5)), 1000);
    assert_eq!(us(quantile_ms(&paired, 1.0)), 2000);
    assert_eq!(quantile_ms(&[], 0.5), 0.0);
}
