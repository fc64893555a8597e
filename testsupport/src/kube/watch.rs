//! Watch responses: a chunked stream of newline-separated JSON events (`ADDED`, `MODIFIED`,
//! `DELETED`, `BOOKMARK`, `ERROR`) read from the storage's history, with selector
//! transitions reported as ADDED/DELETED, an optional delay, bookmarks and a timeout.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::registry::ResourceType;
use super::selector::Selector;
use super::storage::{Event, EventType, Storage, meta_str};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From the current state: existing objects are sent as `ADDED` first (no
    /// resourceVersion, `0`, or `sendInitialEvents=true`); `end_bookmark` then sends the
    /// `k8s.io/initial-events-end` bookmark.
    Now {
        /// Send the initial-events-end bookmark after the existing objects.
        end_bookmark: bool,
    },
    /// Changes after this resourceVersion.
    After(u64),
}

/// What one watch request asks for.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The watched resource.
    pub rt: &'static ResourceType,
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector`.
    pub fields: Selector,
    /// Where to start.
    pub start: Start,
    /// `timeoutSeconds`: the stream ends after it.
    pub timeout: Option<Duration>,
    /// `allowWatchBookmarks`: send a `BOOKMARK` after `bookmark_interval` without events.
    pub bookmarks: bool,
}

impl WatchRequest {
    fn selects(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(object, "namespace") == Some(ns))
            && self.labels.matches_labels(object)
            && self.fields.matches_fields(object)
    }
}

/// Events copied from the history per lock.
const BATCH: usize = 512;

struct WatchState {
    storage: Arc<Storage>,
    request: WatchRequest,
    cursor: u64,
    queue: VecDeque<Bytes>,
    changed: watch::Receiver<u64>,
    epoch: watch::Receiver<u64>,
    deadline: Option<Instant>,
    bookmark_interval: Duration,
    next_bookmark: Instant,
    done: bool,
}

/// One event line: `{"type":KIND,"object":OBJECT}` and a newline.
fn line_of(kind: &str, object_json: &[u8]) -> Bytes {
    let mut bytes = Vec::with_capacity(object_json.len() + 32);
    bytes.extend_from_slice(b"{\"type\":\"");
    bytes.extend_from_slice(kind.as_bytes());
    bytes.extend_from_slice(b"\",\"object\":");
    bytes.extend_from_slice(object_json);
    bytes.extend_from_slice(b"}\n");
    Bytes::from(bytes)
}

fn line(kind: &str, object: &Value) -> Bytes {
    line_of(
        kind,
        &serde_json::to_vec(object).unwrap_or_else(|_| b"{}".to_vec()),
    )
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": metadata}),
    )
}

impl WatchState {
    /// The line for one event as this watcher sees it, if it sees it at all.
    fn encode(&self, event: &Event) -> Option<Bytes> {
        let now = self.request.selects(&event.object);
        let before = event
            .previous
            .as_ref()
            .is_some_and(|p| self.request.selects(p));
        let kind = match (event.kind, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, true, _) => "DELETED",
            _ => return None,
        };
        Some(line_of(kind, event.object_json()))
    }

    /// Queues the next due lines, or waits until something may be due.
    async fn fill(&mut self) {
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            self.done = true;
            return;
        }
        self.changed.borrow_and_update();
        let delay = self.storage.watch_delay();
        let mut wake_at = None;
        match self
            .storage
            .events_after(self.request.rt, self.cursor, BATCH)
        {
            Err(error) => {
                self.queue.push_back(line("ERROR", &error.to_status()));
                self.done = true;
                return;
            }
            Ok((events, current)) => {
                let complete = events.len() < BATCH;
                for event in &events {
                    if !delay.is_zero() && event.at + delay > now {
                        wake_at = Some(event.at + delay);
                        break;
                    }
                    if let Some(bytes) = self.encode(event) {
                        self.queue.push_back(bytes);
                    }
                    self.cursor = event.rv;
                }
                // Everything of this resource up to `current` has been seen.
                if complete && wake_at.is_none() {
                    self.cursor = self.cursor.max(current);
                }
            }
        }
        if !self.queue.is_empty() {
            self.next_bookmark = now + self.bookmark_interval;
            return;
        }
        let far = now + Duration::from_secs(3600);
        let deadline = self.deadline.unwrap_or(far);
        let wake_at = wake_at.unwrap_or(far);
        let bookmark_at = if self.request.bookmarks {
            self.next_bookmark
        } else {
            far
        };
        tokio::select! {
            changed = self.changed.changed() => {
                if changed.is_err() {
                    self.done = true;
                }
            }
            () = sleep_until(wake_at) => {}
            () = sleep_until(bookmark_at) => {
                self.queue.push_back(bookmark(self.request.rt, self.cursor, false));
                self.next_bookmark = Instant::now() + self.bookmark_interval;
            }
            () = sleep_until(deadline) => self.done = true,
            _ = self.epoch.changed() => self.done = true,
        }
    }
}

/// The body of a watch response: one JSON event per line until the timeout or an error.
pub fn stream(
    storage: Arc<Storage>,
    request: WatchRequest,
    bookmark_interval: Duration,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let changed = storage.subscribe();
    let epoch = storage.watch_epoch();
    let now = Instant::now();
    let mut queue = VecDeque::new();
    let cursor = match request.start {
        Start::After(rv) => rv,
        Start::Now { end_bookmark } => {
            let (items, rv) = storage.list(request.rt, request.namespace.as_deref(), |o| {
                request.selects(o)
            });
            queue.extend(items.iter().map(|o| line("ADDED", o)));
            if end_bookmark {
                queue.push_back(bookmark(request.rt, rv, true));
            }
            rv
        }
    };
    let state = WatchState {
        storage,
        cursor,
        queue,
        changed,
        epoch,
        deadline: request.timeout.map(|t| now + t),
        next_bookmark: now + bookmark_interval,
        bookmark_interval,
        request,
        done: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(bytes) = state.queue.pop_front() {
                return Some((bytes, state));
            }
            if state.done {
                return None;
            }
            state.fill().await;
        }
    })
}
