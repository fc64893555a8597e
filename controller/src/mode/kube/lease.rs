//! Leader election on a `coordination.k8s.io/v1` Lease: one replica reconciles, the others
//! stand by and take over when the holder stops renewing.
//!
//! Expiry is judged the way client-go does it: by how long *this* replica has seen the same
//! lease record unchanged, on its own monotonic clock, never by comparing the holder's
//! `renewTime` with the local wall clock (clocks of two nodes may disagree).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

/// Where the lease lives and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Name of the Lease object.
    pub name: String,
    /// Namespace of the Lease object.
    pub namespace: String,
    /// This replica's identity (pod name), written as `holderIdentity`.
    pub identity: String,
    /// How long a lease stays valid without renewal (`leaseDurationSeconds`).
    pub duration: Duration,
    /// How often the holder renews and a standby retries.
    pub retry_period: Duration,
}

/// Why a lease call failed.
#[derive(Debug, thiserror::Error)]
#[error("lease {namespace}/{name}: {source}")]
pub struct LeaseError {
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// Acquires, renews and releases one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last lease record seen from another holder, and when it was first seen.
    observed: Option<(String, Instant)>,
}

impl LeaderElector {
    /// An elector for `config`; nothing is written until [`LeaderElector::try_acquire`].
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// Acquires or renews the lease; `Ok(true)` when this replica holds it afterwards.
    pub async fn try_acquire(&mut self) -> Result<bool, LeaseError> {
        let now = Timestamp::now();
        let duration_secs =
            i32::try_from(self.config.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error(e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_duration_seconds: Some(duration_secs),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return self.write(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder != self.config.identity && !holder.is_empty() {
            // Someone else's: take over only once it went unrenewed for a whole duration.
            let record = format!(
                "{holder}/{:?}/{:?}",
                spec.renew_time.as_ref().map(|t| t.0),
                lease.metadata.resource_version
            );
            let held_for = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0)))
                .unwrap_or(self.config.duration);
            match &self.observed {
                Some((seen, since)) if *seen == record => {
                    if since.elapsed() < held_for {
                        return Ok(false);
                    }
                }
                _ => {
                    self.observed = Some((record, Instant::now()));
                    return Ok(false);
                }
            }
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.acquire_time = Some(MicroTime(now));
        } else if holder.is_empty() {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.acquire_time = Some(MicroTime(now));
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(duration_secs);
        // The resourceVersion in `lease` makes this a compare-and-swap: a concurrent taker
        // gets 409 and stays standby.
        let result = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await;
        self.write(result)
    }

    /// Gives the lease up (empty holder) so a standby takes over at once; best effort.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error(e))?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = None;
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn write(&mut self, result: kube::Result<Lease>) -> Result<bool, LeaseError> {
        match result {
            Ok(_) => {
                self.observed = None;
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_already_exists() => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }

    fn error(&self, source: kube::Error) -> LeaseError {
        LeaseError {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }
}
