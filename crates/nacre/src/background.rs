//! The background worker: merges sealed memtables into the Global Index, cleans zones when
//! free zones run low or compaction was asked for (space/compact.rs), gives retired zones
//! back once no reader can point into them, and tells waiting writers when the pool is
//! really full.
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
use crate::options::RecoveryMutation;
use crate::record::{read_record_meta, Kind};
use crate::space::cleaner::{
    clean_one, register_zones, retire_blobs, worth_closing, Cleaned, Pass, Retired, Want,
};
use crate::space::compact::{Compaction, Round};
use crate::space::Space;
use crate::subtable::Subtable;
use crate::view::Sealed;

/// Runs the worker until the database asks it to stop.
pub(crate) fn run(db: Arc<Engine>) {
    // R2 in gi/pending.rs: the rebuild open left comes before every other step.
    let deferred = db.deferred.lock().take();
    if let Some(d) = deferred {
        db.index_ready.wait_released();
        if let Err(why) = paused(&db, || crate::rebuild::finish(&db, d)) {
            let why = format!("rebuilding the Global Index failed: {why}");
            db.index_ready.set(Err(why.clone()));
            db.poison(why);
            return;
        }
        db.index_ready.set(Ok(()));
    }
    let mut retired: Vec<Retired> = Vec::new();
    let mut stuck = 0u32;
    let mut pass = Pass::new(&db.space);
    let mut compaction = Compaction::new();
    while !db.stopping() {
        match paused(&db, || {
            step(&db, &mut retired, &mut stuck, &mut pass, &mut compaction)
        }) {
            Ok(true) => {}
            Ok(false) => db.space.worker_wait(Duration::from_millis(20)),
            Err(why) => {
                db.poison(format!("background worker failed: {why}"));
                return;
            }
        }
    }
}

/// Runs `f` as one round of the worker (holding `pause`); its error or panic as text.
fn paused<T>(db: &Engine, f: impl FnOnce() -> Result<T>) -> std::result::Result<T, String> {
    let done = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let _round = db.pause.lock();
        f()
    }));
    match done {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(crate::error::panic_message(&*panic)),
    }
}

/// Rounds without progress while writers wait and retired zones are held by readers, after
/// which the writers are told the pool is full (about 100 ms).
const HELD_ROUNDS: u32 = 5;

/// Retired zones waiting for readers beyond which the cleaner pauses.
const RETIRED_BACKLOG: usize = 4;

/// One round of work; whether anything changed (or a compaction request is being served).
/// `stuck` counts the rounds in a row in which writers waited and nothing could be done;
/// `pass` is the cleaner's (P4); `compaction` answers requests to compact (R1).
fn step(
    db: &Engine,
    retired: &mut Vec<Retired>,
    stuck: &mut u32,
    pass: &mut Pass,
    compaction: &mut Compaction,
) -> Result<bool> {
    db.inject_background_fault();
    let subs = db.all_subtables();
    let free = db.store.zones.free_zones();
    let waiting = db.space.writers_waiting();
    let sealed = subs
        .iter()
        .any(|s| !s.inner.view.load().immutables.is_empty());
    let compacting = match compaction.begin(&db.space) {
        Round::Idle => false,
        Round::Compact { fresh } => {
            // A request may find the cleaner's pass spent under pressure: what can be
            // freed is judged again (R2).
            if fresh {
                pass.changed();
            }
            true
        }
    };
    let pressed = free < db.space.clean_below || waiting;
    let clean = pressed || compacting;
    // Compacting without pressure, the cleaner waits while the revisit queues still drop
    // versions: the zones' live bytes are not settled yet, and a zone picked meanwhile may
    // move records about to die (tombstones whose ghosts just left PM).
    let settling = compacting && !pressed;
    let disk = db.disk.as_ref();
    let spill_due = disk.is_some_and(|d| d.queue.busy() || d.queue.with_parked(|p| p.is_some()))
        || disk.is_some() && (crate::spiller::due(db) || db.spill_all.load(Ordering::Acquire));
    if !sealed && !clean && !spill_due && retired.is_empty() && db.blobs.retired_count() == 0 {
        // Nothing waits for this worker (a compaction request makes `clean` true).
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
    // Something waiting writers can use (P4): a merge, versions dropped, zones gained.
    let mut progress = false;
    let mut revisited = false;
    for sub in &subs {
        progress |= merge_ready(db, sub)?;
        revisited |= revisit(db, sub)?;
    }
    progress |= revisited;
    if progress {
        pass.changed();
    }
    let freed = free_retired(db, retired)?;
    progress |= pass.account(&db.space, freed);
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
    let (mut tried, mut cleaned) = (false, false);
    if disk.is_some() {
        let (changed, busy) = crate::spiller::step(db, retired, clean)?;
        progress |= changed;
        spilling = busy;
    } else if clean && !backlog && !(settling && revisited) && (pass.may_clean() || settling) {
        tried = true;
        let want = Want {
            urgent: waiting,
            gain: pass.may_clean(),
            even: settling,
        };
        match clean_one(db, retired, want)? {
            Cleaned::Zone { set } => {
                pass.retired_one(set);
                cleaned = true;
            }
            // Outside the pass: it gains no zone, and moves each zone once (R2).
            Cleaned::Even => cleaned = true,
            Cleaned::Nothing => {}
            Cleaned::NoRoom(w) => why = w,
        }
    }
    // Zones taken for copies count against the pass at once; zones retired only once given
    // back (next rounds).
    progress |= pass.account(&db.space, 0);
    pass.settle(tried, cleaned, retired.len());
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
    // A pass under way (it retired a zone this round) may still gain one: not full yet.
    let idle = waiting && !progress && !pending && !spilling && !cleaned;
    // A memtable sealed (its merge will free space) or a relocation memtable closed (its
    // zones may now be moved): what can be freed changed, so a spent pass gives way to a
    // new one (P4).
    let acted = idle && !backlog && (seal_one(db) || close_reloc(db));
    if acted {
        pass.changed();
    }
    if idle && !acted {
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
    if compacting {
        let queued = subs
            .iter()
            .map(|s| s.inner.revisit.lock().len())
            .max()
            .unwrap_or(0);
        let cycle = (queued as u64).div_ceil(REVISIT_BATCH as u64);
        let changed = progress || cleaned || freed > 0 || pending || acted;
        compaction.end(&db.space, changed, cycle);
    }
    Ok(progress || cleaned || freed > 0 || compacting)
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
    let mark = |db: &Engine| -> Result<()> {
        // Every key of the memtable is in the persistent index now (the mirror's changes
        // were PMwCAS operations, durable when done), unless a tree failed (M4).
        if sub.inner.gi().mirror().is_some_and(|m| m.following()) {
            db.store.mems.set_merged(oldest.src.mem.obj)?;
        }
        Ok(())
    };
    if db.opts.recovery_mutation == Some(RecoveryMutation::MarkMergedEarly) {
        mark(db)?;
    }
    let gone = merge(db, sub, &oldest)?;
    if db.opts.recovery_mutation != Some(RecoveryMutation::MarkMergedEarly) {
        mark(db)?;
    }
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
/// zones (S2). How many zones it gave back.
fn free_retired(db: &Engine, retired: &mut Vec<Retired>) -> Result<u64> {
    let oldest = db.tickets.oldest().map_or(u64::MAX, |(id, _)| id);
    // M2 (gi/mirror.rs): spilled generations' trees go before their zones.
    let trees: Vec<_> = {
        let mut t = db.retired_trees.lock();
        let (done, keep) = std::mem::take(&mut *t)
            .into_iter()
            .partition(|(ticket, _)| *ticket <= oldest);
        *t = keep;
        done
    };
    for (_, gi) in trees {
        if let Some(m) = gi.mirror() {
            m.drop_tree();
        }
    }
    let blob_zones = db.blobs.free_retired(&db.store, oldest)?;
    db.space
        .zones_freed
        .fetch_add(blob_zones, Ordering::Relaxed);
    let mut freed = blob_zones;
    let mut i = 0;
    while i < retired.len() {
        if retired[i].ticket > oldest {
            i += 1;
            continue;
        }
        let r = retired.swap_remove(i);
        r.mem.reclaim_slot(&db.store, r.slot)?;
        r.count_out();
        db.space.zones_freed.fetch_add(1, Ordering::Relaxed);
        freed += 1;
    }
    if freed > 0 {
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

/// Stops appending to a relocation memtable that holds records when the cleaner could
/// gain a zone only by moving its zones (it never picks the one being written;
/// [`worth_closing`]); the next relocation of its subtable starts a new one. Closing one
/// whose zones gain nothing would only leave its zone's room unused. Whether one was closed.
fn close_reloc(db: &Engine) -> bool {
    for sub in db.all_subtables() {
        if !worth_closing(db, sub.id()) {
            continue;
        }
        let mut st = sub.inner.lock();
        if st.reloc.as_ref().is_some_and(|m| m.committed() > 0) {
            let closed = st.reloc.take();
            drop(st);
            // Every record relocated into it is in the persistent index (its relocations
            // were mirrored as they were made), unless a tree failed (M4). An unmarked one
            // is only rebuilt, so a mark that cannot be written is left out.
            if let Some(m) = closed {
                if sub.inner.gi().mirror().is_some_and(|g| g.following()) {
                    if let Err(e) = db.store.mems.set_merged(m.obj) {
                        tracing::warn!(error = %e, "could not mark a relocation memtable merged");
                    }
                }
            }
            return true;
        }
    }
    false
}

/// Seals an active memtable whose merge can free space: the one that holds the most among
/// those whose merge makes at least two zones' worth of bytes dead, or drops a blob
/// ([`dead_after_merge`]). With disk levels, the one that holds the most (a merged Global
/// Index spills to disk). Sealing a memtable whose merge frees nothing would only cost a
/// zone: its zone joins the Global Index, and the subtable's next write needs another.
/// Whether one was sealed.
fn seal_one(db: &Engine) -> bool {
    let mut subs: Vec<(u64, Subtable)> = db
        .all_subtables()
        .into_iter()
        .map(|s| {
            let used = s
                .inner
                .view
                .load()
                .active
                .as_ref()
                .map_or(0, |a| a.mem.committed());
            (used, s)
        })
        .filter(|(used, _)| *used > 0)
        .collect();
    subs.sort_unstable_by_key(|(used, s)| (*used, s.id()));
    let enough = 2 * db.store.zone_size;
    subs.iter().rev().any(|(_, s)| {
        let frees = db.disk.is_some()
            || dead_after_merge(db, s, enough)
                .is_ok_and(|(dead, blobs)| dead >= enough || blobs > 0);
        frees && db.seal(s.id())
    })
}

/// What merging `sub`'s active memtable into its Global Index would make dead, counted
/// until `enough` bytes: record bytes of the versions it supersedes (older versions of its
/// keys, in it or in the Global Index), and how many of those versions name blobs. An upper
/// bound: versions readers still need are counted too.
fn dead_after_merge(db: &Engine, sub: &Subtable, enough: u64) -> Result<(u64, u64)> {
    let view = sub.inner.view.load_full();
    let Some(active) = view.active.as_ref() else {
        return Ok((0, 0));
    };
    let (mut dead, mut blobs) = (0u64, 0u64);
    let mut key: Vec<u8> = Vec::new();
    let mut after: Vec<u8> = Vec::new();
    let mut found: Vec<(u64, PmOffset)> = Vec::new();
    let mut started = false;
    while dead < enough
        && blobs == 0
        && active
            .index
            .next_key_into(started.then_some(after.as_slice()), &mut key, &mut found)
    {
        started = true;
        // Versions newest first: all but the first are superseded.
        for &(_, at) in found.iter().skip(1) {
            let (size, kind) = read_record_meta(&db.store.pool, at)?;
            dead += u64::from(size);
            blobs += u64::from(kind == Kind::Blob);
        }
        if let Some(e) = view.gi.entry(&key) {
            for v in e.value().versions().iter() {
                dead += u64::from(v.size);
                blobs += u64::from(v.blob);
            }
        }
        std::mem::swap(&mut after, &mut key);
    }
    Ok((dead, blobs))
}
