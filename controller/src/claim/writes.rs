//! Writing many claim adoptions at once: [`AdoptionWrites`], one after another through the
//! `Store` port by default, in one transaction and one fsync on the embedded store.

use std::future::Future;

use futures::future::join_all;
use rouse_shared::api::{Sandbox, SandboxClaim};
use rouse_shared::store::{KubeStore, ObjectKey, Patch, Store, StoreError};

use crate::store::{EmbeddedStore, WriteSequence};

/// One claim's adoption: three writes, each only if the one before it succeeded.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// The claim.
    pub claim: ObjectKey,
    /// Its annotations: the member it takes (and when it was first observed).
    pub annotate: Patch,
    /// The member.
    pub member: ObjectKey,
    /// The member's re-own, conditional on the version the claim saw.
    pub adopt: Patch,
    /// The claim's status naming the member, when it changes.
    pub status: Option<Patch>,
}

/// Which write of an [`Adoption`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptionStep {
    /// The claim's annotations.
    Annotate,
    /// The member's re-own.
    Adopt,
    /// The claim's status.
    Status,
}

impl AdoptionStep {
    /// The step name of [`ClaimError::Write`](super::ClaimError::Write).
    pub fn label(self) -> &'static str {
        match self {
            AdoptionStep::Annotate => "annotate",
            AdoptionStep::Adopt => "adopt",
            AdoptionStep::Status => "patch_status",
        }
    }
}

/// A store that writes many adoptions at once; by default one after another, each in order.
pub trait AdoptionWrites: Store<Sandbox> + Store<SandboxClaim> {
    /// Writes every adoption (its writes in order, stopping at the first that fails); one
    /// result per adoption.
    fn write_adoptions(
        &self,
        adoptions: Vec<Adoption>,
    ) -> impl Future<Output = Vec<Result<(), (AdoptionStep, StoreError)>>> + Send {
        async move { join_all(adoptions.iter().map(|a| one_by_one(self, a))).await }
    }
}

async fn one_by_one<S: Store<Sandbox> + Store<SandboxClaim> + ?Sized>(
    store: &S,
    a: &Adoption,
) -> Result<(), (AdoptionStep, StoreError)> {
    Store::<SandboxClaim>::patch(store, &a.claim, &a.annotate)
        .await
        .map_err(|e| (AdoptionStep::Annotate, e))?;
    Store::<Sandbox>::patch(store, &a.member, &a.adopt)
        .await
        .map_err(|e| (AdoptionStep::Adopt, e))?;
    if let Some(patch) = &a.status {
        Store::<SandboxClaim>::patch_status(store, &a.claim, patch)
            .await
            .map_err(|e| (AdoptionStep::Status, e))?;
    }
    Ok(())
}

impl AdoptionWrites for KubeStore {}

impl AdoptionWrites for EmbeddedStore {
    /// One transaction for all of them, durable before anyone sees a claim Ready.
    async fn write_adoptions(
        &self,
        adoptions: Vec<Adoption>,
    ) -> Vec<Result<(), (AdoptionStep, StoreError)>> {
        let n = adoptions.len();
        let sequences = adoptions
            .into_iter()
            .map(|a| {
                let s = WriteSequence::new()
                    .patch::<SandboxClaim>(&a.claim, &a.annotate)
                    .patch::<Sandbox>(&a.member, &a.adopt);
                match &a.status {
                    Some(patch) => s.patch_status::<SandboxClaim>(&a.claim, patch),
                    None => s,
                }
            })
            .collect();
        match self.write_sequences(sequences).await {
            Ok(results) => results
                .into_iter()
                .map(|r| {
                    r.map_err(|e| {
                        let step = [
                            AdoptionStep::Annotate,
                            AdoptionStep::Adopt,
                            AdoptionStep::Status,
                        ];
                        (step[e.index.min(2)], e.source)
                    })
                })
                .collect(),
            Err(e) => (0..n)
                .map(|_| {
                    Err((
                        AdoptionStep::Annotate,
                        StoreError::Unavailable {
                            message: e.to_string(),
                            source: None,
                        },
                    ))
                })
                .collect(),
        }
    }
}
