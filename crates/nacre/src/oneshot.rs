//! `OneShot`: a value set once and awaited by one or more threads. Waiters spin briefly (the
//! setter is usually a few microseconds away on another core) and then block; the setter
//! makes a system call only when someone is blocked.
//!
//! Invariant: `ready` is stored (SeqCst) after the value and before `sleepers` is read, and a
//! waiter registers in `sleepers` (SeqCst) before its final check of `ready` under the lock,
//! so either the setter sees the sleeper and notifies it under the lock, or the sleeper sees
//! `ready` and never blocks.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

const SPINS: u32 = 2000;

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
        self.value.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Waits for the value and returns a copy.
    pub fn wait(&self) -> T {
        for i in 0..SPINS {
            if self.ready.load(Ordering::Acquire) {
                if let Some(v) = self.lock().clone() {
                    return v;
                }
            }
            if i < SPINS / 2 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut g = self.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !self.ready.load(Ordering::SeqCst) || g.is_none() {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        g.clone().unwrap_or_else(|| unreachable!("checked above"))
    }
}
