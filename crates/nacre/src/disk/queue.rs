//! The hand-off between the background worker and the disk worker: at most one spill in
//! flight; its outcome waits here until the background worker finishes it (gives the frozen
//! Global Index's zones back, G2). A spill that failed transiently is parked here until its
//! retry is due (G6 in disk/mod.rs); none other starts meanwhile.
//!
//! Thread safety: one mutex and condition variable; the disk worker sleeps on it between
//! jobs and compactions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::disk::spill::Spilled;
use crate::disk::{DiskTree, StepError};
use crate::view::Frozen;

/// A spill to run.
pub(crate) struct Job {
    pub sub: u32,
    pub frozen: Arc<Frozen>,
    pub tree: Arc<DiskTree>,
    /// The marker's sequence number.
    pub seq: u64,
}

/// A spill that ran, and how it went.
pub(crate) struct Done {
    pub job: Job,
    pub outcome: Result<Spilled, StepError>,
}

/// A spill that failed transiently (G6 in disk/mod.rs), waiting to run again.
pub(crate) struct Parked {
    /// The spill to run again; `None` when the subtable's tree could not be opened (nothing
    /// was frozen: the background worker picks a Global Index again).
    pub job: Option<Job>,
    /// Failed attempts in a row.
    pub failures: u32,
    /// When the next attempt may start.
    pub due: Instant,
    /// The last failure.
    pub cause: String,
    /// Its I/O error kind.
    pub kind: std::io::ErrorKind,
}

#[derive(Default)]
struct State {
    job: Option<Job>,
    /// A job was handed over and its outcome not yet taken.
    in_flight: bool,
    done: Option<Done>,
    stop: bool,
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    cv: Condvar,
    /// A spill that failed transiently and waits to run again (only the background worker
    /// sets and takes it; others read it).
    parked: Mutex<Option<Parked>>,
    /// Spills that failed transiently in a row.
    failures: std::sync::atomic::AtomicU32,
}

impl Queue {
    /// A spill failed transiently: the failures in a row, this one included.
    pub fn failed(&self) -> u32 {
        self.failures
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            .saturating_add(1)
    }

    /// A spill succeeded: the failures in a row before it.
    pub fn succeeded(&self) -> u32 {
        self.failures.swap(0, std::sync::atomic::Ordering::AcqRel)
    }

    /// Parks a spill that failed transiently.
    pub fn park(&self, p: Parked) {
        *self.parked.lock() = Some(p);
    }

    /// The parked spill, if its time has come (it is no longer parked).
    pub fn unpark_due(&self, now: Instant) -> Option<Parked> {
        let mut p = self.parked.lock();
        if p.as_ref().is_some_and(|p| p.due <= now) {
            p.take()
        } else {
            None
        }
    }

    /// Runs `f` on the parked spill, if any.
    pub fn with_parked<R>(&self, f: impl FnOnce(Option<&Parked>) -> R) -> R {
        f(self.parked.lock().as_ref())
    }

    /// Whether a spill is queued, running, or done but not yet finished.
    pub fn busy(&self) -> bool {
        self.state.lock().in_flight
    }

    /// Hands a spill to the disk worker (the caller checked [`Queue::busy`]).
    pub fn submit(&self, job: Job) {
        let mut s = self.state.lock();
        debug_assert!(!s.in_flight, "one spill at a time");
        s.job = Some(job);
        s.in_flight = true;
        self.cv.notify_all();
    }

    /// The outcome of the spill in flight, once it ran.
    pub fn take_done(&self) -> Option<Done> {
        let mut s = self.state.lock();
        let d = s.done.take()?;
        s.in_flight = false;
        Some(d)
    }

    /// Disk worker: the next job, waiting up to `idle`; `Err(())` once stopping.
    pub fn next_job(&self, idle: Duration) -> std::result::Result<Option<Job>, ()> {
        let mut s = self.state.lock();
        if s.stop {
            return Err(());
        }
        if s.job.is_none() {
            self.cv.wait_for(&mut s, idle);
        }
        if s.stop {
            return Err(());
        }
        Ok(s.job.take())
    }

    /// Disk worker: a spill ran.
    pub fn finished(&self, done: Done) {
        self.state.lock().done = Some(done);
    }

    /// Stops the disk worker.
    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.cv.notify_all();
    }
}
