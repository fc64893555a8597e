//! A network namespace per gVisor sandbox, joined to the host by a veth pair with an
//! on-machine /30: the host side gets `.1`, the sandbox `.2`.
//!
//! Why: a gVisor sandbox runs with `--network=sandbox` (gVisor's own network stack, which
//! runsc refuses in the host's namespace and which `runsc checkpoint` can save) inside a
//! namespace of its own; it listens on its declared container ports, as in a pod, and the
//! proxy dials its `.2` address. The /30 of each sandbox is
//! numbered by a small index kept in a file under the data directory, so a restore after a
//! restart of `rouse up` finds the same namespace and address (the checkpointed network stack
//! keeps its address).
//!
//! Everything runs through `ip` (iproute2); names are derived from the index so they fit the
//! 15-byte interface name limit.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use rouse_shared::store::ObjectKey;

use super::error::{Error, Result};
use super::layout::{Layout, ensure_dir};

/// The block the /30s are carved from: `10.234.0.0/16` (16384 sandboxes). Private, rarely
/// used by other tools, and never routed off the machine (no forwarding is set up).
pub const SUBNET_BASE: Ipv4Addr = Ipv4Addr::new(10, 234, 0, 0);
/// How many /30s fit in the block.
const MAX_INDEX: u32 = 1 << 14;

/// One sandbox's namespace and veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    /// The index of its /30 in [`SUBNET_BASE`].
    pub index: u32,
}

impl Netns {
    /// The namespace's name under `/run/netns`.
    pub fn name(&self) -> String {
        format!("rouse-{}", self.index)
    }

    /// The namespace's path, for `nsenter --net=` and the OCI spec.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(self.name())
    }

    /// The host end of the veth pair.
    fn host_if(&self) -> String {
        format!("rvh{}", self.index)
    }

    /// The sandbox end of the veth pair (inside the namespace).
    fn sandbox_if(&self) -> String {
        format!("rvs{}", self.index)
    }

    /// The host's address on the /30.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(SUBNET_BASE) + self.index * 4 + 1)
    }

    /// The sandbox's address on the /30: where the proxy dials it.
    pub fn sandbox_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(SUBNET_BASE) + self.index * 4 + 2)
    }

    /// The index file of a sandbox: `{data}/run/netns/{namespace}/{sandbox}`.
    fn index_file(layout: &Layout, key: &ObjectKey) -> PathBuf {
        netns_dir(layout).join(&key.namespace).join(&key.name)
    }

    /// The sandbox's namespace as recorded, if it has one.
    pub fn recorded(layout: &Layout, key: &ObjectKey) -> Option<Self> {
        let text = std::fs::read_to_string(Self::index_file(layout, key)).ok()?;
        let index = text.trim().parse().ok()?;
        Some(Self { index })
    }

    /// The sandbox's namespace, recorded or a new index, set up and ready: the namespace, the
    /// veth pair, and both addresses. Idempotent: what exists is kept. runsc moves the
    /// sandbox's address into gVisor's network stack, so every start and restore calls this to
    /// put it back on the interface first.
    pub fn ensure(layout: &Layout, key: &ObjectKey) -> Result<Self> {
        let netns = match Self::recorded(layout, key) {
            Some(netns) => netns,
            None => {
                let netns = claim_index(layout)?;
                let file = Self::index_file(layout, key);
                if let Some(parent) = file.parent() {
                    ensure_dir(parent)?;
                }
                std::fs::write(&file, netns.index.to_string())
                    .map_err(|e| Error::data_dir(&file, e))?;
                netns
            }
        };
        netns.setup()?;
        Ok(netns)
    }

    fn setup(&self) -> Result<()> {
        let name = self.name();
        if !self.path().exists() {
            ip(&["netns", "add", &name])?;
        }
        let (host, sandbox) = (self.host_if(), self.sandbox_if());
        if !Path::new("/sys/class/net").join(&host).exists() {
            ip(&[
                "link", "add", &host, "type", "veth", "peer", "name", &sandbox, "netns", &name,
            ])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/30", self.host_ip()),
                "dev",
                &host,
            ])?;
            ip(&["link", "set", &host, "up"])?;
        }
        // One `ip` for everything inside (every start and restore runs this, on a wake's
        // path): `addr replace` is idempotent, so nothing needs reading first.
        let batch = format!(
            "link set lo up\nlink set {sandbox} up\naddr replace {}/30 dev {sandbox}\n",
            self.sandbox_ip()
        );
        ip_batch(&name, &batch)
    }

    /// Deletes the namespace (which deletes the veth pair) and the index file.
    pub fn remove(layout: &Layout, key: &ObjectKey) {
        let Some(netns) = Self::recorded(layout, key) else {
            return;
        };
        if netns.path().exists()
            && let Err(error) = ip(&["netns", "delete", &netns.name()])
        {
            tracing::warn!(sandbox.key = %key, %error, "deleting a network namespace failed");
        }
        let _ = std::fs::remove_file(Self::index_file(layout, key));
    }
}

impl Netns {
    /// Every sandbox of this data directory with a recorded namespace.
    pub fn recorded_keys(layout: &Layout) -> Vec<ObjectKey> {
        let mut keys = Vec::new();
        for ns in std::fs::read_dir(netns_dir(layout))
            .into_iter()
            .flatten()
            .flatten()
        {
            let Some(namespace) = ns.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            for file in std::fs::read_dir(ns.path()).into_iter().flatten().flatten() {
                if let Some(name) = file.file_name().to_str() {
                    keys.push(ObjectKey::new(namespace.clone(), name.to_owned()));
                }
            }
        }
        keys
    }
}

/// `{data}/run/netns`: the index files.
fn netns_dir(layout: &Layout) -> PathBuf {
    layout.data().join("run").join("netns")
}

/// Claims the lowest index no sandbox of this data directory records, by creating its
/// namespace: `ip netns add` fails when the name exists, so two data directories on one
/// machine (or two sandboxes at once) never share one.
fn claim_index(layout: &Layout) -> Result<Netns> {
    let mut used = std::collections::HashSet::new();
    if let Ok(namespaces) = std::fs::read_dir(netns_dir(layout)) {
        for ns in namespaces.flatten() {
            for file in std::fs::read_dir(ns.path()).into_iter().flatten().flatten() {
                if let Some(i) = std::fs::read_to_string(file.path())
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
                {
                    used.insert(i);
                }
            }
        }
    }
    for index in (0..MAX_INDEX).filter(|i| !used.contains(i)) {
        let netns = Netns { index };
        if netns.path().exists() || Path::new("/sys/class/net").join(netns.host_if()).exists() {
            continue;
        }
        if ip(&["netns", "add", &netns.name()]).is_ok() {
            return Ok(netns);
        }
    }
    Err(Error::Network(
        "every network namespace slot of 10.234.0.0/16 is taken".to_owned(),
    ))
}

fn ip(args: &[&str]) -> Result<()> {
    ip_output(args).map(|_| ())
}

/// Runs `commands` (one per line) with `ip -n NAMESPACE -batch -`.
fn ip_batch(namespace: &str, commands: &str) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-n", namespace, "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::Network(format!("running `ip -n {namespace} -batch -`: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(commands.as_bytes())
            .map_err(|e| Error::Network(format!("writing to `ip -batch`: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Network(format!("waiting for `ip -batch`: {e}")))?;
    if !out.status.success() {
        return Err(Error::Network(format!(
            "`ip -n {namespace} -batch` ({}) failed: {}",
            commands.trim().replace('\n', "; "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn ip_output(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Network(format!("running `ip {}`: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(Error::Network(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::{Netns, SUBNET_BASE};

    #[test]
    fn each_index_is_its_own_slash_30() {
        let first = Netns { index: 0 };
        assert_eq!(first.host_ip().to_string(), "10.234.0.1");
        assert_eq!(first.sandbox_ip().to_string(), "10.234.0.2");
        let later = Netns { index: 70 };
        assert_eq!(later.host_ip().to_string(), "10.234.1.25");
        assert_eq!(later.sandbox_ip().to_string(), "10.234.1.26");
        assert_eq!(later.name(), "rouse-70");
        // Interface names fit the kernel's 15 bytes up to the last index.
        let last = Netns {
            index: super::MAX_INDEX - 1,
        };
        assert!(last.host_if().len() <= 15 && last.sandbox_if().len() <= 15);
        assert_eq!(last.sandbox_ip().octets()[..2], SUBNET_BASE.octets()[..2]);
    }
}
