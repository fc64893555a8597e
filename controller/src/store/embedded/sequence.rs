//! Writes that depend on each other, committed together: a [`WriteSequence`] runs its writes in
//! order in one transaction, each only if the ones before it succeeded, and sequences handed
//! over at once share one commit and one fsync. A claim adoption (annotate the claim, re-own
//! the member, report the claim Ready) is one sequence; a burst of claims is one commit.

use std::time::Instant;

use rouse_shared::store::{ObjectKey, Patch, Result, StoreError, StoreObject};
use tokio::sync::oneshot;

use super::EmbeddedStore;
use super::meta::Part;
use super::typed::{observe, patch_op};
use super::writer::Request;

/// Writes run in order in one transaction; the first one refused ends the sequence (the ones
/// before it stay written).
#[derive(Default)]
pub struct WriteSequence {
    ops: Vec<super::ops::Op>,
}

impl std::fmt::Debug for WriteSequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteSequence")
            .field("writes", &self.ops.len())
            .finish()
    }
}

/// Why a sequence stopped: which write (counted from 0) was refused, and why.
#[derive(Debug, thiserror::Error)]
#[error("write {index} of the sequence: {source}")]
pub struct SequenceError {
    /// The refused write.
    pub index: usize,
    /// Its error.
    #[source]
    pub source: StoreError,
}

impl WriteSequence {
    /// An empty sequence.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a merge patch of `K`'s metadata and spec, as [`Store::patch`]
    /// (a `metadata.resourceVersion` in it is a precondition).
    ///
    /// [`Store::patch`]: rouse_shared::store::Store::patch
    pub fn patch<K: StoreObject>(mut self, key: &ObjectKey, patch: &Patch) -> Self {
        self.ops.push(patch_op::<K>(key, patch, Part::Main));
        self
    }

    /// Adds a merge patch of `K`'s status, as [`Store::patch_status`].
    ///
    /// [`Store::patch_status`]: rouse_shared::store::Store::patch_status
    pub fn patch_status<K: StoreObject>(mut self, key: &ObjectKey, patch: &Patch) -> Self {
        self.ops.push(patch_op::<K>(key, patch, Part::Status));
        self
    }

    /// Writes in the sequence.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when it holds no write.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl EmbeddedStore {
    /// Commits `sequences` in one transaction (with the writes waiting beside them), durably
    /// before any reader or watcher sees them, so that a client that sees their result may
    /// take it as acknowledged; one result per sequence. `Err` only when nothing could be
    /// committed.
    pub async fn write_sequences(
        &self,
        sequences: Vec<WriteSequence>,
    ) -> Result<Vec<std::result::Result<(), SequenceError>>> {
        let started = Instant::now();
        let (reply, answer) = oneshot::channel();
        let request = Request {
            sequences: sequences.into_iter().map(|s| s.ops).collect(),
            durable_first: true,
            reply,
        };
        let answers = self.submit(request, answer).await;
        observe("sequences", "", started, &answers);
        Ok(answers?
            .into_iter()
            .map(|answers| {
                answers
                    .into_iter()
                    .enumerate()
                    .find_map(|(index, answer)| answer.err().map(|source| (index, source)))
                    .map_or(Ok(()), |(index, source)| {
                        Err(SequenceError { index, source })
                    })
            })
            .collect())
    }
}
