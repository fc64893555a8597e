//! Test support for the proxy's integration tests: a controllable directory, real backends on
//! 127.0.0.1, a small HTTP client and condition waits with deadlines.

#![allow(dead_code)]

pub mod backend;
pub mod client;
pub mod directory;
pub mod scripted;
pub mod store;

use std::future::Future;
use std::time::Duration;

use rouse_proxy::{Config, Proxy};

pub use directory::TestDirectory;

/// Bound on waits that only fail when something is broken.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A config for tests: listeners on 127.0.0.1:0, domain `sandbox.localhost`, plus `extra` TOML.
pub fn config(extra: &str) -> Config {
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[directory]\nkind = \"static\"\n{extra}"
    );
    Config::from_toml(&text).expect("test config is valid")
}

/// A config for tests with its own `[http]` section (`http`, listen address included).
pub fn config_with_http(http: &str) -> Config {
    let text = format!("{http}[admin]\nlisten = \"127.0.0.1:0\"\n[directory]\nkind = \"static\"\n");
    Config::from_toml(&text).expect("test config is valid")
}

/// Starts a proxy on `directory` and waits until its routes are synced.
pub async fn start(config: Config, directory: &TestDirectory) -> Proxy {
    let proxy = Proxy::start(config, directory.clone())
        .await
        .expect("proxy starts");
    let router = proxy.router().clone();
    wait_for("routes synced", || {
        let router = router.clone();
        async move { router.is_ready() }
    })
    .await;
    proxy
}

/// Polls `probe` until it returns true; panics naming `what` after [`DEADLINE`].
pub async fn wait_for<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if probe().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The host of sandbox `name` in namespace `default`.
pub fn host(name: &str) -> String {
    format!("{name}.default.sandbox.localhost")
}

/// Waits until exactly `n` connections are held for a wake, over all sandboxes.
pub async fn wait_held(router: &rouse_proxy::Router, n: usize) {
    wait_for(&format!("{n} connections held"), || {
        let router = router.clone();
        async move { router.held_connections() == n }
    })
    .await;
}
