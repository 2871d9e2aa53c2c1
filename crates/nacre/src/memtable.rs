//! The semi-persistent memtable (seed 000 §3.1): records appended into PM zones in items (one
//! per group), a volatile index over them, and the persistent commit point `gidx`.
//!
//! Positions are byte offsets within the memtable's zone sequence: `pos = slot * zone_size +
//! offset`, below 4 GiB. `gidx` (a word of the Halloc memtable object) holds the previous and
//! the current commit position: `prev << 32 | cur`.
//!
//! Invariants:
//! - T1: `[0, cur)` holds only whole items of committed groups, except that the item in
//!   `[prev, cur)` may belong to the group whose commit was cut by a crash; recovery then
//!   rolls `cur` back to `prev` (invariant C1).
//! - T4: when a run starts (after recovery), every memtable has `prev == cur`; so an item in
//!   `[prev, cur)` was committed in the current run, and its header names that run. Within a
//!   run no position of a memtable is written twice (zones are freed only by recovery), so bytes left at a position by an
//!   earlier run (a group a crash cut, its sequence numbers later reused) never pass for an
//!   item of this run.
//! - T2: the append cursor only moves in stage 2 of the Reorder Ring (serial), `cur` only in
//!   stage 4 (serial, grant order), so `cur <= cursor` and items never overlap.
//! - T3: a slot's zone is recorded in the memtable object before the zone is committed, and a
//!   zone holds committed data only after it was committed; a slot whose zone is not owned
//!   after recovery lies beyond `cur` and is cleared.
//!
//! Thread safety: `append` is locked only in stage 2 and by recovery; `committed` is written
//! only in stage 4; the index is concurrent; `zones` is read by readers of positions and
//! written in stage 2 under its own lock.

use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};

use nacre_halloc::ObjId;
use nacre_pmem::PmOffset;

use crate::art::ArtIndex;
use crate::error::{Error, Result};
use crate::index::MemIndex;
use crate::record::{
    item_body_matches, read_item_header, read_record, ItemHeader, ITEM_HEADER, ZONE_END,
};
use crate::store::Store;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// The volatile index memtables use (any [`MemIndex`] works; the tests compare them).
pub(crate) type MemtableIndex = ArtIndex;

/// Space granted to one group in one memtable.
#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    /// Where the item starts in PM.
    pub at: PmOffset,
    /// Position after the item (the new `cur` once committed).
    pub end: u64,
    /// Where a `ZONE_END` marker must be written (the item skipped the rest of a zone).
    pub marker: Option<PmOffset>,
    /// Cursor before this reservation, to undo it if the group fails.
    pub undo: u64,
}

/// What rebuilding a memtable's index found.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanStats {
    pub items: u64,
    pub records: u64,
    pub bytes: u64,
    pub max_seq: u64,
}

/// The item of the last group that committed into a memtable, as recovery found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// `prev == cur`: no group of the run being recovered committed here.
    None,
    /// Not whole: the group's commit was cut by a crash.
    Torn,
    /// Whole, written by the run being recovered.
    Whole(ItemHeader),
}

/// What recovery's first phase learns about a memtable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TailFacts {
    /// `gidx`'s previous commit position.
    pub prev: u64,
    /// `gidx`'s current commit position.
    pub cur: u64,
    /// The item in `[prev, cur)`.
    pub tail: Tail,
    /// The last item starting before `prev`: the memtable's last item if the tail goes.
    pub before: Option<ItemHeader>,
}

/// A memtable in DRAM: its PM object, zones, cursors and index.
pub(crate) struct Memtable {
    pub obj: ObjId,
    pub index: MemtableIndex,
    zones: Mutex<Vec<Option<ObjId>>>,
    cursor: Mutex<u64>,
    committed: AtomicU64,
}

impl Memtable {
    /// A memtable over an object whose zones and commit point are read from media.
    pub fn load(store: &Store, obj: ObjId) -> Result<Memtable> {
        let slots = store.mems.slots();
        let mut zones = Vec::with_capacity(slots as usize);
        for s in 0..slots {
            zones.push(store.mems.zone(obj, s)?);
        }
        let cur = store.mems.gidx(obj) & 0xFFFF_FFFF;
        Ok(Memtable {
            obj,
            index: MemtableIndex::default(),
            zones: Mutex::new(zones),
            cursor: Mutex::new(cur),
            committed: AtomicU64::new(cur),
        })
    }

    /// A fresh, empty memtable for `subtable`, committed in the memtable pool and linked in
    /// front of `next` (the subtable's memlist is updated by the caller).
    pub fn create(store: &Store, subtable: u64, next: PmOffset) -> Result<Memtable> {
        let obj = store.mems.get(subtable).map_err(Error::from_alloc)?;
        let linked = store
            .mems
            .set_next(obj, next)
            .and_then(|_| store.mems.commit(obj));
        if let Err(e) = linked {
            let _ = store.mems.objects().abort(obj);
            return Err(e.into());
        }
        Memtable::load(store, obj)
    }

    /// Offset of the memtable object (what memlists link).
    pub fn offset(&self, store: &Store) -> PmOffset {
        store.mems.objects().offset(self.obj)
    }

    /// The zones this memtable owns.
    pub fn zones(&self) -> Vec<ObjId> {
        lock(&self.zones).iter().flatten().copied().collect()
    }

    /// Reserves `len` bytes for one item (stage 2). `Ok(None)`: the memtable is full.
    pub fn reserve(&self, store: &Store, len: usize) -> Result<Option<Reservation>> {
        let zs = store.zone_size;
        let len = len as u64;
        let mut cursor = lock(&self.cursor);
        let mut zones = lock(&self.zones);
        let (slot, off) = (*cursor / zs, *cursor % zs);
        let have = zones.get(slot as usize).copied().flatten();
        if let Some(z) = have.filter(|_| off + len <= zs) {
            let r = Reservation {
                at: store.zones.offset(z).add(off),
                end: *cursor + len,
                marker: None,
                undo: *cursor,
            };
            *cursor += len;
            return Ok(Some(r));
        }
        // Start the next slot (or this one, if it has no zone yet and nothing in it).
        let (nslot, marker) = match have {
            Some(z) if off > 0 => {
                let marker = (zs - off >= 8).then(|| store.zones.offset(z).add(off));
                (slot + 1, marker)
            }
            _ => (slot, None),
        };
        if nslot >= store.mems.slots() || nslot * zs + len > u32::MAX as u64 {
            return Ok(None);
        }
        let zone = match zones[nslot as usize] {
            Some(z) => z,
            None => {
                let z = store.zones.grant().map_err(Error::from_alloc)?;
                // T3: record the zone in the memtable, then commit it.
                let owned = store
                    .mems
                    .set_zone(self.obj, nslot, Some(z))
                    .and_then(|_| store.zones.commit(z));
                if let Err(e) = owned {
                    let _ = store.zones.abort(z);
                    return Err(e.into());
                }
                zones[nslot as usize] = Some(z);
                // Fault the zone in now, once, rather than page by page in stage 3.
                store.pool.prefault(store.zones.offset(z), zs as usize);
                z
            }
        };
        let r = Reservation {
            at: store.zones.offset(zone),
            end: nslot * zs + len,
            marker,
            undo: *cursor,
        };
        *cursor = r.end;
        Ok(Some(r))
    }

    /// Undoes a reservation of a failed group (stage 2, before any later reservation).
    pub fn unreserve(&self, r: &Reservation) {
        *lock(&self.cursor) = r.undo;
    }

    /// Advances `gidx` to `end` (stage 4); the caller fences.
    pub fn commit(&self, store: &Store, end: u64) {
        let cur = self.committed.load(Ordering::Acquire);
        store
            .pool
            .store_u64(store.mems.gidx_offset(self.obj), cur << 32 | end);
        self.committed.store(end, Ordering::Release);
    }

    fn zone_at(&self, store: &Store, pos: u64) -> Result<(PmOffset, usize)> {
        let zs = store.zone_size;
        let zone = lock(&self.zones)
            .get((pos / zs) as usize)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Corrupt(format!("memtable position {pos} has no zone")))?;
        Ok((
            store.zones.offset(zone).add(pos % zs),
            (zs - pos % zs) as usize,
        ))
    }

    /// Walks the items in `[0, end)`, calling `f(item position, item start, header)`. An error
    /// carries the position of the item that failed to parse.
    fn walk(
        &self,
        store: &Store,
        end: u64,
        mut f: impl FnMut(u64, PmOffset, crate::record::ItemHeader) -> Result<()>,
    ) -> std::result::Result<(), (u64, Error)> {
        let zs = store.zone_size;
        let mut pos = 0u64;
        while pos < end {
            let (at, room) = self.zone_at(store, pos).map_err(|e| (pos, e))?;
            if room < ITEM_HEADER || store.pool.load_u64(at) == ZONE_END {
                pos = (pos / zs + 1) * zs;
                continue;
            }
            let h = read_item_header(&store.pool, at, room).map_err(|e| (pos, e))?;
            f(pos, at, h).map_err(|e| (pos, e))?;
            pos += u64::from(h.len);
        }
        if pos != end {
            return Err((
                pos,
                Error::Corrupt(format!(
                    "memtable items end at {pos}, commit point is {end}"
                )),
            ));
        }
        Ok(())
    }

    /// Recovery, phase 1 (before anything is decided or written): where the committed items
    /// end and what the last group's item in `[prev, cur)` looks like. With `run` set (recovery
    /// of that run's writes after a crash), an item in `[prev, cur)` that does not parse, was
    /// written by another run, fails its body checksum or is not alone there is `Tail::Torn`;
    /// without it (a settled or clean state) such damage is an error. Items before `prev` are
    /// committed and must always parse.
    pub fn scan_tail(&self, store: &Store, run: Option<u64>) -> Result<TailFacts> {
        let gidx = store.mems.gidx(self.obj);
        let (prev, cur) = (gidx >> 32, gidx & 0xFFFF_FFFF);
        let mut facts = TailFacts {
            prev,
            cur,
            tail: Tail::None,
            before: None,
        };
        let mut tail: Vec<(PmOffset, ItemHeader)> = Vec::new();
        let walked = self.walk(store, cur, |pos, at, h| {
            if pos < prev {
                facts.before = Some(h);
            } else {
                tail.push((at, h));
            }
            Ok(())
        });
        match walked {
            Ok(()) => {}
            Err((pos, _)) if pos >= prev && run.is_some() => {
                facts.tail = Tail::Torn;
                return Ok(facts);
            }
            Err((_, e)) => return Err(e),
        }
        if let Some(run) = run {
            facts.tail = match tail[..] {
                [] => Tail::None,
                [(at, h)] if h.run == run && item_body_matches(&store.pool, at, &h) => {
                    Tail::Whole(h)
                }
                _ => Tail::Torn,
            };
        }
        Ok(facts)
    }

    /// Recovery: rolls the commit point back to `prev` (the item in `[prev, cur)` belongs to
    /// a group recovery undoes). Flushed only: the caller fences.
    pub fn roll_back(&self, store: &Store, facts: &TailFacts) {
        store.pool.store_u64(
            store.mems.gidx_offset(self.obj),
            facts.prev << 32 | facts.prev,
        );
    }

    /// Recovery, at the end: sets `gidx` to `cur << 32 | cur`, so that after this open an item
    /// in `[prev, cur)` always belongs to a group of the run that follows. Flushed only: the
    /// caller fences. Returns whether a store was needed.
    pub fn collapse(&self, store: &Store) -> bool {
        let gidx = store.mems.gidx(self.obj);
        let cur = gidx & 0xFFFF_FFFF;
        if gidx >> 32 == cur {
            return false;
        }
        store
            .pool
            .store_u64(store.mems.gidx_offset(self.obj), cur << 32 | cur);
        true
    }

    /// Recovery, phase 2: clears slots whose zones are not owned (T3) and rebuilds the index
    /// over `[0, cur)`, `cur` being the commit point after any rollback.
    pub fn rebuild(&self, store: &Store, cur: u64) -> Result<ScanStats> {
        let mut stats = ScanStats::default();
        {
            let zs = store.zone_size;
            let mut zones = lock(&self.zones);
            for (slot, z) in zones.iter_mut().enumerate() {
                if let Some(id) = *z {
                    if !store.zones.is_owned(id)? {
                        if (slot as u64) * zs < cur {
                            return Err(Error::Corrupt(format!(
                                "zone {id:?} holds committed data but is free"
                            )));
                        }
                        store.mems.set_zone(self.obj, slot as u64, None)?;
                        *z = None;
                    }
                }
            }
        }
        self.walk(store, cur, |_, at, h| {
            stats.items += 1;
            stats.bytes += u64::from(h.len);
            let mut off = ITEM_HEADER;
            for _ in 0..h.count {
                let rec_at = at.add(off as u64);
                let r = read_record(&store.pool, rec_at, h.len as usize - off)?;
                off += r.size();
                stats.max_seq = stats.max_seq.max(r.seq);
                self.index.insert(&r.key, r.seq, rec_at);
                stats.records += 1;
            }
            Ok(())
        })
        .map_err(|(_, e)| e)?;
        *lock(&self.cursor) = cur;
        self.committed.store(cur, Ordering::Release);
        Ok(stats)
    }
}
