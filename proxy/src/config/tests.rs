//! Tests of config parsing and validation.

use std::time::Duration;

use super::*;

#[test]
fn an_empty_file_gives_the_defaults() {
    let config = Config::from_toml("").expect("empty config is valid");
    assert_eq!(config, Config::default());
    assert_eq!(config.wake.deadline, Duration::from_secs(60));
    assert_eq!(config.wake.dial_backoff_initial, Duration::from_millis(1));
    assert_eq!(config.wake.dial_backoff_max, Duration::from_millis(50));
    assert_eq!(config.limits.upgraded_idle_timeout, None);
    assert_eq!(config.routing.domains, vec!["sandbox.localhost".to_owned()]);
    assert_eq!(config.directory.kind, DirectoryKind::Store);
}

#[test]
fn every_section_parses() {
    let text = r#"
[routing]
domains = ["sandbox.example.com", "sandbox.localhost"]
default_namespace = ""
upstream_headers = true

[http]
listen = "0.0.0.0:80"

[https]
listen = "[::]:443"
certificates = [{ cert = "/tls/a.pem", key = "/tls/a.key" }]

[tls_passthrough]
listen = "0.0.0.0:8443"

[[tcp]]
listen = "127.0.0.1:2222"
sandbox = "team-a/alice"
port = 22

[admin]
listen = "off"

[wake]
deadline = "90s"
max_held_per_sandbox = 10
max_held_total = 100
release_concurrency = 4
dial_backoff_initial = "2ms"
dial_backoff_max = "100ms"
dial_timeout = "1s"

[limits]
header_read_timeout = "5s"
max_header_bytes = 16384
idle_timeout = "off"
upgraded_idle_timeout = "1h"
max_connections = 0
max_connections_per_ip = 64
rate_limit_per_ip = 100

[activity]
report_interval = "30s"

[drain]
timeout = "1m 30s"

[directory]
kind = "static"

[[directory.routes]]
sandbox = "team-a/alice"
address = "127.0.0.1"
ports = [8080, 9090]

[[directory.routes]]
sandbox = "team-a/bob"
state = "failed"
reason = "disk full"
"#;
    let config = Config::from_toml(text).expect("valid config");
    assert_eq!(config.routing.default_namespace, "");
    assert!(config.routing.upstream_headers);
    assert_eq!(config.https.certificates.len(), 1);
    assert_eq!(config.tcp[0].sandbox, SandboxKey::new("team-a", "alice"));
    assert_eq!(config.tcp[0].port, Some(22));
    assert_eq!(config.admin.listen, None);
    assert_eq!(config.wake.deadline, Duration::from_secs(90));
    assert_eq!(config.limits.idle_timeout, None);
    assert_eq!(config.limits.max_connections_per_ip, 64);
    assert_eq!(
        config.limits.upgraded_idle_timeout,
        Some(Duration::from_secs(3600))
    );
    assert_eq!(config.drain.timeout, Duration::from_secs(90));
    assert_eq!(config.directory.routes[1].state, StaticRouteState::Failed);
}

#[test]
fn every_bad_section_is_reported_with_path_and_line() {
    let text = "[wake]\ndeadline = \"soon\"\n[limits]\nmax_connections = -1\n[bogus]\nx = 1\n[http]\nlisten = \"nowhere\"\n";
    let err = Config::from_toml(text).expect_err("invalid");
    let issues: Vec<String> = err.issues().iter().map(ToString::to_string).collect();
    assert_eq!(issues.len(), 4, "{issues:#?}");
    let has = |needle: &str| issues.iter().any(|i| i.contains(needle));
    assert!(
        has("line 2: wake.deadline: \"soon\" is not a duration"),
        "{issues:#?}"
    );
    assert!(has("line 4: limits.max_connections"), "{issues:#?}");
    assert!(has("line 5: bogus: unknown section"), "{issues:#?}");
    assert!(
        has("line 8: http.listen: \"nowhere\" is not a socket address"),
        "{issues:#?}"
    );
}

#[test]
fn unknown_keys_inside_sections_are_rejected() {
    let err = Config::from_toml("[wake]\ndeadlin = \"5s\"\n").expect_err("typo");
    let text = err.to_string();
    assert!(text.contains("wake"), "{text}");
    assert!(text.contains("deadlin"), "{text}");
}

#[test]
fn syntax_errors_name_the_line() {
    let err = Config::from_toml("[wake]\ndeadline = \n").expect_err("syntax");
    assert_eq!(err.issues()[0].line, Some(2), "{err}");
}

#[test]
fn value_checks_report_every_bad_key() {
    let text = r#"
[routing]
domains = ["bad..domain"]
[wake]
deadline = "0s"
dial_backoff_initial = "1s"
dial_backoff_max = "10ms"
release_concurrency = 0
[limits]
max_header_bytes = 100
[http]
listen = "127.0.0.1:8080"
[admin]
listen = "127.0.0.1:8080"
[directory]
kind = "static"
[[directory.routes]]
sandbox = "a/b"
"#;
    let err = Config::from_toml(text).expect_err("invalid values");
    let paths: Vec<&str> = err.issues().iter().map(|i| i.path.as_str()).collect();
    for want in [
        "routing.domains",
        "wake.deadline",
        "wake.dial_backoff_initial",
        "wake.release_concurrency",
        "limits.max_header_bytes",
        "admin.listen",
        "directory.routes[0].address",
        "directory.routes[0].ports",
    ] {
        assert!(paths.contains(&want), "{want} missing from {paths:?}");
    }
}

#[test]
fn sandbox_keys_need_namespace_and_name() {
    for bad in ["alice", "/alice", "ns/", "a/b/c"] {
        let text = format!("[[tcp]]\nlisten = \"127.0.0.1:1\"\nsandbox = \"{bad}\"\n");
        let err = Config::from_toml(&text).expect_err(bad);
        assert!(err.to_string().contains("namespace/name"), "{bad}: {err}");
    }
}

#[test]
fn the_store_directory_takes_a_namespace_scope() {
    let config = Config::from_toml("[directory]\nnamespace = \"team-a\"\n").expect("valid");
    assert_eq!(config.directory.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        Config::from_toml("").expect("defaults").directory.namespace,
        None
    );

    let err = Config::from_toml("[directory]\nnamespace = \"Team_A\"\n").expect_err("bad name");
    assert!(err.to_string().contains("directory.namespace"), "{err}");
    let err = Config::from_toml("[directory]\nkind = \"static\"\nnamespace = \"team-a\"\n")
        .expect_err("static with a namespace");
    assert!(err.to_string().contains("namespace scope"), "{err}");
}
