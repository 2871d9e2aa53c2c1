//! Space in PM: live bytes per Global Index zone, the zones kept for the cleaner, and flow
//! control (writers are slowed when free zones run low, and wait rather than fail while the
//! background worker can still free space).
//!
//! Invariants:
//! - P1: `zones` holds exactly the zones of memtables that belong to the Global Index
//!   (merged user memtables and relocation memtables), each with the bytes of the records
//!   the Global Index points into it.
//! - P2: only the relocation of the cleaner may take the last `keep` free zones (deletes may
//!   take half of them): relocating never waits for the space it is freeing.
//! - P3: the cleaner moves a zone only while it belongs to a set of zones of one subtable
//!   whose relocation frees more zones than their packed copies take (cleaner.rs,
//!   `gains_a_zone`): copies go to the subtable's own relocation memtable, so zones of
//!   different subtables never pack together, and the room left in the zone that memtable
//!   fills counts. When live data fills the zones, a pass moves nothing, the worker finds no
//!   progress and waiting writers get `PoolFull` (live data is never rewritten for no gain).
//!   Each zone records the largest record it held, which bounds what a packed copy leaves
//!   unused at a zone's end. The one exception: a compaction on request may move a lone
//!   nearly empty zone that only breaks even (R2 in compact.rs).
//! - P4: the worker tells waiting writers the cleaner made progress only when the zones it
//!   gave back outnumber those its relocation took since its pass began (a zone freed and
//!   retaken by a relocation memtable gains a writer nothing). A pass retires at most as
//!   many zones as the set it began with; one that can retire no more (its set moved, or
//!   no set that gains a zone left) and got its zones back without a gain stops the
//!   cleaner until what can be freed changes (a merge, versions dropped, a relocation
//!   memtable closed), so writers get `PoolFull` and live data is not rewritten in a loop.
//!   A round in which the cleaner is not asked to clean leaves its pass open.
//! - F1: a `PoolFull` verdict binds only writers that found no room since the worker's
//!   last progress; a writer still to try the space that progress made tries it first.
//! - F2: the worker gives the verdict only while no more zones are free than the fewest
//!   such a writer saw (else they try again), and only once such a writer waits: a
//!   verdict judged against free zones no writer tried would fail a write that fits.
//!
//! Thread safety: `zones` is locked by the background worker and by `stats()`; the flow
//! control state is a mutex and a condition variable shared by writers and the worker.

pub(crate) mod cleaner;
pub(crate) mod compact;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::FullCause;
use crate::memtable::Memtable;

/// Sealed memtables waiting for a merge beyond which writers wait (like RocksDB's
/// `max_write_buffer_number`).
pub(crate) const MAX_SEALED: u64 = 4;

/// A Global Index zone.
pub(crate) struct ZoneInfo {
    pub sub: u32,
    pub mem: Arc<Memtable>,
    pub slot: u64,
    /// Bytes of records the Global Index points at.
    pub live: u64,
    /// The largest record the Global Index has pointed at in the zone: a copy of its live
    /// records packed into other zones may leave up to this much unused at a zone's end.
    pub max_record: u32,
    /// `visible` when the zone joined the Global Index (its age is measured from it).
    pub stamp: u64,
}

/// Why a writer waiting for space stops waiting without it.
#[derive(Clone, Debug)]
pub(crate) enum Stop {
    /// Nothing can be freed.
    Full(FullCause),
    /// Writes stopped: the background worker failed or the database is poisoned.
    Failed(String),
    /// Only a spill to the disk levels can free zones, and the last one failed transiently;
    /// it is retried in the background (spiller.rs).
    SpillFailed {
        cause: String,
        kind: std::io::ErrorKind,
        failures: u32,
        retry_in: Duration,
    },
}

/// What writers and the background worker share about free space.
///
/// A verdict (`full`) is given at a `progress` count and binds only the writers that found
/// no room after it (F1): a writer that began waiting before the worker's last progress has
/// not tried the space that progress made, so it tries again first, even if a verdict came
/// meanwhile. And the worker judges only against what such writers saw (`seen_free`): with
/// more zones free than the fewest one of them saw, they try again instead of failing (F2).
struct Signal {
    /// Bumped whenever the worker freed space or changed what can be freed.
    progress: u64,
    /// Writers waiting for space.
    waiting: u64,
    /// Writes stopped: the verdict in `full` stands for every later waiter.
    waiting_epoch_failed: bool,
    /// The worker found nothing to free while writers waited (or failed), and why.
    full: Option<Stop>,
    /// The `progress` count `full` was given at (F1).
    full_at: u64,
    /// The fewest free zones a writer saw when it found no room since the last progress
    /// (`u64::MAX`: none has since; every waiting writer has a progress to try first).
    seen_free: u64,
}

impl Default for Signal {
    fn default() -> Signal {
        Signal {
            progress: 0,
            waiting: 0,
            waiting_epoch_failed: false,
            full: None,
            full_at: 0,
            seen_free: u64::MAX,
        }
    }
}

impl Signal {
    /// Waiting writers are told to try again (F1: those waiting now all have a progress
    /// to try before any verdict binds them).
    fn bump(&mut self) {
        self.progress += 1;
        self.seen_free = u64::MAX;
        if !self.waiting_epoch_failed {
            self.full = None;
        }
    }

    /// Writes stopped: every waiting and later writer is told `why`.
    fn fail(&mut self, why: String) {
        self.full = Some(Stop::Failed(why));
        self.waiting_epoch_failed = true;
    }

    /// A writer found no room with `free` zones free and begins to wait; the progress
    /// count it saw.
    fn enter(&mut self, free: u64) -> u64 {
        // A new request for space: the worker decides again whether anything can be freed
        // (deletes since the last verdict may have made room).
        if self.waiting == 0 && !self.waiting_epoch_failed {
            self.full = None;
            self.seen_free = free;
        }
        self.seen_free = self.seen_free.min(free);
        self.waiting += 1;
        self.progress
    }

    /// What a writer that began waiting at progress `seen` is told now, if anything: try
    /// again, or stop.
    fn outcome(&self, seen: u64) -> Option<Result<(), Stop>> {
        if self.waiting_epoch_failed {
            if let Some(why) = &self.full {
                return Some(Err(why.clone()));
            }
        }
        // Space the worker made since this writer found no room: try it first (F1).
        if self.progress != seen {
            return Some(Ok(()));
        }
        let why = self.full.as_ref().filter(|_| self.full_at == seen)?;
        Some(Err(why.clone()))
    }

    /// The worker found nothing to free, with `free` zones free (F1, F2); whether waiting
    /// writers are to be woken.
    fn judge(&mut self, why: Stop, free: u64, log: impl FnOnce(&Stop)) -> bool {
        // No writer waits, or none found no room since the last progress (they will try
        // again first), or the verdict is given already.
        let given =
            self.full.is_some() && (self.waiting_epoch_failed || self.full_at == self.progress);
        if self.waiting == 0 || self.seen_free == u64::MAX || given {
            return false;
        }
        if free > self.seen_free {
            self.bump();
            return true;
        }
        log(&why);
        self.full = Some(why);
        self.full_at = self.progress;
        true
    }
}

/// Space accounting and flow control.
pub(crate) struct Space {
    /// Zones only relocation may take (P2).
    pub keep: u64,
    /// Below this many free zones, writers are slowed.
    pub slow_below: u64,
    /// Below this many free zones, the cleaner runs.
    pub clean_below: u64,
    pub zones: Mutex<HashMap<u64, ZoneInfo>>,
    /// Zones the cleaner found damaged records in (a live value failing its checksum, or
    /// bytes that no longer parse): never cleaned in this run, since moving a record means
    /// re-checksumming its bytes, which would pass damaged data off as whole.
    pub damaged: Mutex<std::collections::HashSet<u64>>,
    signal: Mutex<Signal>,
    writers: Condvar,
    worker: Condvar,
    worker_wake: Mutex<bool>,
    /// Sealed memtables not yet merged.
    sealed: AtomicU64,
    /// Writes stopped (worker failed, database poisoned): nobody will free space or merge.
    failed: std::sync::atomic::AtomicBool,
    pub stalls: AtomicU64,
    pub stall_nanos: AtomicU64,
    pub moved_bytes: AtomicU64,
    pub zones_freed: AtomicU64,
    /// Zones the cleaner's relocation took (P4).
    pub reloc_zones: AtomicU64,
    pub user_bytes: AtomicU64,
    pub pm_bytes: AtomicU64,
    /// Compaction requests made (compact.rs; numbered from 1).
    pub compact_asked: AtomicU64,
    /// The newest compaction request answered (R1 in compact.rs).
    pub compact_done: AtomicU64,
}

impl Space {
    /// Thresholds for a pool of `total` zones and memtables of `slots` zones.
    pub fn new(total: u64, slots: u64) -> Space {
        let keep = 4u64.min(total / 4).max(2);
        let clean_below = (keep + 2 * slots).min(total / 2).max(keep + 1);
        Space {
            keep,
            slow_below: (keep + slots / 2).max(keep + 1).min(clean_below),
            clean_below,
            zones: Mutex::new(HashMap::new()),
            damaged: Mutex::new(std::collections::HashSet::new()),
            signal: Mutex::new(Signal::default()),
            writers: Condvar::new(),
            worker: Condvar::new(),
            worker_wake: Mutex::new(false),
            sealed: AtomicU64::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
            stalls: AtomicU64::new(0),
            stall_nanos: AtomicU64::new(0),
            moved_bytes: AtomicU64::new(0),
            zones_freed: AtomicU64::new(0),
            reloc_zones: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            pm_bytes: AtomicU64::new(0),
            compact_asked: AtomicU64::new(0),
            compact_done: AtomicU64::new(0),
        }
    }

    /// Adds `size` bytes (or removes them) to the live count of the zone holding `zone`.
    pub fn account(zones: &mut HashMap<u64, ZoneInfo>, zone: u64, size: u32, add: bool) {
        if let Some(z) = zones.get_mut(&zone) {
            if add {
                z.live += u64::from(size);
                z.max_record = z.max_record.max(size);
            } else {
                z.live = z.live.saturating_sub(u64::from(size));
            }
        }
    }

    /// The database takes no more writes (its worker failed, or it is poisoned): writers
    /// waiting for space or throttled are released, with `why`, and so is every later one.
    pub fn stop_writes(&self, why: String) {
        self.failed.store(true, Ordering::Release);
        self.signal.lock().fail(why);
        self.writers.notify_all();
    }

    /// Asks the worker to compact (compact.rs) and wakes it; the request's number.
    pub fn ask_compaction(&self) -> u64 {
        let n = self.compact_asked.fetch_add(1, Ordering::AcqRel) + 1;
        self.kick();
        n
    }

    /// Whether compaction request `n` was answered.
    pub fn compacted(&self, n: u64) -> bool {
        self.compact_done.load(Ordering::Acquire) >= n
    }

    /// Wakes the background worker.
    pub fn kick(&self) {
        *self.worker_wake.lock() = true;
        self.worker.notify_one();
    }

    /// The worker waits for a kick or `timeout`.
    pub fn worker_wait(&self, timeout: Duration) {
        let mut w = self.worker_wake.lock();
        if !*w {
            self.worker.wait_for(&mut w, timeout);
        }
        *w = false;
    }

    /// Whether writers are waiting for space.
    pub fn writers_waiting(&self) -> bool {
        self.signal.lock().waiting > 0
    }

    /// The worker freed space or changed what can be freed.
    pub fn progressed(&self) {
        let mut s = self.signal.lock();
        s.bump();
        self.writers.notify_all();
    }

    /// The worker cannot free anything while writers wait: those that found no room since its
    /// last progress fail with `PoolFull` (F1), unless more zones are free now (`free`) than
    /// one of them saw when it found no room; then they try again (F2). Writers still to try
    /// what the last progress made are left to try it.
    pub fn declare_full(&self, why: FullCause, free: u64) {
        let log = |why: &Stop| {
            if let Stop::Full(why) = why {
                tracing::warn!(reason = %why, "pool full");
            }
        };
        self.declare(Stop::Full(why), free, log);
    }

    /// Like [`Space::declare_full`], for a spill that failed and waits to be retried:
    /// waiting writers fail with [`crate::Error::SpillFailed`] instead of waiting for it.
    pub fn declare_spill_failed(&self, why: Stop, free: u64) {
        self.declare(why, free, |_| {});
    }

    fn declare(&self, why: Stop, free: u64, log: impl FnOnce(&Stop)) {
        if self.signal.lock().judge(why, free, log) {
            self.writers.notify_all();
        }
    }

    /// A writer found no room with `free` zones free: waits for the worker's next progress.
    /// `Err(why)` when the worker declared the pool full.
    pub fn wait_for_space(&self, free: u64) -> Result<(), Stop> {
        let start = Instant::now();
        self.stalls.fetch_add(1, Ordering::Relaxed);
        let mut s = self.signal.lock();
        let seen = s.enter(free);
        self.kick();
        let out = loop {
            if let Some(out) = s.outcome(seen) {
                break out;
            }
            self.writers.wait_for(&mut s, Duration::from_millis(5));
            self.kick();
        };
        s.waiting -= 1;
        drop(s);
        self.stall_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// Slows a writer while free zones are below `slow_below` (the deeper, the longer; only
    /// if `slow`: writes that free space are not slowed), and holds it while more than
    /// [`MAX_SEALED`] sealed memtables wait to be merged.
    pub fn throttle(&self, free: u64, slow: bool) {
        if self.sealed.load(Ordering::Acquire) > MAX_SEALED {
            let start = Instant::now();
            self.stalls.fetch_add(1, Ordering::Relaxed);
            let mut s = self.signal.lock();
            while self.sealed.load(Ordering::Acquire) > MAX_SEALED
                && !self.failed.load(Ordering::Acquire)
            {
                self.kick();
                self.writers.wait_for(&mut s, Duration::from_millis(1));
            }
            drop(s);
            self.stall_nanos
                .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        if !slow || free >= self.slow_below {
            return;
        }
        let depth = self.slow_below - free;
        let pause = Duration::from_micros(20 * depth * depth);
        self.stalls.fetch_add(1, Ordering::Relaxed);
        self.stall_nanos
            .fetch_add(pause.as_nanos() as u64, Ordering::Relaxed);
        self.kick();
        std::thread::sleep(pause);
    }

    /// Whether [`Space::throttle`] would make a writer wait now.
    pub fn would_throttle(&self, free: u64, slow: bool) -> bool {
        self.sealed.load(Ordering::Acquire) > MAX_SEALED || (slow && free < self.slow_below)
    }

    /// A memtable was sealed: the worker has a merge to do.
    pub fn sealed_one(&self) {
        self.sealed.fetch_add(1, Ordering::AcqRel);
        self.kick();
    }

    /// A sealed memtable was merged.
    pub fn merged_one(&self) {
        self.sealed.fetch_sub(1, Ordering::AcqRel);
        self.writers.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Stop {
        Stop::Full(FullCause::LiveData)
    }

    #[test]
    fn a_verdict_binds_only_writers_that_found_no_room_since_the_last_progress() {
        let mut s = Signal::default();
        let a = s.enter(4);
        // More zones are free than `a` saw (F2): it is told to try again. A verdict the
        // worker would give before it did, with fewer free than that, is not given (F1):
        // it never tried them.
        assert!(s.judge(full(), 16, |_| {}));
        assert!(!s.judge(full(), 15, |_| {}));
        assert!(
            matches!(s.outcome(a), Some(Ok(()))),
            "a tries the zones freed first"
        );

        // `a` has not woken yet when `b` finds no room after the progress; the verdict
        // then binds `b` only.
        let b = s.enter(4);
        assert!(s.judge(full(), 4, |_| {}));
        assert!(
            matches!(s.outcome(b), Some(Err(Stop::Full(_)))),
            "b is told"
        );
        assert!(
            matches!(s.outcome(a), Some(Ok(()))),
            "a tries the progress first"
        );
        s.waiting -= 2;

        // A new request decides again; with nothing freed since, it is told at once.
        let c = s.enter(4);
        assert!(s.outcome(c).is_none(), "the worker decides again");
        assert!(s.judge(full(), 4, |_| {}));
        assert!(matches!(s.outcome(c), Some(Err(Stop::Full(_)))));
        // A writer that finds no room while that verdict stands is told too.
        let d = s.enter(4);
        assert!(matches!(s.outcome(d), Some(Err(Stop::Full(_)))));
    }

    #[test]
    fn a_failed_worker_stops_every_waiting_writer() {
        let mut s = Signal::default();
        let a = s.enter(4);
        s.bump();
        s.fail("worker failed".into());
        assert!(matches!(s.outcome(a), Some(Err(Stop::Failed(_)))));
        s.waiting = 0;
        let b = s.enter(4);
        assert!(matches!(s.outcome(b), Some(Err(Stop::Failed(_)))));
    }
}
