//! The Global Index's entries in PM (docs/persistent-index.md): one BzTree per subtable
//! generation, one tree entry per version, every change a PMwCAS. Opening it after a crash
//! costs PMwCAS recovery, not a scan of the data. This module holds the entry format and the
//! operations a merge, the cleaner and readers need.
//!
//! Invariants:
//! - P1 (order): a key's *head* entry has the tree key `K` = the user key with each 0x00
//!   byte written as 0x00 0xFF, then the terminator 0x00 0x00; each of its older versions
//!   has `K` followed by the bitwise complement of its sequence number, big-endian. Byte
//!   order of tree keys is then [`IKey`] order (user key ascending, sequence descending),
//!   also for a key that is a prefix of another: a key's head comes first, then its older
//!   versions newest first, and nothing of another key lies between them.
//! - P2 (value): the record's pool offset over 8 in bits 24..61, the tombstone flag in bit
//!   23, the blob flag in bit 22, the ghost count in bits 8..22, and in bits 0..8 a CRC-8
//!   of bits 8..61. Offsets are multiples of 8 (items are), below 2^40. The BzTree does not
//!   check value words, so the CRC does: a value that fails it is corruption, never an
//!   offset, a flag or a count (a flipped count could drop a tombstone early).
//! - P3 (head): a key with entries has a head, which names its newest version; the head's
//!   sequence number is its record's (read with the record's identity check, so a head that
//!   names another key's record is corruption). Older versions are kept only while a
//!   snapshot may read them, each with a sequence number below the head's. Replacing a
//!   key's newest version rewrites the head's value word: one PMwCAS, and no leaf space.
//! - P4 (ghosts): only the head's ghost count means anything (older entries carry 0). A
//!   count that reached [`GHOST_MAX`] stays there (the key is recounted from its records,
//!   as recovery counts them today): a count too high only keeps a tombstone longer (GI3),
//!   never drops one too early.
//! - P5 (idempotent): writing an entry that already holds the same value changes nothing,
//!   so a change cut by a crash can be made again; an older version already present at
//!   another offset or with other flags is corruption (two records claim one write).
//! - P6 (order of a change): a change inserts the older entries the key now needs, then
//!   removes those it no longer needs, then writes the head. A reader between two steps
//!   finds, for any snapshot the horizon still serves, the version it would find before
//!   the change or after it.
//!
//! Thread safety: every operation is a BzTree operation (latch-free, PMwCAS). As in the
//! volatile index, one writer at a time changes a key's entries (the background worker);
//! the head is rewritten with [`BzTree::update_if`], conditional on the word the writer
//! last left there, so a word changed by anything else is found. Readers never wait.

use std::sync::Arc;

use nacre_bztree::{BzError, BzForest, BzTree, BzTreeOptions};
use nacre_pmem::PmOffset;
use nacre_pmwcas::PmwcasError;

use crate::error::{Error, FullCause, Result};

/// Bits of the value's CRC-8 (P2).
const CRC_BITS: u32 = 8;
/// Bits of the ghost count (P2).
const GHOST_BITS: u32 = 14;
/// A ghost count that stays where it is (P4).
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

/// Reads the sequence number of the record at an offset that a head names as a record of
/// a key (P3); an error when it is not one.
pub(crate) type SeqOf = Arc<dyn Fn(PmOffset, &[u8]) -> Result<u64> + Send + Sync>;

/// Where a key's versions live in the pool: the BzTree of one subtable generation.
pub(crate) struct PersistentIndex {
    tree: BzTree,
    seq_of: SeqOf,
}

/// A key's entries as the tree holds them: the head's value word, and the older versions,
/// newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entries {
    pub head: Option<u64>,
    pub older: Vec<PmVersion>,
}

impl Entries {
    /// The entries that a key with `versions` (newest first) and ghost count `ghosts` has
    /// (P3, P4).
    pub fn of(versions: &[PmVersion], ghosts: u64) -> Result<Entries> {
        Ok(Entries {
            head: versions
                .first()
                .map(|v| encode_value(v, ghosts))
                .transpose()?,
            older: versions.get(1..).unwrap_or_default().to_vec(),
        })
    }
}

/// One entry in tree order.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    /// The tree key (where a walk goes on from).
    pub tree_key: Vec<u8>,
    pub key: Vec<u8>,
    /// `None` for the head (its sequence number is its record's, P3).
    pub seq: Option<u64>,
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

/// The head's tree key of `key` (P1).
fn head_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + KEY_EXTRA + key.len() / 8);
    escape_into(key, &mut k);
    k
}

/// The tree key of older version `seq` of `key` (P1).
fn version_key(key: &[u8], seq: u64) -> Vec<u8> {
    let mut k = head_key(key);
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

/// The sequence number of tree key `k` when it is an older version of `key` (P1), read
/// without decoding `k`; `None` for anything else, heads and ill-formed keys included.
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

/// The user key of a tree key, into `out`, and its sequence number (`None` for a head); an
/// ill-formed key is corruption.
fn decode_key(k: &[u8], out: &mut Vec<u8>) -> Result<Option<u64>> {
    let bad = || Error::corrupt("persistent index: ill-formed entry key");
    out.clear();
    let mut i = 0;
    loop {
        match (k.get(i), k.get(i + 1)) {
            (Some(0), Some(0)) => break,
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
    match &k[i + 2..] {
        [] => Ok(None),
        rest => {
            let seq: [u8; 8] = rest.try_into().map_err(|_| bad())?;
            Ok(Some(!u64::from_be_bytes(seq)))
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

/// The version (with sequence `seq`) and ghost count an entry's value holds; one failing
/// its CRC is corruption.
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

/// Whether two value words name the same record with the same flags (whatever their
/// ghost counts).
fn same_version(a: u64, b: u64) -> bool {
    a >> (CRC_BITS + GHOST_BITS) == b >> (CRC_BITS + GHOST_BITS)
}

/// The ghost count a value word holds, unchecked (the caller checked or wrote it).
fn ghosts_in(w: u64) -> u64 {
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

    /// The index in tree `slot` of `forest` (created empty on first use), whose heads'
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

    /// The head's version (its sequence number read from its record, P3) and the key's
    /// ghost count.
    fn head_version(&self, key: &[u8], w: u64) -> Result<(PmVersion, u64)> {
        let (v, g) = decode_value(0, w)?;
        let seq = (self.seq_of)(v.at, key)?;
        Ok((PmVersion { seq, ..v }, g))
    }

    /// The newest version of `key` with sequence at most `snapshot`.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<PmVersion>> {
        let Some(w) = self.tree.get(&head_key(key)).map_err(index_error)? else {
            return Ok(None);
        };
        let (head, _) = self.head_version(key, w)?;
        if head.seq <= snapshot {
            return Ok(Some(head));
        }
        let found = self
            .tree
            .seek_map(&version_key(key, snapshot), |k, w| {
                match version_of(k, key) {
                    Some(seq) => Ok((seq, w)),
                    None => Err(k.to_vec()),
                }
            })
            .map_err(index_error)?;
        match found {
            None => Ok(None),
            Some(Ok((seq, w))) => Ok(Some(decode_value(seq, w)?.0)),
            Some(Err(other)) => {
                // Another key's entry: it must still decode (an ill-formed one is damage).
                decode_key(&other, &mut Vec::new())?;
                Ok(None)
            }
        }
    }

    /// The entries of `key` as the tree holds them.
    pub fn entries(&self, key: &[u8]) -> Result<Entries> {
        let from = head_key(key);
        // Past every sequence of the key: longer than its 8 bytes, all 0xFF.
        let mut end = from.clone();
        end.extend_from_slice(&[0xFF; 9]);
        let mut out = Entries::default();
        let mut from = from;
        loop {
            let batch = self.tree.scan(&from, Some(&end), 64).map_err(index_error)?;
            let last = batch.len() < 64;
            for (k, w) in &batch {
                match version_of(k, key) {
                    Some(seq) => out.older.push(decode_value(seq, *w)?.0),
                    None if out.head.is_none() && out.older.is_empty() => {
                        decode_value(0, *w)?;
                        out.head = Some(*w);
                    }
                    None => return Err(Error::corrupt("persistent index: ill-formed entry key")),
                }
            }
            match batch.last() {
                Some((k, _)) if !last => {
                    from = k.clone();
                    from.push(0);
                }
                _ => return Ok(out),
            }
        }
    }

    /// Every version of `key`, newest first, and the key's ghost count (P4).
    pub fn versions(&self, key: &[u8]) -> Result<(Vec<PmVersion>, u64)> {
        let e = self.entries(key)?;
        let Some(w) = e.head else {
            if e.older.is_empty() {
                return Ok((Vec::new(), 0));
            }
            return Err(Error::corrupt(format!(
                "persistent index: {key:?} has older versions and no head"
            )));
        };
        let (head, ghosts) = self.head_version(key, w)?;
        if e.older.first().is_some_and(|o| o.seq >= head.seq) {
            return Err(Error::corrupt(format!(
                "persistent index: {key:?} has a version at least as new as its head"
            )));
        }
        let mut out = Vec::with_capacity(1 + e.older.len());
        out.push(head);
        out.extend(e.older);
        Ok((out, ghosts))
    }

    /// Up to `max` entries after tree key `after` (from the first when `None`), in tree order.
    pub fn scan(&self, after: Option<&[u8]>, max: usize) -> Result<Vec<Item>> {
        let from = after.map_or_else(Vec::new, |a| {
            let mut k = a.to_vec();
            k.push(0);
            k
        });
        let batch = self.tree.scan(&from, None, max).map_err(index_error)?;
        batch
            .into_iter()
            .map(|(tree_key, word)| {
                let mut key = Vec::new();
                let seq = decode_key(&tree_key, &mut key)?;
                let (v, _) = decode_value(seq.unwrap_or(0), word)?;
                Ok(Item {
                    tree_key,
                    key,
                    seq,
                    word,
                    at: v.at,
                    tomb: v.tomb,
                    blob: v.blob,
                })
            })
            .collect()
    }

    /// Brings `key`'s entries from `have` (what the tree holds) to versions `want` (newest
    /// first; empty: the key leaves the index) with ghost count `ghosts`, in P6's order.
    /// A saturated count stays (P4). Nothing else may change the key's entries meanwhile:
    /// an entry found otherwise than `have` says is corruption.
    pub fn change(
        &self,
        key: &[u8],
        have: &Entries,
        want: &[PmVersion],
        ghosts: u64,
    ) -> Result<()> {
        if !self.fits(key) {
            return Err(Error::TooLarge {
                what: "key in the persistent index",
                len: key.len(),
                max: self.tree.max_key_len() - KEY_EXTRA,
            });
        }
        let older = want.get(1..).unwrap_or_default();
        for w in older {
            match have.older.iter().find(|h| h.seq == w.seq) {
                Some(h) if h == w => {}
                Some(h) if h.tomb == w.tomb && h.blob == w.blob => {
                    let k = version_key(key, w.seq);
                    let (from, to) = (encode_value(h, 0)?, encode_value(w, 0)?);
                    if self
                        .tree
                        .update_if(&k, from, to)
                        .map_err(index_error)?
                        .is_err()
                    {
                        return Err(Error::corrupt(format!(
                            "persistent index: version {} of {key:?} changed under its writer",
                            w.seq
                        )));
                    }
                }
                Some(_) => return Err(Self::claimed_twice(key, w)),
                None => self.insert_older(key, w)?,
            }
        }
        for h in &have.older {
            if !older.iter().any(|w| w.seq == h.seq) {
                let gone = self
                    .tree
                    .delete(&version_key(key, h.seq))
                    .map_err(index_error)?;
                if gone != Some(encode_value(h, 0)?) {
                    return Err(Self::changed_under(key));
                }
            }
        }
        let hk = head_key(key);
        match (have.head, want.first()) {
            (None, None) => Ok(()),
            (Some(x), None) => match self.tree.delete(&hk).map_err(index_error)? {
                Some(g) if g == x || (same_version(g, x) && ghosts_in(g) == GHOST_MAX) => Ok(()),
                _ => Err(Self::changed_under(key)),
            },
            (None, Some(w)) => {
                let word = encode_value(w, ghosts)?;
                if self.tree.insert(&hk, word).map_err(index_error)? {
                    return Ok(());
                }
                // P5: a head written before a crash cut the change.
                let now = self.tree.get(&hk).map_err(index_error)?;
                self.put_head(key, &hk, now, w, ghosts)
            }
            (Some(x), Some(w)) => self.put_head(key, &hk, Some(x), w, ghosts),
        }
    }

    /// Rewrites the head from `cur` to version `w` with count `ghosts`, kept saturated (P4).
    fn put_head(
        &self,
        key: &[u8],
        hk: &[u8],
        mut cur: Option<u64>,
        w: &PmVersion,
        ghosts: u64,
    ) -> Result<()> {
        // One retry: the writer's idea of the count may be below a saturated one (P4).
        for _ in 0..2 {
            let Some(x) = cur else {
                return Err(Error::corrupt(format!(
                    "persistent index: the head of {key:?} went under its writer"
                )));
            };
            decode_value(0, x)?;
            let g = if ghosts_in(x) == GHOST_MAX {
                GHOST_MAX
            } else {
                ghosts
            };
            let word = encode_value(w, g)?;
            if word == x {
                return Ok(());
            }
            match self.tree.update_if(hk, x, word).map_err(index_error)? {
                Ok(()) => return Ok(()),
                Err(Some(n)) if same_version(n, x) && ghosts_in(n) == GHOST_MAX => cur = Some(n),
                Err(_) => break,
            }
        }
        Err(Self::changed_under(key))
    }

    fn changed_under(key: &[u8]) -> Error {
        Error::corrupt(format!(
            "persistent index: the entries of {key:?} changed under their writer"
        ))
    }

    /// Adds older version `w` of `key` (P5: already there with the same value, nothing).
    fn insert_older(&self, key: &[u8], w: &PmVersion) -> Result<()> {
        let k = version_key(key, w.seq);
        let word = encode_value(w, 0)?;
        if self.tree.insert(&k, word).map_err(index_error)? {
            return Ok(());
        }
        match self.tree.get(&k).map_err(index_error)? {
            Some(old) if decode_value(w.seq, old)?.0 == *w => Ok(()),
            Some(_) => Err(Self::claimed_twice(key, w)),
            // Deleted between the two calls: only this writer deletes, so this is damage.
            None => Err(Error::corrupt(format!(
                "persistent index: version {} of {key:?} went under its writer",
                w.seq
            ))),
        }
    }

    fn claimed_twice(key: &[u8], w: &PmVersion) -> Error {
        Error::corrupt(format!(
            "persistent index: version {} of {key:?} is indexed at another record than {:#x}",
            w.seq,
            w.at.get()
        ))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
#[path = "persistent_tests.rs"]
mod tests;
