//! Node access: validated reads of a node's words and records, and building new nodes.
//!
//! Invariants (relied on by every reader):
//! - B1: a node reachable from the root word is a committed object of the tree's node pool,
//!   and is not released while any thread that could have reached it holds an epoch guard
//!   (nodes are freed only by PMwCAS memory policies, which wait for the epoch).
//! - B3: a record's bytes (value, checksum, key) are durable before its metadata word says
//!   visible, and never change afterwards except for the value word, which only a PMwCAS
//!   changes. Hence a key slice read under a guard is stable.
//! - B4: a new node is written whole (every byte, free space included) and persisted before
//!   the PMwCAS that links it is executed; a metadata slot at or beyond the record count is 0.
//! - Every field read from a node is validated before use (codeword checks, bounds, record
//!   checksums): damaged media yields `Corrupt`, never an out-of-bounds access.
//!
//! Thread safety: PMwCAS-managed words (status, metadata, value and child words) are read
//! through [`BzTree::word`], which helps operations in flight; other bytes are immutable
//! while the node is reachable.

use std::cmp::Ordering;

use nacre_pmem::PmOffset;
use nacre_pmwcas::{EpochGuard, FLAGS};

use crate::error::{corrupt, Result};
use crate::layout::{
    record_crc, record_len, record_space, Info, InnerStatus, Kind, LeafStatus, Meta, INFO_AT,
    META_AT, NODE_HEADER, STATUS_AT,
};
use crate::options::BzMutation;
use crate::tree::BzTree;

/// A record's key as stored, with what its checksum covers.
pub(crate) struct RawKey<'g> {
    pub key: &'g [u8],
    pub offset: u32,
    pub crc: u32,
}

/// A node whose info word was validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeView {
    pub off: u64,
    pub info: Info,
}

impl NodeView {
    pub fn is_leaf(&self) -> bool {
        self.info.kind == Kind::Leaf
    }

    pub fn status_addr(&self) -> PmOffset {
        PmOffset(self.off + STATUS_AT)
    }

    pub fn meta_addr(&self, i: u32) -> PmOffset {
        PmOffset(self.off + META_AT + 8 * u64::from(i))
    }
}

/// A record found in a node: its slot, metadata word and value word address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    pub slot: u32,
    pub meta: u64,
    pub value_addr: PmOffset,
    pub total: u32,
}

/// Key-value entries of a node in key order (values are child offsets in inner nodes).
pub(crate) type Entries = Vec<(Vec<u8>, u64)>;

impl BzTree {
    /// Reads a PMwCAS-managed word: directly when it holds a plain value, else through
    /// PMwCAS (helping the operation in flight, cleaning a dirty bit).
    pub(crate) fn word(&self, addr: PmOffset) -> Result<u64> {
        let w = self.pool.load_u64(addr);
        if w & FLAGS == 0 {
            return Ok(w);
        }
        Ok(self.pm.read(addr)?)
    }

    /// Validates that `off` is a node of this tree and reads its info word.
    pub(crate) fn node(&self, off: u64) -> Result<NodeView> {
        if !self.nodes().is_object(PmOffset(off)) {
            return Err(corrupt(
                "node pointer",
                off,
                "not an object of the node pool".into(),
            ));
        }
        let info = Info::decode(
            self.pool.load_u64(PmOffset(off + INFO_AT)),
            off,
            self.node_size,
        )?;
        Ok(NodeView { off, info })
    }

    pub(crate) fn leaf_status(&self, n: &NodeView) -> Result<LeafStatus> {
        let s = LeafStatus::decode(self.word(n.status_addr())?, n.off)?;
        let used = META_AT + 8 * u64::from(s.count) + u64::from(s.block);
        if s.count < n.info.sorted || used > u64::from(self.node_size) || s.deleted > s.block {
            return Err(corrupt(
                "leaf status",
                n.off,
                format!("{s:?} does not fit the node ({} sorted)", n.info.sorted),
            ));
        }
        Ok(s)
    }

    pub(crate) fn inner_status(&self, n: &NodeView) -> Result<InnerStatus> {
        InnerStatus::decode(self.word(n.status_addr())?, n.off)
    }

    /// Whether the node is frozen.
    pub(crate) fn frozen(&self, n: &NodeView) -> Result<bool> {
        Ok(if n.is_leaf() {
            self.leaf_status(n)?.frozen
        } else {
            self.inner_status(n)?.frozen
        })
    }

    /// The status word's raw value (validated).
    pub(crate) fn status_word(&self, n: &NodeView) -> Result<u64> {
        if n.is_leaf() {
            Ok(self.leaf_status(n)?.word())
        } else {
            Ok(self.inner_status(n)?.word())
        }
    }

    pub(crate) fn meta(&self, n: &NodeView, i: u32) -> Result<(u64, Meta)> {
        let w = self.word(n.meta_addr(i))?;
        Ok((w, Meta::decode(w, n.off, self.node_size)?))
    }

    /// The key of the record `m` describes, checked against its checksum.
    pub(crate) fn key<'g>(&self, g: &'g EpochGuard, n: &NodeView, m: Meta) -> Result<&'g [u8]> {
        let k = self.raw_key(g, n, m)?;
        self.verify_key(n, &k)?;
        Ok(k.key)
    }

    /// The key of the record `m` describes, not yet checked against its checksum: for
    /// comparisons whose outcome is checked afterwards ([`BzTree::verify_key`] on the keys
    /// that decide it), never for a key that is returned or acted on unchecked.
    pub(crate) fn raw_key<'g>(
        &self,
        _g: &'g EpochGuard,
        n: &NodeView,
        m: Meta,
    ) -> Result<RawKey<'g>> {
        let Meta::Record {
            offset, key_len, ..
        } = m
        else {
            return Err(corrupt("record", n.off, format!("{m:?} has no key")));
        };
        let at = PmOffset(n.off + u64::from(offset));
        let p = self.pool.ptr(at, record_len(key_len as usize) as usize);
        // SAFETY: `ptr` checked the record lies in the pool (Meta::decode checked it lies in
        // the node). The bytes are immutable while the node is reachable (B3), and the guard
        // `_g` keeps the node from being freed and reused (B1) for the slice's lifetime.
        let crc = unsafe { std::ptr::read_unaligned(p.add(8) as *const u32) };
        // SAFETY: as above; the key follows the 12 fixed bytes within the record.
        let key = unsafe { std::slice::from_raw_parts(p.add(12), key_len as usize) };
        Ok(RawKey {
            key,
            offset,
            crc: u32::from_le(crc),
        })
    }

    /// Checks a key read by [`BzTree::raw_key`] against its record's checksum.
    pub(crate) fn verify_key(&self, n: &NodeView, k: &RawKey<'_>) -> Result<()> {
        if record_crc(k.offset, k.key) != k.crc {
            return Err(corrupt(
                "record",
                n.off,
                format!("checksum mismatch at offset {}", k.offset),
            ));
        }
        Ok(())
    }

    /// Records of a node that are in use: the sorted count for inner nodes, the status's
    /// record count for leaves.
    pub(crate) fn count(&self, n: &NodeView) -> Result<u32> {
        if n.is_leaf() {
            Ok(self.leaf_status(n)?.count)
        } else {
            Ok(n.info.sorted)
        }
    }

    /// Binary search of the sorted prefix for `key`: `Ok(Ok(slot))` on a record (visible or
    /// deleted) with that key, `Ok(Err(slot))` with the insertion point otherwise.
    ///
    /// The probes compare keys unchecked; the outcome is then proven by checked keys alone:
    /// an exact match by the matched key's checksum (failing it is `Corrupt`), an insertion
    /// point `p` by the checked
    /// keys at `p - 1` and `p` bracketing `key`. Checked sorted keys bracket a key at one
    /// place only, so a damaged key that misled a probe either is caught there or did not
    /// change the answer. When the proof fails, the search runs again checking every key.
    pub(crate) fn search_sorted(
        &self,
        g: &EpochGuard,
        n: &NodeView,
        key: &[u8],
    ) -> Result<std::result::Result<(u32, u64, Meta), u32>> {
        let found = self.binary_search(g, n, key, false)?;
        // The checked comparison of `key` with the key in `slot` (`None`: it fails its
        // checksum).
        let side = |slot: u32| -> Result<Option<Ordering>> {
            let k = self.raw_key(g, n, self.meta(n, slot)?.1)?;
            Ok(self.verify_key(n, &k).is_ok().then(|| k.key.cmp(key)))
        };
        let proven = match found {
            // The matched key was checked by the search itself.
            Ok(_) => true,
            Err(p) => {
                (p == 0 || side(p - 1)? == Some(Ordering::Less))
                    && (p == n.info.sorted || side(p)? == Some(Ordering::Greater))
            }
        };
        if proven {
            return Ok(found);
        }
        self.binary_search(g, n, key, true)
    }

    /// Binary search of the sorted prefix, checking each key it compares when `checked`, and
    /// a matched key always (a damaged one is [`crate::BzError::Corrupt`]).
    fn binary_search(
        &self,
        g: &EpochGuard,
        n: &NodeView,
        key: &[u8],
        checked: bool,
    ) -> Result<std::result::Result<(u32, u64, Meta), u32>> {
        let (mut lo, mut hi) = (0u32, n.info.sorted);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (w, m) = self.meta(n, mid)?;
            let k = self.raw_key(g, n, m)?;
            if checked {
                self.verify_key(n, &k)?;
            }
            match k.key.cmp(key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => {
                    if !checked {
                        self.verify_key(n, &k)?;
                    }
                    return Ok(Ok((mid, w, m)));
                }
            }
        }
        Ok(Err(lo))
    }

    /// The visible record with `key` in a leaf of `count` records, if any.
    pub(crate) fn find(
        &self,
        g: &EpochGuard,
        n: &NodeView,
        count: u32,
        key: &[u8],
    ) -> Result<Option<Hit>> {
        let hit = |slot, w, m: Meta| match m {
            Meta::Record {
                offset,
                total,
                visible: true,
                ..
            } => Some(Hit {
                slot,
                meta: w,
                value_addr: PmOffset(n.off + u64::from(offset)),
                total,
            }),
            _ => None,
        };
        if let Ok((slot, w, m)) = self.search_sorted(g, n, key)? {
            if let Some(h) = hit(slot, w, m) {
                return Ok(Some(h));
            }
        }
        for slot in (n.info.sorted..count).rev() {
            let (w, m) = self.meta(n, slot)?;
            if let Meta::Record { visible: true, .. } = m {
                if self.key(g, n, m)? == key {
                    return Ok(hit(slot, w, m));
                }
            }
        }
        Ok(None)
    }

    /// Every entry of a node in key order: the visible records of a leaf, every record of
    /// an inner node.
    pub(crate) fn entries(&self, g: &EpochGuard, n: &NodeView) -> Result<Entries> {
        let count = self.count(n)?;
        let mut out = Vec::with_capacity(count as usize);
        for slot in 0..count {
            let (_, m) = self.meta(n, slot)?;
            match m {
                Meta::Record { visible: true, .. } => {
                    let key = self.key(g, n, m)?.to_vec();
                    let Meta::Record { offset, .. } = m else {
                        unreachable!("matched above")
                    };
                    let v = self.word(PmOffset(n.off + u64::from(offset)))?;
                    out.push((key, v));
                }
                Meta::Record { visible: false, .. } | Meta::Empty | Meta::Reserved { .. }
                    if n.is_leaf() =>
                {
                    // Deleted, aborted, or reserved by an insert that never finished (of an
                    // earlier incarnation, or one a freeze cut off): never visible (T2).
                }
                _ => {
                    return Err(corrupt(
                        "record metadata",
                        n.off,
                        format!("inner slot {slot} holds {m:?}"),
                    ))
                }
            }
        }
        if n.is_leaf() && count > n.info.sorted {
            out.sort_by(|a, b| a.0.cmp(&b.0));
        }
        for w in out.windows(2) {
            if w[0].0 >= w[1].0 {
                return Err(corrupt(
                    "node",
                    n.off,
                    "keys out of order or repeated".into(),
                ));
            }
        }
        Ok(out)
    }

    /// Bytes the entries take in a node (metadata included).
    pub(crate) fn entries_space(entries: &[(Vec<u8>, u64)]) -> u64 {
        entries.iter().map(|(k, _)| record_space(k.len())).sum()
    }

    /// Bytes of a node available to records and metadata.
    pub(crate) fn usable(&self) -> u64 {
        u64::from(self.node_size) - NODE_HEADER
    }

    /// The image of a new node holding `entries` (sorted), unfrozen.
    pub(crate) fn node_image(&self, kind: Kind, entries: &[(Vec<u8>, u64)]) -> Vec<u8> {
        let size = self.node_size as usize;
        let mut img = vec![0u8; size];
        let mut block = 0u64;
        for (i, (k, v)) in entries.iter().enumerate() {
            let len = record_len(k.len());
            block += len;
            let off = size as u64 - block;
            let o = off as usize;
            img[o..o + 8].copy_from_slice(&v.to_le_bytes());
            img[o + 8..o + 12].copy_from_slice(&record_crc(off as u32, k).to_le_bytes());
            img[o + 12..o + 12 + k.len()].copy_from_slice(k);
            let m = Meta::Record {
                visible: true,
                offset: off as u32,
                key_len: k.len() as u32,
                total: len as u32,
            };
            let mo = META_AT as usize + 8 * i;
            img[mo..mo + 8].copy_from_slice(&m.word().to_le_bytes());
        }
        let n = entries.len() as u32;
        let status = match kind {
            Kind::Leaf => LeafStatus {
                frozen: false,
                count: n,
                block: block as u32,
                deleted: 0,
            }
            .word(),
            Kind::Inner => InnerStatus {
                frozen: false,
                version: 0,
            }
            .word(),
        };
        let info = Info {
            kind,
            sorted: n,
            node_size: self.node_size,
        };
        img[0..8].copy_from_slice(&status.to_le_bytes());
        img[8..16].copy_from_slice(&info.word().to_le_bytes());
        img
    }

    /// Allocates a node, writes `entries` into it and persists it whole (B4). The node is
    /// fresh: the caller hands it to a descriptor or aborts it.
    pub(crate) fn new_node(&self, kind: Kind, entries: &[(Vec<u8>, u64)]) -> Result<PmOffset> {
        debug_assert!(
            META_AT + Self::entries_space(entries) <= u64::from(self.node_size),
            "entries overflow a node"
        );
        let img = self.node_image(kind, entries);
        let off = self.nodes().alloc()?;
        // C2 in inner_cache.rs: a copy of what was here before is gone before the new
        // node can be linked.
        if let Some(c) = &self.cache {
            if self.mutation != Some(BzMutation::SkipCacheForget) {
                c.forget(off.get());
            }
        }
        if self.mutation == Some(BzMutation::SkipNodeFlush) {
            // SAFETY: a fresh allocation: no other thread reads or writes it until the
            // PMwCAS that links it.
            unsafe { self.pool.write(off, &img) };
            return Ok(off);
        }
        // SAFETY: as above.
        if let Err(e) = unsafe { self.pool.copy_persist(off, &img) } {
            let _ = self.nodes().abort(off);
            return Err(e.into());
        }
        Ok(off)
    }
}
