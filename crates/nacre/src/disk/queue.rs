//! The hand-off between the background worker and the disk worker: at most one spill in
//! flight; its outcome waits here until the background worker finishes it (gives the frozen
//! Global Index's zones back, G2).
//!
//! Thread safety: one mutex and condition variable; the disk worker sleeps on it between
//! jobs and compactions.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::disk::spill::Spilled;
use crate::disk::DiskTree;
use crate::error::Result;
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
    pub sub: u32,
    pub frozen: Arc<Frozen>,
    pub outcome: Result<Spilled>,
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
}

impl Queue {
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
