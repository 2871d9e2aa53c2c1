//! The Global Index's entries in PM (docs/persistent-index.md): one BzTree per subtable
//! generation, one tree entry per version, every change a PMwCAS. Opening it after a crash
//! costs PMwCAS recovery, not a scan of the data. This module holds the entry format and the
//! operations a merge, the cleaner and readers need; the engine's merges do not use it yet.
//!
//! Invariants:
//! - P1 (order): a version's tree key is the user key with each 0x00 byte written as 0x00
//!   0xFF, then the terminator 0x00 0x00, then the bitwise complement of its sequence
//!   number, big-endian. Byte order of tree keys is then exactly [`IKey`] order (user key
//!   ascending, sequence descending), also for a key that is a prefix of another, so the
//!   first entry at or after (key, s) is the newest version of key visible at s.
//! - P2 (value): the record's pool offset over 8 in bits 24..61, the tombstone flag in bit
//!   23, the blob flag in bit 22, the ghost count in bits 8..22, and in bits 0..8 a CRC-8
//!   of bits 8..61. Offsets are multiples of 8 (items are), below 2^40. The BzTree does not
//!   check value words, so the CRC does: a value that fails it is corruption, never an
//!   offset, a flag or a count (a flipped count could drop a tombstone early).
//! - P3 (ghosts): only the key's newest entry's ghost count means anything (older entries'
//!   counts are stale and ignored). A merge writes the count into the new newest entry when
//!   it inserts it, so no PMwCAS spans two entries. A count that reached [`GHOST_MAX`]
//!   stays there (the key is recounted from its records, as recovery counts them today):
//!   a count too high only keeps a tombstone longer (GI3), never drops one too early.
//! - P4 (idempotent merge): inserting a (key, sequence) already present with the same
//!   offset and flags changes nothing, so a merge cut by a crash can run again; the same
//!   (key, sequence) at another offset is corruption (two records claim one write).
//!
//! Thread safety: every operation is a BzTree operation (latch-free, PMwCAS). Compound
//! updates (relocation, ghost counts) read an entry and change it with
//! [`BzTree::update_if`], retrying when another change came between. As in the volatile
//! index, one writer at a time changes a key's versions and ghost count (the merge, or the
//! cleaner's relocation, which loses cleanly to a merge); readers never wait.

// Point reads and backward walks serve the read path, which does not use the tree yet.
#![cfg_attr(not(test), allow(dead_code))]

use std::ops::Bound;

use nacre_bztree::{BzError, BzForest, BzTree, BzTreeOptions};
use nacre_halloc::Halloc;
use nacre_pmem::PmOffset;
use nacre_pmwcas::PmwcasError;

use crate::error::{Error, FullCause, Result};
use crate::index::IKey;

/// Bits of the value's CRC-8 (P2).
const CRC_BITS: u32 = 8;
/// Bits of the ghost count (P2).
const GHOST_BITS: u32 = 14;
/// A ghost count that stays where it is (P3).
pub(crate) const GHOST_MAX: u64 = (1 << GHOST_BITS) - 1;
const BLOB_BIT: u64 = 1 << (CRC_BITS + GHOST_BITS);
const TOMB_BIT: u64 = BLOB_BIT << 1;
const OFFSET_SHIFT: u32 = CRC_BITS + GHOST_BITS + 2;
/// Offsets at or past this do not fit an entry (1 TiB).
pub(crate) const OFFSET_LIMIT: u64 = 1 << (61 - OFFSET_SHIFT + 3);
/// Bytes a tree key adds to the escaped user key: terminator and sequence.
const KEY_EXTRA: usize = 2 + 8;

/// One version as the persistent index keeps it (its record's size is in the record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PmVersion {
    pub seq: u64,
    pub at: PmOffset,
    pub tomb: bool,
    pub blob: bool,
}

/// Where a key's versions live in the pool: the BzTree of one subtable generation.
pub(crate) struct PersistentIndex {
    tree: BzTree,
}

/// The engine's error for a tree's: damage is [`Error::Corrupt`]; I/O and the allocator keep
/// their kinds; a full node pool or descriptor table is [`Error::PoolFull`]; more threads
/// than the tree was made for is [`Error::InvalidOptions`].
pub(crate) fn index_error(e: BzError) -> Error {
    match e {
        BzError::Corrupt {
            structure,
            offset,
            detail,
        } => Error::corrupt_at(
            format!("persistent index {structure}: {detail}"),
            PmOffset(offset),
        ),
        BzError::KeyTooLong { len, max } => Error::TooLarge {
            what: "key in the persistent index",
            len,
            max,
        },
        BzError::Pmem(e) => Error::Pmem(e),
        BzError::Halloc(e) => Error::from_alloc(e),
        BzError::InvalidOptions(why) | BzError::Pmwcas(PmwcasError::InvalidOptions(why)) => {
            Error::InvalidOptions(format!("persistent index: {why}"))
        }
        e @ BzError::Pmwcas(PmwcasError::TooManyThreads { .. }) => {
            Error::InvalidOptions(format!("persistent index: {e}"))
        }
        e @ BzError::Pmwcas(PmwcasError::NoFreeDescriptor { .. }) => Error::PoolFull {
            cause: FullCause::Exhausted(format!("persistent index: {e}")),
            free_zones: 0,
        },
        other => Error::corrupt(format!("persistent index: {other}")),
    }
}

/// The tree key of (key, seq) (P1).
fn tree_key(key: &[u8], seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + KEY_EXTRA + key.len() / 8);
    escape_into(key, &mut k);
    k.extend_from_slice(&(!seq).to_be_bytes());
    k
}

fn escape_into(key: &[u8], out: &mut Vec<u8>) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// The sequence number of tree key `k` when it is a version of `key` (P1), read without
/// decoding `k`; `None` for anything else, ill-formed keys included.
fn version_of(k: &[u8], key: &[u8]) -> Option<u64> {
    let mut i = 0;
    for &b in key {
        if k.get(i) != Some(&b) {
            return None;
        }
        i += 1;
        if b == 0 {
            if k.get(i) != Some(&0xFF) {
                return None;
            }
            i += 1;
        }
    }
    if k.get(i..i + 2) != Some(&[0, 0][..]) {
        return None;
    }
    let seq: [u8; 8] = k.get(i + 2..)?.try_into().ok()?;
    Some(!u64::from_be_bytes(seq))
}

/// The smallest tree key after (key, seq)'s.
fn just_after(b: &IKey) -> Vec<u8> {
    let mut k = tree_key(&b.key, b.seq);
    k.push(0);
    k
}

/// The user key and sequence of a tree key, into `out`; an ill-formed key is corruption.
fn decode_key(k: &[u8], out: &mut IKey) -> Result<()> {
    let bad = || Error::corrupt("persistent index: ill-formed entry key");
    out.key.clear();
    let mut i = 0;
    loop {
        match (k.get(i), k.get(i + 1)) {
            (Some(0), Some(0)) => break,
            (Some(0), Some(0xFF)) => {
                out.key.push(0);
                i += 2;
            }
            (Some(0), _) | (None, _) => return Err(bad()),
            (Some(&b), _) => {
                out.key.push(b);
                i += 1;
            }
        }
    }
    let seq: [u8; 8] = k
        .get(i + 2..)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(bad)?;
    out.seq = !u64::from_be_bytes(seq);
    Ok(())
}

/// CRC-8 (generator x^8+x^2+x+1) of the 53 bits above a value's check byte, most
/// significant byte first.
fn crc8(bits: u64) -> u64 {
    let mut crc: u8 = 0;
    for i in (0..7).rev() {
        crc ^= (bits >> (8 * i)) as u8;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
    }
    u64::from(crc)
}

/// An entry's value (P2).
fn encode_value(v: &PmVersion, ghosts: u64) -> Result<u64> {
    let at = v.at.get();
    if at % 8 != 0 || at >= OFFSET_LIMIT {
        return Err(Error::InvalidOptions(format!(
            "record offset {at:#x} cannot be indexed (multiple of 8 below {OFFSET_LIMIT:#x})"
        )));
    }
    let flags = (u64::from(v.tomb) * TOMB_BIT) | (u64::from(v.blob) * BLOB_BIT);
    let body = ((at >> 3) << OFFSET_SHIFT) | flags | (ghosts.min(GHOST_MAX) << CRC_BITS);
    Ok(body | crc8(body >> CRC_BITS))
}

/// The version and ghost count an entry's value holds; one failing its CRC is corruption.
fn decode_value(seq: u64, w: u64) -> Result<(PmVersion, u64)> {
    if crc8(w >> CRC_BITS) != w & ((1 << CRC_BITS) - 1) {
        return Err(Error::corrupt(format!(
            "persistent index: value {w:#x} of version {seq} fails its check"
        )));
    }
    let v = PmVersion {
        seq,
        at: PmOffset((w >> OFFSET_SHIFT) << 3),
        tomb: w & TOMB_BIT != 0,
        blob: w & BLOB_BIT != 0,
    };
    Ok((v, (w >> CRC_BITS) & GHOST_MAX))
}

/// `count + delta` under P3: a saturated count stays.
fn ghosts_after(count: u64, delta: i64) -> u64 {
    if count == GHOST_MAX {
        return GHOST_MAX;
    }
    count.saturating_add_signed(delta).min(GHOST_MAX)
}

impl PersistentIndex {
    /// The options of a forest whose trees hold indexes of user keys up to `max_key` bytes
    /// without zero bytes (each zero byte takes one more): `trees` trees of `node_size`-byte
    /// nodes, `nodes` of them in all.
    pub fn forest_options(
        name: &str,
        trees: u32,
        node_size: u32,
        nodes: u64,
        max_key: usize,
    ) -> BzTreeOptions {
        BzTreeOptions {
            name: name.into(),
            node_size,
            max_key_len: max_key + KEY_EXTRA,
            nodes,
            trees,
            ..BzTreeOptions::default()
        }
    }

    /// The index in tree `slot` of `forest` (created empty on first use).
    pub fn in_forest(forest: &BzForest, slot: u32) -> Result<PersistentIndex> {
        let (tree, _) = forest.tree(slot).map_err(index_error)?;
        Ok(PersistentIndex { tree })
    }

    /// Opens (or creates) the index named `name` on `halloc`'s pool: the one tree of a
    /// forest of its own (see [`PersistentIndex::forest_options`]).
    pub fn open(
        halloc: &Halloc,
        name: &str,
        node_size: u32,
        nodes: u64,
        max_key: usize,
    ) -> Result<PersistentIndex> {
        let opts = Self::forest_options(name, 1, node_size, nodes, max_key);
        let (tree, _) = BzTree::open(halloc, &opts).map_err(index_error)?;
        Ok(PersistentIndex { tree })
    }

    /// The tree underneath (checks and statistics).
    pub fn tree(&self) -> &BzTree {
        &self.tree
    }

    /// Whether `key` fits an entry (longer keys need the long-key list of the design).
    pub fn fits(&self, key: &[u8]) -> bool {
        key.len() + key.iter().filter(|&&b| b == 0).count() + KEY_EXTRA <= self.tree.max_key_len()
    }

    /// Adds version `v` of `key` carrying the key's ghost count `ghosts` (P3: the newest
    /// version carries it); false when it was there already (P4).
    pub fn insert(&self, key: &[u8], v: PmVersion, ghosts: u64) -> Result<bool> {
        let k = tree_key(key, v.seq);
        let w = encode_value(&v, ghosts)?;
        if self.tree.insert(&k, w).map_err(index_error)? {
            return Ok(true);
        }
        match self.tree.get(&k).map_err(index_error)? {
            Some(old) => {
                let (had, _) = decode_value(v.seq, old)?;
                if had == v {
                    return Ok(false);
                }
                Err(Error::corrupt(format!(
                    "persistent index: version {} indexed at {:#x}, merged again at {:#x}",
                    v.seq,
                    had.at.get(),
                    v.at.get()
                )))
            }
            // Deleted between the two calls: by the caller's own rules only the merge
            // writes this key now, so this is a version dropped meanwhile.
            None => Ok(false),
        }
    }

    /// The newest version of `key` with sequence at most `snapshot`.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<PmVersion>> {
        let found = self
            .tree
            .seek_map(&tree_key(key, snapshot), |k, w| match version_of(k, key) {
                Some(seq) => Ok((seq, w)),
                None => Err(k.to_vec()),
            })
            .map_err(index_error)?;
        match found {
            None => Ok(None),
            Some(Ok((seq, w))) => Ok(Some(decode_value(seq, w)?.0)),
            Some(Err(other)) => {
                // Another key's entry: it must still decode (an ill-formed one is damage).
                decode_key(&other, &mut IKey::default())?;
                Ok(None)
            }
        }
    }

    /// The entry of `key`'s newest version with sequence at most `snapshot`: its tree key,
    /// sequence and value word.
    fn newest_at(&self, key: &[u8], snapshot: u64) -> Result<Option<(Vec<u8>, u64, u64)>> {
        let found = self
            .tree
            .seek(&tree_key(key, snapshot))
            .map_err(index_error)?;
        let Some((k, w)) = found else {
            return Ok(None);
        };
        let mut ik = IKey::default();
        decode_key(&k, &mut ik)?;
        Ok((ik.key == key).then_some((k, ik.seq, w)))
    }

    /// Every version of `key`, newest first, and the key's ghost count (P3).
    pub fn versions(&self, key: &[u8]) -> Result<(Vec<PmVersion>, u64)> {
        let mut prefix = Vec::new();
        escape_into(key, &mut prefix);
        // Past every sequence of the key: longer than its 8 bytes, all 0xFF.
        let mut end = prefix.clone();
        end.extend_from_slice(&[0xFF; 9]);
        let mut out = Vec::new();
        let mut ghosts = 0;
        let mut from = prefix;
        let mut ik = IKey::default();
        loop {
            let batch = self.tree.scan(&from, Some(&end), 64).map_err(index_error)?;
            let last = batch.len() < 64;
            for (k, w) in &batch {
                decode_key(k, &mut ik)?;
                let (v, g) = decode_value(ik.seq, *w)?;
                if out.is_empty() {
                    ghosts = g;
                }
                out.push(v);
            }
            match batch.last() {
                Some((k, _)) if !last => {
                    from = k.clone();
                    from.push(0);
                }
                _ => return Ok((out, ghosts)),
            }
        }
    }

    /// The first entry after `bound` in index order, into `out`; its record's offset.
    pub fn next_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Result<Option<PmOffset>> {
        let from = match bound {
            Bound::Unbounded => Vec::new(),
            Bound::Included(b) => tree_key(&b.key, b.seq),
            Bound::Excluded(b) => just_after(b),
        };
        self.entry_into(self.tree.seek(&from).map_err(index_error)?, out)
    }

    /// The last entry before `bound` in index order, into `out`; its record's offset.
    pub fn prev_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Result<Option<PmOffset>> {
        let before = match bound {
            // Past every tree key: longer than the longest, all 0xFF.
            Bound::Unbounded => vec![0xFF; self.tree.max_key_len() + 1],
            Bound::Included(b) => just_after(b),
            Bound::Excluded(b) => tree_key(&b.key, b.seq),
        };
        self.entry_into(self.tree.seek_before(&before).map_err(index_error)?, out)
    }

    fn entry_into(&self, e: Option<(Vec<u8>, u64)>, out: &mut IKey) -> Result<Option<PmOffset>> {
        let Some((k, w)) = e else {
            return Ok(None);
        };
        decode_key(&k, out)?;
        Ok(Some(decode_value(out.seq, w)?.0.at))
    }

    /// Up to `max` entries after `after` (from the first when `None`), in index order: each
    /// entry's key and sequence, its version and its ghost count.
    pub fn scan(&self, after: Option<&IKey>, max: usize) -> Result<Vec<(IKey, PmVersion, u64)>> {
        let from = after.map_or_else(Vec::new, just_after);
        let batch = self.tree.scan(&from, None, max).map_err(index_error)?;
        batch
            .iter()
            .map(|(k, w)| {
                let mut ik = IKey::default();
                decode_key(k, &mut ik)?;
                let (v, g) = decode_value(ik.seq, *w)?;
                Ok((ik, v, g))
            })
            .collect()
    }

    /// Moves version `seq` of `key` from `from` to `to` (the cleaner relocated its record);
    /// false when the entry is gone or points elsewhere (a merge dropped it meanwhile: the
    /// copy is a ghost, as in the volatile index).
    pub fn relocate(&self, key: &[u8], seq: u64, from: PmOffset, to: PmOffset) -> Result<bool> {
        let k = tree_key(key, seq);
        let Some(mut cur) = self.tree.get(&k).map_err(index_error)? else {
            return Ok(false);
        };
        loop {
            let (v, ghosts) = decode_value(seq, cur)?;
            if v.at != from {
                return Ok(false);
            }
            let new = encode_value(&PmVersion { at: to, ..v }, ghosts)?;
            match self.tree.update_if(&k, cur, new).map_err(index_error)? {
                Ok(()) => return Ok(true),
                Err(Some(now)) => cur = now,
                Err(None) => return Ok(false),
            }
        }
    }

    /// Removes version `seq` of `key`; what it held.
    pub fn remove(&self, key: &[u8], seq: u64) -> Result<Option<PmVersion>> {
        self.tree
            .delete(&tree_key(key, seq))
            .map_err(index_error)?
            .map(|w| decode_value(seq, w).map(|(v, _)| v))
            .transpose()
    }

    /// Adds `delta` to `key`'s ghost count, in its newest entry (P3); the count after, or
    /// `None` when the key has no entry.
    pub fn add_ghosts(&self, key: &[u8], delta: i64) -> Result<Option<u64>> {
        loop {
            let Some((k, seq, w)) = self.newest_at(key, u64::MAX)? else {
                return Ok(None);
            };
            let (v, g) = decode_value(seq, w)?;
            let after = ghosts_after(g, delta);
            if after == g {
                return Ok(Some(g));
            }
            if self
                .tree
                .update_if(&k, w, encode_value(&v, after)?)
                .map_err(index_error)?
                .is_ok()
            {
                return Ok(Some(after));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
#[path = "persistent_tests.rs"]
mod tests;
