//! Names and hostnames: the Kubernetes rules for object names, label and annotation keys and
//! values; how a hostname addresses a sandbox; and the sandbox-name-hash label value.
//!
//! These live together because the API layer, the controller and the proxy must agree on them
//! exactly: hostnames are built from names the API accepted, and the label value the
//! controller writes must match what upstream `agents.x-k8s.io` tooling selects on.

mod dns;
mod hash;
mod hostname;

pub use dns::{
    DNS1123_LABEL_MAX_LEN, DNS1123_SUBDOMAIN_MAX_LEN, NameError, NamePart, QUALIFIED_NAME_MAX_LEN,
    validate_annotation_key, validate_dns1035_label, validate_dns1123_label,
    validate_dns1123_subdomain, validate_label_key, validate_label_value,
};
pub use hash::{fnv1a_32, sandbox_name_hash};
pub(crate) use hostname::port_prefix;
pub use hostname::{
    HostnameError, MAX_HOST_LEN, MAX_LABEL_LEN, MAX_QUOTED_CHARS, SandboxDomains, SandboxHost,
    split_host_port,
};
