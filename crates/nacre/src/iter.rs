//! Iterators: a merge of one subtable's sources (memtable indexes and the Global Index) at a
//! sequence number, forward or reverse, with range and prefix bounds. Each source is a cursor
//! that re-seeks past the last entry it returned, so no borrow of an index outlives a call;
//! forward, a source reads its next entries ahead in one walk of its index (copies of keys and
//! offsets, emptied whenever the sources are rebuilt), so a scan descends each index once per
//! batch rather than once per entry.
//! An iterator registers its sequence number (so the versions it reads stay indexed, moved
//! by the cleaner rather than dropped) but holds no read view between calls, so it never
//! keeps zones allocated: each call loads the current view (which keeps the zones it points
//! into allocated for the call, V3 in view.rs) and, if the cleaner retired zones since the
//! last call, rebuilds its sources from that view and seeks them back to where it was
//! (offsets read before may point into zones given back since).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use nacre_halloc::ZonePool;
use nacre_pmem::{PmOffset, Pool};

use crate::blob::value_at;
use crate::disk::{DiskRange, DiskTier};
use crate::error::Result;
use crate::index::{Entry, IKey, MemIndex};
use crate::subtable::{Subtable, SubtableInner};
use crate::view::{SnapGuard, Snapshot, View};

/// Bounds, direction and snapshot of an iterator.
#[derive(Default)]
pub struct IterOptions<'a> {
    /// Read at this snapshot (default: the latest acknowledged write).
    pub snapshot: Option<&'a Snapshot>,
    /// Smallest key returned (inclusive).
    pub lower: Option<Vec<u8>>,
    /// Keys returned are below this (exclusive).
    pub upper: Option<Vec<u8>>,
    /// Only keys starting with this.
    pub prefix: Option<Vec<u8>>,
    /// Largest key first.
    pub reverse: bool,
}

impl IterOptions<'_> {
    /// The key range the options select: (inclusive lower, exclusive upper), the prefix
    /// folded in.
    pub(crate) fn bounds(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let mut lower = self.lower.clone();
        let mut upper = self.upper.clone();
        if let Some(p) = &self.prefix {
            if lower.as_ref().is_none_or(|l| l < p) {
                lower = Some(p.clone());
            }
            if let Some(end) = prefix_end(p) {
                if upper.as_ref().is_none_or(|u| *u > end) {
                    upper = Some(end);
                }
            }
        }
        (lower, upper)
    }
}

/// The smallest key above every key with this prefix, if any.
fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last < 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

/// A view's memtable indexes, newest first, and the Global Index.
fn sources_of(view: &View) -> Vec<Arc<dyn MemIndex>> {
    let mut v: Vec<Arc<dyn MemIndex>> = view
        .indexes()
        .map(|ix| ix.clone() as Arc<dyn MemIndex>)
        .collect();
    v.push(view.gi.clone());
    if let Some(f) = &view.frozen {
        v.push(f.gi.clone());
    }
    v
}

/// Entries a source reads ahead at first, and at most (forward iteration).
const AHEAD_MIN: usize = 4;
const AHEAD_MAX: usize = 128;

/// A key in PM and its value read (`None`: a tombstone).
type MemRow = (Vec<u8>, Result<Option<Vec<u8>>>);

/// A key and the newest version of it seen so far (reverse iteration).
type Pending = (Vec<u8>, Option<(u64, PmOffset)>);

/// Iterator over (key, value) pairs. Yields errors for records that fail their checks.
pub struct DbIterator {
    pool: Arc<Pool>,
    zones: ZonePool,
    verify: bool,
    sub: Subtable,
    /// The subtable's retire count when `sources` and `heads` were built.
    retires: u64,
    sources: Vec<Arc<dyn MemIndex>>,
    _pin: SnapGuard,
    heads: Vec<Option<Entry>>,
    /// Forward: each source's entries after its head, read ahead in one walk of its index
    /// (emptied with the heads when the sources are rebuilt), and how many the next read
    /// takes (doubling up to [`AHEAD_MAX`], so a short scan reads little).
    ahead: Vec<VecDeque<Entry>>,
    ahead_len: Vec<usize>,
    seq: u64,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    reverse: bool,
    last: Option<Vec<u8>>,
    pending: Option<Pending>,
    done: bool,
    /// The next PM key and its value (`None`: a tombstone), and whether PM is exhausted.
    mem_head: Option<MemRow>,
    mem_done: bool,
    /// The disk levels, their rows from the position on, the next one, and whether they are
    /// exhausted.
    tier: Option<Arc<DiskTier>>,
    disk_rows: Option<DiskRange>,
    disk_head: Option<Result<(Vec<u8>, Vec<u8>)>>,
    disk_done: bool,
    /// The last key returned (or skipped as deleted): where rebuilt sources resume.
    out: Option<Vec<u8>>,
    /// Key buffers reused by index steps (rows take theirs to the caller).
    spare: IKey,
    probe: IKey,
}

impl DbIterator {
    pub(crate) fn new(
        (pool, zones, verify, tier): (Arc<Pool>, ZonePool, bool, Option<Arc<DiskTier>>),
        sub: Subtable,
        pin: SnapGuard,
        o: IterOptions<'_>,
    ) -> Self {
        let seq = pin.seq;
        let (lower, upper) = o.bounds();
        let inner = sub.inner.clone();
        let view = inner.view.load();
        let retires = inner.retires.load(std::sync::atomic::Ordering::Acquire);
        let mut it = DbIterator {
            pool,
            zones,
            verify,
            sources: sources_of(&view),
            sub,
            retires,
            _pin: pin,
            heads: Vec::new(),
            ahead: Vec::new(),
            ahead_len: Vec::new(),
            seq,
            lower,
            upper,
            reverse: o.reverse,
            last: None,
            pending: None,
            done: false,
            mem_head: None,
            mem_done: false,
            tier,
            disk_rows: None,
            disk_head: None,
            disk_done: true,
            out: None,
            spare: IKey::default(),
            probe: IKey::default(),
        };
        it.reset_ahead();
        it.heads = (0..it.sources.len()).map(|i| it.first(i)).collect();
        it.open_disk();
        it
    }

    /// Loads the current view (held by the caller for the call) and, if zones were retired
    /// since the sources were built (the cleaner moved records, or a spill finished), rebuilds
    /// them, and the disk rows, from the last key returned.
    fn refresh(&mut self, view: &View, inner: &SubtableInner) {
        let retires = inner.retires.load(std::sync::atomic::Ordering::Acquire);
        if retires == self.retires {
            return;
        }
        self.retires = retires;
        self.sources = sources_of(view);
        self.pending = None;
        self.mem_head = None;
        self.mem_done = false;
        self.last = self.out.clone();
        self.reset_ahead();
        self.heads = (0..self.sources.len())
            .map(|i| {
                let ix = &self.sources[i];
                match &self.out {
                    // Before every version of the last key returned.
                    Some(k) if self.reverse => ix.prev(Bound::Excluded(&IKey {
                        key: k.clone(),
                        seq: u64::MAX,
                    })),
                    // After every version of it.
                    Some(k) => ix.next(Bound::Excluded(&IKey {
                        key: k.clone(),
                        seq: 0,
                    })),
                    None => self.first(i),
                }
            })
            .collect();
        self.open_disk();
    }

    /// (Re)opens the disk rows after the last key returned (loaded after the view: G3).
    fn open_disk(&mut self) {
        self.disk_head = None;
        self.disk_rows = None;
        self.disk_done = true;
        let Some(tier) = &self.tier else { return };
        let Some(tree) = tier.existing(self.sub.id()) else {
            return;
        };
        let lo = self.lower.as_deref();
        let hi = self.upper.as_deref();
        let out = self.out.as_deref();
        let (lower, upper) = match (out, self.reverse) {
            (Some(k), false) => (
                Bound::Excluded(k),
                hi.map_or(Bound::Unbounded, Bound::Excluded),
            ),
            (Some(k), true) => (
                lo.map_or(Bound::Unbounded, Bound::Included),
                Bound::Excluded(k),
            ),
            (None, _) => (
                lo.map_or(Bound::Unbounded, Bound::Included),
                hi.map_or(Bound::Unbounded, Bound::Excluded),
            ),
        };
        self.disk_rows = Some(tree.range(lower, upper, self.seq));
        self.disk_done = false;
    }

    /// Empties the read-ahead of every source (their entries may point into zones given back
    /// once the sources are rebuilt).
    fn reset_ahead(&mut self) {
        self.ahead = (0..self.sources.len()).map(|_| VecDeque::new()).collect();
        self.ahead_len = vec![AHEAD_MIN; self.sources.len()];
    }

    fn first(&mut self, i: usize) -> Option<Entry> {
        let ix = &self.sources[i];
        if !self.reverse {
            let lower = self.lower.clone().map(|key| IKey { key, seq: u64::MAX });
            return self.read_ahead(i, lower.as_ref().map_or(Bound::Unbounded, Bound::Included));
        }
        if self.reverse {
            match &self.upper {
                Some(u) => ix.prev(Bound::Excluded(&IKey {
                    key: u.clone(),
                    seq: u64::MAX,
                })),
                None => ix.prev(Bound::Unbounded),
            }
        } else {
            match &self.lower {
                Some(l) => ix.next(Bound::Included(&IKey {
                    key: l.clone(),
                    seq: u64::MAX,
                })),
                None => ix.next(Bound::Unbounded),
            }
        }
    }

    /// Takes the next entry in iteration order across sources and advances its source.
    fn pop(&mut self) -> Option<Entry> {
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some((bk, _)) => (k < bk) != self.reverse,
            };
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let (mut k, at) = self.heads[i].take()?;
        if self.reverse {
            // This source's versions of the key all come next (oldest first): take its newest
            // visible one now and step before the key, whatever its number of versions.
            let seq = std::mem::replace(&mut k.seq, self.seq);
            let mut vis = std::mem::take(&mut self.probe);
            let found = self.sources[i]
                .next_into(Bound::Included(&k), &mut vis)
                .filter(|_| vis.key == k.key);
            k.seq = u64::MAX;
            self.step(i, Bound::Excluded(&k), false);
            k.seq = seq;
            return Some(match found {
                Some(v) => {
                    self.recycle(k);
                    (vis, v)
                }
                None => {
                    self.recycle(vis);
                    (k, at)
                }
            });
        }
        let seq = k.seq;
        // Forward, a visible version: this source's other versions of the key are older and
        // never returned, so step over all of them at once (a hot key may have thousands):
        // (key, 0) sorts after every version of the key. A version newer than the read point:
        // the key's newest visible version in this source, if any, comes next.
        if seq <= self.seq {
            k.seq = 0;
            self.step(i, Bound::Excluded(&k), true);
        } else {
            k.seq = self.seq;
            self.step(i, Bound::Included(&k), true);
        }
        k.seq = seq;
        Some((k, at))
    }

    /// Moves source `i`'s head to the first entry after `bound` (`next`) or the last before
    /// it, in the spare key buffer (no allocation once buffers are large enough).
    fn step(&mut self, i: usize, bound: Bound<&IKey>, next: bool) {
        if next {
            self.heads[i] = self.read_ahead(i, bound);
            return;
        }
        let mut out = std::mem::take(&mut self.spare);
        let ix = &self.sources[i];
        let at = if next {
            ix.next_into(bound, &mut out)
        } else {
            ix.prev_into(bound, &mut out)
        };
        match at {
            Some(at) => self.heads[i] = Some((out, at)),
            None => {
                self.heads[i] = None;
                self.spare = out;
            }
        }
    }

    /// Source `i`'s first entry after `bound` (forward), from its read-ahead: entries up to
    /// the bound are dropped, and an empty read-ahead is filled by one walk of the index.
    fn read_ahead(&mut self, i: usize, bound: Bound<&IKey>) -> Option<Entry> {
        let q = &mut self.ahead[i];
        while let Some((k, _)) = q.front() {
            let past = match bound {
                Bound::Included(b) => k >= b,
                Bound::Excluded(b) => k > b,
                Bound::Unbounded => true,
            };
            if past {
                break;
            }
            q.pop_front();
        }
        if q.is_empty() {
            let n = self.ahead_len[i];
            self.ahead_len[i] = (n * 2).min(AHEAD_MAX);
            let mut batch = Vec::with_capacity(n);
            self.sources[i].next_batch(bound, self.upper.as_deref(), n, &mut batch);
            q.extend(batch);
        }
        q.pop_front()
    }

    /// Keeps a key buffer no row took, for the next step or probe.
    fn recycle(&mut self, k: IKey) {
        if self.spare.key.capacity() == 0 {
            self.spare = k;
        } else if self.probe.key.capacity() == 0 {
            self.probe = k;
        }
    }

    /// The value at `at` (`None`: a tombstone).
    fn value(&self, at: PmOffset) -> Result<Option<Vec<u8>>> {
        value_at(&self.pool, &self.zones, at, self.verify)
    }

    /// The next key in PM (forward) and its newest visible version, tombstones included.
    fn mem_forward(&mut self) -> Option<(Vec<u8>, PmOffset)> {
        while let Some((k, at)) = self.pop() {
            if self.upper.as_ref().is_some_and(|u| k.key >= *u) {
                break;
            }
            if k.seq > self.seq || self.last.as_ref() == Some(&k.key) {
                self.recycle(k);
                continue;
            }
            match &mut self.last {
                Some(l) => {
                    l.clear();
                    l.extend_from_slice(&k.key);
                }
                None => self.last = Some(k.key.clone()),
            }
            return Some((k.key, at));
        }
        None
    }

    /// The next key in PM (reverse) and its newest visible version, tombstones included.
    fn mem_reverse(&mut self) -> Option<(Vec<u8>, PmOffset)> {
        loop {
            let e = self
                .pop()
                .filter(|(k, _)| self.lower.as_ref().is_none_or(|l| k.key >= *l));
            let Some((k, at)) = e else {
                let (key, best) = self.pending.take()?;
                match best {
                    Some((_, at)) => return Some((key, at)),
                    None => return None,
                }
            };
            let same = self.pending.as_ref().is_some_and(|p| p.0 == k.key);
            let seq = k.seq;
            let out = if same {
                self.recycle(k);
                None
            } else {
                self.pending.replace((k.key, None))
            };
            if let Some(p) = self.pending.as_mut() {
                if seq <= self.seq && p.1.is_none_or(|(s, _)| seq > s) {
                    p.1 = Some((seq, at));
                }
            }
            if let Some((key, Some((_, at)))) = out {
                return Some((key, at));
            }
        }
    }

    /// Fills `mem_head` with the next PM key and its value (read now, while the caller holds
    /// the view: an offset is not kept across calls).
    fn fill_mem(&mut self) {
        if self.mem_head.is_some() || self.mem_done {
            return;
        }
        let next = if self.reverse {
            self.mem_reverse()
        } else {
            self.mem_forward()
        };
        match next {
            Some((k, at)) => self.mem_head = Some((k, self.value(at))),
            None => self.mem_done = true,
        }
    }

    fn fill_disk(&mut self) {
        if self.disk_head.is_some() || self.disk_done {
            return;
        }
        let next = match self.disk_rows.as_mut() {
            Some(r) if self.reverse => r.next_back(),
            Some(r) => r.next(),
            None => None,
        };
        match next {
            Some(row) => self.disk_head = Some(row),
            None => self.disk_done = true,
        }
    }

    /// Records `k` as the last key returned, reusing the buffer.
    fn set_out(&mut self, k: &[u8]) {
        match &mut self.out {
            Some(o) => {
                o.clear();
                o.extend_from_slice(k);
            }
            None => self.out = Some(k.to_vec()),
        }
    }

    /// The next row: PM and disk merged, PM winning a key both hold (G3), tombstones and
    /// deleted keys skipped.
    fn next_row(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.fill_mem();
            self.fill_disk();
            let disk_key = match &self.disk_head {
                Some(Ok((k, _))) => Some(k.as_slice()),
                Some(Err(_)) => {
                    // A table failing its checks ends the iteration (lsm-tree's own iterator
                    // may skip data after an error).
                    self.done = true;
                    return self
                        .disk_head
                        .take()
                        .map(|r| r.map(|_| (Vec::new(), Vec::new())));
                }
                None => None,
            };
            let mem_key = self.mem_head.as_ref().map(|(k, _)| k.as_slice());
            let take_disk = match (mem_key, disk_key) {
                (None, None) => {
                    self.done = true;
                    return None;
                }
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(m), Some(d)) if m == d => {
                    self.disk_head = None;
                    false
                }
                (Some(m), Some(d)) => (d < m) != self.reverse,
            };
            if take_disk {
                if let Some(Ok((k, v))) = self.disk_head.take() {
                    self.set_out(&k);
                    return Some(Ok((k, v)));
                }
                continue;
            }
            let Some((k, v)) = self.mem_head.take() else {
                continue;
            };
            self.set_out(&k);
            match v {
                Ok(Some(v)) => return Some(Ok((k, v))),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let inner = self.sub.inner.clone();
        let view = inner.view.load();
        self.refresh(&view, &inner);
        self.next_row()
    }
}
