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

use crate::db::DbInner;
use crate::error::Result;
use crate::gi::{apply, Version};
use crate::index::{IKey, MemIndex};
use crate::record::read_record_meta;
use crate::space::cleaner::{clean_one, register_zones, Retired};
use crate::space::Space;
use crate::subtable::Subtable;
use crate::view::Sealed;

/// Runs the worker until the database asks it to stop.
pub(crate) fn run(db: Arc<DbInner>) {
    let mut retired: Vec<Retired> = Vec::new();
    while !db.stopping() {
        let step = std::panic::catch_unwind(AssertUnwindSafe(|| step(&db, &mut retired)));
        let why = match step {
            Ok(Ok(true)) => continue,
            Ok(Ok(false)) => {
                db.space.worker_wait(Duration::from_millis(20));
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(panic) => panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into()),
        };
        db.poison(format!("background worker failed: {why}"));
        db.space.declare_full();
        return;
    }
}

/// One round of work; whether anything changed.
fn step(db: &DbInner, retired: &mut Vec<Retired>) -> Result<bool> {
    if let Some(f) = db.fault_hook() {
        f();
    }
    let subs = db.all_subtables();
    let free = db.store.zones.free_zones();
    let waiting = db.space.writers_waiting();
    let sealed = subs
        .iter()
        .any(|s| !s.inner.view.load().immutables.is_empty());
    let clean = free < db.space.clean_below || waiting;
    if !sealed && !clean && retired.is_empty() {
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
    }
    progress |= free_retired(db, retired)?;
    if clean {
        progress |= clean_one(db, retired, waiting)?;
    }
    tracing::trace!(
        free,
        waiting,
        sealed,
        progress,
        retired = retired.len(),
        "background step"
    );
    if waiting && !progress && retired.is_empty() && !seal_one(db) {
        db.space.declare_full();
    }
    if progress {
        db.space.progressed();
    }
    Ok(progress)
}

/// Merges the oldest sealed memtable of `sub` once every group that wrote into it has
/// committed. Returns whether one was merged.
fn merge_ready(db: &DbInner, sub: &Subtable) -> Result<bool> {
    let view = sub.inner.view.load_full();
    let Some(oldest) = view.immutables.last().cloned() else {
        return Ok(false);
    };
    if db.visible.load(Ordering::Acquire) < oldest.last_seq {
        return Ok(false);
    }
    drop(view);
    merge(db, sub, &oldest)?;
    let visible = db.visible.load(Ordering::Acquire);
    sub.inner.replace_view(&db.tickets, visible, |v| {
        let mut imm = v.immutables.clone();
        imm.retain(|s| !Arc::ptr_eq(&s.src.mem, &oldest.src.mem));
        (v.active.clone(), imm)
    });
    Ok(true)
}

/// Moves every version of `sealed` into the Global Index (pointers only, G1) and accounts its
/// zones (P1).
fn merge(db: &DbInner, sub: &Subtable, sealed: &Sealed) -> Result<()> {
    let store = &db.store;
    let visible = db.visible.load(Ordering::Acquire);
    register_zones(&db.space, sub.id(), &sealed.src.mem, visible);
    let hz = db.horizon();
    let gi = &sub.inner.gi;
    let index = &sealed.src.index;
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    let mut zones = db.space.zones.lock();
    let mut acct = |at, n, add| Space::account(&mut zones, zone_of(at), n, add);
    let mut next = index.next(std::ops::Bound::Unbounded);
    let mut key: Vec<u8> = Vec::new();
    let mut versions: Vec<Version> = Vec::new();
    while let Some((ik, at)) = next {
        if ik.key != key && !versions.is_empty() {
            apply(gi, &key, &versions, 0, &hz, &mut acct);
            versions.clear();
        }
        let (size, tomb) = read_record_meta(&store.pool, at)?;
        versions.push(Version {
            seq: ik.seq,
            at,
            size,
            tomb,
        });
        next = index.next(std::ops::Bound::Excluded(&ik));
        let IKey { key: k, .. } = ik;
        key = k;
    }
    if !versions.is_empty() {
        apply(gi, &key, &versions, 0, &hz, &mut acct);
    }
    Ok(())
}

/// Gives back retired zones no ticket can reach any more (V3), and memtables left without
/// zones (S2).
fn free_retired(db: &DbInner, retired: &mut Vec<Retired>) -> Result<bool> {
    let oldest = db.tickets.oldest().map_or(u64::MAX, |(id, _)| id);
    let mut freed = false;
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
        if r.mem.zones().is_empty() && r.mem.committed() > 0 {
            if let Some(sub) = db.with_subtable(r.sub, Subtable::clone) {
                sub.inner.unlink(&db.store, &r.mem)?;
            }
        }
    }
    Ok(freed)
}

/// Asks the subtable whose active memtable holds the most to seal it at its next write, so
/// that its superseded versions become reclaimable. Whether a seal was asked for or is still
/// pending.
fn seal_one(db: &DbInner) -> bool {
    let mut best: Option<(u64, Subtable)> = None;
    for sub in db.all_subtables() {
        if sub.inner.seal_requested.load(Ordering::Acquire) {
            return true;
        }
        let view = sub.inner.view.load();
        let used = view.active.as_ref().map_or(0, |a| a.mem.committed());
        if used > 0 && best.as_ref().is_none_or(|(b, _)| used > *b) {
            best = Some((used, sub.clone()));
        }
    }
    match best {
        Some((_, sub)) => {
            sub.inner.seal_requested.store(true, Ordering::Release);
            db.space.progressed();
            true
        }
        None => false,
    }
}
