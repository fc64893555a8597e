//! Opening the file: redb's repair after a crash or an I/O error, the tables of a new file,
//! the format check of an old one, and the resourceVersion to go on from. Used at start and
//! by the writer's recovery after a storage failure.

use std::collections::BTreeMap;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable};

use super::error::{OpenError, Result};
use super::tables::{
    FORMAT, FORMAT_VERSION, META, OBJECTS, OWNERS, RESOURCE_VERSION, reserved_version,
    resource_version,
};

/// Opens (or creates) the file, with redb's repair after a crash or an I/O error, and
/// initialises it; returns the database and its last resourceVersion. Opening commits a
/// durable write, so a file that opens can be written.
pub(super) fn open_file(path: &Path) -> Result<(Database, u64)> {
    let db = Database::create(path).map_err(|source| match source {
        redb::DatabaseError::DatabaseAlreadyOpen => OpenError::Locked {
            path: path.to_owned(),
        },
        source => OpenError::Open {
            path: path.to_owned(),
            source,
        },
    })?;
    let current = init(&db, path)?;
    Ok((db, current))
}

/// Creates the tables of a new file, checks the format of an old one, sets the object
/// gauges, and returns the last resourceVersion.
fn init(db: &Database, path: &Path) -> Result<u64> {
    let init_err = |e: redb::Error| OpenError::Init {
        path: path.to_owned(),
        source: e,
    };
    let tx = db.begin_write().map_err(|e| init_err(e.into()))?;
    {
        tx.open_table(OBJECTS).map_err(|e| init_err(e.into()))?;
        tx.open_table(OWNERS).map_err(|e| init_err(e.into()))?;
        let mut meta = tx.open_table(META).map_err(|e| init_err(e.into()))?;
        let found = meta
            .get(FORMAT)
            .map_err(|e| init_err(e.into()))?
            .map(|v| v.value());
        match found {
            None => {
                meta.insert(FORMAT, FORMAT_VERSION)
                    .map_err(|e| init_err(e.into()))?;
            }
            Some(FORMAT_VERSION) => {}
            Some(found) => {
                return Err(OpenError::Format {
                    path: path.to_owned(),
                    found,
                    supported: FORMAT_VERSION,
                });
            }
        }
        // Versions up to the reserved one may have been seen by watchers and readers in a
        // commit that a crash then lost: continue above them, so no version means two things.
        let damaged = |e: rouse_shared::store::StoreError| OpenError::Damaged {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let current = resource_version(&meta).map_err(damaged)?;
        let reserved = reserved_version(&meta).map_err(damaged)?;
        if reserved > current {
            meta.insert(RESOURCE_VERSION, reserved)
                .map_err(|e| init_err(e.into()))?;
        }
    }
    tx.commit().map_err(|e| init_err(e.into()))?;

    let damaged = |e: rouse_shared::store::StoreError| OpenError::Damaged {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let tx = db.begin_read().map_err(|e| init_err(e.into()))?;
    let meta = tx.open_table(META).map_err(|e| init_err(e.into()))?;
    let current = resource_version(&meta).map_err(damaged)?;
    let objects = tx.open_table(OBJECTS).map_err(|e| init_err(e.into()))?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for entry in objects.iter().map_err(|e| init_err(e.into()))? {
        let (key, _) = entry.map_err(|e| init_err(e.into()))?;
        *counts.entry(key.value().0.to_owned()).or_default() += 1;
    }
    for (kind, count) in counts {
        metrics::gauge!("rouse_store_objects", "kind" => kind).set(count as f64);
    }
    Ok(current)
}
