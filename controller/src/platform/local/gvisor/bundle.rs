//! The OCI bundle (`config.json`) of a gVisor sandbox: the process, the root filesystem, the
//! mounts and the namespaces, the network one being the sandbox's own.

use std::path::Path;

use serde_json::{Value, json};

/// The bundle's `config.json` for one sandbox.
pub(super) fn config(
    argv: &[String],
    env: &[(String, String)],
    cwd: &str,
    root: &Path,
    hostname: &str,
    mounts: Vec<Value>,
    netns: &Path,
) -> Value {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    // gVisor's own network stack (`--network=sandbox`) takes over the veth of the sandbox's
    // namespace: the workload listens on its container ports at the namespace's address.
    let namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
        json!({"type": "network", "path": netns}),
    ];
    json!({
        "ociVersion": "1.0.0",
        "process": {
            "terminal": false,
            "user": {
                "uid": nix::unistd::geteuid().as_raw(),
                "gid": nix::unistd::getegid().as_raw(),
            },
            "args": argv,
            "env": env,
            "cwd": cwd,
        },
        "root": {"path": root, "readonly": false},
        "hostname": hostname,
        "mounts": mounts,
        "linux": {"namespaces": namespaces},
    })
}
