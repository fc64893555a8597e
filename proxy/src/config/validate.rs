//! Checks of values that their types alone cannot express; every failing key is reported.

use std::collections::HashSet;
use std::time::Duration;

use rouse_shared::names::SandboxDomains;

use super::{Config, ConfigIssue, DirectoryKind, StaticRouteState};

/// hyper refuses a smaller read buffer, so smaller header limits cannot be honoured.
pub(crate) const MIN_HEADER_BYTES: usize = 8192;

/// Every problem with the values of a parsed config.
pub(super) fn validate(config: &Config) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut bad = |path: &str, message: String| {
        issues.push(ConfigIssue {
            path: path.to_owned(),
            line: None,
            message,
        })
    };
    let routing = &config.routing;
    let default_ns = (!routing.default_namespace.is_empty()).then_some(&*routing.default_namespace);
    if let Err(err) = SandboxDomains::new(&routing.domains, default_ns) {
        let path = match err {
            rouse_shared::names::HostnameError::InvalidDefaultNamespace { .. } => {
                "routing.default_namespace"
            }
            _ => "routing.domains",
        };
        bad(path, err.to_string());
    }
    let wake = &config.wake;
    for (path, value) in [
        ("wake.deadline", wake.deadline),
        ("wake.dial_backoff_initial", wake.dial_backoff_initial),
        ("wake.dial_backoff_max", wake.dial_backoff_max),
        ("wake.dial_timeout", wake.dial_timeout),
        (
            "limits.header_read_timeout",
            config.limits.header_read_timeout,
        ),
        ("activity.report_interval", config.activity.report_interval),
    ] {
        if value == Duration::ZERO {
            bad(path, "must be more than zero".to_owned());
        }
    }
    if wake.dial_backoff_initial > wake.dial_backoff_max {
        bad(
            "wake.dial_backoff_initial",
            format!(
                "must not exceed wake.dial_backoff_max ({:?})",
                wake.dial_backoff_max
            ),
        );
    }
    for (path, value) in [
        ("wake.max_held_per_sandbox", wake.max_held_per_sandbox),
        ("wake.max_held_total", wake.max_held_total),
        ("wake.release_concurrency", wake.release_concurrency),
    ] {
        if value == 0 {
            bad(path, "must be at least 1".to_owned());
        }
    }
    if config.limits.max_header_bytes < MIN_HEADER_BYTES {
        bad(
            "limits.max_header_bytes",
            format!("must be at least {MIN_HEADER_BYTES}"),
        );
    }
    if config.limits.idle_timeout == Some(Duration::ZERO) {
        bad(
            "limits.idle_timeout",
            "must be more than zero or \"off\"".to_owned(),
        );
    }
    if config.limits.upgraded_idle_timeout == Some(Duration::ZERO) {
        bad(
            "limits.upgraded_idle_timeout",
            "must be more than zero or \"off\"".to_owned(),
        );
    }
    let mut listens = HashSet::new();
    let named = [
        ("http.listen", config.http.listen),
        ("https.listen", config.https.listen),
        ("tls_passthrough.listen", config.tls_passthrough.listen),
        ("admin.listen", config.admin.listen),
    ];
    let tcp = config
        .tcp
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("tcp[{i}].listen"), Some(t.listen)));
    for (path, addr) in named.into_iter().map(|(p, a)| (p.to_owned(), a)).chain(tcp) {
        if let Some(addr) = addr
            && addr.port() != 0
            && !listens.insert(addr)
        {
            bad(&path, format!("{addr} is used by another listener"));
        }
    }
    if config.https.listen.is_some() && config.https.certificates.is_empty() {
        bad(
            "https.certificates",
            "at least one certificate is needed when https.listen is set".to_owned(),
        );
    }
    let directory = &config.directory;
    if directory.kind == DirectoryKind::Store && !directory.routes.is_empty() {
        bad(
            "directory.routes",
            "static routes need directory.kind = \"static\"".to_owned(),
        );
    }
    if let Some(namespace) = &directory.namespace {
        if directory.kind != DirectoryKind::Store {
            bad(
                "directory.namespace",
                "a namespace scope needs directory.kind = \"store\"".to_owned(),
            );
        } else if let Err(err) = rouse_shared::names::validate_dns1123_label(namespace) {
            bad(
                "directory.namespace",
                format!("{namespace:?} is not a namespace name: {err}"),
            );
        }
    }
    let mut seen = HashSet::new();
    for (i, route) in directory.routes.iter().enumerate() {
        if !seen.insert(&route.sandbox) {
            bad(
                &format!("directory.routes[{i}].sandbox"),
                format!("{} has another route already", route.sandbox),
            );
        }
        if route.state == StaticRouteState::Running {
            if route.address.is_empty() {
                bad(
                    &format!("directory.routes[{i}].address"),
                    "a running route needs an address".to_owned(),
                );
            }
            if route.ports.is_empty() {
                bad(
                    &format!("directory.routes[{i}].ports"),
                    "a running route needs at least one port".to_owned(),
                );
            }
        }
        if route.ports.contains(&0) {
            bad(
                &format!("directory.routes[{i}].ports"),
                "ports are 1..=65535".to_owned(),
            );
        }
    }
    issues
}
