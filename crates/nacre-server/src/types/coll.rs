//! The collection machinery the hash, set and sorted-set operations share: creating a key
//! of a type, recording its size and encoding, rebuilding a set or hash that deletes have
//! thinned out, and drawing random members.

use super::{typed, Result};
use crate::store::encoding::{Hint, Kind, Meta};
use crate::store::txn::{Members, Txn};
use crate::store::StoreError;

/// A member and its value.
pub type Member = (Vec<u8>, Vec<u8>);

/// The `kind` at `key`, created empty if missing.
pub fn typed_or_new(txn: &mut Txn<'_>, db: usize, key: &[u8], kind: Kind) -> Result<Meta> {
    match typed(txn, db, key, kind)? {
        Some(m) => Ok(m),
        None => Ok(txn.create(db, key, kind)?.clone()),
    }
}

/// Stores the collection's new size, deleting the key when it is empty; `outgrown` marks it
/// as past its compact encoding for `OBJECT ENCODING` (never undone, as in Redis).
pub fn resize(txn: &mut Txn<'_>, db: usize, key: &[u8], size: u64, outgrown: bool) -> Result<()> {
    if size == 0 {
        txn.set(db, key, None)?;
        return Ok(());
    }
    // An unchanged record is left alone: a command that changed nothing (SADD of members
    // already there) neither writes nor counts as a change.
    let unchanged = txn
        .get(db, key)?
        .is_some_and(|m| m.size == size && (!outgrown || m.hint == Hint::Raw));
    if unchanged {
        return Ok(());
    }
    if let Some(m) = txn.get_mut(db, key)? {
        m.size = size;
        if outgrown {
            m.hint = Hint::Raw;
        }
    }
    Ok(())
}

/// A uniformly random index below `n` (`n > 0`).
pub fn pick(n: usize) -> usize {
    (crate::shared::random_u64() % n as u64) as usize
}

/// Indexes of `count` distinct random elements out of `n` (all of them when `count >= n`),
/// by a partial Fisher-Yates shuffle.
pub fn distinct(n: usize, count: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if count >= n {
        return idx;
    }
    for i in 0..count {
        let j = i + pick(n - i);
        idx.swap(i, j);
    }
    idx.truncate(count);
    idx
}

/// Most members read after a random position for one draw: choosing among them evens out
/// how likely each member is (a member's chance follows the hash gaps before it, averaged
/// over this many members). Tombstones of deleted members between them are bounded by
/// [`removed`]'s rebuilds.
const DRAW_WINDOW: u64 = 16;

/// One member of collection `version` (of `size` members) drawn at random: a random
/// position in hash order is sought once, and one of the members from there on (up to
/// [`DRAW_WINDOW`], wrapping around) is picked, so a draw costs one seek whatever the
/// collection's size.
pub fn random_member(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    version: u64,
    size: u64,
) -> Result<Option<Member>> {
    let window = size.clamp(1, DRAW_WINDOW) as usize;
    let from = crate::shared::random_u64() >> 1;
    let (mut got, _) = txn.members(db, key, version, from, window)?;
    if got.len() < window {
        let (more, _) = txn.members(db, key, version, 0, window - got.len())?;
        for m in more {
            if !got.iter().any(|g| g.0 == m.0) {
                got.push(m);
            }
        }
    }
    if got.is_empty() {
        return Ok(None);
    }
    let i = pick(got.len().min(window));
    Ok(Some(got.swap_remove(i)))
}

/// `count` random members of a collection of `size` under `version`: with repeats when
/// `repeat`, else distinct (all of them when `count >= size`). Small draws seek once per
/// member; a draw of a large part of the collection reads it whole.
pub fn random_members(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    version: u64,
    size: u64,
    count: u64,
    repeat: bool,
) -> Result<Members> {
    if size == 0 || count == 0 {
        return Ok(Vec::new());
    }
    if repeat {
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        if count > size {
            let all = txn.all_members(db, key, version)?;
            for _ in 0..count {
                out.push(all[pick(all.len())].clone());
            }
            return Ok(out);
        }
        for _ in 0..count {
            out.extend(random_member(txn, db, key, version, size)?);
        }
        return Ok(out);
    }
    if count.saturating_mul(3) > size {
        let all = txn.all_members(db, key, version)?;
        let idx = distinct(all.len(), count as usize);
        return Ok(idx.into_iter().map(|i| all[i].clone()).collect());
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count as usize);
    let mut tries = 0;
    while (out.len() as u64) < count {
        tries += 1;
        if tries > count * 16 {
            // Unlucky draws: fall back to the whole collection.
            let all = txn.all_members(db, key, version)?;
            let idx = distinct(all.len(), count as usize);
            return Ok(idx.into_iter().map(|i| all[i].clone()).collect());
        }
        if let Some((m, v)) = random_member(txn, db, key, version, size)? {
            if seen.insert(m.clone()) {
                out.push((m, v));
            }
        }
    }
    Ok(out)
}

/// Deleted members a set or hash may leave behind, per live member, before it is rebuilt
/// under a new version. Until the engine merges them, deleted members stay as tombstones
/// that walks over the collection step over: a set drained by SPOP would make every later
/// draw step over all it ever held. Rebuilding costs a write per live member, paid for by
/// the deletes that led to it.
const DEAD_PER_LIVE: u64 = 4;

/// A set's or hash's count of members deleted since it was (re)built, from its payload.
fn dead_of(m: &Meta) -> Result<u64> {
    match m.payload.len() {
        0 => Ok(0),
        8 => Ok(u64::from_le_bytes(
            m.payload[..].try_into().unwrap_or([0; 8]),
        )),
        _ => Err(StoreError::Corrupt("set or hash metadata: bad payload".into()).into()),
    }
}

/// Notes that `n` members of the set or hash at `key` were deleted (after its new size is
/// recorded), rebuilding it when deleted ones outnumber live ones [`DEAD_PER_LIVE`] times.
pub fn removed(txn: &mut Txn<'_>, db: usize, key: &[u8], n: u64) -> Result<()> {
    let Some(m) = txn.get(db, key)?.cloned() else {
        return Ok(());
    };
    if n == 0 || !matches!(m.kind, Kind::Set | Kind::Hash) {
        return Ok(());
    }
    let dead = dead_of(&m)? + n;
    if dead > 64 && dead > DEAD_PER_LIVE * m.size {
        let members = txn.all_members(db, key, m.version)?;
        let nm = txn.create(db, key, m.kind)?;
        nm.size = m.size;
        nm.expire_at = m.expire_at;
        nm.hint = m.hint;
        let v = nm.version;
        for (f, val) in members {
            txn.set_member(db, key, v, &f, Some(val))?;
        }
    } else if let Some(mm) = txn.get_mut(db, key)? {
        mm.payload = dead.to_le_bytes().to_vec();
    }
    Ok(())
}
