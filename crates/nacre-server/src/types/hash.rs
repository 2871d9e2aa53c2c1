//! Hashes over the keyspace transaction: a metadata record (field count, version) and one
//! `sub` record per field under its version. Commands (`cmd/hashes.rs`) parse arguments,
//! raise events and write replies around these operations.

use super::coll::{removed, resize, typed_or_new};
use super::{typed, Result};
use crate::store::encoding::{Kind, Meta};
use crate::store::txn::{Members, Txn};

/// Redis's `hash-max-listpack-entries` and `hash-max-listpack-value` defaults.
const MAX_LISTPACK: (u64, usize) = (512, 64);

/// The hash at `key` (`None` if missing; WRONGTYPE for another type).
pub fn get(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Meta>> {
    typed(txn, db, key, Kind::Hash)
}

/// The hash at `key`, created empty if missing.
pub fn get_or_new(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Meta> {
    typed_or_new(txn, db, key, Kind::Hash)
}

/// Field `f` of the hash `m` at `key`.
pub fn field(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    m: &Meta,
    f: &[u8],
) -> Result<Option<Vec<u8>>> {
    Ok(txn.member(db, key, m.version, f)?)
}

/// Every field and value of the hash at `key` (empty if missing).
pub fn fields(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Members> {
    match get(txn, db, key)? {
        None => Ok(Vec::new()),
        Some(m) => Ok(txn.all_members(db, key, m.version)?),
    }
}

/// Records the hash's new size (deleting it when empty), noting when a size or a field or
/// value of `len` bytes takes it past a listpack.
fn resized(txn: &mut Txn<'_>, db: usize, key: &[u8], size: u64, len: usize) -> Result<()> {
    resize(
        txn,
        db,
        key,
        size,
        size > MAX_LISTPACK.0 || len > MAX_LISTPACK.1,
    )
}

/// Sets the `(field, value)` pairs of `pairs` (flat) in the hash at `key`, created if
/// missing; how many fields were new.
pub fn set(txn: &mut Txn<'_>, db: usize, key: &[u8], pairs: &[Vec<u8>]) -> Result<i64> {
    let m = get_or_new(txn, db, key)?;
    let mut size = m.size;
    let mut added = 0;
    let mut len = 0;
    for fv in pairs.chunks(2) {
        if field(txn, db, key, &m, &fv[0])?.is_none() {
            added += 1;
            size += 1;
        }
        len = len.max(fv[0].len()).max(fv[1].len());
        txn.set_member(db, key, m.version, &fv[0], Some(fv[1].clone()))?;
    }
    resized(txn, db, key, size, len)?;
    Ok(added)
}

/// Sets field `f` of the hash `m` at `key` (created by [`get_or_new`]) to `v`; `new` says
/// whether the field was missing.
pub fn put(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    m: &Meta,
    f: &[u8],
    v: Vec<u8>,
    new: bool,
) -> Result<()> {
    txn.set_member(db, key, m.version, f, Some(v))?;
    resized(txn, db, key, m.size + u64::from(new), 0)
}

/// Deletes `fields` from the hash at `key` (deleting the key when none is left); how many
/// were there.
pub fn delete(txn: &mut Txn<'_>, db: usize, key: &[u8], fields: &[Vec<u8>]) -> Result<i64> {
    let Some(m) = get(txn, db, key)? else {
        return Ok(0);
    };
    let mut size = m.size;
    let mut n = 0;
    for f in fields {
        if field(txn, db, key, &m, f)?.is_some() {
            txn.set_member(db, key, m.version, f, None)?;
            size -= 1;
            n += 1;
        }
    }
    if n > 0 {
        resized(txn, db, key, size, 0)?;
        removed(txn, db, key, n as u64)?;
    }
    Ok(n)
}
