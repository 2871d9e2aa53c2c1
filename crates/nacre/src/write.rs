//! Writing batches: the checks every batch passes, values stored out of line, and
//! `Db::write_async`, whose batches one committer thread drains in submission order.
//!
//! Invariants of the async queue:
//! - A1: batches commit in the order they were queued: one thread takes them from the front
//!   of the queue and commits each run of them before taking more.
//! - A2: a run merges only batches that each passed the checks alone, hold no value stored out
//!   of line, and whose records for each subtable fit one zone together (a batch whose records
//!   exceed a zone commits alone); a batch that fails its checks fails alone. A merged run commits as one batch: all of it or none of it survives a
//!   crash, as for any group commit, and every future of the run gets its outcome.
//! - A3: every queued batch's future completes: with the commit's outcome, or, once the
//!   database closes, with an error saying so.
//! - A4 (`Db::write_now`, `Db::write_now_begin`): a caller gives runs their places in the
//!   ring on its own thread only while it holds the order lock and the committer's queue is
//!   empty; the committer takes and commits each run under that lock too. The ring commits
//!   in grant order, so batches commit in the order they were handed over, whichever thread
//!   writes them (a caller writes its granted runs after letting the lock go, and finishes
//!   them under it once they fill half the ring: a grant waits for room that they would
//!   hold). A run that would have to wait (for room, for the background worker) is queued
//!   for the committer, with everything handed over after it; so is everything handed over
//!   while the committer holds the lock.
//! - A5 (dependencies, `WriteBatch::after`): a batch is committed only once every batch it
//!   depends on is finished, sits in the same run (which commits as one: they share its
//!   outcome), or was granted its place in the ring before it by `Db::write_now_begin` (the
//!   ring commits in grant order, and a granted group fails only by poisoning the database,
//!   which fails every later group too); if one failed, the batch fails with
//!   `DependencyFailed` without being committed, so no batch computed from a failed one
//!   survives. Batches are taken in queue order, so a dependency queued before is always
//!   finished, granted or in the run.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::batch::{After, WriteBatch};
use crate::blob::{inline_max, MAX_VALUE};
use crate::commit::Check;
use crate::engine::Engine;
use crate::error::{Error, FullCause, Result};
use crate::outcome::{share, Done, WriteFuture, WriteToken};
use crate::record::{record_size, ITEM_HEADER};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    /// The largest record, and the records of one batch for one subtable that commit in one
    /// item: what one zone holds.
    fn record_room(&self) -> usize {
        self.store.zone_size as usize - ITEM_HEADER
    }

    /// The checks a batch passes before it is written: its subtables, its value lengths.
    fn check_ops(&self, batch: &WriteBatch) -> Result<()> {
        for op in &batch.ops {
            if op.db != self.id || self.with_subtable(op.subtable, |_| ()).is_none() {
                return Err(Error::InvalidOptions(format!(
                    "batch names subtable {} of another database",
                    op.subtable
                )));
            }
            if op.value.len() > MAX_VALUE {
                return Err(Error::TooLarge {
                    what: "value",
                    len: op.value.len(),
                    max: MAX_VALUE,
                });
            }
        }
        Ok(())
    }

    /// The checks of a batch's records (values out of line already replaced by descriptors);
    /// its bytes per subtable.
    fn check_records(&self, batch: &WriteBatch) -> Result<Vec<(u32, usize)>> {
        let max = self.record_room();
        for op in &batch.ops {
            let n = record_size(op.key.len(), op.value.len());
            if n > max {
                return Err(Error::TooLarge {
                    what: "record",
                    len: n,
                    max,
                });
            }
        }
        let bytes = batch.bytes_per_subtable();
        // A batch's records may span zones and memtables (commit.rs), but not more zones than
        // the pool could ever give it: such a batch fails now, not after waiting for the
        // cleaner. (A zone holds at most `max` bytes of them.)
        let needs: u64 = bytes
            .iter()
            .filter(|(_, b)| *b > max)
            .map(|(_, b)| b.div_ceil(max) as u64)
            .sum();
        let zones = self.store.zones.objects().shape().count;
        let kept = self.space.keep;
        if needs > 0 && needs + kept > zones {
            return Err(Error::PoolFull {
                cause: FullCause::BatchLargerThanPool {
                    len: bytes.iter().map(|(_, b)| *b as u64).sum(),
                    needs,
                    zones,
                    kept,
                },
                free_zones: self.store.zones.free_zones(),
            });
        }
        Ok(bytes)
    }

    fn has_blobs(&self, batch: &WriteBatch) -> bool {
        let limit = inline_max(self.store.zone_size);
        batch.ops.iter().any(|op| op.value.len() > limit)
    }

    /// `Db::write`.
    pub(crate) fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() && batch.after.is_empty() {
            return Ok(());
        }
        Self::wait_deps(&batch)?;
        self.check_ops(&batch)?;
        self.write_checked(batch, None)
    }

    /// A5 for a batch committed on the caller's thread: waits for the batches it depends on.
    fn wait_deps(batch: &WriteBatch) -> Result<()> {
        for a in &batch.after {
            match a {
                After::Token(t) if t.0.wait_failed() => return Err(Error::DependencyFailed),
                After::Token(_) => {}
                After::InCall(i) => return Err(bad_position(*i)),
            }
        }
        Ok(())
    }

    /// A5 for a batch about to join `run`.
    fn deps_state(batch: &WriteBatch, run: &[(WriteBatch, Arc<Done>)]) -> DepState {
        for a in &batch.after {
            match a {
                After::Token(t) => match t.failed() {
                    Some(true) => return DepState::Failed(Error::DependencyFailed),
                    Some(false) => {}
                    // Granted a place before this batch: it commits first (A5).
                    None if t.0.granted() => {}
                    None if run.iter().rev().any(|(_, d)| Arc::ptr_eq(d, &t.0)) => {}
                    None => return DepState::Waiting(t.clone()),
                },
                After::InCall(i) => return DepState::Failed(bad_position(*i)),
            }
        }
        DepState::Ready
    }

    /// A transaction's commit: `batch` applied atomically if no key in `check` was written
    /// after its read point, else [`Error::Conflict`] and nothing applied (C5 in commit.rs).
    pub(crate) fn write_checked_batch(&self, batch: WriteBatch, check: Check) -> Result<()> {
        if batch.is_empty() && check.keys.is_empty() && batch.after.is_empty() {
            return Ok(());
        }
        Self::wait_deps(&batch)?;
        self.check_ops(&batch)?;
        self.write_checked(batch, Some(check))
    }

    /// [`Engine::write`] of a batch that passed [`Engine::check_ops`].
    fn write_checked(&self, mut batch: WriteBatch, check: Option<Check>) -> Result<()> {
        if !self.has_blobs(&batch) {
            let bytes = self.check_records(&batch)?;
            return self.commit.write_batch(&self.sh, batch, bytes, check);
        }
        let in_flight = &self.blobs.in_flight;
        in_flight.fetch_add(1, Ordering::AcqRel);
        let r = self.write_blobs(&mut batch).and_then(|blobs| {
            self.check_records(&batch)
                .and_then(|bytes| self.commit.write_batch(&self.sh, batch, bytes, check))
                .map_err(|e| self.give_back(e, &blobs))
        });
        in_flight.fetch_sub(1, Ordering::AcqRel);
        r
    }

    /// `Db::write_async`: queues `batch` (A1), starting the committer thread on first use.
    pub(crate) fn write_async(&self, me: &Arc<Engine>, batch: WriteBatch) -> WriteFuture {
        let done = Arc::new(Done::default());
        let fut = WriteFuture { done: done.clone() };
        self.enqueue(me, vec![(batch, done)]);
        fut
    }

    /// `Db::write_async_many`: queues `batches` in order, with one wake of the committer.
    pub(crate) fn write_async_many(
        &self,
        me: &Arc<Engine>,
        batches: Vec<WriteBatch>,
    ) -> Vec<WriteFuture> {
        let items = linked(batches);
        let futs = items
            .iter()
            .map(|(_, done)| WriteFuture { done: done.clone() })
            .collect();
        self.enqueue(me, items);
        futs
    }

    /// `Db::write_now`: [`Engine::write_now_begin`] and the grants finished at once, on the
    /// calling thread.
    pub(crate) fn write_now(&self, me: &Arc<Engine>, batches: Vec<WriteBatch>) -> Vec<WriteFuture> {
        let (futs, _, grants) = self.write_now_begin(me, batches);
        grants.finish();
        futs
    }

    /// `Db::write_now_begin`: gives runs of `batches`, merged as the committer merges them
    /// (A2), their places in the commit order on the calling thread (in order, under the
    /// order lock, while none has to wait: A4, A5); their records are written and committed by
    /// [`NowGrants::finish`], outside the order lock, so that several callers write theirs
    /// at once. Returns the futures, in order, and how many of the first ones the grants
    /// (or failures found here) complete: the rest are queued for the committer.
    pub(crate) fn write_now_begin(
        &self,
        me: &Arc<Engine>,
        batches: Vec<WriteBatch>,
    ) -> (Vec<WriteFuture>, usize, NowGrants) {
        let mut q: VecDeque<(WriteBatch, Arc<Done>)> = linked(batches).into();
        let futs: Vec<WriteFuture> = q
            .iter()
            .map(|(_, done)| WriteFuture { done: done.clone() })
            .collect();
        let mut grants = NowGrants {
            engine: me.clone(),
            runs: Vec::new(),
        };
        let order = match self.writes.order.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if order.is_some()
            && lock(&self.writes.queue).is_empty()
            && !self.writes.stopped.load(Ordering::Acquire)
        {
            while !q.is_empty() {
                let (run, bytes) = self.take_run(&mut q, false);
                if run.is_empty() && bytes.is_some() {
                    // The front batch depends on one that is not granted (A5).
                    break;
                }
                let Some(bytes) = bytes else {
                    // Values stored out of line are written by the committer.
                    for item in run.into_iter().rev() {
                        q.push_front(item);
                    }
                    break;
                };
                if let Some(back) = self.grant_run_now(run, bytes, &mut grants) {
                    q.push_front(back);
                    break;
                }
                // A grant waits for room in the ring, which this call's own unfinished
                // groups may hold: past half the ring, they are finished here (under the
                // order lock, as `write_now` does) before more are granted.
                if grants.runs.len() >= (self.opts.ring_capacity / 2).max(1) {
                    grants.finish_runs();
                }
            }
        }
        let here = futs.len() - q.len();
        if !q.is_empty() {
            self.enqueue(me, q.into());
        }
        drop(order);
        (futs, here, grants)
    }

    /// Grants a run its place on the calling thread (see [`Engine::write_now_begin`]) unless
    /// that has to wait: then the run comes back as one batch whose outcome completes every
    /// batch of the run.
    fn grant_run_now(
        &self,
        run: Vec<(WriteBatch, Arc<Done>)>,
        bytes: Vec<(u32, usize)>,
        grants: &mut NowGrants,
    ) -> Option<(WriteBatch, Arc<Done>)> {
        if run.is_empty() {
            return None;
        }
        let (merged, dones) = merge_run(run);
        if merged.is_empty() {
            for d in dones {
                d.finish(Ok(()));
            }
            return None;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.commit.grant_now(&self.sh, merged, bytes)
        }))
        .unwrap_or_else(|p| Err(Ok(commit_panicked(&*p))));
        match r {
            Ok(g) => {
                // A5: a later batch that depends on these may be granted after them, since
                // the ring commits in grant order; if their commit fails, the database is
                // poisoned and no later group commits either.
                for d in &dones {
                    d.grant();
                }
                grants.runs.push((g, dones));
                None
            }
            Err(Ok(e)) => {
                for d in dones {
                    d.finish(Err(share(&e)));
                }
                None
            }
            Err(Err(merged)) => {
                let lead = Arc::new(Done::default());
                lead.lead(dones);
                Some((merged, lead))
            }
        }
    }

    /// Queues `items` in order (A1), starting the committer thread on first use.
    fn enqueue(&self, me: &Arc<Engine>, items: Vec<(WriteBatch, Arc<Done>)>) {
        let w = &self.writes;
        let sleeping = {
            let mut q = lock(&w.queue);
            if w.stopped.load(Ordering::Acquire) {
                drop(q);
                for (_, done) in items {
                    done.finish(Err(Error::Poisoned("the database is closing".into())));
                }
                return;
            }
            q.extend(items);
            w.sleeping.load(Ordering::Relaxed)
        };
        // A futex wake costs a system call even with nobody waiting: only wake the committer
        // when it sleeps (it sets the flag under the queue lock before it waits, so a flag
        // seen clear means it will find these batches before it waits again). The wake comes
        // after the lock is released, so the woken thread does not wait for it.
        if sleeping {
            w.wake.notify_one();
        }
        if w.started.load(Ordering::Acquire) {
            return;
        }
        let mut t = lock(&w.thread);
        if t.is_none() && !w.stopped.load(Ordering::Acquire) {
            let engine = me.clone();
            match std::thread::Builder::new()
                .name("nacre-committer".into())
                .spawn(move || engine.run_committer())
            {
                Ok(h) => {
                    *t = Some(h);
                    w.started.store(true, Ordering::Release);
                }
                Err(e) => {
                    drop(t);
                    w.fail_all(&format!("cannot start the committer thread: {e}"));
                }
            }
        }
    }

    /// The committer thread: takes runs of queued batches from the front and commits each.
    fn run_committer(&self) {
        let w = &self.writes;
        loop {
            // A short spin before sleeping: a writer waiting on its last batch queues its next
            // one within microseconds, and a futex wake costs tens of them.
            let spin = std::time::Instant::now();
            while w.is_idle() && spin.elapsed() < spin_limit() {
                std::thread::yield_now();
            }
            {
                let mut q = lock(&w.queue);
                while q.is_empty() && !w.stopped.load(Ordering::Acquire) {
                    w.sleeping.store(true, Ordering::Relaxed);
                    q = w.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                    w.sleeping.store(false, Ordering::Relaxed);
                }
                if q.is_empty() {
                    return;
                }
            }
            // A4: the run is taken and committed under the order lock.
            let order = lock(&w.order);
            let run = self.take_run(&mut lock(&w.queue), true);
            self.commit_run(run);
            drop(order);
        }
    }

    /// The longest run at the front of the queue that may merge (A2), with its records' bytes
    /// per subtable (`None` for a lone batch with values stored out of line, whose records are
    /// known only once its values are written); batches that fail their checks alone are
    /// completed here, and so are batches whose dependencies failed (A5). A batch that
    /// depends on one neither finished nor in the run ends the run; at the front of the queue,
    /// it is waited for if `can_wait`, else the run comes back empty.
    fn take_run(&self, q: &mut VecDeque<(WriteBatch, Arc<Done>)>, can_wait: bool) -> Run {
        let max = self.record_room();
        let mut run: Vec<(WriteBatch, Arc<Done>)> = Vec::new();
        let mut bytes: Vec<(u32, usize)> = Vec::new();
        // Whether the run's batches free space (known from its first batch).
        let mut run_frees: Option<bool> = None;
        while let Some((b, d)) = q.pop_front() {
            match Self::deps_state(&b, &run) {
                DepState::Ready => {}
                DepState::Failed(e) => {
                    d.finish(Err(e));
                    continue;
                }
                DepState::Waiting(t) if run.is_empty() && can_wait => {
                    // Not reached by batches queued in order (A5): a dependency committed
                    // elsewhere (`Db::write` on another thread).
                    t.0.wait_failed();
                    q.push_front((b, d));
                    continue;
                }
                DepState::Waiting(_) => {
                    q.push_front((b, d));
                    break;
                }
            }
            if let Err(e) = self.check_ops(&b) {
                d.finish(Err(e));
                continue;
            }
            if self.has_blobs(&b) {
                if run.is_empty() {
                    return (vec![(b, d)], None);
                }
                q.push_front((b, d));
                break;
            }
            let mine = match self.check_records(&b) {
                Ok(m) => m,
                Err(e) => {
                    d.finish(Err(e));
                    continue;
                }
            };
            let fits = mine
                .iter()
                .all(|(s, n)| bytes.iter().find(|(t, _)| t == s).map_or(0, |(_, m)| *m) + n <= max);
            if !fits && run.is_empty() {
                // Records exceeding a zone for some subtable: this batch commits alone.
                return (vec![(b, d)], Some(mine));
            }
            // A batch that frees space keeps its right to the reserve: it does not merge
            // with batches that add data.
            let frees = b.frees_space();
            let alike = run_frees.is_none_or(|f| f == frees);
            if !fits || !alike {
                q.push_front((b, d));
                break;
            }
            for (s, n) in mine {
                match bytes.iter_mut().find(|(t, _)| *t == s) {
                    Some((_, m)) => *m += n,
                    None => bytes.push((s, n)),
                }
            }
            run_frees = Some(frees);
            run.push((b, d));
        }
        (run, Some(bytes))
    }

    /// Commits a run as one batch; its batches were checked in [`Engine::take_run`].
    fn commit_run(&self, (run, bytes): Run) {
        if run.is_empty() {
            return;
        }
        let (merged, dones) = merge_run(run);
        // A3: a panic below still completes every future of the run.
        let commit = || match bytes {
            _ if merged.is_empty() => Ok(()),
            Some(bytes) => self.commit.write_batch(&self.sh, merged, bytes, None),
            None => self.write_checked(merged, None),
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(commit))
            .unwrap_or_else(|p| Err(commit_panicked(&*p)));
        for d in dones {
            d.finish(r.as_ref().map(|_| ()).map_err(share));
        }
    }
}

/// Runs granted their places in the commit order by `Db::write_now_begin`, whose records
/// are still to be written: [`NowGrants::finish`] writes and commits them (and so does
/// dropping them: the ring waits for every granted group, so none may be left).
pub struct NowGrants {
    engine: Arc<Engine>,
    runs: Vec<(crate::commit::NowGroup, Vec<Arc<Done>>)>,
}

impl NowGrants {
    /// Writes and commits the granted runs, in order, on this thread; every future of their
    /// batches is complete on return. Callers may finish theirs at the same time: each
    /// group commits after the groups granted before it.
    pub fn finish(mut self) {
        self.finish_runs();
    }

    fn finish_runs(&mut self) {
        let e = &self.engine;
        for (g, dones) in self.runs.drain(..) {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                e.commit.finish_now(&e.sh, g)
            }))
            .unwrap_or_else(|p| Err(commit_panicked(&*p)));
            for d in dones {
                d.finish(r.as_ref().map(|_| ()).map_err(share));
            }
        }
    }
}

impl Drop for NowGrants {
    fn drop(&mut self) {
        self.finish_runs();
    }
}

/// The error every batch of a run gets when committing it panicked (A3).
fn commit_panicked(payload: &(dyn std::any::Any + Send)) -> Error {
    Error::Poisoned(format!(
        "the commit panicked: {}",
        crate::error::panic_message(payload)
    ))
}

/// Where a batch's dependencies stand (A5).
enum DepState {
    Ready,
    Failed(Error),
    Waiting(WriteToken),
}

/// The error of a batch naming a position of its call that does not come before it.
fn bad_position(i: usize) -> Error {
    Error::InvalidOptions(format!(
        "WriteBatch::after_batch({i}) names no batch before this one in the same call"
    ))
}

/// `batches` with their futures' slots, each dependency on an earlier batch of the call
/// replaced by that batch's token (a later or missing position is left, and fails the batch).
fn linked(batches: Vec<WriteBatch>) -> Vec<(WriteBatch, Arc<Done>)> {
    let mut items: Vec<(WriteBatch, Arc<Done>)> = Vec::with_capacity(batches.len());
    for mut b in batches {
        for a in &mut b.after {
            if let After::InCall(i) = *a {
                if let Some((_, d)) = items.get(i) {
                    *a = After::Token(WriteToken(d.clone()));
                }
            }
        }
        items.push((b, Arc::new(Done::default())));
    }
    items
}

/// One batch of a run's batches, and their futures' slots.
fn merge_run(run: Vec<(WriteBatch, Arc<Done>)>) -> (WriteBatch, Vec<Arc<Done>>) {
    let mut merged = WriteBatch::new();
    // A run's batches all free space or none does (take_run).
    if run.first().is_some_and(|(b, _)| b.frees_space()) {
        merged.mark_frees_space();
    }
    let mut dones = Vec::with_capacity(run.len());
    for (b, d) in run {
        merged.ops.extend(b.ops);
        dones.push(d);
    }
    (merged, dones)
}

/// Queued batches to commit together, and their records' bytes per subtable (see
/// [`Engine::take_run`]).
type Run = (Vec<(WriteBatch, Arc<Done>)>, Option<Vec<(u32, usize)>>);

/// The queue and thread behind `Db::write_async`.
#[derive(Default)]
pub(crate) struct Committer {
    queue: Mutex<VecDeque<(WriteBatch, Arc<Done>)>>,
    /// Held while batches are taken and committed, by the committer thread or by
    /// [`Engine::write_now`] (A4).
    order: Mutex<()>,
    wake: Condvar,
    /// Whether the committer waits on `wake`; set and read under `queue`'s lock.
    sleeping: AtomicBool,
    /// Whether the thread was started (it is never started twice).
    started: AtomicBool,
    stopped: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How long the committer looks for more work before it sleeps, where cores are to spare:
/// with four or fewer, a thread yielding in a loop takes the core from the writers that
/// would queue that work (on two cores, a server's writes ran 40% slower with the spin).
pub(crate) fn spin_limit() -> std::time::Duration {
    static SPIN: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 4 {
            std::time::Duration::from_micros(50)
        } else {
            std::time::Duration::ZERO
        }
    })
}

impl Committer {
    fn is_idle(&self) -> bool {
        lock(&self.queue).is_empty() && !self.stopped.load(Ordering::Acquire)
    }

    /// Stops the thread once the queue is drained (A3), and waits for it.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.wake.notify_all();
        if let Some(h) = lock(&self.thread).take() {
            if h.join().is_err() {
                tracing::error!("committer thread panicked");
                self.fail_all("the committer thread panicked");
            }
        }
        self.fail_all("the database closed before this batch was written");
    }

    fn fail_all(&self, why: &str) {
        for (_, d) in lock(&self.queue).drain(..) {
            d.finish(Err(Error::Poisoned(why.to_string())));
        }
    }
}
