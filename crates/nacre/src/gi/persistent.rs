//! The Global Index's entries in PM (docs/persistent-index.md): one BzTree per subtable
//! generation, one entry per key, every change a PMwCAS. Opening it after a crash costs
//! PMwCAS recovery, not a scan of the data. This module holds the entry format and the
//! operations a merge, the cleaner and readers need.
//!
//! The tree holds what a restart needs: each key's newest version, and how many other
//! copies of the key are in PM. Older versions that live readers and snapshots still need
//! stay in DRAM only, since no reader outlives a crash; a version leaving that set changes
//! nothing in the tree (it was counted as a copy from the start).
//!
//! Invariants:
//! - P1 (order): a key's entry has the tree key made of the user key with each 0x00 byte
//!   written as 0x00 0xFF, then the terminator 0x00 0x00. Byte order of tree keys is then
//!   user key order, also for a key that is a prefix of another, and the empty key has an
//!   entry like any other.
//! - P2 (value): the record's pool offset over 8 in bits 24..61, the tombstone flag in bit
//!   23, the blob flag in bit 22, the copy count in bits 8..22, and in bits 0..8 a CRC-8 of
//!   bits 8..61. Offsets are multiples of 8 (items are), below 2^40. The BzTree does not
//!   check value words, so the CRC does: a value that fails it is corruption, never an
//!   offset, a flag or a count (a flipped count could drop a tombstone early).
//! - P3 (newest): an entry names its key's newest version; its sequence number is its
//!   record's, read with the record's identity check, so an entry that names another
//!   key's record is corruption. Replacing a key's newest version rewrites the entry's
//!   value word: one PMwCAS, and no leaf space.
//! - P4 (copies): the count is the key's copies in PM that the entry does not name: the
//!   volatile index's ghosts (GI2) plus its older versions. It is what a rebuild from the
//!   records would count, so a tombstone whose count is not 0 stays (GI3). A count that
//!   reached [`GHOST_MAX`] stays there (the key is recounted from its records, as recovery
//!   counts them today): a count too high only keeps a tombstone longer, never drops one
//!   too early.
//! - P5 (idempotent): writing an entry that already holds the wanted value changes nothing,
//!   so a change cut by a crash can be made again.
//!
//! Thread safety: every operation is a BzTree operation (latch-free, PMwCAS). As in the
//! volatile index, one writer at a time changes a key's entry (the background worker); it
//! rewrites the entry with [`BzTree::update_if`], conditional on the word it last left
//! there, so a word changed by anything else is found. Readers never wait.

use std::sync::Arc;

use nacre_bztree::{BzError, BzForest, BzTree, BzTreeOptions};
use nacre_pmem::PmOffset;
use nacre_pmwcas::PmwcasError;

use crate::error::{Error, FullCause, Result};

/// Bits of the value's CRC-8 (P2).
const CRC_BITS: u32 = 8;
/// Bits of the copy count (P2).
const GHOST_BITS: u32 = 14;
/// A copy count that stays where it is (P4).
pub(crate) const GHOST_MAX: u64 = (1 << GHOST_BITS) - 1;
const BLOB_BIT: u64 = 1 << (CRC_BITS + GHOST_BITS);
const TOMB_BIT: u64 = BLOB_BIT << 1;
const OFFSET_SHIFT: u32 = CRC_BITS + GHOST_BITS + 2;
/// Offsets at or past this do not fit an entry (1 TiB).
pub(crate) const OFFSET_LIMIT: u64 = 1 << (61 - OFFSET_SHIFT + 3);
/// Bytes a tree key adds to the escaped user key: the terminator.
const KEY_EXTRA: usize = 2;

/// A key's newest version as the persistent index keeps it (its record's size is in the
/// record; its sequence number too, P3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PmVersion {
    pub seq: u64,
    pub at: PmOffset,
    pub tomb: bool,
    pub blob: bool,
}

/// Reads the sequence number of the record at an offset that an entry names as a record of
/// a key (P3); an error when it is not one.
pub(crate) type SeqOf = Arc<dyn Fn(PmOffset, &[u8]) -> Result<u64> + Send + Sync>;

/// Where a subtable generation's keys live in the pool: its BzTree.
pub(crate) struct PersistentIndex {
    tree: BzTree,
    seq_of: SeqOf,
}

/// One entry in tree order, as a walk finds it (its sequence number unread).
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub key: Vec<u8>,
    pub word: u64,
    pub at: PmOffset,
    pub tomb: bool,
    pub blob: bool,
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

/// The tree key of `key` (P1).
fn tree_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + KEY_EXTRA + key.len() / 8);
    for &b in key {
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    k.extend_from_slice(&[0, 0]);
    k
}

/// The item of entry (`tree_key`, `word`).
fn item(tree_key: Vec<u8>, word: u64) -> Result<Item> {
    let mut key = Vec::with_capacity(tree_key.len());
    decode_key(&tree_key, &mut key)?;
    let (v, _) = decode_value(word)?;
    Ok(Item {
        key,
        word,
        at: v.at,
        tomb: v.tomb,
        blob: v.blob,
    })
}

/// The user key of a tree key, into `out`; an ill-formed key is corruption.
fn decode_key(k: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let bad = || Error::corrupt("persistent index: ill-formed entry key");
    out.clear();
    let mut i = 0;
    loop {
        match (k.get(i), k.get(i + 1)) {
            (Some(0), Some(0)) if i + 2 == k.len() => return Ok(()),
            (Some(0), Some(0xFF)) => {
                out.push(0);
                i += 2;
            }
            (Some(0), _) | (None, _) => return Err(bad()),
            (Some(&b), _) => {
                out.push(b);
                i += 1;
            }
        }
    }
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

/// The value word of an entry naming `v` with copy count `copies` (P2; the count saturates).
pub(crate) fn encode_value(v: &PmVersion, copies: u64) -> Result<u64> {
    let at = v.at.get();
    if at % 8 != 0 || at >= OFFSET_LIMIT {
        return Err(Error::InvalidOptions(format!(
            "record offset {at:#x} cannot be indexed (multiple of 8 below {OFFSET_LIMIT:#x})"
        )));
    }
    let flags = (u64::from(v.tomb) * TOMB_BIT) | (u64::from(v.blob) * BLOB_BIT);
    let body = ((at >> 3) << OFFSET_SHIFT) | flags | (copies.min(GHOST_MAX) << CRC_BITS);
    Ok(body | crc8(body >> CRC_BITS))
}

/// The version (its sequence number left 0: it is the record's, P3) and copy count a value
/// word holds; one failing its CRC is corruption.
fn decode_value(w: u64) -> Result<(PmVersion, u64)> {
    if crc8(w >> CRC_BITS) != w & ((1 << CRC_BITS) - 1) {
        return Err(Error::corrupt(format!(
            "persistent index: value {w:#x} fails its check"
        )));
    }
    let v = PmVersion {
        seq: 0,
        at: PmOffset((w >> OFFSET_SHIFT) << 3),
        tomb: w & TOMB_BIT != 0,
        blob: w & BLOB_BIT != 0,
    };
    Ok((v, (w >> CRC_BITS) & GHOST_MAX))
}

/// Whether two value words name the same record with the same flags (whatever their
/// counts).
fn same_version(a: u64, b: u64) -> bool {
    a >> (CRC_BITS + GHOST_BITS) == b >> (CRC_BITS + GHOST_BITS)
}

/// The copy count a value word holds, unchecked (the caller checked or wrote it).
fn copies_in(w: u64) -> u64 {
    (w >> CRC_BITS) & GHOST_MAX
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

    /// The index in tree `slot` of `forest` (created empty on first use), whose entries'
    /// sequence numbers `seq_of` reads.
    pub fn in_forest(forest: &BzForest, slot: u32, seq_of: SeqOf) -> Result<PersistentIndex> {
        let (tree, _) = forest.tree(slot).map_err(index_error)?;
        Ok(PersistentIndex { tree, seq_of })
    }

    #[cfg(test)]
    /// Opens (or creates) the index named `name` on `halloc`'s pool: the one tree of a
    /// forest of its own (see [`PersistentIndex::forest_options`]).
    pub fn open(
        halloc: &nacre_halloc::Halloc,
        name: &str,
        (node_size, nodes, max_key): (u32, u64, usize),
        seq_of: SeqOf,
    ) -> Result<PersistentIndex> {
        let opts = Self::forest_options(name, 1, node_size, nodes, max_key);
        let (tree, _) = BzTree::open(halloc, &opts).map_err(index_error)?;
        Ok(PersistentIndex { tree, seq_of })
    }

    #[cfg(test)]
    /// The tree underneath (checks and statistics).
    pub fn tree(&self) -> &BzTree {
        &self.tree
    }

    /// Whether `key` fits an entry (longer keys need the long-key list of the design).
    pub fn fits(&self, key: &[u8]) -> bool {
        key.len() + key.iter().filter(|&&b| b == 0).count() + KEY_EXTRA <= self.tree.max_key_len()
    }

    /// `key`'s entry's value word, if it has one.
    pub fn word(&self, key: &[u8]) -> Result<Option<u64>> {
        self.tree.get(&tree_key(key)).map_err(index_error)
    }

    /// `key`'s newest version (its sequence number read from its record, P3) and its copy
    /// count.
    pub fn newest(&self, key: &[u8]) -> Result<Option<(PmVersion, u64)>> {
        let Some(w) = self.word(key)? else {
            return Ok(None);
        };
        let (v, copies) = decode_value(w)?;
        let seq = (self.seq_of)(v.at, key)?;
        Ok(Some((PmVersion { seq, ..v }, copies)))
    }

    /// Calls `f` on every entry in tree order, fetched a leaf at a time. `f` may change the
    /// entry it is given or earlier ones: the walk goes on after the leaf it read last.
    pub fn walk(&self, f: impl FnMut(Item) -> Result<()>) -> Result<()> {
        self.walk_range(None, None, f)
    }

    /// [`PersistentIndex::walk`] over the entries of user keys `from <= key < to` (no bound
    /// where `None`).
    pub fn walk_range(
        &self,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        mut f: impl FnMut(Item) -> Result<()>,
    ) -> Result<()> {
        // Tree keys sort as their user keys, and a user key's tree key is the least tree key
        // of that user key or any above it (the escape keeps order; the terminator is 00 00).
        let start = from.map_or_else(Vec::new, tree_key);
        let end = to.map(tree_key);
        let mut failed = None;
        self.tree
            .for_each_leaf(&start, end.as_deref(), |entries| {
                for (k, w) in entries {
                    if let Err(e) = item(k, w).and_then(&mut f) {
                        failed = Some(e);
                        return Ok(false);
                    }
                }
                Ok(true)
            })
            .map_err(index_error)?;
        failed.map_or(Ok(()), Err)
    }

    /// Brings `key`'s entry from value word `have` (what the writer last left there; `None`:
    /// no entry) to naming `want` with copy count `copies` (`None`: the key leaves the
    /// index). A saturated count stays (P4). Only the writer changes the entry: one found
    /// otherwise than `have` says is corruption (for a removal, found as it goes).
    pub fn change(
        &self,
        key: &[u8],
        have: Option<u64>,
        want: Option<&PmVersion>,
        copies: u64,
    ) -> Result<()> {
        if let (Some(x), Some(w)) = (have, want) {
            // The common no-op (a merge that only kept or dropped older versions), without
            // touching the tree.
            if encode_value(w, copies)? == x {
                return Ok(());
            }
        }
        if !self.fits(key) {
            return Err(Error::TooLarge {
                what: "key in the persistent index",
                len: key.len(),
                max: self.tree.max_key_len() - KEY_EXTRA,
            });
        }
        let k = tree_key(key);
        match (have, want) {
            (None, None) => Ok(()),
            (Some(x), None) => match self.tree.delete(&k).map_err(index_error)? {
                Some(g) if g == x || (same_version(g, x) && copies_in(g) == GHOST_MAX) => Ok(()),
                _ => Err(Self::changed_under(key)),
            },
            (None, Some(w)) => {
                if self
                    .tree
                    .insert(&k, encode_value(w, copies)?)
                    .map_err(index_error)?
                {
                    return Ok(());
                }
                // P5: an entry written before a crash cut the change.
                let now = self.word(key)?;
                self.put(key, &k, now, w, copies)
            }
            (Some(x), Some(w)) => self.put(key, &k, Some(x), w, copies),
        }
    }

    /// Rewrites the entry from `cur` to naming `w` with count `copies`, kept saturated (P4).
    fn put(
        &self,
        key: &[u8],
        k: &[u8],
        mut cur: Option<u64>,
        w: &PmVersion,
        copies: u64,
    ) -> Result<()> {
        // One retry: the writer's idea of the count may be below a saturated one (P4).
        for _ in 0..2 {
            let Some(x) = cur else {
                return Err(Self::changed_under(key));
            };
            decode_value(x)?;
            let c = if copies_in(x) == GHOST_MAX {
                GHOST_MAX
            } else {
                copies
            };
            let word = encode_value(w, c)?;
            if word == x {
                return Ok(());
            }
            match self.tree.update_if(k, x, word).map_err(index_error)? {
                Ok(()) => return Ok(()),
                Err(Some(n)) if same_version(n, x) && copies_in(n) == GHOST_MAX => cur = Some(n),
                Err(_) => break,
            }
        }
        Err(Self::changed_under(key))
    }

    fn changed_under(key: &[u8]) -> Error {
        Error::corrupt(format!(
            "persistent index: the entry of {key:?} changed under its writer"
        ))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
#[path = "persistent_tests.rs"]
mod tests;
