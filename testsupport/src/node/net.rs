//! The real node's network: a network namespace of the run's own, joined to the host by a
//! veth pair with a /30 of `10.235.0.0/16` (the host side `.1`, the node `.2`). Everything of
//! the node lives inside: the control plane, the kubelet, containerd, the pod bridge
//! (`10.88.0.0/16`), the Service range (`10.96.0.0/16`) and kube-proxy's iptables rules, so
//! no test traffic leaves addresses the run made, and deleting the namespace takes them all.
//!
//! Tests on the host reach the node at its `.2` address: the API server on 6443 and NodePort
//! Services.

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The block the node links are carved from.
const BLOCK: Ipv4Addr = Ipv4Addr::new(10, 235, 0, 0);
/// /30s in the block.
const SLOTS: u32 = 1 << 14;

/// One node's namespace and veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNet {
    /// The run's id (names derive from it).
    pub id: String,
    /// The /30's index in the block.
    pub slot: u32,
}

impl NodeNet {
    /// The namespace's name under `/run/netns`.
    pub fn netns(&self) -> String {
        format!("rouse-node-{}", self.id)
    }

    /// The namespace's path, for `nsenter --net=`.
    pub fn netns_path(&self) -> String {
        format!("/run/netns/{}", self.netns())
    }

    /// The host end of the veth pair (15 bytes at most).
    pub fn host_if(&self) -> String {
        format!("rnh{}", self.id)
    }

    /// The node end, inside the namespace.
    pub fn node_if(&self) -> String {
        format!("rnn{}", self.id)
    }

    /// The host's address on the /30.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(BLOCK) + self.slot * 4 + 1)
    }

    /// The node's address: the API server, the kubelet and NodePorts answer here.
    pub fn node_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(BLOCK) + self.slot * 4 + 2)
    }

    /// Makes the namespace and the link for run `id`, on a /30 no other run uses; turns on
    /// forwarding and bridge netfilter inside (pods and kube-proxy need both).
    pub fn create(id: &str) -> Result<Self> {
        let taken = ip_output(&["-4", "-o", "addr", "show"])?;
        let start = u32::from_str_radix(id.get(..4).unwrap_or("0"), 16).unwrap_or(0) % SLOTS;
        let slot = (0..SLOTS)
            .map(|i| (start + i) % SLOTS)
            .find(|slot| {
                let probe = Self {
                    id: id.to_owned(),
                    slot: *slot,
                };
                !taken.contains(&format!(" {}/", probe.host_ip()))
            })
            .context("every /30 of 10.235.0.0/16 is in use")?;
        let net = Self {
            id: id.to_owned(),
            slot,
        };
        let ns = net.netns();
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link",
            "add",
            &net.host_if(),
            "type",
            "veth",
            "peer",
            "name",
            &net.node_if(),
            "netns",
            &ns,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/30", net.host_ip()),
            "dev",
            &net.host_if(),
        ])?;
        ip(&["link", "set", &net.host_if(), "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/30", net.node_ip()),
            "dev",
            &net.node_if(),
        ])?;
        ip(&["-n", &ns, "link", "set", &net.node_if(), "up"])?;
        // The node's own processes reach ClusterIPs too: the route gets them to kube-proxy's
        // OUTPUT rules (pods reach them through the bridge anyway).
        ip(&[
            "-n",
            &ns,
            "route",
            "add",
            super::files::SERVICE_CIDR,
            "dev",
            &net.node_if(),
        ])?;
        // Bridge netfilter is a module; its sysctls exist per namespace once it is loaded.
        let _ = Command::new("modprobe").arg("br_netfilter").status();
        net.sysctl("net.ipv4.ip_forward", "1")?;
        net.sysctl("net.bridge.bridge-nf-call-iptables", "1")?;
        Ok(net)
    }

    /// Sets a sysctl inside the namespace (network sysctls are per namespace).
    fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let status = Command::new("nsenter")
            .arg(format!("--net={}", self.netns_path()))
            .args(["sh", "-c", "echo \"$1\" > \"$2\"", "sh", value, &path])
            .status()
            .context("run nsenter")?;
        if !status.success() {
            bail!("setting {key}={value} in {} failed", self.netns());
        }
        Ok(())
    }
}

fn ip(args: &[&str]) -> Result<()> {
    ip_output(args).map(|_| ())
}

fn ip_output(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .with_context(|| format!("run `ip {}` (iproute2)", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::NodeNet;

    #[test]
    fn names_fit_and_addresses_pair_up() {
        let net = NodeNet {
            id: "a1b2c3".to_owned(),
            slot: 70,
        };
        assert!(net.host_if().len() <= 15 && net.node_if().len() <= 15);
        assert_eq!(net.host_ip().to_string(), "10.235.1.25");
        assert_eq!(net.node_ip().to_string(), "10.235.1.26");
        assert_eq!(net.netns_path(), "/run/netns/rouse-node-a1b2c3");
    }
}
