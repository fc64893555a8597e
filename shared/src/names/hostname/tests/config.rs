//! Tests of the domain configuration, `split_host_port` and error messages.

use super::*;

#[test]
fn domains_are_validated_and_normalised() {
    let cases: Vec<Case<Vec<String>>> = vec![
        case(
            "dedup and lowercase",
            "Sandbox.Localhost.,sandbox.localhost",
            Ok(vec![D.into()]),
        ),
        case(
            "most labels first",
            "c,a.b,x.a.b",
            Ok(vec!["x.a.b".into(), "a.b".into(), "c".into()]),
        ),
        case("none", "", Err(HostnameError::NoDomains)),
        case(
            "only a dot",
            ".",
            Err(invalid_domain(".", "must not be empty")),
        ),
        case(
            "non-ascii",
            "bücher.de",
            Err(invalid_domain(
                "bücher.de",
                "must be ASCII (use the punycode xn-- form)",
            )),
        ),
        case(
            "empty label",
            "a..b",
            Err(invalid_domain("a..b", &format!("label \"\" {EMPTY_LABEL}"))),
        ),
        case(
            "leading dash",
            "-a.b",
            Err(invalid_domain(
                "-a.b",
                &format!("label \"-a\" {LABEL_ENDS}"),
            )),
        ),
        case(
            "underscore",
            "a_b.c",
            Err(invalid_domain(
                "a_b.c",
                &format!("label \"a_b\" {LABEL_CHARS}"),
            )),
        ),
        case(
            "punycode",
            "xn--bcher-kva.de",
            Ok(vec!["xn--bcher-kva.de".into()]),
        ),
    ];
    for Case { name, input, want } in cases {
        let list: Vec<&str> = input.split(',').filter(|d| !d.is_empty()).collect();
        let got = SandboxDomains::new(list, None).map(|d| d.domains().map(str::to_owned).collect());
        assert_eq!(got, want, "{name}");
    }
}

fn invalid_domain(domain: &str, reason: &str) -> HostnameError {
    HostnameError::InvalidDomain {
        domain: domain.into(),
        reason: reason.into(),
    }
}

#[test]
fn default_namespace_is_validated() {
    let cases: Vec<Case<Option<String>>> = vec![
        case("valid", "team-a", Ok(Some("team-a".into()))),
        case(
            "uppercase",
            "Team",
            Err(HostnameError::InvalidDefaultNamespace {
                namespace: "Team".into(),
                source: NameError::InvalidChar {
                    part: crate::names::NamePart::Whole,
                    rule: "must consist of lower case alphanumeric characters or '-', and must start \
                           and end with an alphanumeric character",
                    found: 'T',
                    position: 0,
                },
            }),
        ),
        case(
            "empty",
            "",
            Err(HostnameError::InvalidDefaultNamespace {
                namespace: String::new(),
                source: NameError::Empty {
                    part: crate::names::NamePart::Whole,
                },
            }),
        ),
    ];
    for Case { name, input, want } in cases {
        let got = SandboxDomains::new([D], Some(&input))
            .map(|d| d.default_namespace().map(str::to_owned));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn split_host_port_cases() {
    let not_sandbox = |host: &str, reason: &'static str| {
        Err(HostnameError::NotASandboxHost {
            host: host.into(),
            reason,
        })
    };
    const V6: &str = "IPv6 address literals do not name a sandbox";
    const COLONS: &str =
        "more than one ':' (an IPv6 address must be in brackets, and names no sandbox)";
    let cases: Vec<Case<(&str, Option<u16>)>> = vec![
        case(
            "host only",
            "a.ns.sandbox.localhost",
            Ok(("a.ns.sandbox.localhost", None)),
        ),
        case(
            "host and port",
            "a.ns.sandbox.localhost:8443",
            Ok(("a.ns.sandbox.localhost", Some(8443))),
        ),
        case(
            "trailing dot kept for parse",
            "a.sandbox.localhost.:443",
            Ok(("a.sandbox.localhost.", Some(443))),
        ),
        case("port 65535", "h:65535", Ok(("h", Some(65535)))),
        case("port 0", "h:0", bad_port("h:0", "0", PORT_RANGE)),
        case(
            "port 65536",
            "h:65536",
            bad_port("h:65536", "65536", PORT_RANGE),
        ),
        case("leading zero", "h:080", bad_port("h:080", "080", PORT_ZERO)),
        case("empty port", "h:", bad_port("h:", "", "must not be empty")),
        case(
            "signed port",
            "h:+80",
            bad_port("h:+80", "+80", "must be a decimal number"),
        ),
        case(
            "letters in port",
            "h:8a",
            bad_port("h:8a", "8a", "must be a decimal number"),
        ),
        case("empty", "", Err(HostnameError::Empty)),
        case("empty host", ":80", Err(HostnameError::Empty)),
        case(
            "bracketed ipv6 with port",
            "[::1]:80",
            not_sandbox("[::1]:80", V6),
        ),
        case("bracketed ipv6", "[fe80::1]", not_sandbox("[fe80::1]", V6)),
        case("bare ipv6", "::1", not_sandbox("::1", COLONS)),
        case("two colons", "a:b:80", not_sandbox("a:b:80", COLONS)),
    ];
    for Case { name, input, want } in cases {
        let got = split_host_port(&input);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn errors_have_metric_labels_and_messages() {
    let d = domains(&[D], None);
    let cases = [
        ("empty", d.parse(""), "empty", "host is empty"),
        (
            "port",
            d.parse(&format!("08080-x.ns.{D}")),
            "invalid_port",
            "host \"08080-x.ns.sandbox.localhost\" has an invalid port \"08080\": must not have a leading zero",
        ),
        (
            "non-ascii",
            d.parse("bücher.ns.sandbox.localhost"),
            "non_ascii",
            "host \"bücher.ns.sandbox.localhost\" contains the non-ASCII character 'ü' at position 1; \
             use the punycode (xn--) form of the name",
        ),
        (
            "unknown",
            d.parse("a.b.example"),
            "unknown_domain",
            "host \"a.b.example\" is not under a configured sandbox domain",
        ),
    ];
    for (name, got, label, message) in cases {
        let got = got.map_err(|e| (e.metric_label(), e.to_string()));
        assert_eq!(got, Err((label, message.to_owned())), "{name}");
    }
}
