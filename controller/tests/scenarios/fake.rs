//! The in-process fake API server with its fake kubelet, and a scenario environment on it.

use std::time::Duration;

use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};

use super::env::Env;

/// A fake API server with a kubelet, and the scenario environment (namespace `team-a`) on it,
/// whose waits last up to `timeout`.
pub async fn start(timeout: Duration) -> (FakeApiServer, FakeKubelet, Env) {
    let server = FakeApiServer::start().await.expect("fake API server");
    let kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let client = server.client().expect("client");
    let env = Env {
        controller_client: client.clone(),
        client,
        namespace: "team-a".to_owned(),
        lease_namespace: "team-a".to_owned(),
        image: "busybox:1.36".to_owned(),
        timeout,
    };
    (server, kubelet, env)
}
