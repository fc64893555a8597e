//! The error of hostname parsing and of the sandbox-domain configuration.
//!
//! Kept apart from the parser so that each file stays short; every variant quotes the offending
//! input (already cut short by the parser) so the message alone says what to fix.

use super::super::NameError;

/// Why a host does not address a sandbox, or why the domain configuration is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    /// The host is empty.
    #[error("host is empty")]
    Empty,
    /// The host is longer than 253 characters.
    #[error("host {host:?} is {len} characters long; a host name has at most 253")]
    TooLong {
        /// The host, cut short.
        host: String,
        /// Its length without a trailing dot.
        len: usize,
    },
    /// The host holds a non-ASCII character.
    #[error(
        "host {host:?} contains the non-ASCII character '{}' at position {position}; \
         use the punycode (xn--) form of the name", .found.escape_debug()
    )]
    NonAscii {
        /// The host, cut short.
        host: String,
        /// The first non-ASCII character.
        found: char,
        /// Its position, counted in characters from 0.
        position: usize,
    },
    /// A label of the host is not a DNS label.
    #[error("host {host:?} has an invalid label {label:?}: {reason}")]
    InvalidLabel {
        /// The host, cut short.
        host: String,
        /// The offending label, cut short.
        label: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The host is under none of the configured domains.
    #[error("host {host:?} is not under a configured sandbox domain")]
    UnknownDomain {
        /// The host, cut short.
        host: String,
    },
    /// The host is a configured domain itself.
    #[error(
        "host {host:?} is a sandbox domain itself; address a sandbox as name.namespace.{domain}"
    )]
    HostIsDomain {
        /// The host, cut short.
        host: String,
        /// The domain it equals.
        domain: String,
    },
    /// More than two labels come before the domain.
    #[error(
        "host {host:?} has {found} labels before the domain {domain:?}; \
         expected [port-]name.namespace or [port-]name"
    )]
    TooManyLabels {
        /// The host, cut short.
        host: String,
        /// The matched domain.
        domain: String,
        /// How many labels precede the domain.
        found: usize,
    },
    /// The host names no namespace and no default namespace is configured.
    #[error(
        "host {host:?} names no namespace and no default namespace is configured; \
         use name.namespace.{domain}"
    )]
    NoDefaultNamespace {
        /// The host, cut short.
        host: String,
        /// The matched domain.
        domain: String,
    },
    /// A port (prefix or `:port`) is not a port number.
    #[error("host {host:?} has an invalid port {port:?}: {reason}")]
    InvalidPort {
        /// The host or authority, cut short.
        host: String,
        /// The port text, cut short.
        port: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The authority is not a host name that could address a sandbox (e.g. an IPv6 literal).
    #[error("{host:?} is not a sandbox host: {reason}")]
    NotASandboxHost {
        /// The authority, cut short.
        host: String,
        /// Why it is not one.
        reason: &'static str,
    },
    /// No sandbox domain was configured.
    #[error("no sandbox domain is configured")]
    NoDomains,
    /// A configured sandbox domain is not a valid domain name.
    #[error("sandbox domain {domain:?} is invalid: {reason}")]
    InvalidDomain {
        /// The domain, cut short.
        domain: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configured default namespace is not a DNS-1123 label.
    #[error("default namespace {namespace:?} is invalid: {source}")]
    InvalidDefaultNamespace {
        /// The namespace, cut short.
        namespace: String,
        /// What is wrong with it.
        source: NameError,
    },
}

impl HostnameError {
    /// A fixed, short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            HostnameError::Empty => "empty",
            HostnameError::TooLong { .. } => "too_long",
            HostnameError::NonAscii { .. } => "non_ascii",
            HostnameError::InvalidLabel { .. } => "invalid_label",
            HostnameError::UnknownDomain { .. } => "unknown_domain",
            HostnameError::HostIsDomain { .. } => "host_is_domain",
            HostnameError::TooManyLabels { .. } => "too_many_labels",
            HostnameError::NoDefaultNamespace { .. } => "no_default_namespace",
            HostnameError::InvalidPort { .. } => "invalid_port",
            HostnameError::NotASandboxHost { .. } => "not_a_sandbox_host",
            HostnameError::NoDomains
            | HostnameError::InvalidDomain { .. }
            | HostnameError::InvalidDefaultNamespace { .. } => "invalid_config",
        }
    }
}
