//! The zone cleaner (PM-only mode, DESIGN §4.4): picks a Global Index zone by cost-benefit
//! (LFS: free space gained against live bytes moved, weighted by age), relocates its live
//! records through the commit path with their sequence numbers, points the Global Index at
//! the copies, and retires the zone; it is given back once no reader can hold an offset into
//! it (V3 in view.rs).
//!
//! Crash safety: a relocation is an ordinary group of the Reorder Ring, so it is durable or
//! absent as a whole; the victim's slot is marked reclaimed (T6) only after that, and the zone
//! released after the mark. A crash in between leaves a record and its copy, same key and
//! sequence: recovery keeps one (and counts the other as a ghost, GI2).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::commit::{GroupError, Moved};
use crate::engine::Engine;
use crate::error::{Error, FullCause, Result};
use crate::gi::{apply, GlobalIndex, Horizon, Version};
use crate::memtable::{Found, Memtable};
use crate::record::{read_record, ITEM_HEADER};
use crate::space::{Space, ZoneInfo};
use crate::subtable::Subtable;

/// A zone waiting for the readers that may point into it.
pub(crate) struct Retired {
    /// Given back once no ticket older than this one lives.
    pub ticket: u64,
    pub mem: Arc<Memtable>,
    pub slot: u64,
    /// The copies that leave PM with the zone, with the Global Index that counts them as
    /// ghosts (GI2): counted out only once the zone's slot is durably reclaimed, so that no
    /// crash leaves a copy in PM that a count (the persistent index's too) no longer covers.
    pub ghosts: Option<(Arc<GlobalIndex>, Copies)>,
}

/// Copies of keys' records: key and sequence number.
pub(crate) type Copies = Vec<(Vec<u8>, u64)>;

impl Retired {
    /// The zone is given back: its copies leave their keys' ghost counts (one change of
    /// the persistent index per key, however many of its copies the zone held).
    pub fn count_out(self) {
        let Some((gi, mut ghosts)) = self.ghosts else {
            return;
        };
        ghosts.sort_unstable();
        for copies in ghosts.chunk_by(|a, b| a.0 == b.0) {
            let k = &copies[0].0;
            if let Some(e) = gi.entry(k) {
                let (vs, before) = (e.value().versions(), e.value().ghosts());
                for (_, seq) in copies {
                    e.value().ghost_gone(*seq);
                }
                gi.mirror_change(k, (&vs, before), (&vs, e.value().ghosts()));
            }
        }
    }
}

/// The victim: (zone, subtable, memtable, slot).
type Victim = (u64, u32, Arc<Memtable>, u64);

/// Whether moving zone `info`'s live records elsewhere can gain space: its dead bytes must
/// exceed what a packed copy may leave unused (a zone's tail, up to its largest record, and
/// two item headers), and be at least an eighth of the zone (a sixteenth when writers wait).
/// A zone whose live data is close to its capacity is never worth moving.
fn worth_moving(info: &ZoneInfo, zs: u64, urgent: bool) -> bool {
    let dead = zs.saturating_sub(info.live);
    let floor = if urgent { zs / 16 } else { zs / 8 };
    dead >= floor.max(2 * (u64::from(info.max_record) + ITEM_HEADER as u64))
}

/// The fewest of a subtable's `candidates` (live bytes, largest record), emptiest first, whose
/// relocation frees at least one zone more than their copies take; `None` if no number
/// does. Copies go to the subtable's own relocation memtable: first into the `room` bytes
/// left in the zone it is filling, then into new zones. The `k` emptiest zones' records,
/// packed into zones that each may leave one record and two item headers per victim holding
/// live records unused (`n` of them), need
/// `ceil((live + 2n headers - usable room) / (zone - largest record - header))` new zones;
/// that must be fewer than `k`. A zone with nothing live gains itself. Without such a set,
/// cleaning would only rewrite live data (wear) without giving a writer a zone.
fn gains_a_zone(mut candidates: Vec<(u64, u32)>, room: u64, zs: u64) -> Option<u64> {
    let header = ITEM_HEADER as u64;
    candidates.sort_unstable_by_key(|c| c.0);
    let (mut live, mut largest, mut holding) = (0u64, 0u64, 0u64);
    for (k, (l, r)) in candidates.into_iter().enumerate() {
        let k = k as u64 + 1;
        live += l;
        if l > 0 {
            holding += 1;
            largest = largest.max(u64::from(r));
        }
        let per = zs.saturating_sub(largest + header);
        if per == 0 {
            return None;
        }
        let usable = room.saturating_sub(largest + header);
        if (live + 2 * holding * header)
            .saturating_sub(usable)
            .div_ceil(per)
            < k
        {
            return Some(k);
        }
    }
    None
}

/// Whether moving a lone zone holding `live` bytes is worth it on request (compact.rs, R2)
/// although it gains no zone: it is nearly empty (at most an eighth live), so its copies
/// take at most the one zone it frees. Its ghosts leave PM with it, so the tombstones they
/// hold in the Global Index (GI3) can go; a zone in which a key was put and deleted keeps
/// both records, and the tombstone, until then.
fn breaks_even(live: u64, zs: u64) -> bool {
    live <= zs / 8
}

/// A zone the cleaner may move: (zone, live bytes, largest record, score, victim).
type Candidate = (u64, u64, u32, f64, Victim);

/// Each subtable's relocation memtable being written, and the room left in its zone.
fn relocating(db: &Engine) -> HashMap<u32, (Arc<Memtable>, u64)> {
    let zs = db.store.zone_size;
    db.all_subtables()
        .iter()
        .filter_map(|s| {
            let m = s.inner.lock().reloc.clone()?;
            let room = m.room_left(zs);
            Some((s.id(), (m, room)))
        })
        .collect()
}

/// The zones worth moving ([`worth_moving`]) by subtable, but for zones holding damaged
/// records and zones of the relocation memtables in `writing`.
fn candidates(
    db: &Engine,
    urgent: bool,
    writing: &HashMap<u32, (Arc<Memtable>, u64)>,
) -> HashMap<u32, Vec<Candidate>> {
    let zs = db.store.zone_size;
    let now = db.visible.load(Ordering::Acquire);
    let damaged = db.space.damaged.lock().clone();
    let zones = db.space.zones.lock();
    let mut by_sub: HashMap<u32, Vec<Candidate>> = HashMap::new();
    for (&z, info) in zones.iter() {
        if writing
            .get(&info.sub)
            .is_some_and(|(m, _)| Arc::ptr_eq(m, &info.mem))
            || damaged.contains(&z)
            || !worth_moving(info, zs, urgent)
        {
            continue;
        }
        let u = info.live as f64 / zs as f64;
        let age = (now.saturating_sub(info.stamp) + 1) as f64;
        let score = (1.0 - u) * age / (1.0 + u);
        let victim = (z, info.sub, info.mem.clone(), info.slot);
        by_sub
            .entry(info.sub)
            .or_default()
            .push((z, info.live, info.max_record, score, victim));
    }
    by_sub
}

/// The set of `cands` that gains a zone with `room` bytes left in the zone relocation fills
/// ([`gains_a_zone`]): the emptiest zones, as many as it takes.
fn gaining_set(mut cands: Vec<Candidate>, room: u64, zs: u64) -> Vec<Candidate> {
    let sizes = cands.iter().map(|c| (c.1, c.2)).collect();
    let Some(k) = gains_a_zone(sizes, room, zs) else {
        return Vec::new();
    };
    cands.sort_unstable_by_key(|c| (c.1, c.0));
    cands.truncate(k as usize);
    cands
}

/// What the cleaner may pick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want {
    /// Writers wait: zones a sixteenth dead are worth moving (else an eighth).
    pub urgent: bool,
    /// Zones of sets that gain one (P3), while the pass may go on (P4).
    pub gain: bool,
    /// On request (compact.rs, R2): failing those, a subtable's emptiest zone alone, if it
    /// is nearly empty and no set of the subtable gains a zone ([`breaks_even`]).
    pub even: bool,
}

/// A zone picked, with how many zones its set has (`None`: a lone zone that breaks even).
type Picked = (Victim, Option<u64>);

/// Picks the zone to move ([`Want`]) and how many zones the set it belongs to has (the pass
/// that gains a zone retires at most that many, P4). Relocation packs a subtable's records
/// into its own relocation memtable, so a zone is gained per subtable: only a zone of a set
/// of one subtable's emptiest zones that gains one ([`gaining_set`]) may be picked; among
/// those, the one with the best benefit/cost, `(1 - u) * age / (1 + u)`, `u` its live
/// fraction (LFS). A pass that cannot free a zone a writer can use moves nothing, but for
/// a compaction on request, which then may move a nearly empty zone that breaks even.
fn pick(db: &Engine, want: Want) -> Option<Picked> {
    let zs = db.store.zone_size;
    let writing = relocating(db);
    let mut best: Option<(f64, Victim, u64)> = None;
    let mut even: Option<(f64, Victim)> = None;
    for (sub, cands) in candidates(db, want.urgent, &writing) {
        let room = writing.get(&sub).map_or(0, |(_, r)| *r);
        let lone = cands.iter().min_by_key(|c| (c.1, c.0)).cloned();
        let set = gaining_set(cands, room, zs);
        let k = set.len() as u64;
        for (_, _, _, score, victim) in set {
            if best.as_ref().is_none_or(|(b, _, _)| score > *b) {
                best = Some((score, victim, k));
            }
        }
        if let Some((_, live, _, score, victim)) = lone.filter(|_| k == 0) {
            if breaks_even(live, zs) && even.as_ref().is_none_or(|(b, _)| score > *b) {
                even = Some((score, victim));
            }
        }
    }
    let picked = match (best, even) {
        (Some((_, v, k)), _) if want.gain => Some((v, Some(k))),
        (None, Some((_, v))) if want.even => Some((v, None)),
        _ => None,
    };
    tracing::trace!(victim = ?picked.as_ref().map(|(v, k)| (v.0, *k)), "cleaner pick");
    picked
}

/// Whether the cleaner could gain a zone of subtable `sub` if its relocation memtable were
/// closed (its zones become candidates; copies start a new zone), and not otherwise: the
/// memtable's zones belong to every set that gains one.
pub(crate) fn worth_closing(db: &Engine, sub: u32) -> bool {
    let zs = db.store.zone_size;
    let writing = relocating(db);
    let Some((open, room)) = writing.get(&sub) else {
        return false;
    };
    let mut others = writing.clone();
    others.remove(&sub);
    let cands = candidates(db, true, &others)
        .remove(&sub)
        .unwrap_or_default();
    let without: Vec<Candidate> = cands
        .iter()
        .filter(|c| !Arc::ptr_eq(&c.4 .2, open))
        .cloned()
        .collect();
    gaining_set(without, *room, zs).is_empty() && !gaining_set(cands, 0, zs).is_empty()
}

/// Adds the zones of `mem` not yet accounted (P1); how many it added.
pub(crate) fn register_zones(space: &Space, sub: u32, mem: &Arc<Memtable>, stamp: u64) -> u64 {
    let mut zones = space.zones.lock();
    let mut added = 0;
    for (slot, z) in mem.zones() {
        zones.entry(z.0).or_insert_with(|| {
            added += 1;
            ZoneInfo {
                sub,
                mem: mem.clone(),
                slot,
                live: 0,
                max_record: 0,
                stamp,
            }
        });
    }
    added
}

/// The cleaner's pass (P4): the zones it retired, gave back and took for its copies since
/// it began. A pass ends when the zones given back outnumber the zones taken (a zone gained:
/// waiting writers are told) or when it can retire no more and every zone it retired is
/// back without a gain (spent: no more cleaning until what can be freed changes).
pub(crate) struct Pass {
    /// Zones retired in this pass.
    retired: u64,
    /// The most zones the pass may retire: the size of the set that gained a zone when it
    /// began.
    budget: u64,
    /// Zones given back minus zones relocation took, since the pass began.
    net: i64,
    /// `Space::reloc_zones` last accounted.
    taken_seen: u64,
    /// The pass ended without a gain.
    spent: bool,
}

impl Pass {
    pub fn new(space: &Space) -> Pass {
        Pass {
            retired: 0,
            budget: 0,
            net: 0,
            taken_seen: space.reloc_zones.load(Ordering::Relaxed),
            spent: false,
        }
    }

    /// Zones given back (`n`) and taken by relocation since the last call are accounted;
    /// whether the pass gained a zone (a new pass begins).
    pub fn account(&mut self, space: &Space, n: u64) -> bool {
        let taken = space.reloc_zones.load(Ordering::Relaxed);
        self.net += n as i64 - (taken - self.taken_seen) as i64;
        self.taken_seen = taken;
        if self.net > 0 {
            *self = Pass::new(space);
            return true;
        }
        false
    }

    /// What can be freed changed (a merge, versions dropped, a memtable sealed or a
    /// relocation memtable closed): a new pass may begin. What this one owes (zones taken,
    /// or retired and not given back yet) carries over.
    pub fn changed(&mut self) {
        self.retired = 0;
        self.budget = 0;
        self.spent = false;
    }

    /// Whether the cleaner may retire another zone.
    pub fn may_clean(&self) -> bool {
        !self.spent && (self.retired == 0 || self.retired < self.budget)
    }

    /// A zone was retired, part of a set of `set` zones that gains one.
    pub fn retired_one(&mut self, set: u64) {
        if self.retired == 0 {
            self.budget = set;
        }
        self.retired += 1;
    }

    /// The end of a round, with `owed` retired zones not yet given back; `tried`: the
    /// cleaner looked for a zone to retire, `cleaned`: it retired one. A pass that retired
    /// zones, got all of them back and gained nothing is spent once it can retire no more:
    /// its budget is used up, or the cleaner looked and found no zone of a gaining set. A
    /// round in which the cleaner did not look (free zones enough and no writer waiting, or
    /// retired zones held by readers) leaves the pass open: the rest of its set is still to
    /// be moved, and only then does it gain a zone.
    pub fn settle(&mut self, tried: bool, cleaned: bool, owed: usize) {
        let done = self.retired >= self.budget || tried && !cleaned;
        if done && !cleaned && owed == 0 && self.retired > 0 && self.net <= 0 {
            tracing::debug!(
                retired = self.retired,
                net = self.net,
                "cleaner pass gained no zone"
            );
            self.spent = true;
        }
    }
}

/// What one cleaning attempt did.
pub(crate) enum Cleaned {
    /// A zone was retired; it belongs to a set of `set` zones whose relocation gains one.
    Zone { set: u64 },
    /// A lone nearly empty zone was retired on request; its move gains no zone (R2).
    Even,
    /// No zone is worth cleaning (or none holds enough dead bytes to gain one).
    Nothing,
    /// Relocation found no room (no free zone, or no memtable object).
    NoRoom(FullCause),
}

/// Cleans one zone if moving it is part of a set that gains one, or breaks even on request
/// ([`pick`], [`Want`]). Zones its relocation takes are counted in `Space::reloc_zones`.
pub(crate) fn clean_one(db: &Engine, retired: &mut Vec<Retired>, want: Want) -> Result<Cleaned> {
    let Some(((zone, sub_id, mem, slot), set)) = pick(db, want) else {
        return Ok(Cleaned::Nothing);
    };
    let Some(sub) = db.with_subtable(sub_id, Subtable::clone) else {
        return Ok(Cleaned::Nothing);
    };
    let store = &db.store;
    let gi_arc = sub.inner.gi();
    let gi = &*gi_arc;
    let mut found: Vec<Found> = Vec::new();
    let scanned = mem.scan_slot(store, slot, |r| {
        found.push(r);
        Ok(())
    });
    if let Err(e @ Error::Corrupt { .. }) = &scanned {
        set_aside(db, zone, e);
        // Another zone, if one is worth it (each set-aside zone leaves the choice for good).
        return clean_one(db, retired, want);
    }
    scanned?;
    let hz: Horizon = db.horizon();
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    // Re-apply the horizon to every key the zone holds: versions no reader needs any more are
    // not worth moving.
    let keys: BTreeSet<&[u8]> = found.iter().map(|r| &r.key[..]).collect();
    let mut gone = Vec::new();
    {
        let mut zones = db.space.zones.lock();
        for k in keys {
            if gi.entry(k).is_some() {
                let mut acct = |at, n, add| Space::account(&mut zones, zone_of(at), n, add);
                apply(gi, k, &[], 0, &hz, &mut acct, &mut gone);
            }
        }
    }
    retire_blobs(db, &sub, &gone)?;
    let mut live: Vec<Found> = Vec::new();
    // Copies no version points at: ghosts (GI2) until the zone is given back. Counted out
    // only then: a relocation that finds no room leaves the zone, and its ghosts, in place.
    let mut ghosts: Vec<(Vec<u8>, u64)> = Vec::new();
    for r in found {
        let Some(e) = gi.entry(&r.key) else { continue };
        let pointed = e.value().versions().iter().any(|v| v.at == r.at);
        if pointed {
            live.push(r);
        } else {
            ghosts.push((r.key, r.seq));
        }
    }
    tracing::debug!(
        zone,
        sub = sub_id,
        live = live.len(),
        ghosts = ghosts.len(),
        ?set,
        "cleaning a zone"
    );
    let mut chunk: Vec<(Found, Moved)> = Vec::new();
    let mut bytes = 0usize;
    // The current chunk's limit: set when its first record comes (0: no chunk yet).
    let mut room = 0usize;
    let mut moved: Vec<(Vec<u8>, u64)> = Vec::new();
    if let Some(r) = live.iter().find(|r| r.damaged) {
        let e = Error::corrupt_at("a live record's value fails its checksum", r.at);
        set_aside(db, zone, &e);
        return clean_one(db, retired, want);
    }
    for r in live {
        let rec = read_record(&store.pool, r.at, r.size as usize)?;
        if bytes + r.size as usize > room {
            if !chunk.is_empty() {
                if let Some(why) = relocate(db, &sub, std::mem::take(&mut chunk), &mut moved)? {
                    return Ok(Cleaned::NoRoom(why));
                }
            }
            bytes = 0;
            room = chunk_room(db, &sub, r.size as usize);
        }
        bytes += r.size as usize;
        chunk.push((
            r,
            Moved {
                key: rec.key,
                value: rec.value,
                seq: rec.seq,
                kind: rec.kind,
            },
        ));
    }
    if !chunk.is_empty() {
        if let Some(why) = relocate(db, &sub, chunk, &mut moved)? {
            return Ok(Cleaned::NoRoom(why));
        }
    }
    // The zone's ghosts and the moved records' old copies leave PM with the zone (GI2):
    // counted out once it is given back.
    let ghosts: Vec<(Vec<u8>, u64)> = ghosts.into_iter().chain(moved).collect();
    db.space.zones.lock().remove(&zone);
    sub.inner.retires.fetch_add(1, Ordering::AcqRel);
    let ticket = sub
        .inner
        .replace_view(&db.tickets, db.visible.load(Ordering::Acquire), |v| {
            (v.active.clone(), v.immutables.clone())
        });
    retired.push(Retired {
        ticket,
        mem,
        slot,
        ghosts: Some((gi_arc.clone(), ghosts)),
    });
    Ok(set.map_or(Cleaned::Even, |set| Cleaned::Zone { set }))
}

/// The most record bytes the next relocation item of `sub` may hold, its first record being
/// `first` bytes: what is left of the relocation memtable's zone being filled when that
/// record fits there, else a whole zone. Copies are packed, so moving zones that are mostly
/// live still gains zones (a copy never starts a new zone while the last one has room).
fn chunk_room(db: &Engine, sub: &Subtable, first: usize) -> usize {
    let zs = db.store.zone_size;
    let left = sub
        .inner
        .lock()
        .reloc
        .as_ref()
        .map_or(0, |m| m.room_left(zs)) as usize;
    if left >= ITEM_HEADER + first {
        left - ITEM_HEADER
    } else {
        zs as usize - ITEM_HEADER
    }
}

/// Keeps zone `zone` out of cleaning for the rest of the run: it holds damaged bytes (`why`).
fn set_aside(db: &Engine, zone: u64, why: &Error) {
    if db.space.damaged.lock().insert(zone) {
        tracing::warn!(zone, error = %why, "zone holds damaged records: not cleaned");
    }
}

/// Writes `chunk` to the subtable's relocation memtable and points the Global Index at the
/// copies; the old copies count as ghosts until their zone is given back (GI2), and are
/// added to `moved`. `Ok(Some(why))`: no room to relocate into.
fn relocate(
    db: &Engine,
    sub: &Subtable,
    chunk: Vec<(Found, Moved)>,
    moved_keys: &mut Vec<(Vec<u8>, u64)>,
) -> Result<Option<FullCause>> {
    let (found, moved): (Vec<Found>, Vec<Moved>) = chunk.into_iter().unzip();
    let sub_id = sub.id();
    let news = match db.commit_moved(sub_id, moved) {
        Ok(n) => n,
        Err(GroupError::NoSpace { .. }) => return Ok(Some(FullCause::LiveData)),
        Err(GroupError::PoolFull(why)) => return Ok(Some(why)),
        Err(e) => return Err(Error::from(e)),
    };
    let store = &db.store;
    if let Some(reloc) = sub.inner.lock().reloc.clone() {
        let taken = register_zones(
            &db.space,
            sub_id,
            &reloc,
            db.visible.load(Ordering::Acquire),
        );
        db.space.reloc_zones.fetch_add(taken, Ordering::Relaxed);
    }
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    let gi = &*sub.inner.gi();
    let mut zones = db.space.zones.lock();
    for (r, new_at) in found.into_iter().zip(news) {
        let Some(e) = gi.entry(&r.key) else { continue };
        let (old, ghosts) = (e.value().versions(), e.value().ghosts());
        let mut vs: Vec<Version> = old.to_vec();
        if let Some(v) = vs.iter_mut().find(|v| v.at == r.at) {
            v.at = new_at;
            Space::account(&mut zones, zone_of(r.at), r.size, false);
            Space::account(&mut zones, zone_of(new_at), r.size, true);
            gi.mirror_change(&r.key, (&old, ghosts), (&vs, ghosts + 1));
            e.value().set_versions(vs);
            e.value().add_ghosts(1);
            moved_keys.push((r.key.clone(), r.seq));
        }
        db.space
            .moved_bytes
            .fetch_add(u64::from(r.size), Ordering::Relaxed);
    }
    Ok(None)
}

/// Versions naming blobs left `sub`'s Global Index: their zones go back once every view that
/// could still read them is gone (B2 in blob.rs).
pub(crate) fn retire_blobs(db: &Engine, sub: &Subtable, gone: &[Version]) -> Result<()> {
    if gone.is_empty() {
        return Ok(());
    }
    let ticket = sub
        .inner
        .replace_view(&db.tickets, db.visible.load(Ordering::Acquire), |v| {
            (v.active.clone(), v.immutables.clone())
        });
    db.blobs.dropped(&db.store, gone, ticket)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZS: u64 = 64 << 10;

    #[test]
    fn zones_full_of_live_records_gain_nothing() {
        // 64 records of 1,008 bytes fill a 64 KiB zone but for a 1 KB tail.
        let full = vec![(64 * 1008, 1008); 200];
        assert_eq!(gains_a_zone(full, 0, ZS), None);
        // Their tails together hold more than two zones: still nothing to gain by moving.
        const { assert!(200 * (ZS - 64 * 1008) > 2 * ZS) };
    }

    #[test]
    fn a_few_half_empty_zones_gain_one() {
        assert_eq!(gains_a_zone(vec![(ZS / 2, 1008); 3], 0, ZS), Some(3));
        assert_eq!(gains_a_zone(vec![(ZS / 2, 1008); 1], 0, ZS), None);
        // Three quarters live: four zones' records fit in three.
        let mut zones = vec![(ZS - ZS / 4, 1008); 3];
        assert_eq!(gains_a_zone(zones.clone(), 0, ZS), None);
        zones.extend([(ZS - ZS / 4, 1008); 3]);
        assert_eq!(gains_a_zone(zones, 0, ZS), Some(5));
    }

    #[test]
    fn a_nearly_empty_zone_alone_gains_nothing_unless_its_copy_fits_the_open_zone() {
        // Moving one zone holding a record into a new zone of the relocation memtable frees
        // one zone and takes one.
        assert_eq!(gains_a_zone(vec![(100, 100)], 0, ZS), None);
        // Into the tail of the zone that memtable is filling, it gains one.
        assert_eq!(gains_a_zone(vec![(100, 100)], ZS / 2, ZS), Some(1));
        // Not if the tail is too short for the record.
        assert_eq!(gains_a_zone(vec![(100, 100)], 150, ZS), None);
        // Two of them share one new zone.
        assert_eq!(gains_a_zone(vec![(100, 100); 2], 0, ZS), Some(2));
    }

    #[test]
    fn a_zone_with_nothing_live_gains_itself() {
        assert_eq!(gains_a_zone(vec![(0, 1008)], 0, ZS), Some(1));
        // First among fuller ones; its largest record bounds no copy.
        let zones = vec![(ZS - 2000, 1008), (0, (ZS / 2) as u32)];
        assert_eq!(gains_a_zone(zones, 0, ZS), Some(1));
    }

    #[test]
    fn on_request_a_lone_nearly_empty_zone_moves_though_it_only_breaks_even() {
        assert!(breaks_even(100, ZS) && breaks_even(ZS / 8, ZS));
        assert!(!breaks_even(ZS / 8 + 1, ZS));
    }

    #[test]
    fn records_larger_than_a_zone_can_never_be_packed() {
        let big = vec![(ZS / 2, (ZS - 40) as u32); 10];
        assert_eq!(gains_a_zone(big, ZS - 40, ZS), None);
    }
}
