//! One write transaction as the operations see it: load, store and erase objects while
//! handing out resourceVersions, keeping the owner index current and collecting the changes
//! to publish once the transaction has committed.

use std::sync::Arc;

use jiff::Timestamp;
use redb::{ReadableTable, WriteTransaction};
use rouse_shared::store::StoreError;
use serde_json::Value;

use super::meta::{meta_str, owner_uids, set_resource_version};
use super::select::ChangeType;
use super::tables::{OBJECTS, OWNERS, get_object, unavailable};
use super::watch::Change;

/// A dependent found through the owner index: kind, namespace, name.
pub(crate) type Dependent = (String, String, String);

/// Writes of one batch, in one redb transaction.
pub(crate) struct Txn<'t> {
    tx: &'t WriteTransaction,
    rv: u64,
    changes: Vec<Change>,
    /// The time all writes of the batch use.
    pub now: Timestamp,
}

impl<'t> Txn<'t> {
    /// Starts on a transaction whose last handed-out version is `rv`.
    pub(crate) fn new(tx: &'t WriteTransaction, rv: u64, now: Timestamp) -> Self {
        Self {
            tx,
            rv,
            changes: Vec::new(),
            now,
        }
    }

    /// The last version handed out and the changes made.
    pub(crate) fn finish(self) -> (u64, Vec<Change>) {
        (self.rv, self.changes)
    }

    /// The stored object, if any (including writes earlier in this transaction).
    pub(crate) fn load(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, StoreError> {
        let table = self
            .tx
            .open_table(OBJECTS)
            .map_err(|e| unavailable("open objects table", e))?;
        get_object(&table, kind, namespace, name)
    }

    /// Writes `object` with the next version; `previous` is the stored state it replaces.
    pub(crate) fn put(
        &mut self,
        kind: &str,
        mut object: Value,
        previous: Option<Value>,
    ) -> Result<Value, StoreError> {
        self.rv += 1;
        set_resource_version(&mut object, self.rv);
        let namespace = meta_str(&object, "namespace").unwrap_or_default();
        let name = meta_str(&object, "name").unwrap_or_default();
        let bytes = serde_json::to_vec(&object).map_err(|e| StoreError::Unavailable {
            message: format!("encode {kind} {namespace}/{name}: {e}"),
            source: Some(Box::new(e)),
        })?;
        {
            let mut table = self
                .tx
                .open_table(OBJECTS)
                .map_err(|e| unavailable("open objects table", e))?;
            table
                .insert((kind, namespace, name), bytes.as_slice())
                .map_err(|e| unavailable("write object", e))?;
        }
        let old_owners = previous.as_ref().map(owner_uids).unwrap_or_default();
        let new_owners = owner_uids(&object);
        self.index(kind, namespace, name, &old_owners, &new_owners)?;
        let ty = if previous.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.changes.push(Change {
            rv: self.rv,
            kind: kind.to_owned(),
            ty,
            object: Arc::new(object.clone()),
            previous: previous.map(Arc::new),
        });
        Ok(object)
    }

    /// Removes `object` (its stored state) with the next version; returns its last state.
    pub(crate) fn erase(&mut self, kind: &str, mut object: Value) -> Result<Value, StoreError> {
        self.rv += 1;
        set_resource_version(&mut object, self.rv);
        let namespace = meta_str(&object, "namespace").unwrap_or_default();
        let name = meta_str(&object, "name").unwrap_or_default();
        {
            let mut table = self
                .tx
                .open_table(OBJECTS)
                .map_err(|e| unavailable("open objects table", e))?;
            table
                .remove((kind, namespace, name))
                .map_err(|e| unavailable("remove object", e))?;
        }
        self.index(kind, namespace, name, &owner_uids(&object), &[])?;
        self.changes.push(Change {
            rv: self.rv,
            kind: kind.to_owned(),
            ty: ChangeType::Deleted,
            object: Arc::new(object.clone()),
            previous: None,
        });
        Ok(object)
    }

    /// Moves the owner index entries of one object from `old` owners to `new` ones.
    fn index(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        old: &[String],
        new: &[String],
    ) -> Result<(), StoreError> {
        if old == new {
            return Ok(());
        }
        let mut table = self
            .tx
            .open_table(OWNERS)
            .map_err(|e| unavailable("open owners table", e))?;
        for uid in old.iter().filter(|u| !new.contains(u)) {
            table
                .remove((uid.as_str(), kind, namespace, name))
                .map_err(|e| unavailable("update owner index", e))?;
        }
        for uid in new.iter().filter(|u| !old.contains(u)) {
            table
                .insert((uid.as_str(), kind, namespace, name), ())
                .map_err(|e| unavailable("update owner index", e))?;
        }
        Ok(())
    }

    /// Objects with an owner reference to `uid`.
    pub(crate) fn dependents(&self, uid: &str) -> Result<Vec<Dependent>, StoreError> {
        let table = self
            .tx
            .open_table(OWNERS)
            .map_err(|e| unavailable("open owners table", e))?;
        let mut out = Vec::new();
        for entry in table
            .range((uid, "", "", "")..)
            .map_err(|e| unavailable("read owner index", e))?
        {
            let (key, ()) = entry
                .map(|(k, v)| (k, v.value()))
                .map_err(|e| unavailable("read owner index", e))?;
            let (owner, kind, namespace, name) = key.value();
            if owner != uid {
                break;
            }
            out.push((kind.to_owned(), namespace.to_owned(), name.to_owned()));
        }
        Ok(out)
    }
}
