//! Iterators: a merge of one subtable's sources (memtable indexes and the Global Index) at a
//! sequence number, forward or reverse, with range and prefix bounds. Each source is a cursor
//! that re-seeks past the last entry it returned, so no borrow of an index outlives a call.
//! An iterator registers its sequence number (so the versions it reads stay indexed, moved
//! by the cleaner rather than dropped) but holds no read view between calls, so it never
//! keeps zones allocated: each call loads the current view (which keeps the zones it points
//! into allocated for the call, V3 in view.rs) and, if the cleaner retired zones since the
//! last call, rebuilds its sources from that view and seeks them back to where it was
//! (offsets read before may point into zones given back since).

use std::ops::Bound;
use std::sync::Arc;

use nacre_halloc::ZonePool;
use nacre_pmem::{PmOffset, Pool};

use crate::blob::value_at;
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
fn sources_of(view: &View, sub: &SubtableInner) -> Vec<Arc<dyn MemIndex>> {
    let mut v: Vec<Arc<dyn MemIndex>> = view
        .indexes()
        .map(|ix| ix.clone() as Arc<dyn MemIndex>)
        .collect();
    v.push(sub.gi.clone());
    v
}

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
    seq: u64,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    reverse: bool,
    last: Option<Vec<u8>>,
    pending: Option<Pending>,
    done: bool,
    /// Key buffers reused by index steps (rows take theirs to the caller).
    spare: IKey,
    probe: IKey,
}

impl DbIterator {
    pub(crate) fn new(
        (pool, zones, verify): (Arc<Pool>, ZonePool, bool),
        sub: Subtable,
        pin: SnapGuard,
        o: IterOptions<'_>,
    ) -> Self {
        let seq = pin.seq;
        let mut lower = o.lower;
        let mut upper = o.upper;
        if let Some(p) = &o.prefix {
            if lower.as_ref().is_none_or(|l| l < p) {
                lower = Some(p.clone());
            }
            if let Some(end) = prefix_end(p) {
                if upper.as_ref().is_none_or(|u| *u > end) {
                    upper = Some(end);
                }
            }
        }
        let inner = sub.inner.clone();
        let view = inner.view.load();
        let retires = inner.retires.load(std::sync::atomic::Ordering::Acquire);
        let mut it = DbIterator {
            pool,
            zones,
            verify,
            sources: sources_of(&view, &inner),
            sub,
            retires,
            _pin: pin,
            heads: Vec::new(),
            seq,
            lower,
            upper,
            reverse: o.reverse,
            last: None,
            pending: None,
            done: false,
            spare: IKey::default(),
            probe: IKey::default(),
        };
        it.heads = (0..it.sources.len()).map(|i| it.first(i)).collect();
        it
    }

    /// Loads the current view (held by the caller for the call) and, if zones were retired
    /// since the sources were built, rebuilds them and seeks them back to the position.
    fn refresh(&mut self, view: &View, inner: &SubtableInner) {
        let retires = inner.retires.load(std::sync::atomic::Ordering::Acquire);
        if retires == self.retires {
            return;
        }
        self.retires = retires;
        self.sources = sources_of(view, inner);
        self.heads = (0..self.sources.len())
            .map(|i| {
                let ix = &self.sources[i];
                match (&self.pending, &self.last) {
                    // Reverse, in the middle of a key: start that key again.
                    (Some((k, _)), _) if self.reverse => ix.prev(Bound::Included(&IKey {
                        key: k.clone(),
                        seq: 0,
                    })),
                    // Forward: after every version of the last key consumed.
                    (_, Some(k)) if !self.reverse => ix.next(Bound::Excluded(&IKey {
                        key: k.clone(),
                        seq: 0,
                    })),
                    _ => self.first(i),
                }
            })
            .collect();
        if self.reverse {
            self.pending = None;
        }
    }

    fn first(&self, i: usize) -> Option<Entry> {
        let ix = &self.sources[i];
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

    /// Keeps a key buffer no row took, for the next step or probe.
    fn recycle(&mut self, k: IKey) {
        if self.spare.key.capacity() == 0 {
            self.spare = k;
        } else if self.probe.key.capacity() == 0 {
            self.probe = k;
        }
    }

    fn value(&self, key: Vec<u8>, at: PmOffset) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        match value_at(&self.pool, &self.zones, at, self.verify) {
            Ok(Some(v)) => Some(Ok((key, v))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn next_forward(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
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
            if let Some(r) = self.value(k.key, at) {
                return Some(r);
            }
        }
        self.done = true;
        None
    }

    fn next_reverse(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            let e = self
                .pop()
                .filter(|(k, _)| self.lower.as_ref().is_none_or(|l| k.key >= *l));
            let Some((k, at)) = e else {
                self.done = true;
                let (key, best) = self.pending.take()?;
                let (_, at) = best?;
                return self.value(key, at);
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
                if let Some(r) = self.value(key, at) {
                    return Some(r);
                }
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
        if self.reverse {
            self.next_reverse()
        } else {
            self.next_forward()
        }
    }
}
