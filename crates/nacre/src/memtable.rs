//! The semi-persistent memtable (seed 000 §3.1): records appended into PM zones in items (one
//! per group), a volatile index over them, and the persistent commit point `gidx`.
//!
//! Positions are byte offsets within the memtable's zone sequence: `pos = slot * zone_size +
//! offset`, below 512 MiB. `gidx` (a word of the Halloc memtable object) holds the previous and
//! the current commit position, `(prev, cur)`, in one checked word (nacre-halloc meta_pools).
//!
//! Invariants:
//! - T1: `[0, cur)` holds only whole items of committed groups, except that the items in
//!   `[prev, cur)` may belong to the group whose commit was cut by a crash; recovery then
//!   rolls `cur` back to `prev` (invariant C1). `[prev, cur)` holds the items of exactly one
//!   group: a group's items in one memtable are consecutive (one per zone it fills, for a
//!   group whose records exceed a zone) and its stage 4 moves `gidx` over all of them with
//!   one store.
//! - T4: when a run starts (after recovery), every memtable has `prev == cur`; so an item in
//!   `[prev, cur)` was committed in the current run, and its header names that run.
//! - T5: no position of a memtable incarnation is written twice, and every item header (and
//!   zone-end marker) is bound by its checksum to its [`Place`]: the memtable's birth number
//!   (unique per incarnation, from the engine root's counter) and its position. Zones are
//!   given back and reused within a run, so a zone's bytes may be an earlier owner's items
//!   of this very run; T5 makes such bytes fail to parse at any other place, so they read as
//!   a torn tail, never as an item.
//! - T6: a slot marked reclaimed held a zone whose records were all relocated or dead; its
//!   positions hold nothing and walks skip them. A slot is marked before its zone is released.
//! - T2: the append cursor only moves in stage 2 of the Reorder Ring (serial), `cur` only in
//!   stage 4 (serial, grant order), so `cur <= cursor` and items never overlap. A failed
//!   group's reservations are undone in stage 2, newest first, before any later group
//!   reserves; the zones they took hold nothing and are given back.
//! - T3: a slot's zone is recorded in the memtable object before the zone is committed, and a
//!   zone holds committed data only after it was committed; a slot whose zone is not owned
//!   after recovery lies beyond `cur` and is cleared.
//!
//! Thread safety: `append` is locked only in stage 2 and by recovery; `committed` is written
//! only in stage 4; the index is concurrent; `zones` is read by readers of positions and
//! written in stage 2 under its own lock.

use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};

use nacre_halloc::{ObjId, Slot};
use nacre_pmem::PmOffset;

use crate::art::ArtIndex;
use crate::error::{Error, Result};
use crate::index::MemIndex;
use crate::record::{
    item_body_matches, read_item_header, read_record_checked, record_size, Checked, ItemHeader,
    Kind, Place, ITEM_HEADER, ZONE_END,
};
use crate::store::Store;

/// What a memtable holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Users' writes: active, then immutable, then part of the Global Index.
    User = 1,
    /// Records the cleaner relocated (old sequence numbers): part of the Global Index.
    Relocation = 2,
}

impl Role {
    fn from_word(w: u64) -> Option<Role> {
        match w {
            1 => Some(Role::User),
            2 => Some(Role::Relocation),
            _ => None,
        }
    }
}

/// The zone-end marker for position `pos` of memtable `birth` (bound like item headers, T5).
pub(crate) fn zone_end_marker(birth: u64, pos: u64) -> u64 {
    ZONE_END ^ birth.rotate_left(32) ^ pos
}

/// One record found by a scan: where it is and what it is.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub key: Vec<u8>,
    pub seq: u64,
    pub at: PmOffset,
    pub size: u32,
    pub tomb: bool,
    /// The record names a blob (blob.rs).
    pub blob: bool,
    /// The record's value fails its checksum (its identity passed): reads of its key fail.
    pub damaged: bool,
}

thread_local! {
    /// A record's key and value while a scan checks it, reused across records.
    static KV: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

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
    /// Where the item starts in the memtable (its [`Place`]).
    pub pos: u64,
    /// Where a zone-end marker must be written, and its value (the item skipped the rest of
    /// a zone).
    pub marker: Option<(PmOffset, u64)>,
    /// Cursor before this reservation, to undo it if the group fails.
    pub undo: u64,
}

/// What rebuilding a memtable's index found.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanStats {
    pub items: u64,
    pub records: u64,
    /// Records whose value failed its checksum (their identity passed).
    pub damaged: u64,
    pub bytes: u64,
    pub max_seq: u64,
}

/// The items of the last group that committed into a memtable, as recovery found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// `prev == cur`: no group of the run being recovered committed here.
    None,
    /// Not whole: the group's commit was cut by a crash.
    Torn,
    /// Whole, written by the run being recovered: the first item's header and how many items
    /// of that group `[prev, cur)` holds.
    Whole(ItemHeader, u32),
}

/// What recovery's first phase learns about a memtable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TailFacts {
    /// `gidx`'s previous commit position.
    pub prev: u64,
    /// `gidx`'s current commit position.
    pub cur: u64,
    /// The items in `[prev, cur)`.
    pub tail: Tail,
    /// The last group's items before `prev` (the memtable's last items if the tail goes): the
    /// header of the last item starting before `prev`, and how many items of its group end
    /// there, one after another.
    pub before: Option<(ItemHeader, u32)>,
    /// A torn tail whose items' headers are all whole, name one group and say the run being
    /// recovered (only records fail their checksum): that header. Recovery uses it to tell a
    /// torn write (the last group's) from damage (an older group's).
    pub torn_header: Option<ItemHeader>,
}

/// A memtable's persistent side in DRAM: its PM object, zones and cursors. The volatile
/// index of an active or immutable memtable is held beside it (an [`ArtIndex`] in the read
/// view), so a memtable merged into the Global Index keeps its zones without its index.
pub(crate) struct Memtable {
    pub obj: ObjId,
    /// The subtable id its object records.
    pub subtable: u64,
    pub birth: u64,
    pub role: Role,
    /// Whether items are bound to their place (T5); off only in mutation tests.
    bind: bool,
    zones: Mutex<Vec<Slot>>,
    cursor: Mutex<u64>,
    committed: AtomicU64,
}

impl Memtable {
    /// A memtable over an object whose zones and commit point are read from media.
    pub fn load(store: &Store, obj: ObjId) -> Result<Memtable> {
        let slots = store.mems.slots();
        let mut zones = Vec::with_capacity(slots as usize);
        for s in 0..slots {
            zones.push(store.mems.slot(obj, s)?);
        }
        let head = store.mems.head(obj)?;
        let role = Role::from_word(head.role).ok_or_else(|| {
            Error::corrupt_at(
                format!("memtable object has an unknown role {}", head.role),
                store.mems.objects().offset(obj),
            )
        })?;
        let (_, cur) = store.mems.gidx(obj)?;
        Ok(Memtable {
            obj,
            subtable: head.subtable,
            birth: head.birth,
            role,
            bind: store.mutation != Some(crate::options::RecoveryMutation::SkipPlaceCheck),
            zones: Mutex::new(zones),
            cursor: Mutex::new(cur),
            committed: AtomicU64::new(cur),
        })
    }

    /// A fresh, empty memtable for `subtable`, committed in the memtable pool and linked in
    /// front of `next` (the subtable's memlist is updated by the caller).
    pub fn create(store: &Store, subtable: u64, next: PmOffset, role: Role) -> Result<Memtable> {
        let birth = store.next_birth()?;
        let obj = store
            .mems
            .get(subtable, birth, role as u64)
            .map_err(Error::from_alloc)?;
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

    /// The zones this memtable owns, with their slots.
    pub fn zones(&self) -> Vec<(u64, ObjId)> {
        lock(&self.zones)
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Zone(z) => Some((i as u64, *z)),
                _ => None,
            })
            .collect()
    }

    /// The committed end position.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Gives slot `slot`'s zone back (T6): marks the slot reclaimed, then releases the zone.
    /// The caller guarantees that nothing reachable points into the zone any more.
    pub fn reclaim_slot(&self, store: &Store, slot: u64) -> Result<()> {
        let mut zones = lock(&self.zones);
        let Some(Slot::Zone(z)) = zones.get(slot as usize).copied() else {
            return Ok(());
        };
        store.mems.set_reclaimed(self.obj, slot)?;
        zones[slot as usize] = Slot::Reclaimed;
        store.zones.reclaim(&[z])?;
        Ok(())
    }

    /// Bytes the next item can take in the zone being filled without starting another
    /// (0 when the cursor is at a zone boundary). Stable only while no group reserves here.
    pub fn room_left(&self, zone_size: u64) -> u64 {
        let cursor = *lock(&self.cursor);
        let off = cursor % zone_size;
        let filling = matches!(
            lock(&self.zones).get((cursor / zone_size) as usize),
            Some(Slot::Zone(_))
        );
        if off > 0 && filling {
            zone_size - off
        } else {
            0
        }
    }

    /// Reserves `len` bytes for one item (stage 2). `Ok(None)`: the memtable is full. A new
    /// zone is taken only while more than `keep` zones are free (else `Error::NoSpace`).
    pub fn reserve(&self, store: &Store, len: usize, keep: u64) -> Result<Option<Reservation>> {
        let zs = store.zone_size;
        let len = len as u64;
        let mut cursor = lock(&self.cursor);
        let mut zones = lock(&self.zones);
        let (slot, off) = (*cursor / zs, *cursor % zs);
        let have = match zones.get(slot as usize) {
            Some(Slot::Zone(z)) => Some(*z),
            _ => None,
        };
        if let Some(z) = have.filter(|_| off + len <= zs) {
            let r = Reservation {
                at: store.zones.offset(z).add(off),
                pos: *cursor,
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
                let marker =
                    (zs - off >= 8).then(|| (store.zones.offset(z).add(off), self.marker(*cursor)));
                (slot + 1, marker)
            }
            _ => (slot, None),
        };
        if nslot >= store.mems.slots() || nslot * zs + len > u32::MAX as u64 {
            return Ok(None);
        }
        let zone = match zones[nslot as usize] {
            Slot::Zone(z) => z,
            Slot::Reclaimed => {
                return Err(Error::corrupt(format!(
                    "memtable slot {nslot} ahead of the cursor is reclaimed"
                )))
            }
            Slot::Empty => {
                let free = store.zones.free_zones();
                if free <= keep {
                    return Err(Error::NoSpace { free, keep });
                }
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
                zones[nslot as usize] = Slot::Zone(z);
                // Fault the zone in now, once, rather than page by page in stage 3.
                store.pool.prefault(store.zones.offset(z), zs as usize);
                z
            }
        };
        let r = Reservation {
            at: store.zones.offset(zone),
            pos: nslot * zs,
            end: nslot * zs + len,
            marker,
            undo: *cursor,
        };
        *cursor = r.end;
        Ok(Some(r))
    }

    /// Undoes a reservation of a failed group (stage 2, the group's reservations newest
    /// first, before any later reservation) (T2): moves the cursor back and gives back the
    /// zones of the slots that start at or after it, which hold nothing. Each slot is cleared
    /// before its zone is released (T3 reversed): a crash in between leaves a committed zone
    /// no slot names, which the orphan sweep releases.
    pub fn unreserve(&self, store: &Store, r: &Reservation) -> Result<()> {
        let mut cursor = lock(&self.cursor);
        *cursor = r.undo;
        let first = r.undo.div_ceil(store.zone_size) as usize;
        let mut zones = lock(&self.zones);
        for (slot, s) in zones.iter_mut().enumerate().skip(first) {
            if let Slot::Zone(z) = *s {
                store.mems.set_zone(self.obj, slot as u64, None)?;
                *s = Slot::Empty;
                store.zones.reclaim(&[z])?;
            }
        }
        Ok(())
    }

    /// Advances `gidx` to `end` (stage 4), over every item the group wrote here (one store,
    /// so `prev` stays where the group's first item starts); the caller fences.
    pub fn commit(&self, store: &Store, end: u64) {
        let cur = self.committed.load(Ordering::Acquire);
        store.pool.store_u64(
            store.mems.gidx_offset(self.obj),
            store.mems.gidx_word(self.obj, cur, end),
        );
        self.committed.store(end, Ordering::Release);
    }

    /// Where position `pos` lies and how many bytes of its zone follow; `None` for a reclaimed
    /// slot (T6).
    fn zone_at(&self, store: &Store, pos: u64) -> Result<Option<(PmOffset, usize)>> {
        let zs = store.zone_size;
        let zone = match lock(&self.zones).get((pos / zs) as usize) {
            Some(Slot::Zone(z)) => *z,
            Some(Slot::Reclaimed) => return Ok(None),
            _ => {
                return Err(Error::corrupt(format!(
                    "memtable position {pos} has no zone"
                )))
            }
        };
        Ok(Some((
            store.zones.offset(zone).add(pos % zs),
            (zs - pos % zs) as usize,
        )))
    }

    /// Where an item at `pos` belongs (T5).
    pub fn place(&self, pos: u64) -> Place {
        if self.bind {
            Place {
                birth: self.birth,
                pos,
            }
        } else {
            Place { birth: 0, pos: 0 }
        }
    }

    /// The zone-end marker for position `pos` (T5).
    fn marker(&self, pos: u64) -> u64 {
        let p = self.place(pos);
        zone_end_marker(p.birth, p.pos)
    }

    /// Visits the records of the items in slot `slot` (up to the commit point), calling
    /// `f(record)`. For the cleaner: the memtable is sealed.
    pub fn scan_slot(
        &self,
        store: &Store,
        slot: u64,
        mut f: impl FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let zs = store.zone_size;
        let end = self.committed().min((slot + 1) * zs);
        let mut pos = slot * zs;
        while pos < end {
            let Some((at, room)) = self.zone_at(store, pos)? else {
                return Ok(());
            };
            if room < ITEM_HEADER || store.pool.load_u64(at) == self.marker(pos) {
                return Ok(());
            }
            let h = read_item_header(&store.pool, at, self.place(pos), room)?;
            self.item_records(store, at, &h, &mut f)?;
            pos += u64::from(h.len);
        }
        Ok(())
    }

    fn item_records(
        &self,
        store: &Store,
        at: PmOffset,
        h: &ItemHeader,
        f: &mut impl FnMut(Found) -> Result<()>,
    ) -> Result<()> {
        let mut off = ITEM_HEADER;
        KV.with(|kv| {
            let mut kv = kv.borrow_mut();
            for _ in 0..h.count {
                let rec_at = at.add(off as u64);
                let (seq, kind, klen, damaged) = match read_record_checked(
                    &store.pool,
                    rec_at,
                    h.len as usize - off,
                    &mut kv,
                )? {
                    Checked::Whole { seq, kind, klen } => (seq, kind, klen, false),
                    Checked::ValueDamaged { seq, kind, klen } => (seq, kind, klen, true),
                };
                let size = record_size(klen, kv.len() - klen);
                off += size;
                f(Found {
                    key: kv[..klen].to_vec(),
                    seq,
                    at: rec_at,
                    size: size as u32,
                    tomb: kind == Kind::Delete,
                    blob: kind == Kind::Blob,
                    damaged,
                })?;
            }
            Ok(())
        })
    }

    /// `Db::verify`: reads every item in `[0, end)` and checks its header, body and records,
    /// calling `bad(problem, offset, key)` for each failure (the walk stops at an item whose
    /// header or a record's identity fails: nothing after it can be placed) and `blob(desc)`
    /// for each whole record naming a blob. Returns items, records and bytes read.
    pub fn verify(
        &self,
        store: &Store,
        end: u64,
        bad: &mut dyn FnMut(String, PmOffset, Option<Vec<u8>>),
        blob: &mut dyn FnMut(Vec<u8>),
    ) -> (u64, u64, u64) {
        let (mut items, mut records, mut bytes) = (0, 0, 0);
        let mut kv = Vec::new();
        let walked = self.walk(store, end, |_, at, h| {
            items += 1;
            bytes += u64::from(h.len);
            let body_ok = item_body_matches(&store.pool, at, &h);
            let mut off = ITEM_HEADER;
            let mut record_bad = false;
            for _ in 0..h.count {
                let rec_at = at.add(off as u64);
                match read_record_checked(&store.pool, rec_at, h.len as usize - off, &mut kv) {
                    Ok(Checked::Whole { kind, klen, .. }) => {
                        records += 1;
                        if kind == Kind::Blob {
                            blob(kv[klen..].to_vec());
                        }
                        off += record_size(klen, kv.len() - klen);
                    }
                    Ok(Checked::ValueDamaged { klen, .. }) => {
                        records += 1;
                        record_bad = true;
                        bad(
                            "record value fails its checksum".into(),
                            rec_at,
                            Some(kv[..klen].to_vec()),
                        );
                        off += record_size(klen, kv.len() - klen);
                    }
                    Err(e) => {
                        bad(e.to_string(), rec_at, None);
                        return Ok(());
                    }
                }
            }
            if !body_ok && !record_bad {
                bad("item body fails its checksum".into(), at, None);
            }
            Ok(())
        });
        if let Err((pos, e)) = walked {
            bad(
                format!("memtable position {pos}: {e}"),
                store.mems.objects().offset(self.obj),
                None,
            );
        }
        (items, records, bytes)
    }

    /// Walks the items in `[0, end)`, calling `f(item position, item start, header)`. An error
    /// carries the position of the item that failed to parse.
    fn walk(
        &self,
        store: &Store,
        end: u64,
        f: impl FnMut(u64, PmOffset, crate::record::ItemHeader) -> Result<()>,
    ) -> std::result::Result<(), (u64, Error)> {
        self.walk_from(store, 0, end, f)
    }

    /// [`Memtable::walk`] from position `from`, a zone's start (items never span zones).
    fn walk_from(
        &self,
        store: &Store,
        from: u64,
        end: u64,
        mut f: impl FnMut(u64, PmOffset, crate::record::ItemHeader) -> Result<()>,
    ) -> std::result::Result<(), (u64, Error)> {
        let zs = store.zone_size;
        debug_assert_eq!(from % zs, 0, "walks start at a zone's start");
        let mut pos = from.min(end);
        while pos < end {
            let Some((at, room)) = self.zone_at(store, pos).map_err(|e| (pos, e))? else {
                // A reclaimed slot (T6): its items are gone, the commit point may lie in it.
                pos = ((pos / zs + 1) * zs).min(end);
                continue;
            };
            if room < ITEM_HEADER || store.pool.load_u64(at) == self.marker(pos) {
                pos = (pos / zs + 1) * zs;
                continue;
            }
            let h =
                read_item_header(&store.pool, at, self.place(pos), room).map_err(|e| (pos, e))?;
            f(pos, at, h).map_err(|e| (pos, e))?;
            pos += u64::from(h.len);
        }
        if pos != end {
            return Err((
                pos,
                Error::corrupt(format!(
                    "memtable items end at {pos}, commit point is {end}"
                )),
            ));
        }
        Ok(())
    }

    /// Recovery, phase 1 (before anything is decided or written): where the committed items
    /// end and what the last group's items in `[prev, cur)` look like. With `run` set
    /// (recovery of that run's writes after a crash), a tail in `[prev, cur)` with an item
    /// that does not parse, was written by another run or fails its body checksum, or whose
    /// items name more than one group, is `Tail::Torn`; without it (a settled or clean state)
    /// such damage is an error. Items before `prev` are committed and must always parse.
    /// `one_item` (a mutation test only) takes the rules from before a group could write
    /// several items to one memtable: a tail of more than one item is torn, and each
    /// memtable shows one item of its last group.
    pub fn scan_tail(&self, store: &Store, run: Option<u64>, one_item: bool) -> Result<TailFacts> {
        let (prev, cur) = store.mems.gidx(self.obj)?;
        let mut facts = TailFacts {
            prev,
            cur,
            tail: Tail::None,
            before: None,
            torn_header: None,
        };
        let same = |a: &ItemHeader, b: &ItemHeader| a.seq == b.seq && a.run == b.run;
        let mut tail: Vec<(PmOffset, ItemHeader)> = Vec::new();
        // Items never span zones, so a walk may start at any zone's start. It starts at the
        // zone of the last item before `prev` and moves a zone back while every item it
        // found before `prev` belongs to that item's group (the group's run of items may go
        // on before it) or it found none: `before` then counts the whole run, as a walk
        // from the memtable's start would. Items before the window are read by the rebuild.
        let zs = store.zone_size;
        let mut zone = prev.saturating_sub(1) / zs;
        let walked = loop {
            facts.before = None;
            tail.clear();
            let mut seen = 0u64;
            let walked = self.walk_from(store, zone * zs, cur, |pos, at, h| {
                if pos < prev {
                    seen += 1;
                    facts.before = match facts.before {
                        Some((b, n)) if same(&b, &h) && !one_item => Some((h, n + 1)),
                        _ => Some((h, 1)),
                    };
                } else {
                    tail.push((at, h));
                }
                Ok(())
            });
            let whole_run = facts.before.is_none_or(|(_, n)| u64::from(n) == seen);
            if zone == 0
                || !whole_run
                || store.mutation == Some(crate::options::RecoveryMutation::TailWindowOneZone)
            {
                break walked;
            }
            zone -= 1;
        };
        match walked {
            Ok(()) => {}
            Err((pos, _)) if pos >= prev && run.is_some() => {
                facts.tail = Tail::Torn;
                return Ok(facts);
            }
            Err((_, e)) => return Err(e),
        }
        let Some(run) = run else {
            return Ok(facts);
        };
        let Some(&(_, first)) = tail.first() else {
            return Ok(facts);
        };
        let one_group = tail.iter().all(|(_, h)| h.run == run && same(h, &first))
            && (tail.len() == 1 || !one_item);
        facts.tail = if !one_group {
            Tail::Torn
        } else if let Some((_, h)) = tail
            .iter()
            .find(|(at, h)| !item_body_matches(&store.pool, *at, h))
        {
            facts.torn_header = Some(*h);
            Tail::Torn
        } else {
            Tail::Whole(first, tail.len() as u32)
        };
        Ok(facts)
    }

    /// Recovery: rolls the commit point back to `prev` (the item in `[prev, cur)` belongs to
    /// a group recovery undoes). Flushed only: the caller fences.
    pub fn roll_back(&self, store: &Store, facts: &TailFacts) {
        store.pool.store_u64(
            store.mems.gidx_offset(self.obj),
            store.mems.gidx_word(self.obj, facts.prev, facts.prev),
        );
    }

    /// Recovery, at the end: sets `gidx` to `(cur, cur)`, so that after this open an item
    /// in `[prev, cur)` always belongs to a group of the run that follows. Flushed only: the
    /// caller fences. Returns whether a store was needed.
    pub fn collapse(&self, store: &Store) -> Result<bool> {
        let (prev, cur) = store.mems.gidx(self.obj)?;
        if prev == cur {
            return Ok(false);
        }
        store.pool.store_u64(
            store.mems.gidx_offset(self.obj),
            store.mems.gidx_word(self.obj, cur, cur),
        );
        Ok(true)
    }

    /// Recovery, phase 2: clears slots whose zones are not owned (T3) and visits every
    /// record in `[0, cur)`, `cur` being the commit point after any rollback.
    pub fn rebuild(&self, store: &Store, cur: u64, mut f: impl FnMut(Found)) -> Result<ScanStats> {
        let mut stats = ScanStats::default();
        self.prepare(store, cur)?;
        self.walk(store, cur, |_, at, h| {
            stats.items += 1;
            stats.bytes += u64::from(h.len);
            self.item_records(store, at, &h, &mut |r: Found| {
                stats.max_seq = stats.max_seq.max(r.seq);
                stats.records += 1;
                if r.damaged {
                    stats.damaged += 1;
                    tracing::warn!(
                        key = %String::from_utf8_lossy(&r.key),
                        seq = r.seq,
                        offset = r.at.get(),
                        "a record's value fails its checksum: reads of its key will fail"
                    );
                }
                f(r);
                Ok(())
            })
        })
        .map_err(|(_, e)| e)?;
        Ok(stats)
    }

    /// Recovery, phase 2 without reading records: clears slots whose zones are not owned
    /// (T3) and sets the commit point to `cur`. Before any zone is taken again, so a free
    /// zone a slot still names is never handed to another memtable while named here.
    pub fn prepare(&self, store: &Store, cur: u64) -> Result<()> {
        {
            let zs = store.zone_size;
            let mut zones = lock(&self.zones);
            for (slot, z) in zones.iter_mut().enumerate() {
                if let Slot::Zone(id) = *z {
                    if !store.zones.is_owned(id)? {
                        if (slot as u64) * zs < cur {
                            return Err(Error::corrupt(format!(
                                "zone {id:?} holds committed data but is free"
                            )));
                        }
                        store.mems.set_zone(self.obj, slot as u64, None)?;
                        *z = Slot::Empty;
                    }
                }
            }
        }
        *lock(&self.cursor) = cur;
        self.committed.store(cur, Ordering::Release);
        Ok(())
    }

    /// Recovery of a memtable reads go to: [`Memtable::rebuild`] into a fresh index. Also
    /// returns the records `keep` picks (an active memtable's blobs; every record of one
    /// the Global Index is rebuilt from in the background).
    pub fn rebuild_index(
        &self,
        store: &Store,
        cur: u64,
        keep: impl Fn(&Found) -> bool,
    ) -> Result<(MemtableIndex, ScanStats, Vec<Found>)> {
        let index = MemtableIndex::default();
        let mut kept = Vec::new();
        let stats = self.rebuild(store, cur, |r| {
            index.insert(&r.key, r.seq, r.at);
            if keep(&r) {
                kept.push(r);
            }
        })?;
        Ok((index, stats, kept))
    }
}
