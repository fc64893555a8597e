//! How a Sandbox object maps to a [`RouteState`]: a pure function of the object, table-tested.

use rouse_shared::api::keys::{condition, reason};
use rouse_shared::api::{OperatingMode, Sandbox};

use super::contract::{Endpoint, PortMapping, RouteState};

/// The route state a Sandbox object calls for.
///
/// - being deleted → `Missing`;
/// - `spec.operatingMode: Suspended` → `Suspended` (wake-on-connect from `spec.suspension`,
///   with `metadata.generation` and `uid` so each suspension is told apart);
/// - `Ready=True` with an endpoint → `Running`;
/// - `Ready=False` because the pod finished, failed or the sandbox expired → `Failed`;
/// - anything else → `Starting`, with the endpoint if one is known.
///
/// The endpoint is `status.endpoint`, or else the first pod IP with the container ports the
/// pod template declares.
pub fn route_state(sandbox: &Sandbox) -> RouteState {
    if sandbox.metadata.deletion_timestamp.is_some() {
        return RouteState::Missing;
    }
    if sandbox.spec.effective_operating_mode() == OperatingMode::Suspended {
        let wake_on_connect = sandbox
            .spec
            .suspension
            .as_ref()
            .is_none_or(|s| s.wake_on_connect);
        let generation = sandbox
            .metadata
            .generation
            .and_then(|g| u64::try_from(g).ok())
            .unwrap_or(0);
        return RouteState::Suspended {
            wake_on_connect,
            generation,
            uid: sandbox.metadata.uid.clone().unwrap_or_default(),
        };
    }
    let status = sandbox.status.as_ref();
    let ready = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY));
    let endpoint = endpoint(sandbox);
    match ready {
        Some(c) if c.status == "True" => match endpoint {
            Some(endpoint) => RouteState::Running { endpoint },
            None => RouteState::Starting { endpoint: None },
        },
        Some(c)
            if c.status == "False"
                && [
                    reason::POD_FAILED,
                    reason::POD_SUCCEEDED,
                    reason::SANDBOX_EXPIRED,
                ]
                .contains(&c.reason.as_str()) =>
        {
            let reason = if c.message.is_empty() {
                c.reason.clone()
            } else {
                format!("{}: {}", c.reason, c.message)
            };
            RouteState::Failed { reason }
        }
        _ => RouteState::Starting { endpoint },
    }
}

/// The endpoint a sandbox status's `endpoint` names (`None` without an address).
pub fn status_endpoint(ep: &rouse_shared::api::Endpoint) -> Option<Endpoint> {
    if ep.address.is_empty() {
        return None;
    }
    let ports = ep
        .ports
        .iter()
        .filter_map(|p| {
            Some(PortMapping {
                container_port: u16::try_from(p.container_port).ok()?,
                port: u16::try_from(p.port).ok()?,
            })
        })
        .filter(|p| p.container_port != 0 && p.port != 0)
        .collect();
    Some(Endpoint {
        address: ep.address.clone(),
        ports,
    })
}

/// Where to dial the sandbox, if known.
fn endpoint(sandbox: &Sandbox) -> Option<Endpoint> {
    let status = sandbox.status.as_ref()?;
    if let Some(ep) = &status.endpoint {
        return status_endpoint(ep);
    }
    let address = status.pod_ips.first()?.clone();
    let ports = sandbox
        .spec
        .pod_template
        .spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .filter(|&p| p != 0)
        .map(|port| PortMapping {
            container_port: port,
            port,
        })
        .collect();
    Some(Endpoint { address, ports })
}

#[cfg(test)]
mod tests;
