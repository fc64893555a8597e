//! The configuration files of a real node's parts, every path inside the run's directory so
//! that two runs never share state and a tear-down knows what is the run's.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The pod network inside the node's namespace.
pub const POD_CIDR: &str = "10.88.0.0/16";
/// The Service range; the API server's Service is `.1`, cluster DNS `.10`.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The cluster DNS Service address the kubelet gives pods.
pub const DNS_IP: &str = "10.96.0.10";
/// The sandbox (pause) image every pod starts with, imported before the kubelet starts.
pub const PAUSE_IMAGE: &str = "registry.local/pause:1";

/// Where a run keeps its files.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// `/var/tmp/rouse-node/<id>`.
    pub root: PathBuf,
}

impl RunDir {
    /// A path inside the run directory.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// containerd's socket.
    pub fn containerd_socket(&self) -> PathBuf {
        self.join("containerd/containerd.sock")
    }
}

/// containerd 1.6's config: the CRI plugin with a `runc` handler (the default) and a `runsc`
/// handler (RuntimeClass `gvisor`), pod network namespaces mounted under the run's state
/// directory, and oom_score_adj never lowered (these hosts lack `CAP_SYS_RESOURCE`; runc
/// fails with `can't get final child's PID from pipe: EOF` otherwise).
pub fn containerd_toml(run: &RunDir) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{ttrpc}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "{runsc_toml}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
"#,
        root = run.join("containerd/root").display(),
        state = run.join("containerd/state").display(),
        socket = run.containerd_socket().display(),
        ttrpc = run.join("containerd/containerd.sock.ttrpc").display(),
        runsc_toml = run.join("etc/runsc.toml").display(),
        cni_conf = run.join("cni/conf").display(),
    )
}

/// The gVisor shim's options: the pinned runsc, its state under the run directory, gofers in
/// a new empty network namespace each (the default pins a shared one with a bind mount).
pub fn runsc_toml(run: &RunDir, runsc: &Path) -> String {
    format!(
        "binary_name = \"{}\"\nroot = \"{}\"\n[runsc_config]\n  gofer-network-namespace = \"new\"\n",
        runsc.display(),
        run.join("runsc").display()
    )
}

/// The bridge CNI: `cni0` in the node's namespace, host-local addresses of [`POD_CIDR`]
/// (allocations kept in the run directory).
pub fn cni_conflist(run: &RunDir) -> String {
    format!(
        r#"{{"cniVersion": "0.4.0", "name": "rouse-node", "plugins": [
  {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {{"type": "host-local", "dataDir": "{ipam}",
              "ranges": [[{{"subnet": "{POD_CIDR}"}}]], "routes": [{{"dst": "0.0.0.0/0"}}]}}}},
  {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
]}}
"#,
        ipam = run.join("cni/ipam").display()
    )
}

/// The kubelet: cgroupfs under the run's own cgroup root (these hosts are cgroup v1 without
/// systemd: `failCgroupV1: false`), webhook authentication and authorization, every directory
/// in the run directory, locally imported images never collected. Disk eviction at 256 MiB
/// left, not a percentage: the kubelet measures the blocks left to non-root users, and these
/// hosts reserve most free blocks for root (170 GB free, 1.3 GB "available" seen), so 1% of
/// the disk evicted every pod while the node's root processes had room.
pub fn kubelet_yaml(run: &RunDir, node_ip: Ipv4Addr, cgroup_root: &str, ca: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_root}
containerRuntimeEndpoint: unix://{socket}
failSwapOn: false
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
clusterDNS: [{DNS_IP}]
clusterDomain: cluster.local
resolvConf: {resolv}
serializeImagePulls: false
address: {node_ip}
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
podLogsDir: {logs}
volumePluginDir: {plugins}
evictionHard: {{memory.available: "100Mi", nodefs.available: "256Mi", imagefs.available: "256Mi", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
        socket = run.containerd_socket().display(),
        ca = ca.display(),
        resolv = run.join("etc/resolv.conf").display(),
        logs = run.join("pod-logs").display(),
        plugins = run.join("kubelet-plugins").display(),
    )
}

/// The resolv.conf pods get besides cluster DNS: nothing outside the node resolves.
pub fn resolv_conf() -> &'static str {
    "nameserver 127.0.0.1\noptions ndots:1\n"
}

/// A kubeconfig for a client certificate at `https://<node ip>:6443`.
pub fn kubeconfig(node_ip: Ipv4Addr, ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: rouse-node\n  cluster:\n    server: https://{node_ip}:6443\n    \
         certificate-authority: {ca}\ncontexts:\n- name: rouse-node\n  context:\n    cluster: rouse-node\n    \
         user: user\ncurrent-context: rouse-node\nusers:\n- name: user\n  user:\n    client-certificate: {cert}\n    \
         client-key: {key}\n",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_path_is_inside_the_run_directory() {
        let run = RunDir {
            root: PathBuf::from("/var/tmp/rouse-node/abc"),
        };
        let texts = [
            containerd_toml(&run),
            runsc_toml(&run, Path::new("/cache/runsc")),
            cni_conflist(&run),
            kubelet_yaml(
                &run,
                Ipv4Addr::new(10, 235, 0, 2),
                "rouse-node-abc",
                Path::new("/var/tmp/rouse-node/abc/pki/ca.crt"),
            ),
        ];
        for text in texts {
            for line in text.lines() {
                for word in line.split(['"', ' ', ':', ',', '{', '}']) {
                    // `unix:///path` splits into `unix` and `///path`.
                    let word = word.trim_start_matches("//");
                    if word.starts_with('/') && !word.starts_with("/cache/") {
                        assert!(
                            word.starts_with("/var/tmp/rouse-node/abc/")
                                || word == "/usr/lib/cni"
                                || word == "/rouse-node-abc",
                            "{word} in {line}"
                        );
                    }
                }
            }
        }
        let cni: serde_json::Value = serde_json::from_str(&cni_conflist(&run)).expect("JSON");
        assert_eq!(
            cni["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            POD_CIDR
        );
    }
}
