//! The Global Index's volatile index: user key -> the versions still needed, newest first,
//! each pointing at its record in PM (seed 000 §3.3). Rebuilt on open by scanning the zones
//! of every memtable that belongs to the Global Index.
//!
//! Invariants (per key):
//! - GI1: `versions` is sorted by sequence, newest first, with no two versions of one
//!   sequence, and is never empty while the key is in the map.
//! - GI2: `ghosts` counts the copies of this key's records in PM that `versions` does not
//!   point at and whose sequence is at least `born`. Copies below `born` predate the key's
//!   current entry (an earlier entry's tombstone, dropped when no older copy remained).
//! - GI3: a tombstone is removed from `versions` only when it is the oldest version and
//!   `ghosts == 0`: no older record of the key remains anywhere in PM, so no crash can bring
//!   one back.
//!
//! Thread safety: one writer per key at a time (the background worker; recovery builds with
//! one thread per share of the keys before the database is shared); readers take no lock: a key's version list is replaced whole
//! (arc-swap), and the map is a lock-free skip list.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use crossbeam_skiplist::SkipMap;
use nacre_pmem::PmOffset;

use crate::gi::mirror::Mirror;
use crate::gi::pending::Pending;
use crate::index::{Entry, IKey, MemIndex};

/// One version of a key in the Global Index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub seq: u64,
    pub at: PmOffset,
    /// Bytes the record occupies in its zone.
    pub size: u32,
    pub tomb: bool,
    /// The record names a blob (blob.rs).
    pub blob: bool,
}

/// A key's versions, newest first: one is kept inline (most keys have one), more on the heap.
pub(crate) type Versions = smallvec::SmallVec<[Version; 1]>;

/// `v` as [`Versions`]: inline when it holds at most one version.
fn compact(v: Vec<Version>) -> Versions {
    if v.len() <= 1 {
        v.into_iter().collect()
    } else {
        Versions::from_vec(v)
    }
}

/// A key's entry.
pub(crate) struct KeyEntry {
    versions: ArcSwap<Versions>,
    ghosts: AtomicU64,
    born: AtomicU64,
}

impl KeyEntry {
    pub fn new(versions: Vec<Version>, ghosts: u64, born: u64) -> KeyEntry {
        KeyEntry {
            versions: ArcSwap::from_pointee(compact(versions)),
            ghosts: AtomicU64::new(ghosts),
            born: AtomicU64::new(born),
        }
    }

    pub fn versions(&self) -> Arc<Versions> {
        self.versions.load_full()
    }

    pub fn set_versions(&self, v: Vec<Version>) {
        self.versions.store(Arc::new(compact(v)));
    }

    pub fn ghosts(&self) -> u64 {
        self.ghosts.load(Ordering::Relaxed)
    }

    pub fn add_ghosts(&self, n: u64) {
        self.ghosts.fetch_add(n, Ordering::Relaxed);
    }

    pub fn set_ghosts(&self, n: u64) {
        self.ghosts.store(n, Ordering::Relaxed);
    }

    /// One ghost of this key at sequence `seq` left PM (its zone was given back).
    pub fn ghost_gone(&self, seq: u64) {
        if seq >= self.born() {
            let g = self.ghosts();
            debug_assert!(g > 0, "ghost count underflow");
            self.ghosts.store(g.saturating_sub(1), Ordering::Relaxed);
        }
    }

    pub fn born(&self) -> u64 {
        self.born.load(Ordering::Relaxed)
    }

    pub fn set_born(&self, b: u64) {
        self.born.store(b, Ordering::Relaxed);
    }
}

/// The Global Index of one subtable.
#[derive(Default)]
pub(crate) struct GlobalIndex {
    /// Keys boxed: a `Vec`'s capacity word would be in every node.
    map: SkipMap<Box<[u8]>, KeyEntry>,
    versions: AtomicU64,
    /// Its copy in PM, with `Options::persistent_index` (mirror.rs).
    pm: Option<Arc<Mirror>>,
    /// Set while the index is being rebuilt in the background: the index is empty and
    /// point reads go to this (pending.rs).
    pending: Option<Pending>,
}

impl GlobalIndex {
    /// An empty index whose changes `pm` mirrors.
    pub fn mirrored(pm: Option<Mirror>) -> GlobalIndex {
        GlobalIndex {
            pm: pm.map(Arc::new),
            ..GlobalIndex::default()
        }
    }

    /// The stand-in for an index rebuilt in the background (pending.rs).
    pub fn pending(p: Pending) -> GlobalIndex {
        GlobalIndex {
            pending: Some(p),
            ..GlobalIndex::default()
        }
    }

    /// Whether a point read of `key` here may wait for the background rebuild (a stand-in
    /// whose tree cannot answer for `key`, pending.rs).
    pub fn would_wait(&self, key: &[u8]) -> bool {
        self.pending.as_ref().is_some_and(|p| p.would_wait(key))
    }

    /// The stand-in's state, if this index is one (pending.rs).
    pub fn pending_state(&self) -> Option<&Pending> {
        self.pending.as_ref()
    }

    /// Sets the mirror (recovery, once the tree is reconciled).
    pub fn set_mirror(&mut self, pm: Option<Arc<Mirror>>) {
        self.pm = pm;
    }

    /// The mirror, if any.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.pm.as_deref()
    }

    /// The newest version of `key` at or below `seq`: from the persistent index when it
    /// serves reads (`Options::persistent_index_reads`), else from the skip list.
    pub fn get_at(&self, key: &[u8], seq: u64) -> crate::error::Result<Option<(u64, PmOffset)>> {
        if let Some(p) = &self.pending {
            return p.get_at(key, seq);
        }
        match self.pm.as_ref().filter(|m| m.serves(key)) {
            Some(m) => match m.newest(key)? {
                Some((s, at)) if s <= seq => Ok(Some((s, at))),
                None => Ok(None),
                // An older version a reader still needs: those are in DRAM only (P4 in
                // persistent.rs).
                Some(_) => Ok(MemIndex::get(self, key, seq)),
            },
            None => Ok(MemIndex::get(self, key, seq)),
        }
    }

    /// The writer changed `key`'s entry from (`old`, `old_ghosts`) to (`new`, `new_ghosts`):
    /// the mirror follows (M1 in mirror.rs).
    pub fn mirror_change(
        &self,
        key: &[u8],
        (old, old_ghosts): (&[Version], u64),
        (new, new_ghosts): (&[Version], u64),
    ) {
        if let Some(pm) = &self.pm {
            pm.change(key, old, old_ghosts, new, new_ghosts);
        }
    }

    /// The entry of `key`, if any.
    pub fn entry(
        &self,
        key: &[u8],
    ) -> Option<crossbeam_skiplist::map::Entry<'_, Box<[u8]>, KeyEntry>> {
        self.map.get(key)
    }

    /// Inserts or replaces `key`'s entry (writer only).
    pub fn put_entry(&self, key: Vec<u8>, e: KeyEntry) {
        self.map.insert(key.into_boxed_slice(), e);
    }

    /// Removes `key`'s entry (writer only).
    pub fn remove(&self, key: &[u8]) {
        self.map.remove(key);
    }

    /// Adjusts the count of indexed versions.
    pub fn count_versions(&self, added: u64, removed: u64) {
        if added > 0 {
            self.versions.fetch_add(added, Ordering::Relaxed);
        }
        if removed > 0 {
            self.versions.fetch_sub(removed, Ordering::Relaxed);
        }
    }

    /// Every entry, in key order (checks).
    pub fn entries(&self) -> crossbeam_skiplist::map::Iter<'_, Box<[u8]>, KeyEntry> {
        self.map.iter()
    }

    /// The entries of keys `from <= key < to` (no bound where `None`), in key order.
    pub fn entries_range<'a>(
        &'a self,
        from: Option<&'a [u8]>,
        to: Option<&'a [u8]>,
    ) -> impl Iterator<Item = crossbeam_skiplist::map::Entry<'a, Box<[u8]>, KeyEntry>> + 'a {
        let lo = from.map_or(Bound::Unbounded, Bound::Included);
        let hi = to.map_or(Bound::Unbounded, Bound::Excluded);
        self.map.range::<[u8], _>((lo, hi))
    }

    /// Keys with an entry.
    pub fn keys(&self) -> usize {
        self.map.len()
    }

    /// Versions indexed.
    pub fn version_count(&self) -> u64 {
        self.versions.load(Ordering::Relaxed)
    }

    /// Writes the entry of `key`'s version `v` into `out`, reusing its key buffer.
    fn entry_of(key: &[u8], v: &Version, out: &mut IKey) -> PmOffset {
        out.key.clear();
        out.key.extend_from_slice(key);
        out.seq = v.seq;
        v.at
    }

    fn first_after(&self, key: &[u8], out: &mut IKey) -> Option<PmOffset> {
        let e = self
            .map
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()?;
        let vs = e.value().versions.load();
        vs.first().map(|v| Self::entry_of(e.key(), v, out))
    }

    fn last_before(&self, key: &[u8], out: &mut IKey) -> Option<PmOffset> {
        let e = self
            .map
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .next_back()?;
        let vs = e.value().versions.load();
        vs.last().map(|v| Self::entry_of(e.key(), v, out))
    }
}

impl MemIndex for GlobalIndex {
    /// Adds one version (recovery and tests; merges replace whole lists).
    fn insert(&self, key: &[u8], seq: u64, at: PmOffset) {
        let v = Version {
            seq,
            at,
            size: 0,
            tomb: false,
            blob: false,
        };
        match self.map.get(key) {
            Some(e) => {
                let mut vs = e.value().versions().to_vec();
                let i = vs.partition_point(|x| x.seq > seq);
                vs.insert(i, v);
                e.value().set_versions(vs);
            }
            None => {
                self.map.insert(key.into(), KeyEntry::new(vec![v], 0, seq));
            }
        }
        self.count_versions(1, 0);
    }

    fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, PmOffset)> {
        let e = self.map.get(key)?;
        let vs = e.value().versions.load();
        // Newest first: binary search, however many versions a read point holds.
        let i = vs.partition_point(|v| v.seq > snapshot);
        vs.get(i).map(|v| (v.seq, v.at))
    }

    fn next_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset> {
        let (k, strict) = match bound {
            Bound::Unbounded => {
                let e = self.map.front()?;
                let vs = e.value().versions.load();
                return vs.first().map(|v| Self::entry_of(e.key(), v, out));
            }
            Bound::Included(k) => (k, false),
            Bound::Excluded(k) => (k, true),
        };
        if let Some(e) = self.map.get(&k.key[..]) {
            let vs = e.value().versions.load();
            let i = vs.partition_point(|v| v.seq > k.seq || (strict && v.seq == k.seq));
            let hit = vs.get(i);
            if let Some(v) = hit {
                return Some(Self::entry_of(&k.key, v, out));
            }
        }
        self.first_after(&k.key, out)
    }

    fn next_batch(
        &self,
        bound: Bound<&IKey>,
        upper: Option<&[u8]>,
        max: usize,
        out: &mut Vec<Entry>,
    ) {
        let mut push = |key: &[u8], vs: &[Version]| -> bool {
            if upper.is_some_and(|u| key >= u) {
                return false;
            }
            for v in vs {
                if out.len() >= max {
                    return false;
                }
                let k = IKey {
                    key: key.to_vec(),
                    seq: v.seq,
                };
                out.push((k, v.at));
            }
            out.len() < max
        };
        let after = match bound {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(k) | Bound::Excluded(k) => {
                let strict = matches!(bound, Bound::Excluded(_));
                if let Some(e) = self.map.get(&k.key[..]) {
                    let vs = e.value().versions.load();
                    let i = vs.partition_point(|v| v.seq > k.seq || (strict && v.seq == k.seq));
                    if !push(&k.key, &vs[i..]) {
                        return;
                    }
                }
                Bound::Excluded(&k.key[..])
            }
        };
        for e in self.map.range::<[u8], _>((after, Bound::Unbounded)) {
            let vs = e.value().versions.load();
            if !push(e.key(), &vs) {
                return;
            }
        }
    }

    fn prev_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset> {
        let (k, strict) = match bound {
            Bound::Unbounded => {
                let e = self.map.back()?;
                let vs = e.value().versions.load();
                return vs.last().map(|v| Self::entry_of(e.key(), v, out));
            }
            Bound::Included(k) => (k, false),
            Bound::Excluded(k) => (k, true),
        };
        if let Some(e) = self.map.get(&k.key[..]) {
            let vs = e.value().versions.load();
            let i = vs.partition_point(|v| v.seq > k.seq || (!strict && v.seq == k.seq));
            let hit = i.checked_sub(1).and_then(|i| vs.get(i));
            if let Some(v) = hit {
                return Some(Self::entry_of(&k.key, v, out));
            }
        }
        self.last_before(&k.key, out)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.version_count() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_walks_cover_every_version_in_index_order() {
        let gi = GlobalIndex::default();
        for (k, s) in [(&b"a"[..], 5), (b"a", 9), (b"b", 3), (b"c", 7), (b"c", 1)] {
            gi.insert(k, s, PmOffset(s * 8));
        }
        let mut fwd = Vec::new();
        let mut at = gi.next(Bound::Unbounded);
        while let Some((k, _)) = at {
            fwd.push((k.key.clone(), k.seq));
            at = gi.next(Bound::Excluded(&k));
        }
        let want: Vec<(Vec<u8>, u64)> = [(b"a", 9), (b"a", 5), (b"b", 3), (b"c", 7), (b"c", 1)]
            .iter()
            .map(|(k, s)| (k.to_vec(), *s))
            .collect();
        assert_eq!(fwd, want);
        let mut rev = Vec::new();
        let mut at = gi.prev(Bound::Unbounded);
        while let Some((k, _)) = at {
            rev.push((k.key.clone(), k.seq));
            at = gi.prev(Bound::Excluded(&k));
        }
        rev.reverse();
        assert_eq!(rev, want);
        assert_eq!(gi.get(b"a", 8), Some((5, PmOffset(40))));
        assert_eq!(gi.get(b"a", 4), None);
        assert_eq!(gi.len(), 5);
    }

    #[test]
    fn batches_match_stepping() {
        let (gi, skip) = (
            GlobalIndex::default(),
            crate::index::SkipListIndex::default(),
        );
        let mut rng = nacre_pmem::SplitMix64::new(7);
        for seq in 1..500u64 {
            let k = vec![b'a' + (rng.next_u64() % 4) as u8; 1 + (rng.next_u64() % 3) as usize];
            gi.insert(&k, seq, PmOffset(seq * 8));
            skip.insert(&k, seq, PmOffset(seq * 8));
        }
        for _ in 0..300 {
            let ik = IKey {
                key: vec![b'a' + (rng.next_u64() % 5) as u8; 1 + (rng.next_u64() % 3) as usize],
                seq: rng.next_u64() % 520,
            };
            let upper = (rng.next_u64() % 2 == 0).then(|| vec![b'a' + (rng.next_u64() % 5) as u8]);
            let max = 1 + (rng.next_u64() % 60) as usize;
            for b in [Bound::Included(&ik), Bound::Excluded(&ik), Bound::Unbounded] {
                let (mut x, mut y) = (Vec::new(), Vec::new());
                gi.next_batch(b, upper.as_deref(), max, &mut x);
                skip.next_batch(b, upper.as_deref(), max, &mut y);
                assert_eq!(x, y, "batch {b:?} to {upper:?} max {max}");
            }
        }
    }
}
