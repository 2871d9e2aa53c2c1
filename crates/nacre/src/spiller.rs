//! Spilling to the disk levels (DESIGN §4.5): the background worker freezes a subtable's
//! Global Index when it reaches `gi_size_limit` (or when writers wait for space), the spill
//! worker streams it into tables, a compaction worker compacts the trees spills changed, and
//! the background worker finishes the spill by giving the frozen memtables' zones back (G2 in
//! disk/mod.rs).
//!
//! Failures (D5 in disk/tree.rs, G6 in disk/mod.rs):
//! - transient: an I/O error writing or registering new tables (a full disk, a quota, EIO)
//!   that left the tree as it was. The spill's table files are removed, its Global Index stays
//!   frozen and readable in PM, and the spill runs again after a backoff (100 ms, doubling up
//!   to 5 s; no other spill starts meanwhile). Writers that need space get
//!   [`crate::Error::SpillFailed`] with the cause instead of waiting; once a retry succeeds,
//!   the zones go back and writes resume. A compaction step that fails so is retried with the
//!   same backoff (compactions are never needed for a write to go through).
//! - fatal: a damaged record or table, a broken invariant, a failure after which the tree's
//!   `current` file may name a version the open tree does not hold, a panic: the database is
//!   poisoned. Reads go on (the frozen Global Index stays readable in PM), writes fail with
//!   the cause until a reopen.
//!
//! Thread safety: freezing and finishing run on the background worker, which is the only
//! writer of the Global Indexes; the disk worker only reads a frozen Global Index.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::disk::queue::{Done, Job, Parked};
use crate::disk::spill::spill;
use crate::disk::{DiskTier, StepError};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gi::{GlobalIndex, Version};
use crate::space::cleaner::Retired;
use crate::space::Stop;
use crate::subtable::Subtable;
use crate::view::Frozen;

/// Runs the spill worker until the database stops: the spills the background worker hands it,
/// one at a time.
pub(crate) fn run_spills(db: Arc<Engine>) {
    let Some(disk) = db.disk.as_ref() else { return };
    loop {
        let job = match disk.queue.next_job(Duration::from_secs(1)) {
            Err(()) => return,
            Ok(None) => continue,
            Ok(Some(j)) => j,
        };
        let store = &db.store;
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            spill(
                &store.pool,
                &store.zones,
                db.opts.verify_checksums,
                &job.frozen,
                &job.tree,
                job.seq,
            )
        }))
        .unwrap_or_else(|p| {
            Err(StepError::Fatal(Error::Background {
                worker: "disk spill",
                reason: crate::error::panic_message(&*p),
            }))
        });
        disk.queue.finished(Done { job, outcome });
        db.space.kick();
        disk.wake_compactor();
    }
}

/// Runs the compaction worker until the database stops: compaction steps on every tree a
/// spill changed, beside spills (a spill never waits for a compaction).
pub(crate) fn run_compactions(db: Arc<Engine>) {
    let Some(disk) = db.disk.as_ref() else { return };
    let mut busy: BTreeSet<u32> = BTreeSet::new();
    // Transient failures in a row, and when compacting may start again after the last.
    let mut failures = 0u32;
    let mut resume: Option<Instant> = None;
    loop {
        if busy.is_empty() && disk.compactor_wait(Duration::from_millis(200)) {
            return;
        }
        if disk.stopping() {
            return;
        }
        if db.poisoned().is_some() {
            busy.clear();
            continue;
        }
        // Backing off (`busy` is empty then, so the wait above paces this loop).
        if resume.is_some_and(|t| Instant::now() < t) {
            continue;
        }
        for (id, t) in disk.trees() {
            if t.take_dirty() {
                busy.insert(id);
            }
        }
        let Some(&sub) = busy.iter().next() else {
            continue;
        };
        let tree = match disk.tree(sub) {
            Ok(t) => t,
            Err(e) => {
                db.poison(format!("opening the disk levels failed: {e}"));
                continue;
            }
        };
        let threshold = db.disk_gc_threshold(tree.newest());
        let step = std::panic::catch_unwind(AssertUnwindSafe(|| match db.store.pool.sim() {
            None => tree.compact(threshold),
            // After a simulated power failure nothing runs, compactions included.
            Some(sim) => sim
                .unless_stopped(|| tree.compact(threshold))
                .unwrap_or(Ok((false, 0))),
        }));
        if matches!(step, Ok(Ok(_))) && std::mem::take(&mut failures) > 0 {
            resume = None;
            tracing::info!("compacting the disk levels works again");
        }
        match step {
            Ok(Ok((false, _))) => {
                busy.remove(&sub);
            }
            Ok(Ok((true, bytes))) => {
                disk.counters.compactions.fetch_add(1, Ordering::Relaxed);
                disk.counters
                    .compaction_bytes
                    .fetch_add(bytes, Ordering::Relaxed);
            }
            Ok(Err(StepError::Transient { error, kind })) => {
                failures += 1;
                let delay = backoff(failures);
                tracing::warn!(
                    failures,
                    retry_in_ms = delay.as_millis() as u64,
                    kind = ?kind,
                    error = %error,
                    "compacting the disk levels failed; the tree is as it was, retrying later"
                );
                tree.set_dirty();
                busy.clear();
                resume = Some(Instant::now() + delay);
            }
            Ok(Err(StepError::Fatal(e))) => {
                db.poison(format!("compacting the disk levels failed: {e}"));
                busy.clear();
            }
            Err(p) => {
                db.poison(format!(
                    "compacting the disk levels panicked: {}",
                    crate::error::panic_message(&*p)
                ));
                busy.clear();
            }
        }
    }
}

/// Zones of `sub`'s Global Index that are not frozen.
fn gi_zones(db: &Engine, sub: &Subtable) -> u64 {
    let frozen = sub.inner.view.load().frozen.clone();
    let zones = db.space.zones.lock();
    zones
        .values()
        .filter(|z| z.sub == sub.id())
        .filter(|z| {
            frozen
                .as_ref()
                .is_none_or(|f| !f.mems.iter().any(|m| Arc::ptr_eq(m, &z.mem)))
        })
        .count() as u64
}

/// Whether some subtable's Global Index has reached its limit (frozen zones not counted).
pub(crate) fn due(db: &Engine) -> bool {
    let limit = db.gi_limit_zones();
    db.all_subtables().iter().any(|s| gi_zones(db, s) >= limit)
}

/// Finishes a spill that ran, and freezes a Global Index that is due (one spill at a time).
/// `urgent`: writers wait for space, so the largest Global Index goes whatever its size.
/// Whether anything changed; `Ok(true)` from a spill in flight as well (space will come).
pub(crate) fn step(db: &Engine, retired: &mut Vec<Retired>, urgent: bool) -> Result<(bool, bool)> {
    let Some(disk) = db.disk.as_ref() else {
        return Ok((false, false));
    };
    let mut progress = false;
    if let Some(done) = disk.queue.take_done() {
        finish(db, done, retired)?;
        progress = true;
    }
    if disk.queue.busy() {
        return Ok((progress, true));
    }
    if db.poisoned().is_some() {
        // A failed spill leaves its frozen Global Index readable in PM; nothing more spills.
        return Ok((progress, false));
    }
    match disk.queue.unpark_due(Instant::now()) {
        Some(Parked { job: Some(job), .. }) => {
            tracing::debug!(subtable = job.sub, "trying the failed spill again");
            disk.queue.submit(job);
            return Ok((true, true));
        }
        // The tree could not be opened: pick a Global Index again.
        Some(Parked { job: None, .. }) => {}
        None => {
            if let Some(stop) = parked_stop(disk) {
                // Only the parked spill can free zones: writers waiting for space are told
                // why now instead of waiting for its retry.
                db.space
                    .declare_spill_failed(stop, db.store.zones.free_zones());
                return Ok((progress, true));
            }
        }
    }
    let limit = db.gi_limit_zones();
    // `Db::flush` spills every Global Index that holds anything.
    let urgent = urgent || db.spill_all.load(Ordering::Acquire);
    let mut best: Option<(u64, Subtable)> = None;
    for sub in db.all_subtables() {
        let view = sub.inner.view.load();
        // M5 (gi/mirror.rs): the next generation's tree slot must be free.
        if view.frozen.is_some() || view.gi.mirror().is_some_and(|m| !m.next_slot_free()) {
            continue;
        }
        drop(view);
        let n = gi_zones(db, &sub);
        if (n >= limit || (urgent && n > 0)) && best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, sub));
        }
    }
    let Some((_, sub)) = best else {
        return Ok((progress, false));
    };
    freeze(db, &sub)?;
    Ok((true, true))
}

/// Freezes `sub`'s Global Index: readers see a new, empty one, then the frozen one; the disk
/// worker gets the spill.
fn freeze(db: &Engine, sub: &Subtable) -> Result<()> {
    let Some(disk) = db.disk.as_ref() else {
        return Ok(());
    };
    let tree = match disk.tree_or_step_error(sub.id()) {
        Ok(t) => t,
        Err(StepError::Transient { error, kind }) => {
            park(db, disk, None, sub, error, kind);
            return Ok(());
        }
        Err(StepError::Fatal(e)) => return Err(e),
    };
    let visible = db.visible.load(Ordering::Acquire);
    let mut frozen: Option<Arc<Frozen>> = None;
    sub.inner.replace_tiers(&db.tickets, visible, |v, chain| {
        let in_view = |m: &Arc<crate::memtable::Memtable>| {
            v.active.as_ref().is_some_and(|a| Arc::ptr_eq(&a.mem, m))
                || v.immutables.iter().any(|s| Arc::ptr_eq(&s.src.mem, m))
        };
        let mems = chain.iter().filter(|m| !in_view(m)).cloned().collect();
        let f = Arc::new(Frozen {
            gi: v.gi.clone(),
            mems,
        });
        frozen = Some(f.clone());
        let next = v.gi.mirror().and_then(|m| m.next_generation());
        (Arc::new(GlobalIndex::mirrored(next)), Some(f))
    });
    // Keys the old Global Index kept older versions of: they are spilled as they are.
    sub.inner.revisit.lock().clear();
    let Some(frozen) = frozen else { return Ok(()) };
    tracing::debug!(
        subtable = %sub.name(),
        memtables = frozen.mems.len(),
        keys = frozen.gi.keys(),
        "froze the Global Index for a spill"
    );
    // Markers' sequence numbers strictly grow: two spills with no commit between them (writers
    // blocked on space, say) must not write two versions of the marker at one sequence
    // number, or lsm-tree may answer the older one and recovery would index again memtables
    // the newer spill holds, some of their zones already given back.
    let seq = visible.max(tree.newest() + 1);
    disk.queue.submit(Job {
        sub: sub.id(),
        frozen,
        tree,
        seq,
    });
    Ok(())
}

/// How long to wait before attempt `failures + 1` of a failed spill or compaction: 100 ms,
/// doubling, at most 5 s.
pub(crate) fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms.min(5_000))
}

/// A spill failed transiently (G6 in disk/mod.rs): `job` (`None`: the tree could not be
/// opened, nothing was frozen) waits for its retry; writers waiting for space are told.
fn park(
    db: &Engine,
    disk: &DiskTier,
    job: Option<Job>,
    sub: &Subtable,
    error: Error,
    kind: std::io::ErrorKind,
) {
    let failures = disk.queue.failed();
    let delay = backoff(failures);
    disk.counters.spill_failures.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        subtable = %sub.name(),
        failures,
        retry_in_ms = delay.as_millis() as u64,
        kind = ?kind,
        error = %error,
        "spilling to the disk levels failed; its Global Index stays readable in PM and the \
         spill will be retried; writes that need space are refused meanwhile"
    );
    disk.queue.park(Parked {
        job,
        failures,
        due: Instant::now() + delay,
        cause: error.to_string(),
        kind,
    });
    if let Some(stop) = parked_stop(disk) {
        db.space
            .declare_spill_failed(stop, db.store.zones.free_zones());
    }
}

/// What writers that wait for space are told while a failed spill waits for its retry.
fn parked_stop(disk: &DiskTier) -> Option<Stop> {
    disk.queue.with_parked(|p| {
        p.map(|p| Stop::SpillFailed {
            cause: p.cause.clone(),
            kind: p.kind,
            failures: p.failures,
            retry_in: p.due.saturating_duration_since(Instant::now()),
        })
    })
}

/// [`Error::SpillFailed`] while a failed spill waits for its retry.
pub(crate) fn parked_error(disk: &DiskTier) -> Option<Error> {
    match parked_stop(disk)? {
        Stop::SpillFailed {
            cause,
            kind,
            failures,
            retry_in,
        } => Some(Error::SpillFailed {
            cause,
            kind,
            failures,
            retry_in,
        }),
        _ => None,
    }
}

/// A spill ran: on success, readers stop reading the frozen Global Index, and its zones and
/// the blobs it names go back once no reader holds them (G2); after a transient failure the
/// spill waits for its retry; after a fatal one the database is poisoned. Either way the
/// frozen Global Index stays readable until a spill of it succeeds.
fn finish(db: &Engine, done: Done, retired: &mut Vec<Retired>) -> Result<()> {
    let Done { job, outcome } = done;
    let Some(sub) = db.with_subtable(job.sub, Subtable::clone) else {
        return Ok(());
    };
    let Some(disk) = db.disk.as_ref() else {
        return Ok(());
    };
    let s = match outcome {
        Ok(s) => s,
        Err(StepError::Transient { error, kind }) => {
            park(db, disk, Some(job), &sub, error, kind);
            return Ok(());
        }
        Err(StepError::Fatal(e)) => {
            db.poison(format!("spilling to the disk levels failed: {e}"));
            return Ok(());
        }
    };
    disk.spilled(s.entries, s.bytes, s.took);
    let failed = disk.queue.succeeded();
    if failed > 0 {
        tracing::info!(
            subtable = %sub.name(),
            failed,
            "spilling to the disk levels works again; writes resume"
        );
    }
    let frozen = job.frozen;
    sub.inner.retires.fetch_add(1, Ordering::AcqRel);
    let ticket =
        sub.inner
            .replace_tiers(&db.tickets, db.visible.load(Ordering::Acquire), |v, _| {
                (v.gi.clone(), None)
            });
    // M2 (gi/mirror.rs): the frozen generation's tree goes once no view can read it, before
    // the zones retired below (same ticket).
    if frozen.gi.mirror().is_some() {
        db.retired_trees.lock().push((ticket, frozen.gi.clone()));
    }
    {
        let mut zones = db.space.zones.lock();
        for m in &frozen.mems {
            for (slot, z) in m.zones() {
                zones.remove(&z.0);
                retired.push(Retired {
                    ticket,
                    mem: m.clone(),
                    slot,
                    ghosts: None,
                });
            }
        }
    }
    let gone: Vec<Version> = frozen
        .gi
        .entries()
        .flat_map(|e| {
            e.value()
                .versions()
                .iter()
                .filter(|v| v.blob)
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    db.blobs.dropped(&db.store, &gone, ticket)?;
    tracing::info!(
        subtable = %sub.name(),
        entries = s.entries,
        bytes = s.bytes,
        millis = s.took.as_millis() as u64,
        memtables = frozen.mems.len(),
        "spilled the Global Index to the disk levels"
    );
    Ok(())
}
