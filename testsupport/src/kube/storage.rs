//! The fake API server's state: objects by resource, namespace and name, one global
//! resourceVersion counter, and a bounded per-resource history of watch events.
//!
//! Every write goes through [`Storage`] under one short synchronous lock; watchers are woken
//! through a `tokio::sync::watch` channel carrying the latest resourceVersion and then copy
//! the events they need out of the history.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::registry::ResourceType;
use super::status::{ApiError, Result};

/// Where an object lives: its resource, namespace (empty when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub group: &'static str,
    pub plural: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Key {
    /// The key of `name` in `namespace` of resource `rt`.
    pub fn new(rt: &'static ResourceType, namespace: &str, name: &str) -> Self {
        Self {
            group: rt.group,
            plural: rt.plural,
            namespace: if rt.namespaced {
                namespace.to_owned()
            } else {
                String::new()
            },
            name: name.to_owned(),
        }
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

/// One committed change, as kept in the watch history.
#[derive(Debug)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (its last state for a deletion).
    pub object: Value,
    /// The object before the change, so selector transitions can be reported.
    pub previous: Option<Value>,
    /// When it was committed; a delayed watch sends it no earlier than `at + delay`.
    pub at: Instant,
    /// `object` as JSON, encoded once for all watchers.
    encoded: OnceLock<Bytes>,
}

impl Event {
    /// The object as JSON bytes, shared by every watcher that sends it.
    pub fn object_json(&self) -> &Bytes {
        self.encoded.get_or_init(|| {
            Bytes::from(serde_json::to_vec(&self.object).unwrap_or_else(|_| b"{}".to_vec()))
        })
    }
}

/// The kept events of one resource: every event with `rv > floor` is present.
#[derive(Debug, Default)]
struct History {
    events: VecDeque<Arc<Event>>,
    floor: u64,
}

/// Mutable state, only touched under the lock.
pub(super) struct Inner {
    pub(super) rv: u64,
    pub(super) objects: BTreeMap<Key, Value>,
    pub(super) uids: HashMap<String, Key>,
    /// Owner uid → keys of the objects naming it in `ownerReferences`.
    owned: HashMap<String, BTreeSet<Key>>,
    histories: HashMap<(&'static str, &'static str), History>,
    history_limit: usize,
    random: u64,
    cluster_ips: u32,
}

/// Shared state of one fake API server.
pub struct Storage {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
    watch_delay: Mutex<Duration>,
    /// Bumped to end every open watch stream.
    epoch: watch::Sender<u64>,
}

/// The current time as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC).
pub fn timestamp_in(offset: Duration) -> String {
    let at = jiff::Timestamp::now() + offset;
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `metadata` of an object, created when missing or not an object.
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(meta)) => meta,
        // Just ensured above to be an object.
        _ => unreachable!("metadata was set to an object"),
    }
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The uids in `metadata.ownerReferences`.
pub fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The entries of `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl Inner {
    fn next_random(&mut self) -> u64 {
        // xorshift64: enough to make generated names and uids unpredictable in tests.
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x
    }

    /// A fresh uid in the usual 8-4-4-4-12 hex form.
    pub(super) fn new_uid(&mut self) -> String {
        let hi = self.next_random();
        let lo = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xfff,
            lo >> 52,
            lo & 0xffff_ffff_ffff
        )
    }

    /// `generateName` plus five characters, as Kubernetes generates them.
    pub(super) fn generated_name(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.next_random();
        let mut name = prefix.to_owned();
        for _ in 0..5 {
            name.push(char::from(ALPHABET[(r % ALPHABET.len() as u64) as usize]));
            r /= ALPHABET.len() as u64;
        }
        name
    }

    /// A cluster IP for a new Service.
    pub(super) fn next_cluster_ip(&mut self) -> String {
        self.cluster_ips += 1;
        let n = self.cluster_ips;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    /// Stores `object` under `key` with a new resourceVersion and records the event.
    pub(super) fn put(
        &mut self,
        rt: &'static ResourceType,
        key: Key,
        mut object: Value,
        previous: Option<Value>,
    ) -> Value {
        self.rv += 1;
        meta_mut(&mut object).insert("resourceVersion".into(), json!(self.rv.to_string()));
        if let Some(uid) = meta_str(&object, "uid") {
            self.uids.insert(uid.to_owned(), key.clone());
        }
        if let Some(old) = &previous {
            self.unindex_owners(&key, old);
        }
        for owner in owner_uids(&object) {
            self.owned.entry(owner).or_default().insert(key.clone());
        }
        self.objects.insert(key, object.clone());
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(rt, kind, object.clone(), previous);
        object
    }

    /// Removes the object under `key`; returns its last state with the deletion's version.
    pub(super) fn remove(&mut self, rt: &'static ResourceType, key: &Key) -> Option<Value> {
        let previous = self.objects.remove(key)?;
        if let Some(uid) = meta_str(&previous, "uid") {
            self.uids.remove(uid);
        }
        self.unindex_owners(key, &previous);
        self.rv += 1;
        let mut last = previous.clone();
        meta_mut(&mut last).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.record(rt, EventType::Deleted, last.clone(), Some(previous));
        Some(last)
    }

    fn unindex_owners(&mut self, key: &Key, object: &Value) {
        for owner in owner_uids(object) {
            if let Some(keys) = self.owned.get_mut(&owner) {
                keys.remove(key);
                if keys.is_empty() {
                    self.owned.remove(&owner);
                }
            }
        }
    }

    /// Keys of the objects that name `uid` as an owner, in key order.
    pub(super) fn dependents(&self, uid: &str) -> Vec<Key> {
        self.owned
            .get(uid)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn record(
        &mut self,
        rt: &'static ResourceType,
        kind: EventType,
        object: Value,
        previous: Option<Value>,
    ) {
        let limit = self.history_limit.max(1);
        let history = self.histories.entry((rt.group, rt.plural)).or_default();
        while history.events.len() >= limit {
            if let Some(old) = history.events.pop_front() {
                history.floor = old.rv;
            }
        }
        history.events.push_back(Arc::new(Event {
            rv: self.rv,
            kind,
            object,
            previous,
            at: Instant::now(),
            encoded: OnceLock::new(),
        }));
    }

    /// The object under `key` or 404.
    pub(super) fn get(&self, rt: &'static ResourceType, key: &Key) -> Result<&Value> {
        self.objects
            .get(key)
            .ok_or_else(|| ApiError::not_found(rt, &key.name))
    }

    /// Objects of `rt`, in one namespace or all, in key order.
    pub(super) fn iter_resource<'a>(
        &'a self,
        rt: &'static ResourceType,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        let start = Key {
            group: rt.group,
            plural: rt.plural,
            namespace: namespace.unwrap_or_default().to_owned(),
            name: String::new(),
        };
        self.objects
            .range(start..)
            .take_while(move |(k, _)| {
                k.group == rt.group
                    && k.plural == rt.plural
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(_, v)| v)
    }
}

impl Storage {
    /// Empty storage keeping at most `history_limit` events per resource for watches.
    pub fn new(history_limit: usize) -> Self {
        let seed = RandomState::new().hash_one(0x5eed_u64) | 1;
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                uids: HashMap::new(),
                owned: HashMap::new(),
                histories: HashMap::new(),
                history_limit,
                random: seed,
                cluster_ips: 0,
            }),
            changed: watch::Sender::new(1),
            watch_delay: Mutex::new(Duration::ZERO),
            epoch: watch::Sender::new(0),
        }
    }

    /// Runs `f` under the lock, then wakes watchers if anything was committed.
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let (out, before, after) = {
            let mut inner = self.lock();
            let before = inner.rv;
            let out = f(&mut inner);
            (out, before, inner.rv)
        };
        if after != before {
            self.changed.send_replace(after);
        }
        out
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock leaves the maps consistent (every write is one insert or
        // remove), so a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver woken with the latest resourceVersion after each commit.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// A receiver that changes when every watch stream must end.
    pub fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// Ends every open watch stream.
    pub fn end_watches(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Matching objects of `rt` and the version they were read at.
    pub fn list(
        &self,
        rt: &'static ResourceType,
        namespace: Option<&str>,
        keep: impl Fn(&Value) -> bool,
    ) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner
            .iter_resource(rt, namespace)
            .filter(|o| keep(o))
            .cloned()
            .collect();
        (items, inner.rv)
    }

    /// One object, if present.
    pub fn get(&self, rt: &'static ResourceType, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(&Key::new(rt, namespace, name))
            .cloned()
    }

    /// Events of `rt` after `cursor` (at most `max`) and the current resourceVersion, or 410
    /// when some of those events were dropped from the history.
    pub fn events_after(
        &self,
        rt: &'static ResourceType,
        cursor: u64,
        max: usize,
    ) -> Result<(Vec<Arc<Event>>, u64)> {
        let inner = self.lock();
        let Some(history) = inner.histories.get(&(rt.group, rt.plural)) else {
            return Ok((Vec::new(), inner.rv));
        };
        if cursor < history.floor {
            return Err(ApiError::expired(cursor, history.floor));
        }
        let start = history.events.partition_point(|e| e.rv <= cursor);
        let events = history.events.range(start..).take(max).cloned().collect();
        Ok((events, inner.rv))
    }

    /// Forgets all watch history, so any watch from an earlier version gets 410.
    pub fn compact(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        for history in inner.histories.values_mut() {
            history.events.clear();
            history.floor = rv;
        }
    }

    /// How long watch events are held back before being sent.
    pub fn watch_delay(&self) -> Duration {
        *self.watch_delay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the watch delay for events sent from now on.
    pub fn set_watch_delay(&self, delay: Duration) {
        *self.watch_delay.lock().unwrap_or_else(|e| e.into_inner()) = delay;
        // Wake watchers so they re-evaluate what is due.
        self.changed.send_modify(|_| {});
    }
}
