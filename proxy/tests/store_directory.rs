//! The store-backed directory: routes from Sandbox objects, wake and activity as merge patches,
//! relist after an expired watch — and a wake end to end through the proxy.

mod support;

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use rouse_proxy::directory::{ActivityReport, Directory, RouteState, RouteUpdate, StoreDirectory};
use rouse_shared::api::{
    Endpoint, EndpointPort, OperatingMode, Sandbox, SandboxSpec, SandboxStatus,
};
use rouse_shared::store::ObjectKey;
use support::DEADLINE;
use support::store::MemStore;

fn suspended(name: &str) -> Sandbox {
    let mut sb = Sandbox::new(name, SandboxSpec::default());
    sb.metadata.namespace = Some("default".to_owned());
    sb.spec.operating_mode = Some(OperatingMode::Suspended);
    sb
}

fn ready(name: &str, port: u16) -> Sandbox {
    let mut sb = Sandbox::new(name, SandboxSpec::default());
    sb.metadata.namespace = Some("default".to_owned());
    sb.status = Some(SandboxStatus {
        conditions: vec![Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: "DependenciesReady".to_owned(),
            message: String::new(),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }],
        endpoint: Some(Endpoint {
            address: "127.0.0.1".to_owned(),
            ports: vec![EndpointPort {
                name: None,
                container_port: 80,
                port: i32::from(port),
            }],
        }),
        ..SandboxStatus::default()
    });
    sb
}

async fn next(updates: &mut BoxStream<'static, RouteUpdate>) -> RouteUpdate {
    tokio::time::timeout(DEADLINE, updates.next())
        .await
        .expect("an update within the deadline")
        .expect("the stream goes on")
}

#[tokio::test]
async fn routes_wakes_activity_and_relist() {
    let store = MemStore::default();
    store.put(suspended("alice"));
    store.put(ready("bob", 31000));
    let directory = StoreDirectory::new(store.clone());
    let mut updates = directory.updates();

    let mut first = Vec::new();
    loop {
        match next(&mut updates).await {
            RouteUpdate::Synced => break,
            RouteUpdate::Set { key, state } => first.push((key.to_string(), state)),
        }
    }
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0].0, "default/alice");
    assert_eq!(first[0].1, RouteState::suspended(true));
    assert!(
        matches!(first[1].1, RouteState::Running { .. }),
        "{first:?}"
    );

    let alice = ObjectKey::new("default", "alice");
    directory.wake(&alice).await.expect("wake");
    let stored = store.object(&alice).expect("alice");
    assert_eq!(stored.spec.operating_mode, Some(OperatingMode::Running));
    assert_eq!(
        next(&mut updates).await,
        RouteUpdate::Set {
            key: alice.clone(),
            state: RouteState::Starting { endpoint: None }
        }
    );

    let bob = ObjectKey::new("default", "bob");
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let report = ActivityReport {
        at,
        bytes_to_upstream: 1,
        bytes_to_client: 2,
        connections_opened: 1,
        connections_open: 1,
    };
    directory
        .report_activity(&bob, report)
        .await
        .expect("report");
    let stored = store.object(&bob).expect("bob");
    let last = stored
        .status
        .and_then(|s| s.last_activity_time)
        .expect("lastActivityTime");
    assert_eq!(last.0.to_string(), "2027-01-15T08:00:00Z");
    // The status patch is an object change the watch reports; bob's route is unchanged.

    store.remove_unseen_and_expire(&bob);
    let mut after = Vec::new();
    loop {
        match next(&mut updates).await {
            RouteUpdate::Synced => break,
            RouteUpdate::Set { key, state } => after.push((key, state)),
        }
    }
    assert!(
        after.contains(&(bob.clone(), RouteState::Missing)),
        "the relist notices bob is gone: {after:?}"
    );

    let missing = ObjectKey::new("default", "nobody");
    assert_eq!(
        directory
            .wake(&missing)
            .await
            .expect_err("no such sandbox")
            .metric_label(),
        "not_found"
    );
}

#[tokio::test]
async fn a_request_wakes_a_suspended_sandbox_through_the_store() {
    let store = MemStore::default();
    store.put(suspended("alice"));
    let config = support::config("[activity]\nreport_interval = \"50ms\"\n");
    let proxy = rouse_proxy::Proxy::start(config, StoreDirectory::new(store.clone()))
        .await
        .expect("proxy starts");
    let router = proxy.router().clone();
    support::wait_for("routes synced", || {
        let router = router.clone();
        async move { router.is_ready() }
    })
    .await;
    let addr = proxy.addrs().http.expect("http listener");
    let request =
        tokio::spawn(
            async move { support::client::get(addr, &support::host("alice"), "/woken").await },
        );

    // The controller's part: see the wake, start the workload, report it ready.
    let key = ObjectKey::new("default", "alice");
    support::wait_for("the wake patch", || {
        let store = store.clone();
        let key = key.clone();
        async move {
            store.object(&key).and_then(|sb| sb.spec.operating_mode) == Some(OperatingMode::Running)
        }
    })
    .await;
    let backend = support::backend::Backend::start().await;
    store.put(ready("alice", backend.addr.port()));

    let reply = tokio::time::timeout(DEADLINE, request)
        .await
        .expect("the held request completes")
        .expect("client task");
    assert_eq!(reply.status, http::StatusCode::OK);
    assert_eq!(reply.body, "hello /woken");
    support::wait_for("lastActivityTime written", || {
        let store = store.clone();
        let key = key.clone();
        async move {
            store
                .object(&key)
                .and_then(|sb| sb.status)
                .and_then(|s| s.last_activity_time)
                .is_some()
        }
    })
    .await;
    proxy.shutdown().await;
}
