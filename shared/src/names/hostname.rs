//! Sandbox hostnames: which sandbox (and port) a Host header, TLS SNI name or CONNECT target
//! addresses.
//!
//! The proxy routes by name, so this runs on every request and connection: it makes one pass
//! over the host, compares case-insensitively without lowercasing a copy, and allocates only
//! the strings it returns.
//!
//! # Grammar
//!
//! Under each configured domain `D` (e.g. `sandbox.localhost`):
//!
//! | host                          | sandbox                  | port      |
//! |-------------------------------|--------------------------|-----------|
//! | `{name}.{namespace}.D`        | `{namespace}/{name}`     | default   |
//! | `{port}-{name}.{namespace}.D` | `{namespace}/{name}`     | `{port}`  |
//! | `{name}.D`                    | `{default ns}/{name}`    | default   |
//! | `{port}-{name}.D`             | `{default ns}/{name}`    | `{port}`  |
//!
//! The last two forms need a configured default namespace. A host equal to a domain, or with
//! more than two labels in front of it, addresses no sandbox.
//!
//! # Port prefix wins
//!
//! A first label of the form `<digits>-<rest>` is *always* read as a port prefix: the digits
//! must be a port in 1..=65535 without a leading zero (`0-x`, `65536-x` and `08080-x` are
//! errors, not sandbox names) and `<rest>` is the sandbox name. So `8080-x.ns.D` means port
//! 8080 of sandbox `x`, and a sandbox literally named `8080-x` is reached with an explicit
//! port, e.g. `80-8080-x.ns.D` (port 80 of sandbox `8080-x`). Reading the prefix one way
//! only keeps the mapping from host to sandbox unambiguous, whatever sandboxes exist.
//!
//! # Other rules
//!
//! - Case-insensitive; the returned names are lower case.
//! - One trailing dot (a fully qualified name) is accepted; two, a leading dot, or `..` are not.
//! - Every label is a DNS-1123 label (1..=63 of letters, digits and `-`, not starting or ending
//!   with `-`); the whole host is at most 253 characters without the trailing dot.
//! - Non-ASCII hosts are rejected; punycode labels (`xn--bcher-kva`) are plain ASCII and are
//!   taken as they are, never decoded.
//! - When several domains match, the one with the most labels wins: with domains
//!   `sandbox.localhost` and `eu.sandbox.localhost`, `a.b.eu.sandbox.localhost` is `b/a`, and
//!   `eu.sandbox.localhost` itself is an error, not sandbox `eu`.
//!
//! Errors quote the offending host, cut to [`MAX_QUOTED_CHARS`] characters so that a hostile
//! header cannot flood the logs.

mod error;

pub use error::HostnameError;

use super::dns::validate_dns1123_label;

/// Longest host name, without a trailing dot.
pub const MAX_HOST_LEN: usize = 253;
/// Longest label of a host name.
pub const MAX_LABEL_LEN: usize = 63;
/// Most characters of user input quoted in an error.
pub const MAX_QUOTED_CHARS: usize = 100;

/// The sandbox (and port) a host addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SandboxHost {
    /// Namespace of the sandbox, lower case.
    pub namespace: String,
    /// Name of the sandbox, lower case.
    pub name: String,
    /// Port from a `{port}-` prefix; `None` means the sandbox's default port.
    pub port: Option<u16>,
}

impl SandboxHost {
    /// The canonical host under `domain` (`[{port}-]{name}.{namespace}.{domain}`), if one exists.
    ///
    /// `None` when no host addresses this sandbox and port: the name or namespace is not a DNS
    /// label (Kubernetes allows dots in many names), `{port}-{name}` or the whole host is too
    /// long, or the name itself looks like a port prefix (`8080-x`) and no port is given.
    pub fn to_host(&self, domain: &str) -> Option<String> {
        check_label(&self.name).ok()?;
        check_label(&self.namespace).ok()?;
        let first = match self.port {
            Some(port) => format!("{port}-{}", self.name),
            None if port_prefix(&self.name).is_some() => return None,
            None => self.name.clone(),
        };
        let host = format!("{first}.{}.{domain}", self.namespace);
        (first.len() <= MAX_LABEL_LEN && host.len() <= MAX_HOST_LEN).then_some(host)
    }
}

/// The configured sandbox domains and default namespace; parses hosts under them.
///
/// # Example
/// ```
/// use rouse_shared::names::{SandboxDomains, SandboxHost};
///
/// let domains = SandboxDomains::new(["sandbox.localhost"], Some("default"))?;
/// let host = domains.parse("8080-alice.team-a.sandbox.localhost")?;
/// assert_eq!(host, SandboxHost { namespace: "team-a".into(), name: "alice".into(), port: Some(8080) });
/// assert_eq!(domains.parse("Bob.Sandbox.Localhost.")?.namespace, "default");
/// # Ok::<(), rouse_shared::names::HostnameError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxDomains {
    /// Lower-case domains without a trailing dot, most labels first.
    domains: Vec<String>,
    /// Namespace for `{name}.D` hosts.
    default_namespace: Option<String>,
}

impl SandboxDomains {
    /// Validates and normalises the domains (lower case, no trailing dot, no duplicates).
    pub fn new(
        domains: impl IntoIterator<Item = impl AsRef<str>>,
        default_namespace: Option<&str>,
    ) -> Result<Self, HostnameError> {
        let mut normalised: Vec<String> = Vec::new();
        for domain in domains {
            let domain = normalise_domain(domain.as_ref())?;
            if !normalised.contains(&domain) {
                normalised.push(domain);
            }
        }
        if normalised.is_empty() {
            return Err(HostnameError::NoDomains);
        }
        // Most labels first, so the first domain that matches a host is the longest one.
        normalised.sort_by(|a, b| label_count(b).cmp(&label_count(a)).then_with(|| a.cmp(b)));
        let default_namespace = match default_namespace {
            Some(ns) => match validate_dns1123_label(ns) {
                Ok(()) => Some(ns.to_owned()),
                Err(source) => {
                    return Err(HostnameError::InvalidDefaultNamespace {
                        namespace: clip(ns),
                        source,
                    });
                }
            },
            None => None,
        };
        Ok(Self {
            domains: normalised,
            default_namespace,
        })
    }

    /// The domains, normalised, with the most labels first.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(String::as_str)
    }

    /// The namespace for hosts that name none.
    pub fn default_namespace(&self) -> Option<&str> {
        self.default_namespace.as_deref()
    }

    /// Parses a host (no `:port`; see [`split_host_port`]) into the sandbox it addresses.
    pub fn parse(&self, host: &str) -> Result<SandboxHost, HostnameError> {
        let trimmed = host.strip_suffix('.').unwrap_or(host);
        if trimmed.is_empty() {
            return Err(HostnameError::Empty);
        }
        if trimmed.len() > MAX_HOST_LEN {
            return Err(HostnameError::TooLong {
                host: clip(host),
                len: trimmed.len(),
            });
        }
        if let Some(at) = trimmed.bytes().position(|b| !b.is_ascii()) {
            // Every byte before `at` is ASCII, so `at` is a char boundary and a char position.
            return Err(HostnameError::NonAscii {
                host: clip(host),
                found: trimmed
                    .get(at..)
                    .and_then(|t| t.chars().next())
                    .unwrap_or('?'),
                position: at,
            });
        }
        for label in trimmed.split('.') {
            check_label(label).map_err(|reason| HostnameError::InvalidLabel {
                host: clip(host),
                label: clip(label),
                reason,
            })?;
        }
        let (domain, front) = self
            .match_domain(trimmed)
            .ok_or_else(|| HostnameError::UnknownDomain { host: clip(host) })?;
        if front.is_empty() {
            return Err(HostnameError::HostIsDomain {
                host: clip(host),
                domain: domain.to_owned(),
            });
        }
        let mut labels = front.split('.');
        let first = labels.next().unwrap_or_default();
        let namespace = labels.next();
        if labels.next().is_some() {
            return Err(HostnameError::TooManyLabels {
                host: clip(host),
                domain: domain.to_owned(),
                found: front.split('.').count(),
            });
        }
        let (port, name) = split_port_prefix(first, host)?;
        let namespace = match (namespace, &self.default_namespace) {
            (Some(ns), _) => ns.to_ascii_lowercase(),
            (None, Some(default)) => default.clone(),
            (None, None) => {
                return Err(HostnameError::NoDefaultNamespace {
                    host: clip(host),
                    domain: domain.to_owned(),
                });
            }
        };
        Ok(SandboxHost {
            namespace,
            name: name.to_ascii_lowercase(),
            port,
        })
    }

    /// The longest domain `host` is under (or equal to), and the part of `host` before it.
    ///
    /// `host` must be ASCII, so that every byte index is a char boundary.
    fn match_domain<'h>(&self, host: &'h str) -> Option<(&str, &'h str)> {
        let bytes = host.as_bytes();
        self.domains.iter().find_map(|domain| {
            let d = domain.as_bytes();
            if bytes.len() == d.len() {
                return bytes
                    .eq_ignore_ascii_case(d)
                    .then_some((domain.as_str(), ""));
            }
            let cut = bytes.len().checked_sub(d.len() + 1)?;
            let on_boundary = bytes.get(cut) == Some(&b'.');
            if on_boundary && bytes.get(cut + 1..)?.eq_ignore_ascii_case(d) {
                return Some((domain.as_str(), host.get(..cut)?));
            }
            None
        })
    }
}

/// Splits a Host header or CONNECT authority (`host` or `host:port`) into host and port.
///
/// IPv6 literals (`[::1]:80`) are rejected: they cannot name a sandbox. The port must be a
/// decimal number in 1..=65535 without a leading zero.
///
/// # Example
/// ```
/// use rouse_shared::names::split_host_port;
///
/// assert_eq!(split_host_port("alice.ns.sandbox.localhost:8443")?, ("alice.ns.sandbox.localhost", Some(8443)));
/// assert_eq!(split_host_port("alice.ns.sandbox.localhost")?, ("alice.ns.sandbox.localhost", None));
/// # Ok::<(), rouse_shared::names::HostnameError>(())
/// ```
pub fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), HostnameError> {
    if authority.is_empty() {
        return Err(HostnameError::Empty);
    }
    if authority.starts_with('[') {
        return Err(HostnameError::NotASandboxHost {
            host: clip(authority),
            reason: "IPv6 address literals do not name a sandbox",
        });
    }
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Ok((authority, None));
    };
    if host.contains(':') {
        return Err(HostnameError::NotASandboxHost {
            host: clip(authority),
            reason: "more than one ':' (an IPv6 address must be in brackets, and names no sandbox)",
        });
    }
    if host.is_empty() {
        return Err(HostnameError::Empty);
    }
    let port = parse_port(port).map_err(|reason| HostnameError::InvalidPort {
        host: clip(authority),
        port: clip(port),
        reason,
    })?;
    Ok((host, Some(port)))
}

/// Splits a `<digits>-<rest>` first label into port and sandbox name; other labels have no port.
fn split_port_prefix<'l>(
    label: &'l str,
    host: &str,
) -> Result<(Option<u16>, &'l str), HostnameError> {
    let Some((port, name)) = port_prefix(label) else {
        return Ok((None, label));
    };
    let port = parse_port(port).map_err(|reason| HostnameError::InvalidPort {
        host: clip(host),
        port: clip(port),
        reason,
    })?;
    // The whole label passed `check_label`, so only a '-' right after the prefix can be wrong.
    if check_label(name).is_err() {
        return Err(HostnameError::InvalidLabel {
            host: clip(host),
            label: clip(label),
            reason: "the sandbox name after a port prefix must start with a letter or digit",
        });
    }
    Ok((Some(port), name))
}

/// Splits a `<digits>-<rest>` label into digits and rest; `None` for labels of other forms.
pub(crate) fn port_prefix(label: &str) -> Option<(&str, &str)> {
    let (digits, rest) = label.split_once('-')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((digits, rest))
}

/// Parses a decimal port in 1..=65535 without sign or leading zero.
fn parse_port(text: &str) -> Result<u16, &'static str> {
    if text.is_empty() {
        return Err("must not be empty");
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("must be a decimal number");
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err("must not have a leading zero");
    }
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err("must be between 1 and 65535"),
    }
}

/// Checks one host label: 1..=63 ASCII letters, digits or '-', not starting or ending with '-'.
fn check_label(label: &str) -> Result<(), &'static str> {
    let bytes = label.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err("must not be empty (check for a leading dot, '..' or a second trailing dot)");
    };
    if bytes.len() > MAX_LABEL_LEN {
        return Err("must be no more than 63 characters");
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
    {
        return Err("must consist of letters, digits or '-'");
    }
    if first == b'-' || last == b'-' {
        return Err("must start and end with a letter or digit");
    }
    Ok(())
}

/// Validates and normalises one configured domain.
fn normalise_domain(raw: &str) -> Result<String, HostnameError> {
    let invalid = |reason: String| HostnameError::InvalidDomain {
        domain: clip(raw),
        reason,
    };
    let domain = raw.strip_suffix('.').unwrap_or(raw);
    if domain.is_empty() {
        return Err(invalid("must not be empty".to_owned()));
    }
    if !domain.is_ascii() {
        return Err(invalid(
            "must be ASCII (use the punycode xn-- form)".to_owned(),
        ));
    }
    if domain.len() > MAX_HOST_LEN {
        return Err(invalid(format!(
            "must be no more than {MAX_HOST_LEN} characters"
        )));
    }
    for label in domain.split('.') {
        check_label(label)
            .map_err(|reason| invalid(format!("label {:?} {reason}", clip(label))))?;
    }
    Ok(domain.to_ascii_lowercase())
}

/// Number of labels in a dotted name.
fn label_count(name: &str) -> usize {
    name.bytes().filter(|&b| b == b'.').count() + 1
}

/// Copies at most [`MAX_QUOTED_CHARS`] characters of `s`, marking a cut with '…'.
fn clip(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", s.get(..end).unwrap_or(s)),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests;
