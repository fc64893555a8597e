//! When an object first reached a state, as a client watching it sees it: a watch of one kind
//! in one namespace records, per object name and per uid, the instant its first event matched
//! a test, and waiters are woken on each new record.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Most objects remembered: every name the benchmark creates is unique, and it creates far
/// fewer than this.
const MAX_RECORDS: usize = 10_000;

/// The records of one watch; the watch stops when this is dropped.
#[derive(Debug)]
pub struct Seen<V> {
    records: Arc<Mutex<HashMap<String, (Instant, V)>>>,
    notify: Arc<Notify>,
    stop: CancellationToken,
}

impl<V: Clone + Send + 'static> Seen<V> {
    /// Watches `api` and records each object the first time `test` gives a value for it.
    pub fn start<K>(api: Api<K>, test: fn(&K) -> Option<V>) -> Self
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let records: Arc<Mutex<HashMap<String, (Instant, V)>>> = Arc::default();
        let notify = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let (out, woken, stopped) = (records.clone(), notify.clone(), stop.clone());
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            loop {
                let object = tokio::select! {
                    () = stopped.cancelled() => return,
                    next = events.next() => match next {
                        Some(Ok(object)) => object,
                        // The watcher resumes by itself after an error.
                        Some(Err(_)) => continue,
                        None => return,
                    },
                };
                let Some(value) = test(&object) else { continue };
                let at = Instant::now();
                if let Ok(mut records) = out.lock()
                    && records.len() < MAX_RECORDS
                {
                    // By uid too: an object made again under the same name is another record.
                    if let Some(uid) = object.uid() {
                        records.entry(uid).or_insert((at, value.clone()));
                    }
                    records.entry(object.name_any()).or_insert((at, value));
                }
                woken.notify_waiters();
            }
        });
        Self {
            records,
            notify,
            stop,
        }
    }

    /// The instant and value recorded for `name`, waiting at most `timeout`; the error names
    /// `what` was awaited.
    pub async fn wait(&self, name: &str, what: &str, timeout: Duration) -> Result<(Instant, V)> {
        let end = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(record) = self.get(name) {
                return Ok(record);
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                bail!("{name}: not {what} within {timeout:?}");
            }
        }
    }

    /// The record of `name` (or of a uid), if there is one.
    pub fn get(&self, name: &str) -> Option<(Instant, V)> {
        self.records.lock().ok()?.get(name).cloned()
    }
}

impl<V> Drop for Seen<V> {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
