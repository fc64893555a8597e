//! The environment and command line a workload gets: the container's `env`, `PORT`,
//! `ROUSE_PORT_<containerPort>` and `ROUSE_VOLUME_<NAME>`, with Kubernetes `$(VAR)`
//! references expanded.

use std::collections::HashMap;

use super::layout::env_suffix;
use super::ports::PortMap;
use super::spec::{LaunchSpec, expand};

/// Host variables a process-runtime workload inherits; everything else of the controller's
/// environment stays out of it.
const INHERITED: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// `PATH` inside a gvisor sandbox.
pub(crate) const SANDBOX_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The final environment and argv of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Variables in the order they were defined (later ones win on duplicate names).
    pub env: Vec<(String, String)>,
    /// The command line with references expanded.
    pub argv: Vec<String>,
}

/// Builds the environment: `base`, then the container's `env` (each value may refer to any
/// variable defined before it), then Rouse's variables, which win so the workload listens
/// where the route points. `volumes` are `(name, path seen by the workload)`.
pub fn resolve(
    spec: &LaunchSpec,
    base: Vec<(String, String)>,
    ports: &PortMap,
    volumes: &[(String, String)],
) -> Resolved {
    let mut env: Vec<(String, String)> = base;
    let rouse = rouse_vars(ports, volumes);
    for (name, value) in &spec.env {
        let value = {
            let known = as_map(&env, &rouse);
            expand(value, |n| known.get(n).cloned())
        };
        env.push((name.clone(), value));
    }
    env.extend(rouse);
    let known = as_map(&env, &[]);
    let argv = spec
        .argv
        .iter()
        .map(|a| expand(a, |n| known.get(n).cloned()))
        .collect();
    Resolved {
        env: dedup(env),
        argv,
    }
}

/// The host variables a process-runtime workload inherits.
pub fn inherited_host_env() -> Vec<(String, String)> {
    INHERITED
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)))
        .collect()
}

fn rouse_vars(ports: &PortMap, volumes: &[(String, String)]) -> Vec<(String, String)> {
    let mut vars = vec![("PORT".to_owned(), ports.default_port.to_string())];
    for (container_port, host_port) in &ports.mapped {
        vars.push((
            format!("ROUSE_PORT_{container_port}"),
            host_port.to_string(),
        ));
    }
    for (name, path) in volumes {
        vars.push((format!("ROUSE_VOLUME_{}", env_suffix(name)), path.clone()));
    }
    vars
}

fn as_map(first: &[(String, String)], then: &[(String, String)]) -> HashMap<String, String> {
    first.iter().chain(then).cloned().collect()
}

/// Keeps the last definition of each name, at the position of its first.
fn dedup(env: Vec<(String, String)>) -> Vec<(String, String)> {
    let last: HashMap<&str, &str> = env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let mut seen = std::collections::HashSet::new();
    env.iter()
        .filter(|(n, _)| seen.insert(n.clone()))
        .map(|(n, _)| {
            (
                n.clone(),
                last.get(n.as_str()).copied().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
