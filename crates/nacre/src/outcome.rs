//! Where a queued batch's outcome is left: the slot its [`WriteFuture`] waits on, and the
//! [`WriteToken`] by which a later batch depends on it.
//!
//! Invariants:
//! - O1: a slot is finished once; its state (ok or failed) is set before its future can see
//!   the outcome, and stays readable after the future took the outcome.
//! - O2: the followers of a slot (batches merged into its batch) finish with its outcome,
//!   before it does.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::error::{Error, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy of `e` for every batch of a merged run (errors hold I/O errors, which do not clone).
pub(crate) fn share(e: &Error) -> Error {
    match e {
        Error::PoolFull { cause, free_zones } => Error::PoolFull {
            cause: cause.clone(),
            free_zones: *free_zones,
        },
        Error::Poisoned(why) => Error::Poisoned(why.clone()),
        Error::Corrupt { what, at } => Error::Corrupt {
            what: what.clone(),
            at: *at,
        },
        Error::Background { worker, reason } => Error::Background {
            worker,
            reason: reason.clone(),
        },
        Error::SpillFailed {
            cause,
            kind,
            failures,
            retry_in,
        } => Error::SpillFailed {
            cause: cause.clone(),
            kind: *kind,
            failures: *failures,
            retry_in: *retry_in,
        },
        Error::DependencyFailed => Error::DependencyFailed,
        other => Error::Poisoned(other.to_string()),
    }
}

/// `Done::state` before the batch is finished.
const PENDING: u8 = 0;
/// `Done::state` of a batch that committed.
const OK: u8 = 1;
/// `Done::state` of a batch that failed.
const FAILED: u8 = 2;

/// Where a queued batch's outcome is left for its future.
#[derive(Default)]
pub(crate) struct Done {
    slot: Mutex<Slot>,
    cv: Condvar,
    /// `PENDING`, `OK` or `FAILED` (O1).
    state: AtomicU8,
    /// Granted its place in the commit order by `Db::write_now_begin`.
    granted: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Slot {
    outcome: Option<Result<()>>,
    waker: Option<Waker>,
    /// Whether a thread waits on `cv` (the wake is a system call: skipped when nobody does).
    blocked: bool,
    /// Slots completed with this one's outcome (the batches merged into this one's batch).
    followers: Vec<Arc<Done>>,
}

impl Done {
    pub(crate) fn finish(&self, r: Result<()>) {
        let (waker, blocked) = {
            let mut s = lock(&self.slot);
            for f in std::mem::take(&mut s.followers) {
                f.finish(r.as_ref().map(|_| ()).map_err(share));
            }
            self.state
                .store(if r.is_ok() { OK } else { FAILED }, Ordering::Release);
            s.outcome = Some(r);
            (s.waker.take(), s.blocked)
        };
        if blocked {
            self.cv.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Makes `followers` finish with this slot's outcome (O2).
    pub(crate) fn lead(&self, followers: Vec<Arc<Done>>) {
        lock(&self.slot).followers = followers;
    }

    /// The batch was granted its place in the commit order (A5 in write.rs).
    pub(crate) fn grant(&self) {
        self.granted.store(true, Ordering::Release);
    }

    /// Whether the batch was granted its place in the commit order.
    pub(crate) fn granted(&self) -> bool {
        self.granted.load(Ordering::Acquire)
    }

    /// `Some(true)` once the batch failed, `Some(false)` once it committed.
    pub(crate) fn failed(&self) -> Option<bool> {
        match self.state.load(Ordering::Acquire) {
            PENDING => None,
            s => Some(s == FAILED),
        }
    }

    /// Blocks until the batch is finished; whether it failed.
    pub(crate) fn wait_failed(&self) -> bool {
        let mut s = lock(&self.slot);
        loop {
            if let Some(f) = self.failed() {
                return f;
            }
            s.blocked = true;
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The outcome of a [`crate::Db::write_async`]: `Ok` once the batch is durable.
pub struct WriteFuture {
    pub(crate) done: Arc<Done>,
}

impl WriteFuture {
    /// Blocks until the batch is durable or failed.
    pub fn wait(self) -> Result<()> {
        let spin = std::time::Instant::now();
        while lock(&self.done.slot).outcome.is_none() && spin.elapsed() < crate::write::spin_limit()
        {
            std::thread::yield_now();
        }
        let mut s = lock(&self.done.slot);
        loop {
            if let Some(r) = s.outcome.take() {
                return r;
            }
            s.blocked = true;
            s = self.done.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A token by which a later batch depends on this one (see [`crate::WriteBatch::after`]).
    pub fn token(&self) -> WriteToken {
        WriteToken(self.done.clone())
    }
}

impl Future for WriteFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut s = lock(&self.done.slot);
        match s.outcome.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A queued batch as a later batch names it to depend on it ([`WriteFuture::token`]).
#[derive(Clone)]
pub struct WriteToken(pub(crate) Arc<Done>);

impl WriteToken {
    /// `Some(true)` once the batch failed, `Some(false)` once it committed, `None` before.
    pub fn failed(&self) -> Option<bool> {
        self.0.failed()
    }
}

impl std::fmt::Debug for WriteToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WriteToken").field(&self.failed()).finish()
    }
}

impl PartialEq for WriteToken {
    fn eq(&self, other: &WriteToken) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for WriteToken {}
