//! Recovery from a storage failure, on the writer thread: after a batch failed and the file
//! refuses writes, answer every queued write at once with the reason, and reopen the file with
//! backoff (100 ms doubling to 5 s) until opening it — which commits a durable write — works.
//!
//! Reopening is what a restart would do: redb repairs the file to its last durable commit,
//! so every acknowledged write is there (a write is acknowledged only once durable) and
//! changes that were published to watchers but never made durable are gone. The versions go
//! on above the durable reservation, as after a restart, and every watch ends with `Expired`,
//! so watchers list again and see the file as it is.

use std::path::Path;
use std::time::{Duration, Instant};

use rouse_shared::store::StoreError;
use tokio::sync::mpsc;

use super::open::open_file;
use super::storage::Storage;
use super::watch::Hub;

/// The first pause before reopening, and the longest.
const REOPEN_FIRST: Duration = Duration::from_millis(100);
const REOPEN_MAX: Duration = Duration::from_secs(5);
/// How often queued writes are answered while waiting to reopen.
const ANSWER_EVERY: Duration = Duration::from_millis(20);

/// True when `err` comes from an I/O error of the file (found by walking its sources): redb
/// then refuses the file until it is reopened ("Previous I/O error occurred").
pub(crate) fn file_failed(err: &StoreError) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(redb) = cause.downcast_ref::<redb::Error>()
            && matches!(redb, redb::Error::Io(_) | redb::Error::PreviousIo)
        {
            return true;
        }
        if cause.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        source = cause.source();
    }
    false
}

/// Reopens the file that [`Storage::fail`] took out of service, answering queued writes at
/// once meanwhile (`refuse` answers one with the error); returns false when the store was
/// closed (every sender dropped), true once the file serves again.
pub(crate) fn recover<R>(
    storage: &Storage,
    hub: &Hub,
    path: &Path,
    rx: &mut mpsc::Receiver<R>,
    refuse: impl Fn(R, StoreError),
) -> bool {
    let mut pause = REOPEN_FIRST;
    let mut next = Instant::now() + pause;
    loop {
        loop {
            match rx.try_recv() {
                Ok(request) => refuse(request, storage.unavailable()),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(ANSWER_EVERY));
            continue;
        }
        match open_file(path) {
            Ok((db, current)) => {
                // Watchers may have seen changes the file no longer has: all list again.
                hub.reset(current);
                storage.recovered(db);
                return true;
            }
            Err(err) => {
                storage.attempt_failed(err.to_string());
                pause = (pause * 2).min(REOPEN_MAX);
                next = Instant::now() + pause;
            }
        }
    }
}
