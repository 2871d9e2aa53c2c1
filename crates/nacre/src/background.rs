//! The background worker: merges sealed memtables into the Global Index, cleans zones when
//! free zones run low, gives retired zones back once no reader can point into them, and
//! tells waiting writers when the pool is really full.
//!
//! A panic or error in the worker poisons the database with its cause: writers get that
//! error instead of waiting for space that will never come.
//!
//! Thread safety: one worker per database; it is the only writer of the Global Indexes and
//! of the zone accounting after open.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use nacre_pmem::PmOffset;

use crate::engine::Engine;
use crate::error::{FullCause, Result};
use crate::gi::{apply, Version};
use crate::index::MemIndex;
use crate::record::{read_record_meta, Kind};
use crate::space::cleaner::{clean_one, register_zones, retire_blobs, Cleaned, Retired};
use crate::space::Space;
use crate::subtable::Subtable;
use crate::view::Sealed;

/// Runs the worker until the database asks it to stop.
pub(crate) fn run(db: Arc<Engine>) {
    let mut retired: Vec<Retired> = Vec::new();
    let mut stuck = 0u32;
    while !db.stopping() {
        let step = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _round = db.pause.lock();
            step(&db, &mut retired, &mut stuck)
        }));
        let why = match step {
            Ok(Ok(true)) => continue,
            Ok(Ok(false)) => {
                db.space.worker_wait(Duration::from_millis(20));
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(panic) => crate::error::panic_message(&*panic),
        };
        db.poison(format!("background worker failed: {why}"));
        return;
    }
}

/// Rounds without progress while writers wait and retired zones are held by readers, after
/// which the writers are told the pool is full (about 100 ms).
const HELD_ROUNDS: u32 = 5;

/// Retired zones waiting for readers beyond which the cleaner pauses.
const RETIRED_BACKLOG: usize = 4;

/// One round of work; whether anything changed. `stuck` counts the rounds in a row in which
/// writers waited and nothing could be done.
fn step(db: &Engine, retired: &mut Vec<Retired>, stuck: &mut u32) -> Result<bool> {
    db.inject_background_fault();
    let subs = db.all_subtables();
    let free = db.store.zones.free_zones();
    let waiting = db.space.writers_waiting();
    let sealed = subs
        .iter()
        .any(|s| !s.inner.view.load().immutables.is_empty());
    let clean = free < db.space.clean_below || waiting;
    let disk = db.disk.as_ref();
    let spill_due = disk.is_some_and(|d| d.queue.busy() || d.queue.with_parked(|p| p.is_some()))
        || disk.is_some() && (crate::spiller::due(db) || db.spill_all.load(Ordering::Acquire));
    if !sealed && !clean && !spill_due && retired.is_empty() && db.blobs.retired_count() == 0 {
        return Ok(false);
    }
    // Current views get fresh tickets, so that only views readers still hold keep old
    // versions indexed and retired zones allocated (V2, V3).
    let visible = db.visible.load(Ordering::Acquire);
    for sub in &subs {
        sub.inner.replace_view(&db.tickets, visible, |v| {
            (v.active.clone(), v.immutables.clone())
        });
    }
    let mut progress = false;
    for sub in &subs {
        progress |= merge_ready(db, sub)?;
        progress |= revisit(db, sub)?;
    }
    progress |= free_retired(db, retired)?;
    // Retired zones readers still hold are not free yet; cleaning more would only spend the
    // free zones on copies.
    let backlog = retired.len() >= RETIRED_BACKLOG;
    let mut why = FullCause::LiveData;
    if backlog {
        why = FullCause::HeldByReaders {
            zones: retired.len() as u64,
        };
    }
    // With disk levels, cold data leaves PM by spilling instead of being cleaned in place.
    let mut spilling = false;
    if disk.is_some() {
        let (changed, busy) = crate::spiller::step(db, retired, clean)?;
        progress |= changed;
        spilling = busy;
    } else if clean && !backlog {
        match clean_one(db, retired, waiting)? {
            Cleaned::Zone => progress = true,
            Cleaned::Nothing => {}
            Cleaned::NoRoom(w) => why = w,
        }
    }
    tracing::trace!(
        free,
        waiting,
        sealed,
        progress,
        retired = retired.len(),
        "background step"
    );
    // Sealed memtables still to merge will free space: not full yet.
    let pending = subs
        .iter()
        .any(|s| !s.inner.view.load().immutables.is_empty());
    if waiting
        && !progress
        && !pending
        && !spilling
        && (backlog || !(seal_one(db) || close_reloc(db)))
    {
        // Zones retired but held by long-lived readers (iterators, views) count as used.
        *stuck += 1;
        let held = retired.len() + db.blobs.retired_count();
        if held > 0 {
            why = FullCause::HeldByReaders { zones: held as u64 };
        }
        // Writes of long values under way: once they finish, what they overwrote can go.
        let held = held + db.blobs.in_flight.load(Ordering::Acquire) as usize;
        if held == 0 || *stuck >= HELD_ROUNDS {
            db.space.declare_full(why, db.store.zones.free_zones());
        }
    } else {
        *stuck = 0;
    }
    if progress {
        db.space.progressed();
    }
    Ok(progress)
}

/// Merges the oldest sealed memtable of `sub` once every group that wrote into it has
/// committed. Returns whether one was merged.
fn merge_ready(db: &Engine, sub: &Subtable) -> Result<bool> {
    let view = sub.inner.view.load_full();
    let Some(oldest) = view.immutables.last().cloned() else {
        return Ok(false);
    };
    if db.visible.load(Ordering::Acquire) < oldest.last_seq {
        return Ok(false);
    }
    drop(view);
    let gone = merge(db, sub, &oldest)?;
    let visible = db.visible.load(Ordering::Acquire);
    let ticket = sub.inner.replace_view(&db.tickets, visible, |v| {
        let mut imm = v.immutables.clone();
        imm.retain(|s| !Arc::ptr_eq(&s.src.mem, &oldest.src.mem));
        (v.active.clone(), imm)
    });
    db.blobs.dropped(&db.store, &gone, ticket)?;
    db.space.merged_one();
    Ok(true)
}

/// Moves every version of `sealed` into the Global Index (pointers only, G1) and accounts its
/// zones (P1). Returns the versions naming blobs that were dropped.
fn merge(db: &Engine, sub: &Subtable, sealed: &Sealed) -> Result<Vec<Version>> {
    let store = &db.store;
    let visible = db.visible.load(Ordering::Acquire);
    register_zones(&db.space, sub.id(), &sealed.src.mem, visible);
    let hz = db.horizon();
    let gi = &*sub.inner.gi();
    let index = &sealed.src.index;
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    let mut zones = db.space.zones.lock();
    let mut acct = |at, n, add| Space::account(&mut zones, zone_of(at), n, add);
    let mut revisit: Vec<Vec<u8>> = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    let mut after: Vec<u8> = Vec::new();
    let mut found: Vec<(u64, PmOffset)> = Vec::new();
    let mut versions: Vec<Version> = Vec::new();
    let mut gone: Vec<Version> = Vec::new();
    let mut started = false;
    // Key by key, each key's versions in one pass (a hot key has many).
    while index.next_key_into(started.then_some(after.as_slice()), &mut key, &mut found) {
        started = true;
        versions.clear();
        for &(seq, at) in &found {
            let (size, kind) = read_record_meta(&store.pool, at)?;
            versions.push(Version {
                seq,
                at,
                size,
                tomb: kind == Kind::Delete,
                blob: kind == Kind::Blob,
            });
        }
        if apply(gi, &key, &versions, 0, &hz, &mut acct, &mut gone) {
            revisit.push(key.clone());
        }
        std::mem::swap(&mut after, &mut key);
    }
    drop(zones);
    sub.inner.revisit.lock().extend(revisit);
    Ok(gone)
}

/// Keys the worker re-applies the horizon to per round, at most.
const REVISIT_BATCH: usize = 4096;

/// Re-applies the current horizon to keys that kept older versions for readers (or a
/// tombstone for its ghosts), so versions that became unreadable turn into dead bytes even
/// if their key is never written again. Whether any version was dropped.
fn revisit(db: &Engine, sub: &Subtable) -> Result<bool> {
    let keys: Vec<Vec<u8>> = {
        let mut q = sub.inner.revisit.lock();
        let n = q.len().min(REVISIT_BATCH);
        q.drain(..n).collect()
    };
    if keys.is_empty() {
        return Ok(false);
    }
    let store = &db.store;
    let hz = db.horizon();
    let gi = &*sub.inner.gi();
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    let before = gi.version_count();
    let mut again = Vec::new();
    let mut gone = Vec::new();
    {
        let mut zones = db.space.zones.lock();
        let mut acct = |at, n, add| Space::account(&mut zones, zone_of(at), n, add);
        for k in keys {
            if gi.entry(&k).is_some() && apply(gi, &k, &[], 0, &hz, &mut acct, &mut gone) {
                again.push(k);
            }
        }
    }
    let dropped = gi.version_count() < before;
    // Keys still waiting go to the back; they are looked at again once the queue comes round.
    sub.inner.revisit.lock().extend(again);
    retire_blobs(db, sub, &gone)?;
    Ok(dropped)
}

/// Gives back retired zones no ticket can reach any more (V3), and memtables left without
/// zones (S2).
fn free_retired(db: &Engine, retired: &mut Vec<Retired>) -> Result<bool> {
    let oldest = db.tickets.oldest().map_or(u64::MAX, |(id, _)| id);
    let blob_zones = db.blobs.free_retired(&db.store, oldest)?;
    db.space
        .zones_freed
        .fetch_add(blob_zones, Ordering::Relaxed);
    let mut freed = blob_zones > 0;
    let mut i = 0;
    while i < retired.len() {
        if retired[i].ticket > oldest {
            i += 1;
            continue;
        }
        let r = retired.swap_remove(i);
        r.mem.reclaim_slot(&db.store, r.slot)?;
        db.space.zones_freed.fetch_add(1, Ordering::Relaxed);
        freed = true;
    }
    if freed {
        for sub in db.all_subtables() {
            let active = sub.inner.view.load().active.as_ref().map(|a| a.mem.clone());
            let empty: Vec<_> = {
                let st = sub.inner.lock();
                st.chain
                    .iter()
                    .filter(|m| m.zones().is_empty() && m.committed() > 0)
                    .filter(|m| !active.as_ref().is_some_and(|a| Arc::ptr_eq(a, m)))
                    .cloned()
                    .collect()
            };
            for m in empty {
                sub.inner.unlink(&db.store, &m)?;
            }
        }
    }
    Ok(freed)
}

/// Stops appending to every relocation memtable that holds records, so the cleaner may pick
/// its zones (it never picks the one being written); the next relocation starts a new one.
/// Whether one was closed.
fn close_reloc(db: &Engine) -> bool {
    let mut closed = false;
    for sub in db.all_subtables() {
        let mut st = sub.inner.lock();
        if st.reloc.as_ref().is_some_and(|m| m.committed() > 0) {
            st.reloc = None;
            closed = true;
        }
    }
    closed
}

/// Seals the active memtable that holds the most, so that its superseded versions become
/// reclaimable once it is merged. Whether one was sealed.
fn seal_one(db: &Engine) -> bool {
    let mut subs: Vec<(u64, u32)> = db
        .all_subtables()
        .iter()
        .map(|s| {
            let used = s
                .inner
                .view
                .load()
                .active
                .as_ref()
                .map_or(0, |a| a.mem.committed());
            (used, s.id())
        })
        .filter(|(used, _)| *used > 0)
        .collect();
    subs.sort_unstable();
    subs.iter().rev().any(|(_, id)| db.seal(*id))
}
