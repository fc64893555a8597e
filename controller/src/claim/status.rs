//! A claim's status: its sandbox's name and IPs with the sandbox's `Ready` and `Finished`
//! conditions forwarded (one write, so a client waiting on one watch sees both together),
//! or `Ready=False` with the reason the claim is not served.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{Resource, ResourceExt};
use rouse_shared::api::keys::condition;
use rouse_shared::api::{ClaimedSandbox, Sandbox, SandboxClaim, SandboxClaimStatus};

/// `True`.
pub(crate) const TRUE: &str = "True";
const FALSE: &str = "False";

/// Claim condition reasons, upstream's values.
pub mod reason {
    /// `Ready=False`: the claim's SandboxWarmPool does not exist.
    pub const WARM_POOL_NOT_FOUND: &str = "WarmPoolNotFound";
    /// `Ready=False`: the pool's SandboxTemplate does not exist.
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    /// `Ready=False`: a warm sandbox is being adopted.
    pub const ADOPTION_PENDING: &str = "AdoptionPending";
    /// `Ready=False`: the sandbox exists but reports no `Ready` condition yet.
    pub const SANDBOX_NOT_READY: &str = "SandboxNotReady";
    /// `Ready=False`: the sandbox the claim was bound to is gone.
    pub const SANDBOX_MISSING: &str = "SandboxMissing";
    /// `Ready=False` and `ClaimExpired=True`: the claim passed its expiry.
    pub const CLAIM_EXPIRED: &str = "ClaimExpired";
    /// `Ready=False`: the sandbox passed its own `shutdownTime`.
    pub const SANDBOX_EXPIRED: &str = "SandboxExpired";
    /// `Ready=False`: a write failed; the message says which.
    pub const RECONCILER_ERROR: &str = "ReconcilerError";
}

fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Puts `new` into `conditions`, keeping the previous transition time when the status did
/// not change.
fn set(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
}

fn condition(
    claim: &SandboxClaim,
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation: claim.meta().generation,
        last_transition_time: Time(now),
    }
}

/// The `Finished` condition the claim should carry: its sandbox's, else the one it has.
pub(crate) fn finished(claim: &SandboxClaim, sandbox: Option<&Sandbox>) -> Option<Condition> {
    match sandbox {
        Some(s) => s
            .status
            .as_ref()
            .and_then(|st| find(&st.conditions, condition::FINISHED))
            .cloned(),
        None => claim
            .status
            .as_ref()
            .and_then(|st| find(&st.conditions, condition::FINISHED))
            .cloned(),
    }
}

/// The status of a claim bound to `sandbox`: its name, IPs and Service FQDN, its `Ready` forwarded (or
/// `SandboxNotReady` while it has none) and its `Finished`.
pub(crate) fn bound(claim: &SandboxClaim, sandbox: &Sandbox, now: Timestamp) -> SandboxClaimStatus {
    let mut status = claim.status.clone().unwrap_or_default();
    let sandbox_status = sandbox.status.clone().unwrap_or_default();
    let ready = match find(&sandbox_status.conditions, condition::READY) {
        Some(c) => Condition {
            observed_generation: claim.meta().generation,
            ..c.clone()
        },
        None => condition(
            claim,
            condition::READY,
            FALSE,
            reason::SANDBOX_NOT_READY,
            "Sandbox is not ready",
            now,
        ),
    };
    set(&mut status.conditions, ready);
    match find(&sandbox_status.conditions, condition::FINISHED) {
        Some(f) => set(&mut status.conditions, f.clone()),
        None => status.conditions.retain(|c| c.type_ != condition::FINISHED),
    }
    status
        .conditions
        .retain(|c| c.type_ != condition::CLAIM_EXPIRED);
    status.sandbox = Some(ClaimedSandbox {
        name: sandbox.name_any(),
        pod_ips: sandbox_status.pod_ips,
        service_fqdn: sandbox_status.service_fqdn,
    });
    status
}

/// The status of a claim that is not served: `Ready=False` with `reason`; the bound
/// sandbox, if any, stays named.
pub(crate) fn failed(
    claim: &SandboxClaim,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> SandboxClaimStatus {
    let mut status = claim.status.clone().unwrap_or_default();
    set(
        &mut status.conditions,
        condition(claim, condition::READY, FALSE, reason, message, now),
    );
    status
}

/// The status of an expired claim: `Ready=False/ClaimExpired`, `ClaimExpired=True`, the
/// sandbox named while it still exists.
pub(crate) fn expired(
    claim: &SandboxClaim,
    sandbox: Option<&Sandbox>,
    now: Timestamp,
) -> SandboxClaimStatus {
    let mut status = failed(
        claim,
        reason::CLAIM_EXPIRED,
        "Claim expired. Sandbox cleanup initiated.",
        now,
    );
    set(
        &mut status.conditions,
        condition(
            claim,
            condition::CLAIM_EXPIRED,
            TRUE,
            reason::CLAIM_EXPIRED,
            "Claim expired",
            now,
        ),
    );
    if let Some(f) = finished(claim, sandbox) {
        set(&mut status.conditions, f);
    }
    status.sandbox = sandbox.map(|s| ClaimedSandbox {
        name: s.name_any(),
        pod_ips: s
            .status
            .as_ref()
            .map(|st| st.pod_ips.clone())
            .unwrap_or_default(),
        service_fqdn: s.status.as_ref().and_then(|st| st.service_fqdn.clone()),
    });
    status
}
