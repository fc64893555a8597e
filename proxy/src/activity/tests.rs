//! Coalescing and heartbeat of activity reports, on paused time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{self, BoxFuture, FutureExt};
use futures::stream::{self, BoxStream, StreamExt};
use tokio::time::Instant;

use crate::config::Config;
use crate::directory::{
    ActivityReport, Directory, Endpoint, PortMapping, Result, RouteState, RouteUpdate, SandboxKey,
};
use crate::route::{ConnKind, Router};

/// Records when each report arrived.
#[derive(Clone, Default)]
struct Recorder {
    reports: Arc<Mutex<Vec<(Instant, ActivityReport)>>>,
}

impl Recorder {
    fn reports(&self) -> Vec<(Instant, ActivityReport)> {
        self.reports.lock().expect("lock").clone()
    }
}

impl Directory for Recorder {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        stream::pending().boxed()
    }

    fn wake(&self, _key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        future::ready(Ok(())).boxed()
    }

    fn report_activity(
        &self,
        _key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        self.reports
            .lock()
            .expect("lock")
            .push((Instant::now(), report));
        future::ready(Ok(())).boxed()
    }
}

fn router(recorder: &Recorder) -> (Router, SandboxKey) {
    let config = Config::from_toml("[activity]\nreport_interval = \"10s\"\n").expect("config");
    let router = Router::new(config, recorder.clone()).expect("router");
    let key = SandboxKey::new("default", "alice");
    let state = RouteState::Running {
        endpoint: Endpoint {
            address: "127.0.0.1".to_owned(),
            ports: vec![PortMapping {
                container_port: 80,
                port: 1,
            }],
        },
    };
    router.table_for_tests().apply(key.clone(), state, 1);
    (router, key)
}

#[tokio::test(start_paused = true)]
async fn reports_are_coalesced_per_interval_and_beat_while_open() {
    let recorder = Recorder::default();
    let (router, key) = router(&recorder);
    let start = Instant::now();

    let guard = router.guard(&key, ConnKind::Http).expect("slot");
    for _ in 0..1000 {
        guard.record_bytes(10, 20);
    }
    tokio::time::sleep(Duration::from_secs(35)).await;
    drop(guard);
    tokio::time::sleep(Duration::from_secs(60)).await;

    let reports = recorder.reports();
    let at: Vec<u64> = reports
        .iter()
        .map(|(t, _)| (*t - start).as_secs())
        .collect();
    // At once, then one per 10 s while the connection is open (the heartbeat), one more
    // carrying the close, then silence.
    assert_eq!(at, vec![0, 10, 20, 30, 40], "{reports:#?}");
    let up: u64 = reports.iter().map(|(_, r)| r.bytes_to_upstream).sum();
    let down: u64 = reports.iter().map(|(_, r)| r.bytes_to_client).sum();
    assert_eq!((up, down), (10_000, 20_000));
    assert_eq!(reports[0].1.connections_opened, 1);
    assert_eq!(reports[3].1.connections_open, 1);
    assert_eq!(reports[4].1.connections_open, 0);

    // New activity after the quiet period reports at once again.
    let again = Instant::now();
    let guard = router.guard(&key, ConnKind::Http).expect("slot");
    drop(guard);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reports = recorder.reports();
    assert_eq!(reports.len(), 6);
    assert_eq!(reports[5].0, again);
}

#[tokio::test(start_paused = true)]
async fn the_live_view_is_now_while_open_and_the_close_time_after() {
    let recorder = Recorder::default();
    let (router, key) = router(&recorder);
    assert_eq!(router.last_activity(&key), None, "never used");
    assert_eq!(
        router.last_activity(&SandboxKey::new("default", "nobody")),
        None
    );

    let guard = router.guard(&key, ConnKind::Http).expect("slot");
    let before = std::time::SystemTime::now();
    let seen = router.last_activity(&key).expect("open");
    assert!(seen >= before, "an open connection is activity now");
    drop(guard);
    let closed = router.last_activity(&key).expect("closed");
    let after = std::time::SystemTime::now();
    assert!(closed <= after, "a closed connection keeps its close time");
    assert!(
        after.duration_since(closed).unwrap_or_default() < Duration::from_secs(5),
        "the close time is recent"
    );
}
