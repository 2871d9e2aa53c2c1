//! Sets over the keyspace transaction: a metadata record (member count, version) and one
//! empty `sub` record per member under its version. `OBJECT ENCODING` follows Redis 7.0:
//! `intset` while every member is an integer and there are at most 512, then `hashtable`
//! for good; an `intset` lists its members in numeric order, as Redis does. Commands
//! (`cmd/sets.rs`) parse arguments, raise events and write replies around these operations.

use std::collections::BTreeSet;

use super::coll::{random_members, removed, resize, typed_or_new};
use super::{typed, Result};
use crate::num::parse_i64_strict;
use crate::store::encoding::{Hint, Kind, Meta};
use crate::store::txn::{Members, Txn};

/// Redis's `set-max-intset-entries` default.
const MAX_INTSET: u64 = 512;

pub fn get(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Meta>> {
    typed(txn, db, key, Kind::Set)
}

pub fn contains(txn: &mut Txn<'_>, db: usize, key: &[u8], m: &Meta, member: &[u8]) -> Result<bool> {
    Ok(txn.member(db, key, m.version, member)?.is_some())
}

/// Whether a set holding `m` and then `added` stays an intset.
fn outgrows(m: &Meta, size: u64, added: &[u8]) -> bool {
    m.hint == Hint::Raw || size > MAX_INTSET || parse_i64_strict(added).is_none()
}

/// Every member of the set at `key` (empty if missing), in the order Redis lists them.
pub fn members(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Vec<Vec<u8>>> {
    let Some(m) = get(txn, db, key)? else {
        return Ok(Vec::new());
    };
    let all: Members = txn.all_members(db, key, m.version)?;
    let mut out: Vec<Vec<u8>> = all.into_iter().map(|(k, _)| k).collect();
    if m.hint != Hint::Raw {
        out.sort_by_key(|v| parse_i64_strict(v).unwrap_or(0));
    }
    Ok(out)
}

/// Adds `items` to the set at `key` (created if missing); how many were new.
pub fn add(txn: &mut Txn<'_>, db: usize, key: &[u8], items: &[Vec<u8>]) -> Result<i64> {
    let m = typed_or_new(txn, db, key, Kind::Set)?;
    let mut size = m.size;
    let mut outgrown = m.hint == Hint::Raw;
    let mut added = 0;
    for it in items {
        if !contains(txn, db, key, &m, it)? {
            txn.set_member(db, key, m.version, it, Some(Vec::new()))?;
            size += 1;
            added += 1;
            outgrown |= outgrows(&m, size, it);
        }
    }
    resize(txn, db, key, size, outgrown)?;
    Ok(added)
}

/// Checks the type of every key, then loads each set (`None`: missing).
fn load_all(txn: &mut Txn<'_>, db: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Meta>>> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        out.push(get(txn, db, k)?);
    }
    Ok(out)
}

/// The intersection of the sets at `keys`, stopping at `limit` members (0: no limit).
pub fn inter(txn: &mut Txn<'_>, db: usize, keys: &[Vec<u8>], limit: usize) -> Result<Vec<Vec<u8>>> {
    let metas = load_all(txn, db, keys)?;
    if metas.iter().any(Option::is_none) {
        return Ok(Vec::new());
    }
    // Walk the smallest set; look each member up in the others.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| metas[i].as_ref().map_or(0, |m| m.size));
    let first = order[0];
    let mut out = Vec::new();
    'member: for it in members(txn, db, &keys[first])? {
        for &j in &order[1..] {
            let Some(m) = metas[j].as_ref() else {
                continue 'member;
            };
            if !contains(txn, db, &keys[j], m, &it)? {
                continue 'member;
            }
        }
        out.push(it);
        if limit != 0 && out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// The union (`diff == false`) or difference of the sets at `keys`.
pub fn union_or_diff(
    txn: &mut Txn<'_>,
    db: usize,
    keys: &[Vec<u8>],
    diff: bool,
) -> Result<Vec<Vec<u8>>> {
    let metas = load_all(txn, db, keys)?;
    let mut acc: BTreeSet<Vec<u8>> = BTreeSet::new();
    if diff {
        if metas[0].is_none() {
            return Ok(Vec::new());
        }
        acc.extend(members(txn, db, &keys[0])?);
        for (k, m) in keys.iter().zip(&metas).skip(1) {
            if acc.is_empty() {
                break;
            }
            if m.is_some() {
                for it in members(txn, db, k)? {
                    acc.remove(&it);
                }
            }
        }
    } else {
        for (k, m) in keys.iter().zip(&metas) {
            if m.is_some() {
                acc.extend(members(txn, db, k)?);
            }
        }
    }
    Ok(acc.into_iter().collect())
}

/// Removes `items` from the set `m` at `key` (deleting the key when none is left); how
/// many were there.
pub fn remove(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    m: &Meta,
    items: &[Vec<u8>],
) -> Result<u64> {
    let mut n = 0;
    for it in items {
        // A member named twice is there only the first time.
        if contains(txn, db, key, m, it)? {
            txn.set_member(db, key, m.version, it, None)?;
            n += 1;
        }
    }
    resized_after_removal(txn, db, key, m, n)?;
    Ok(n)
}

/// Records the set's size after `n` of its members were deleted.
fn resized_after_removal(txn: &mut Txn<'_>, db: usize, key: &[u8], m: &Meta, n: u64) -> Result<()> {
    if n > 0 {
        resize(txn, db, key, m.size - n, false)?;
        removed(txn, db, key, n)?;
    }
    Ok(())
}

/// Deletes members known to be in the set `m` at `key`, and records its new size.
fn drop_members<'a>(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    m: &Meta,
    items: impl Iterator<Item = &'a [u8]>,
) -> Result<()> {
    let mut n = 0;
    for it in items {
        txn.set_member(db, key, m.version, it, None)?;
        n += 1;
    }
    resized_after_removal(txn, db, key, m, n)
}

/// Removes and returns up to `count` random members of the set `m` at `key`.
pub fn pop(txn: &mut Txn<'_>, db: usize, key: &[u8], m: &Meta, count: u64) -> Result<Vec<Vec<u8>>> {
    let chosen: Vec<Vec<u8>> = random_members(txn, db, key, m.version, m.size, count, false)?
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    drop_members(txn, db, key, m, chosen.iter().map(|v| v.as_slice()))?;
    Ok(chosen)
}

/// Replaces whatever `dst` holds with a set of `items` (not empty); the count.
pub fn replace(txn: &mut Txn<'_>, db: usize, dst: &[u8], items: &[Vec<u8>]) -> Result<i64> {
    txn.create(db, dst, Kind::Set)?;
    add(txn, db, dst, items)
}
