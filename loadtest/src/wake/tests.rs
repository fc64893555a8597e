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
