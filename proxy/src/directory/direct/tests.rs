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
