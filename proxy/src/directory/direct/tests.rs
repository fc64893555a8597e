use super::*;
use crate::directory::PortMapping;

fn key() -> SandboxKey {
    SandboxKey::new("default", "alice")
}

fn endpoint(port: u16) -> Endpoint {
    Endpoint {
        address: "127.0.0.1".to_owned(),
        ports: vec![PortMapping {
            container_port: 8000,
            port,
        }],
    }
}

fn suspended(generation: u64, uid: &str) -> RouteState {
    RouteState::Suspended {
        wake_on_connect: true,
        generation,
        uid: uid.to_owned(),
    }
}

fn woken(generation: u64, uid: &str) -> Woken {
    Woken {
        endpoint: endpoint(4000),
        generation,
        uid: uid.to_owned(),
    }
}

fn direct_state() -> RouteState {
    RouteState::Starting {
        endpoint: Some(endpoint(4000)),
    }
}

#[test]
fn the_woken_endpoint_holds_until_the_store_catches_up() {
    let mut o = Overrides::default();
    assert_eq!(o.store(&key(), suspended(3, "u")), suspended(3, "u"));
    assert_eq!(o.woken(&key(), woken(3, "u")), Some(direct_state()));
    // The same suspension again (a status write of the suspended sandbox) is behind the wake.
    assert_eq!(o.store(&key(), suspended(3, "u")), direct_state());
    // The wake written, no endpoint in the status yet.
    let starting = RouteState::Starting { endpoint: None };
    assert_eq!(o.store(&key(), starting.clone()), direct_state());
    // The status with the endpoint: the store is past the wake and wins from now on.
    let published = RouteState::Starting {
        endpoint: Some(endpoint(4000)),
    };
    assert_eq!(o.store(&key(), published.clone()), published);
    assert_eq!(o.store(&key(), starting.clone()), starting, "override gone");
}

#[test]
fn a_newer_suspension_deletion_or_failure_wins_over_the_wake() {
    let cases = [
        ("suspended again", suspended(5, "u")),
        ("replaced", suspended(3, "other")),
        ("deleted", RouteState::Missing),
        (
            "failed",
            RouteState::Failed {
                reason: "PodFailed".to_owned(),
            },
        ),
        (
            "running",
            RouteState::Running {
                endpoint: endpoint(4001),
            },
        ),
    ];
    for (name, state) in cases {
        let mut o = Overrides::default();
        o.store(&key(), suspended(3, "u"));
        o.woken(&key(), woken(3, "u"));
        assert_eq!(o.store(&key(), state.clone()), state, "{name}");
        assert_eq!(
            o.store(&key(), RouteState::Starting { endpoint: None }),
            RouteState::Starting { endpoint: None },
            "{name}: the override is gone"
        );
    }
}

#[test]
fn a_wake_the_store_is_already_past_is_ignored() {
    let mut o = Overrides::default();
    assert_eq!(o.woken(&key(), woken(3, "u")), None, "unknown sandbox");
    o.store(&key(), suspended(5, "u"));
    assert_eq!(o.woken(&key(), woken(3, "u")), None, "a newer suspension");
    let running = RouteState::Running {
        endpoint: endpoint(4000),
    };
    o.store(&key(), running);
    assert_eq!(o.woken(&key(), woken(5, "u")), None, "already running");
    // Woken in the store before the direct wake's answer came: the endpoint still helps.
    o.store(&key(), RouteState::Starting { endpoint: None });
    assert_eq!(o.woken(&key(), woken(5, "u")), Some(direct_state()));
}

#[test]
fn a_refused_wake_puts_the_store_state_back() {
    let mut o = Overrides::default();
    o.store(&key(), suspended(3, "u"));
    o.woken(&key(), woken(3, "u"));
    assert_eq!(o.refused(&key(), 2, "u"), None, "another wake's refusal");
    assert_eq!(o.refused(&key(), 3, "u"), Some(suspended(3, "u")));
    assert_eq!(o.refused(&key(), 3, "u"), None, "only once");
    assert_eq!(o.store(&key(), suspended(3, "u")), suspended(3, "u"));
}

/// The merged stream over a store stream and the wake events fed by hand.
fn merged() -> (
    futures::channel::mpsc::UnboundedSender<RouteUpdate>,
    mpsc::Sender<Event>,
    Merged,
) {
    let (store_tx, store_rx) = futures::channel::mpsc::unbounded();
    let (events_tx, events) = mpsc::channel(EVENT_BUFFER);
    let merged = Merged {
        store: store_rx.boxed(),
        events,
        overrides: Overrides::default(),
    };
    (store_tx, events_tx, merged)
}

fn set(state: RouteState) -> RouteUpdate {
    RouteUpdate::Set { key: key(), state }
}

#[tokio::test]
async fn the_merged_stream_yields_a_woken_endpoint_without_a_store_update() {
    let (store, events, mut merged) = merged();
    store.unbounded_send(set(suspended(3, "u"))).expect("send");
    store.unbounded_send(RouteUpdate::Synced).expect("send");
    assert_eq!(merged.next().await, Some(set(suspended(3, "u"))));
    assert_eq!(merged.next().await, Some(RouteUpdate::Synced));
    // Nothing from the store: the poll that receives the wake yields its endpoint.
    assert!(futures::poll!(merged.next()).is_pending());
    events
        .send(Event::Woken(key(), woken(3, "u")))
        .await
        .expect("send");
    assert_eq!(
        futures::poll!(merged.next()),
        std::task::Poll::Ready(Some(set(direct_state())))
    );
    // The store's view of the same suspension stays behind the wake.
    store.unbounded_send(set(suspended(3, "u"))).expect("send");
    assert_eq!(merged.next().await, Some(set(direct_state())));
    // A wake the store is past yields nothing; the store's stream still flows.
    events
        .send(Event::Woken(key(), woken(1, "u")))
        .await
        .expect("send");
    let running = RouteState::Running {
        endpoint: endpoint(4000),
    };
    store.unbounded_send(set(running.clone())).expect("send");
    assert_eq!(merged.next().await, Some(set(running)));
    // Refused after the store moved on: nothing to put back.
    events
        .send(Event::Refused(key(), 3, "u".to_owned()))
        .await
        .expect("send");
    drop(store);
    assert_eq!(merged.next().await, None, "ends with the store's stream");
}
