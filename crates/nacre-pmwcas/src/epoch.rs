//! Epoch-based reclamation for descriptors (and the memory their policies free).
//!
//! Hand-written rather than crossbeam-epoch: reclaiming a descriptor does persistent-memory
//! work (flushes, fences, allocator releases) that must run at points this crate chooses, in
//! a deterministic order for the power-failure torture, not inside another thread's `pin`.
//!
//! Invariants:
//! - E1: a thread inside a guard has its slot set to an epoch no greater than the global
//!   epoch it read when the guard started; an idle slot holds 0.
//! - E2: the global epoch advances from e to e + 1 only when every busy slot holds e.
//! - E3: an item retired while the global epoch was e is handed back only once the global
//!   epoch reaches e + 2: every thread busy when it was retired has left its guard since, and
//!   a thread that entered later cannot reach the item (the caller retires an item only once
//!   it is unreachable from shared memory).
//!
//! Thread safety: slots are claimed with compare-and-swap and released when the thread exits
//! (a thread's entries for dropped managers are pruned when it joins another manager);
//! all epoch loads and stores are `SeqCst` so a slot store orders before the guarded loads.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crossbeam_utils::CachePadded;

use crate::error::{PmwcasError, Result};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Slot {
    epoch: AtomicU64,
    taken: AtomicBool,
}

struct Shared {
    id: u64,
    global: AtomicU64,
    slots: Box<[CachePadded<Slot>]>,
}

/// This thread's slot in one manager (weak: a dropped manager's entry is pruned).
struct Local {
    id: u64,
    shared: Weak<Shared>,
    slot: usize,
    depth: u32,
}

/// Releases this thread's slots when it exits.
struct Locals(Vec<Local>);

impl Drop for Locals {
    fn drop(&mut self) {
        for l in &self.0 {
            if let Some(sh) = l.shared.upgrade() {
                let s = &sh.slots[l.slot];
                s.epoch.store(0, Ordering::SeqCst);
                s.taken.store(false, Ordering::Release);
            }
        }
    }
}

thread_local! {
    static LOCALS: RefCell<Locals> = const { RefCell::new(Locals(Vec::new())) };
}

/// An epoch manager with a limbo list of retired items of type `T`.
pub(crate) struct Epochs<T> {
    shared: Arc<Shared>,
    limbo: Mutex<VecDeque<(u64, T)>>,
}

/// Keeps the current thread inside an epoch until dropped. Guards nest.
pub(crate) struct Guard {
    shared: Arc<Shared>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let id = self.shared.id;
        LOCALS.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(loc) = l.0.iter_mut().find(|x| x.id == id) {
                loc.depth -= 1;
                if loc.depth == 0 {
                    self.shared.slots[loc.slot].epoch.store(0, Ordering::SeqCst);
                }
            }
        });
    }
}

impl<T> Epochs<T> {
    /// A manager for at most `threads` threads inside guards at once.
    pub fn new(threads: usize) -> Self {
        let slots = (0..threads)
            .map(|_| {
                CachePadded::new(Slot {
                    epoch: AtomicU64::new(0),
                    taken: AtomicBool::new(false),
                })
            })
            .collect();
        Epochs {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                global: AtomicU64::new(1),
                slots,
            }),
            limbo: Mutex::new(VecDeque::new()),
        }
    }

    /// Enters an epoch (E1).
    pub fn pin(&self) -> Result<Guard> {
        let sh = &self.shared;
        LOCALS.with(|l| {
            let mut l = l.borrow_mut();
            let pos = match l.0.iter().position(|x| x.id == sh.id) {
                Some(p) => p,
                None => {
                    l.0.retain(|x| x.shared.strong_count() > 0);
                    let slot = sh
                        .slots
                        .iter()
                        .position(|s| {
                            s.taken
                                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                                .is_ok()
                        })
                        .ok_or(PmwcasError::TooManyThreads {
                            max: sh.slots.len(),
                        })?;
                    l.0.push(Local {
                        id: sh.id,
                        shared: Arc::downgrade(sh),
                        slot,
                        depth: 0,
                    });
                    l.0.len() - 1
                }
            };
            let loc = &mut l.0[pos];
            if loc.depth == 0 {
                let e = sh.global.load(Ordering::SeqCst);
                sh.slots[loc.slot].epoch.store(e, Ordering::SeqCst);
                std::sync::atomic::fence(Ordering::SeqCst);
            }
            loc.depth += 1;
            Ok(Guard { shared: sh.clone() })
        })
    }

    /// Adds an unreachable item to the limbo list; returns the list's length.
    pub fn retire(&self, item: T) -> usize {
        let e = self.shared.global.load(Ordering::SeqCst);
        let mut limbo = self.limbo.lock().unwrap_or_else(|e| e.into_inner());
        limbo.push_back((e, item));
        limbo.len()
    }

    /// Advances the global epoch if every busy slot has caught up (E2).
    fn try_advance(&self) -> u64 {
        let sh = &self.shared;
        let e = sh.global.load(Ordering::SeqCst);
        let behind = sh.slots.iter().any(|s| {
            let se = s.epoch.load(Ordering::SeqCst);
            se != 0 && se != e
        });
        if behind {
            return e;
        }
        match sh
            .global
            .compare_exchange(e, e + 1, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => e + 1,
            Err(now) => now,
        }
    }

    /// Tries to advance the epoch and takes every item that is now safe to reuse (E3).
    pub fn collect(&self) -> Vec<T> {
        let mut limbo = self.limbo.lock().unwrap_or_else(|e| e.into_inner());
        if limbo.is_empty() {
            return Vec::new();
        }
        let g = self.try_advance();
        let mut out = Vec::new();
        while limbo.front().is_some_and(|(e, _)| e + 2 <= g) {
            if let Some((_, item)) = limbo.pop_front() {
                out.push(item);
            }
        }
        out
    }

    /// Items waiting in limbo.
    pub fn pending(&self) -> usize {
        self.limbo.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn local_entries() -> usize {
        LOCALS.with(|l| l.borrow().0.len())
    }

    #[test]
    fn a_thread_keeps_no_entries_for_dropped_managers() {
        for _ in 0..1000 {
            let ep: Epochs<u32> = Epochs::new(2);
            drop(ep.pin().expect("pin"));
        }
        assert!(local_entries() <= 1, "{} entries", local_entries());
    }

    #[test]
    fn items_wait_for_two_advances_and_for_busy_threads() {
        let ep: Epochs<u32> = Epochs::new(4);
        ep.retire(1);
        assert!(ep.collect().is_empty(), "one advance is not enough");
        assert_eq!(ep.collect(), vec![1]);
        // A thread that stays pinned holds reclamation back.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let ep = &ep;
            s.spawn(move || {
                let _g = ep.pin().expect("pin");
                tx.send(()).expect("send");
                done_rx.recv().expect("recv");
            });
            rx.recv().expect("recv");
            ep.retire(2);
            for _ in 0..5 {
                assert!(ep.collect().is_empty(), "reclaimed under a pinned reader");
            }
            done_tx.send(()).expect("send");
        });
        let mut got = Vec::new();
        for _ in 0..3 {
            got.extend(ep.collect());
        }
        assert_eq!(got, vec![2]);
    }

    #[test]
    fn guards_nest() {
        let ep: Epochs<u32> = Epochs::new(1);
        let a = ep.pin().expect("pin");
        let b = ep.pin().expect("nested pin");
        drop(b);
        ep.retire(7);
        ep.collect();
        assert!(ep.collect().is_empty(), "outer guard still holds the epoch");
        drop(a);
        assert_eq!(ep.collect(), vec![7]);
    }
}
