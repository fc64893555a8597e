//! [`TestDirectory`]: routes the test sets, wakes and activity reports it records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::{self, BoxFuture, FutureExt};
use futures::stream::BoxStream;
use rouse_proxy::SandboxKey;
use rouse_proxy::directory::{
    ActivityReport, Directory, DirectoryError, Endpoint, PortMapping, Result, RouteState,
    RouteUpdate, StaticDirectory,
};
use rouse_shared::store::StoreError;
use tokio::sync::watch;

/// A directory the test drives.
#[derive(Clone)]
pub struct TestDirectory {
    routes: StaticDirectory,
    wakes: Arc<watch::Sender<u64>>,
    reports: Arc<Mutex<Vec<(SandboxKey, ActivityReport)>>>,
    failing_wakes: Arc<AtomicU64>,
}

impl Default for TestDirectory {
    fn default() -> Self {
        Self::new()
    }
}

impl TestDirectory {
    /// An empty directory.
    pub fn new() -> Self {
        Self {
            routes: StaticDirectory::new(&[]),
            wakes: Arc::new(watch::channel(0).0),
            reports: Arc::default(),
            failing_wakes: Arc::default(),
        }
    }

    /// Sets a sandbox in namespace `default`.
    pub fn set(&self, name: &str, state: RouteState) {
        self.routes.set(SandboxKey::new("default", name), state);
    }

    /// Sets a sandbox running at `addr`, its one port mapped from `container_port`.
    pub fn running(&self, name: &str, addr: std::net::SocketAddr) {
        self.set(name, running(addr));
    }

    /// Wakes asked for so far.
    pub fn wakes(&self) -> u64 {
        *self.wakes.borrow()
    }

    /// Waits for the wake count to reach `n`.
    pub async fn wait_wakes(&self, n: u64) {
        let mut rx = self.wakes.subscribe();
        tokio::time::timeout(super::DEADLINE, rx.wait_for(|w| *w >= n))
            .await
            .expect("wake within the deadline")
            .expect("directory alive");
    }

    /// Makes the next `n` wake calls fail as if the store were down.
    pub fn fail_wakes(&self, n: u64) {
        self.failing_wakes.store(n, Ordering::SeqCst);
    }

    /// Activity reports received so far.
    pub fn reports(&self) -> Vec<(SandboxKey, ActivityReport)> {
        self.reports.lock().expect("reports lock").clone()
    }
}

/// A running state dialing `addr`, as container port 80.
pub fn running(addr: std::net::SocketAddr) -> RouteState {
    RouteState::Running {
        endpoint: Endpoint {
            address: addr.ip().to_string(),
            ports: vec![PortMapping {
                container_port: 80,
                port: addr.port(),
            }],
        },
    }
}

impl Directory for TestDirectory {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        self.routes.updates()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        self.wakes.send_modify(|n| *n += 1);
        let fail = self
            .failing_wakes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            let err = DirectoryError::Store {
                key: key.clone(),
                source: StoreError::Unavailable {
                    message: "store down for the test".to_owned(),
                    source: None,
                },
            };
            return future::ready(Err(err)).boxed();
        }
        future::ready(Ok(())).boxed()
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        self.reports
            .lock()
            .expect("reports lock")
            .push((key.clone(), report));
        future::ready(Ok(())).boxed()
    }
}
