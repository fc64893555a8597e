//! The write operations inside a transaction: create, patch (main or status) and delete with
//! finalizers and owner-reference cascading, with the API server's rules.
//!
//! Every check that can reject a request runs before its first write, so a rejected request
//! leaves the shared batch transaction untouched; only storage failures abort a batch.

use rouse_shared::store::{DeleteParams, ObjectKey, Propagation, StoreError};
use serde_json::{Map, Value};

use super::meta::{
    NameRequest, Part, apply_patch, finalizers, generated_name, generation, mark_deleting,
    meta_str, name_request, new_uid, prepare_create, remove_owner, set_generation, spec_changed,
    validate_key,
};
use super::txn::Txn;

/// Decodes an object as its kind and encodes it back: rejects what the kind cannot hold and
/// drops fields it does not know, like a structural schema.
pub(crate) type Check = fn(Value) -> Result<Value, String>;

/// How many generated names are tried before giving up on collisions.
const GENERATE_ATTEMPTS: usize = 8;

/// A write request.
pub(crate) enum Op {
    /// Create `object` in `namespace`.
    Create {
        kind: String,
        namespace: String,
        object: Value,
        check: Check,
    },
    /// Merge-patch the main resource or the status subresource.
    Patch {
        kind: String,
        key: ObjectKey,
        patch: Map<String, Value>,
        precondition: Option<String>,
        part: Part,
        check: Check,
    },
    /// Delete with preconditions and propagation.
    Delete {
        kind: String,
        key: ObjectKey,
        params: DeleteParams,
    },
}

/// What a write did.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The object as stored now (created, patched, or unchanged by a no-op patch).
    Stored(Value),
    /// The object is gone; its last state.
    Deleted(Value),
    /// Finalizers hold the object; it is marked for deletion.
    Pending(Value),
}

fn invalid(kind: &str, key: ObjectKey, message: String) -> StoreError {
    StoreError::Invalid {
        kind: kind.to_owned(),
        key,
        message,
    }
}

fn random_failed(err: getrandom::Error) -> StoreError {
    StoreError::Unavailable {
        message: format!("no randomness for uid or name: {err}"),
        source: None,
    }
}

/// Runs one request.
pub(crate) fn execute(txn: &mut Txn<'_>, op: Op) -> Result<Outcome, StoreError> {
    match op {
        Op::Create {
            kind,
            namespace,
            object,
            check,
        } => create(txn, &kind, &namespace, object, check),
        Op::Patch {
            kind,
            key,
            patch,
            precondition,
            part,
            check,
        } => patch_object(
            txn,
            &kind,
            &key,
            &patch,
            precondition.as_deref(),
            part,
            check,
        ),
        Op::Delete { kind, key, params } => delete(txn, &kind, &key, &params),
    }
}

fn create(
    txn: &mut Txn<'_>,
    kind: &str,
    namespace: &str,
    mut object: Value,
    check: Check,
) -> Result<Outcome, StoreError> {
    let request =
        name_request(&object).map_err(|m| invalid(kind, ObjectKey::new(namespace, ""), m))?;
    let mut name = None;
    for _ in 0..GENERATE_ATTEMPTS {
        let candidate = match &request {
            NameRequest::Fixed(name) => name.clone(),
            NameRequest::Generate(prefix) => generated_name(prefix).map_err(random_failed)?,
        };
        let key = ObjectKey::new(namespace, candidate.as_str());
        validate_key(namespace, &candidate).map_err(|m| invalid(kind, key.clone(), m))?;
        if txn.load(kind, namespace, &candidate)?.is_none() {
            name = Some(candidate);
            break;
        }
        if let NameRequest::Fixed(_) = request {
            return Err(StoreError::AlreadyExists {
                kind: kind.to_owned(),
                key,
            });
        }
    }
    let Some(name) = name else {
        // Only generated names get here: a fixed name returns or breaks on the first try.
        let tried = match &request {
            NameRequest::Fixed(name) => name.clone(),
            NameRequest::Generate(prefix) => format!("{prefix}*"),
        };
        return Err(StoreError::AlreadyExists {
            kind: kind.to_owned(),
            key: ObjectKey::new(namespace, tried),
        });
    };
    let key = ObjectKey::new(namespace, name.as_str());
    let uid = new_uid().map_err(random_failed)?;
    prepare_create(&mut object, namespace, &name, uid, txn.now)
        .map_err(|m| invalid(kind, key.clone(), m))?;
    let object = check(object).map_err(|m| invalid(kind, key, m))?;
    txn.put(kind, object, None).map(Outcome::Stored)
}

fn load(txn: &Txn<'_>, kind: &str, key: &ObjectKey) -> Result<Value, StoreError> {
    txn.load(kind, &key.namespace, &key.name)?
        .ok_or_else(|| StoreError::NotFound {
            kind: kind.to_owned(),
            key: key.clone(),
        })
}

fn conflict(kind: &str, key: &ObjectKey, message: String) -> StoreError {
    StoreError::Conflict {
        kind: kind.to_owned(),
        key: key.clone(),
        message,
    }
}

fn patch_object(
    txn: &mut Txn<'_>,
    kind: &str,
    key: &ObjectKey,
    patch: &Map<String, Value>,
    precondition: Option<&str>,
    part: Part,
    check: Check,
) -> Result<Outcome, StoreError> {
    let current = load(txn, kind, key)?;
    let stored_rv = meta_str(&current, "resourceVersion").unwrap_or_default();
    if let Some(wanted) = precondition
        && wanted != stored_rv
    {
        return Err(conflict(
            kind,
            key,
            format!(
                "the object has been modified (resourceVersion {wanted} is not the stored {stored_rv}); read it again and retry"
            ),
        ));
    }
    let next = apply_patch(&current, patch, part).map_err(|m| invalid(kind, key.clone(), m))?;
    let mut next = check(next).map_err(|m| invalid(kind, key.clone(), m))?;
    if spec_changed(&current, &next) {
        set_generation(&mut next, generation(&current) + 1);
    }
    if next == current {
        // The API server skips no-op updates: no new version, no event.
        return Ok(Outcome::Stored(current));
    }
    if meta_str(&next, "deletionTimestamp").is_some() && finalizers(&next).is_empty() {
        // The last finalizer is gone: the deletion that was asked for completes.
        let uid = meta_str(&next, "uid").unwrap_or_default().to_owned();
        let gone = txn.erase(kind, next)?;
        release_dependents(txn, &uid, Dependents::Delete)?;
        return Ok(Outcome::Stored(gone));
    }
    txn.put(kind, next, Some(current)).map(Outcome::Stored)
}

fn delete(
    txn: &mut Txn<'_>,
    kind: &str,
    key: &ObjectKey,
    params: &DeleteParams,
) -> Result<Outcome, StoreError> {
    let current = load(txn, kind, key)?;
    let preconditions = [
        ("uid", params.uid.as_deref()),
        ("resourceVersion", params.resource_version.as_deref()),
    ];
    for (field, wanted) in preconditions {
        let stored = meta_str(&current, field).unwrap_or_default();
        if let Some(wanted) = wanted
            && wanted != stored
        {
            return Err(conflict(
                kind,
                key,
                format!("precondition failed: {field} {wanted} is not the stored {stored}"),
            ));
        }
    }
    remove(
        txn,
        kind,
        current,
        params.propagation.unwrap_or(Propagation::Background),
    )
}

/// Deletes a stored object, or marks it when finalizers hold it, and treats its dependents
/// as `propagation` says.
fn remove(
    txn: &mut Txn<'_>,
    kind: &str,
    object: Value,
    propagation: Propagation,
) -> Result<Outcome, StoreError> {
    let uid = meta_str(&object, "uid").unwrap_or_default().to_owned();
    if !finalizers(&object).is_empty() {
        if meta_str(&object, "deletionTimestamp").is_some() {
            return Ok(Outcome::Pending(object));
        }
        let mut marked = object.clone();
        mark_deleting(&mut marked, txn.now);
        let marked = txn.put(kind, marked, Some(object))?;
        match propagation {
            Propagation::Orphan => release_dependents(txn, &uid, Dependents::Orphan)?,
            Propagation::Foreground => release_dependents(txn, &uid, Dependents::Delete)?,
            // Dependents go when the finalizers clear and the owner is really deleted.
            Propagation::Background => {}
        }
        return Ok(Outcome::Pending(marked));
    }
    let gone = match propagation {
        Propagation::Orphan => {
            release_dependents(txn, &uid, Dependents::Orphan)?;
            txn.erase(kind, object)?
        }
        // Foreground: dependents first, then the owner, all in this transaction.
        Propagation::Foreground => {
            release_dependents(txn, &uid, Dependents::Delete)?;
            txn.erase(kind, object)?
        }
        Propagation::Background => {
            let gone = txn.erase(kind, object)?;
            release_dependents(txn, &uid, Dependents::Delete)?;
            gone
        }
    };
    Ok(Outcome::Deleted(gone))
}

/// What happens to the dependents of a deleted owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dependents {
    /// Deleted, unless another owner keeps them (then they only lose the reference).
    Delete,
    /// Kept, without the reference to the deleted owner.
    Orphan,
}

/// Removes the owner reference to `owner_uid` from its dependents and, with
/// [`Dependents::Delete`], deletes those left with no owner.
fn release_dependents(
    txn: &mut Txn<'_>,
    owner_uid: &str,
    what: Dependents,
) -> Result<(), StoreError> {
    if owner_uid.is_empty() {
        return Ok(());
    }
    for (kind, namespace, name) in txn.dependents(owner_uid)? {
        let Some(dependent) = txn.load(&kind, &namespace, &name)? else {
            continue;
        };
        let mut unowned = dependent.clone();
        let owners_left = remove_owner(&mut unowned, owner_uid);
        if what == Dependents::Delete && owners_left == 0 {
            remove(txn, &kind, dependent, Propagation::Background)?;
        } else {
            txn.put(&kind, unowned, Some(dependent))?;
        }
    }
    Ok(())
}
