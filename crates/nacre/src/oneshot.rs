//! `OneShot`: a value set once and awaited by one or more threads. Waiters spin briefly (the
//! setter is usually a few microseconds away on another core) and then block; the setter
//! makes a system call only when someone is blocked.
//!
//! Invariant: `ready` is stored (SeqCst) after the value and before `sleepers` is read, and a
//! waiter registers in `sleepers` (SeqCst) before its final check of `ready` under the lock,
//! so either the setter sees the sleeper and notifies it under the lock, or the sleeper sees
//! `ready` and never blocks.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// How long a waiter spins before it starts yielding: about a commit's worth of work.
const SPIN: std::time::Duration = std::time::Duration::from_micros(2);

pub(crate) struct OneShot<T> {
    value: Mutex<Option<T>>,
    ready: AtomicBool,
    sleepers: AtomicU32,
    cv: Condvar,
}

impl<T: Clone> OneShot<T> {
    pub fn new() -> Self {
        OneShot {
            value: Mutex::new(None),
            ready: AtomicBool::new(false),
            sleepers: AtomicU32::new(0),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<T>> {
        self.value.lock()
    }

    /// Stores the value (first call wins) and wakes blocked waiters.
    pub fn set(&self, v: T) {
        {
            let mut g = self.lock();
            if g.is_none() {
                *g = Some(v);
            }
        }
        self.ready.store(true, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock();
            self.cv.notify_all();
        }
    }

    /// Whether the value is set.
    pub fn is_set(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Waits for the value and returns a copy: spins, yields until `patience` has passed,
    /// then blocks. Short patience suits waits that span a device round trip: a yielding
    /// thread keeps a core from the kernel threads completing it.
    pub fn wait(&self, patience: std::time::Duration) -> T {
        let start = std::time::Instant::now();
        let mut i = 0u32;
        loop {
            if self.ready.load(Ordering::Acquire) {
                if let Some(v) = self.lock().clone() {
                    return v;
                }
            }
            i = i.wrapping_add(1);
            if i % 32 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let waited = start.elapsed();
            if waited > patience {
                break;
            }
            if waited > SPIN {
                std::thread::yield_now();
            }
        }
        let mut g = self.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !self.ready.load(Ordering::SeqCst) || g.is_none() {
            self.cv.wait(&mut g);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        g.clone().unwrap_or_else(|| unreachable!("checked above"))
    }
}
