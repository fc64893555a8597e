//! Tests of hostname parsing; configuration and round-trip tests are in `tests/`.

use super::*;
use crate::names::NameError;

mod config;
mod round_trip;

const D: &str = "sandbox.localhost";

struct Case<T> {
    name: &'static str,
    input: String,
    want: Result<T, HostnameError>,
}

fn case<T>(
    name: &'static str,
    input: impl Into<String>,
    want: Result<T, HostnameError>,
) -> Case<T> {
    Case {
        name,
        input: input.into(),
        want,
    }
}

fn domains(list: &[&str], default_namespace: Option<&str>) -> SandboxDomains {
    match SandboxDomains::new(list, default_namespace) {
        Ok(domains) => domains,
        Err(err) => panic!("test domains {list:?} are invalid: {err}"),
    }
}

fn run_parse(domains: &SandboxDomains, cases: Vec<Case<SandboxHost>>) {
    for Case { name, input, want } in cases {
        let got = domains.parse(&input);
        assert_eq!(got, want, "{name}");
    }
}

fn sb(namespace: &str, name: &str, port: Option<u16>) -> Result<SandboxHost, HostnameError> {
    Ok(SandboxHost {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        port,
    })
}

fn bad_label<T>(host: &str, label: &str, reason: &'static str) -> Result<T, HostnameError> {
    Err(HostnameError::InvalidLabel {
        host: host.to_owned(),
        label: label.to_owned(),
        reason,
    })
}

fn bad_port<T>(host: &str, port: &str, reason: &'static str) -> Result<T, HostnameError> {
    Err(HostnameError::InvalidPort {
        host: host.to_owned(),
        port: port.to_owned(),
        reason,
    })
}

fn unknown<T>(host: &str) -> Result<T, HostnameError> {
    Err(HostnameError::UnknownDomain {
        host: host.to_owned(),
    })
}

const EMPTY_LABEL: &str =
    "must not be empty (check for a leading dot, '..' or a second trailing dot)";
const LABEL_CHARS: &str = "must consist of letters, digits or '-'";
const LABEL_ENDS: &str = "must start and end with a letter or digit";
const LABEL_LONG: &str = "must be no more than 63 characters";
const PORT_RANGE: &str = "must be between 1 and 65535";
const PORT_ZERO: &str = "must not have a leading zero";

#[test]
fn parse_grammar_and_adversarial_hosts() {
    let l63 = "a".repeat(63);
    let l64 = "a".repeat(64);
    let hostile = format!("{}.ns.{D}", "a".repeat(10_000));
    run_parse(
        &domains(&[D], Some("default")),
        vec![
            case(
                "name.ns.D",
                format!("alice.team-a.{D}"),
                sb("team-a", "alice", None),
            ),
            case(
                "port-name.ns.D",
                format!("8080-alice.team-a.{D}"),
                sb("team-a", "alice", Some(8080)),
            ),
            case(
                "name.D uses default ns",
                format!("alice.{D}"),
                sb("default", "alice", None),
            ),
            case(
                "port-name.D",
                format!("443-alice.{D}"),
                sb("default", "alice", Some(443)),
            ),
            case(
                "uppercase is lowercased",
                "ALICE.Team-A.SANDBOX.Localhost",
                sb("team-a", "alice", None),
            ),
            case(
                "trailing dot",
                format!("alice.ns.{D}."),
                sb("ns", "alice", None),
            ),
            case(
                "double trailing dot",
                format!("alice.ns.{D}.."),
                bad_label(&format!("alice.ns.{D}.."), "", EMPTY_LABEL),
            ),
            case("empty", "", Err(HostnameError::Empty)),
            case("only a dot", ".", Err(HostnameError::Empty)),
            case("two dots", "..", bad_label("..", "", EMPTY_LABEL)),
            case(
                "empty inner label",
                format!("a..ns.{D}"),
                bad_label(&format!("a..ns.{D}"), "", EMPTY_LABEL),
            ),
            case(
                "leading dot",
                format!(".a.ns.{D}"),
                bad_label(&format!(".a.ns.{D}"), "", EMPTY_LABEL),
            ),
            case(
                "63-char label",
                format!("{l63}.ns.{D}"),
                sb("ns", &l63, None),
            ),
            case(
                "64-char label",
                format!("{l64}.ns.{D}"),
                bad_label(&format!("{l64}.ns.{D}"), &l64, LABEL_LONG),
            ),
            case(
                "port 65535",
                format!("65535-x.ns.{D}"),
                sb("ns", "x", Some(65535)),
            ),
            case("port 1", format!("1-x.ns.{D}"), sb("ns", "x", Some(1))),
            case(
                "port 0",
                format!("0-x.ns.{D}"),
                bad_port(&format!("0-x.ns.{D}"), "0", PORT_RANGE),
            ),
            case(
                "port 65536",
                format!("65536-x.ns.{D}"),
                bad_port(&format!("65536-x.ns.{D}"), "65536", PORT_RANGE),
            ),
            case(
                "huge port",
                format!("99999999999-x.ns.{D}"),
                bad_port(&format!("99999999999-x.ns.{D}"), "99999999999", PORT_RANGE),
            ),
            case(
                "leading zero port",
                format!("08080-x.ns.{D}"),
                bad_port(&format!("08080-x.ns.{D}"), "08080", PORT_ZERO),
            ),
            case(
                "port prefix wins",
                format!("8080-x.ns.{D}"),
                sb("ns", "x", Some(8080)),
            ),
            case(
                "sandbox named 8080-x",
                format!("80-8080-x.ns.{D}"),
                sb("ns", "8080-x", Some(80)),
            ),
            case(
                "all-digit name",
                format!("8080.ns.{D}"),
                sb("ns", "8080", None),
            ),
            case(
                "name with inner digits-dash",
                format!("a8080-x.ns.{D}"),
                sb("ns", "a8080-x", None),
            ),
            case(
                "dash after port prefix",
                format!("80--x.ns.{D}"),
                bad_label(
                    &format!("80--x.ns.{D}"),
                    "80--x",
                    "the sandbox name after a port prefix must start with a letter or digit",
                ),
            ),
            case(
                "leading dash",
                format!("-x.ns.{D}"),
                bad_label(&format!("-x.ns.{D}"), "-x", LABEL_ENDS),
            ),
            case(
                "trailing dash",
                format!("x-.ns.{D}"),
                bad_label(&format!("x-.ns.{D}"), "x-", LABEL_ENDS),
            ),
            case(
                "trailing dash on namespace",
                format!("x.ns-.{D}"),
                bad_label(&format!("x.ns-.{D}"), "ns-", LABEL_ENDS),
            ),
            case(
                "underscore",
                format!("a_b.ns.{D}"),
                bad_label(&format!("a_b.ns.{D}"), "a_b", LABEL_CHARS),
            ),
            case(
                "port left in host",
                format!("a.ns.{D}:80"),
                bad_label(&format!("a.ns.{D}:80"), "localhost:80", LABEL_CHARS),
            ),
            case(
                "punycode kept as-is",
                format!("xn--bcher-kva.ns.{D}"),
                sb("ns", "xn--bcher-kva", None),
            ),
            case(
                "non-ascii",
                format!("bücher.ns.{D}"),
                Err(HostnameError::NonAscii {
                    host: format!("bücher.ns.{D}"),
                    found: 'ü',
                    position: 1,
                }),
            ),
            case(
                "host equals domain",
                "Sandbox.Localhost.",
                Err(HostnameError::HostIsDomain {
                    host: "Sandbox.Localhost.".into(),
                    domain: D.into(),
                }),
            ),
            case(
                "unknown domain",
                "alice.ns.example.com",
                unknown("alice.ns.example.com"),
            ),
            case(
                "suffix off label boundary",
                "alice.xsandbox.localhost",
                unknown("alice.xsandbox.localhost"),
            ),
            case(
                "domain off label boundary",
                "xsandbox.localhost",
                unknown("xsandbox.localhost"),
            ),
            case("parent of domain", "localhost", unknown("localhost")),
            case(
                "too many labels",
                format!("a.b.c.{D}"),
                Err(HostnameError::TooManyLabels {
                    host: format!("a.b.c.{D}"),
                    domain: D.into(),
                    found: 3,
                }),
            ),
            case(
                "hostile length is cut in the error",
                hostile.clone(),
                Err(HostnameError::TooLong {
                    host: format!("{}…", &hostile[..MAX_QUOTED_CHARS]),
                    len: hostile.len(),
                }),
            ),
        ],
    );
}

#[test]
fn parse_total_length_limit() {
    // name (63) + '.' + namespace (63) + '.' + domain (125) = 253.
    let name = "n".repeat(63);
    let ns = "s".repeat(63);
    let d125 = format!("{}.{}", "d".repeat(62), "e".repeat(62));
    let d126 = format!("{}.{}", "d".repeat(63), "e".repeat(62));
    let h253 = format!("{name}.{ns}.{d125}");
    let h254 = format!("{name}.{ns}.{d126}");
    assert_eq!((h253.len(), h254.len()), (253, 254));
    run_parse(
        &domains(&[&d125, &d126], None),
        vec![
            case("253 chars", h253.clone(), sb(&ns, &name, None)),
            case(
                "253 chars and trailing dot",
                format!("{h253}."),
                sb(&ns, &name, None),
            ),
            case(
                "254 chars",
                h254.clone(),
                Err(HostnameError::TooLong {
                    host: format!("{}…", &h254[..100]),
                    len: 254,
                }),
            ),
        ],
    );
}

#[test]
fn parse_overlapping_domains_longest_wins() {
    let eu = "eu.sandbox.localhost";
    run_parse(
        &domains(&[D, eu], Some("default")),
        vec![
            case(
                "under the longer domain",
                format!("a.b.{eu}"),
                sb("b", "a", None),
            ),
            case(
                "short form under the longer domain",
                format!("a.{eu}"),
                sb("default", "a", None),
            ),
            case(
                "under the shorter domain only",
                format!("a.b.{D}"),
                sb("b", "a", None),
            ),
            case(
                "equal to the longer domain",
                eu,
                Err(HostnameError::HostIsDomain {
                    host: eu.into(),
                    domain: eu.into(),
                }),
            ),
            case(
                "too many labels for the longer domain",
                format!("a.b.c.{eu}"),
                Err(HostnameError::TooManyLabels {
                    host: format!("a.b.c.{eu}"),
                    domain: eu.into(),
                    found: 3,
                }),
            ),
        ],
    );
}

#[test]
fn parse_without_default_namespace() {
    let no_default = |host: String| {
        Err(HostnameError::NoDefaultNamespace {
            host,
            domain: D.into(),
        })
    };
    run_parse(
        &domains(&[D], None),
        vec![
            case(
                "full form works",
                format!("alice.ns.{D}"),
                sb("ns", "alice", None),
            ),
            case(
                "name.D",
                format!("alice.{D}"),
                no_default(format!("alice.{D}")),
            ),
            case(
                "port-name.D",
                format!("80-alice.{D}"),
                no_default(format!("80-alice.{D}")),
            ),
        ],
    );
}
