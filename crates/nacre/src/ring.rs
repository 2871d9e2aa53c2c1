//! The Reorder Ring (seed 000 §3.2.3, Algorithms 1-3): groups are granted in order, persist
//! their records in parallel, and commit serially in grant order.
//!
//! Indexes (monotonic, never wrapping; slots are `index % cap`):
//! - `bid`: next handle to hand out (stage 1).
//! - `sid`: next handle allowed into stage 2 (serial space grant).
//! - `hid`: next handle whose commit may start (claimed by CAS, Alg. 2).
//! - `pid`: next handle to commit (stage 4, serial).
//!
//! Invariants:
//! - R1: stage 2 runs for handles in `bid` order, one at a time (`sid`).
//! - R2: stage 4 runs for handles in `bid` order, one at a time (`pid`), and a handle enters
//!   it only after its own stage 3 finished (its owner called `finish`), so commits follow
//!   grant order (C2). A handle is committed by another thread only after its owner ran the
//!   hand-off (a fence), so its records are durable before any commit point covers them.
//! - R3: at most `cap - 1` handles are between stage 1 and the end of stage 4, so a slot is
//!   reused only after its previous handle committed.
//! - R4: a slot's `ready` flag is cleared in the previous handle's stage 2, before any thread
//!   may look at it for this handle, and set only by this handle's owner after stage 3.
//!
//! Thread safety: lock-free indexes; each slot's payload sits behind a mutex written in stage
//! 1 by the owner and read in stage 4 by whichever thread commits it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

struct Slot<G> {
    ready: AtomicBool,
    payload: Mutex<Option<G>>,
}

/// An index on a cache line of its own: threads in different stages touch different indexes,
/// and sharing a line would move it between their cores on every touch.
#[repr(align(64))]
struct Padded(AtomicU64);

impl std::ops::Deref for Padded {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// The ring. `G` is the per-group payload handed to the commit function.
pub(crate) struct Ring<G> {
    bid: Padded,
    sid: Padded,
    hid: Padded,
    pid: Padded,
    cap: u64,
    slots: Vec<Slot<G>>,
}

/// Waits for `cond`: a short spin (the thread ahead is usually mid-commit on another core),
/// then yields, so an oversubscribed machine runs that thread instead of this one. Public
/// for callers that wait on the commit path's progress the same way (nacre-server's turn
/// of resolution).
pub fn wait_until(mut cond: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        if spins < 128 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

impl<G: Clone> Ring<G> {
    pub fn new(cap: usize) -> Self {
        Ring {
            bid: Padded(AtomicU64::new(0)),
            sid: Padded(AtomicU64::new(0)),
            hid: Padded(AtomicU64::new(0)),
            pid: Padded(AtomicU64::new(0)),
            cap: cap as u64,
            slots: (0..cap)
                .map(|_| Slot {
                    ready: AtomicBool::new(false),
                    payload: Mutex::new(None),
                })
                .collect(),
        }
    }

    fn slot(&self, h: u64) -> &Slot<G> {
        &self.slots[(h % self.cap) as usize]
    }

    /// Stages 1 and 2 (Alg. 1): takes a handle, stores `payload`, then runs `stage2` serially
    /// in handle order. Returns the handle and `stage2`'s result.
    pub fn grant<R>(&self, payload: G, stage2: impl FnOnce() -> R) -> (u64, R) {
        let h = self.bid.fetch_add(1, Ordering::AcqRel);
        wait_until(|| h - self.pid.load(Ordering::Acquire) < self.cap - 1);
        *self
            .slot(h)
            .payload
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(payload);
        wait_until(|| self.sid.load(Ordering::Acquire) == h);
        let r = stage2();
        self.slot(h + 1).ready.store(false, Ordering::Release);
        self.sid.fetch_add(1, Ordering::AcqRel);
        (h, r)
    }

    /// Stage 3 is done for `h` (its records are written and flushed): commits `h` and every
    /// later ready handle in order if no earlier handle is still pending (Alg. 2), else runs
    /// `handoff` and leaves `h` for the thread that commits its predecessor. `commit` for `h`
    /// itself then runs on this thread, so its fences also complete this thread's stage-3
    /// flushes; `handoff` must complete them (fence) before another thread may commit `h`.
    pub fn finish(&self, h: u64, handoff: &dyn Fn(), commit: &dyn Fn(&G)) {
        if self.claim(h) {
            self.commit_from(h, commit);
            return;
        }
        // The predecessor is usually mid-commit: waiting a few microseconds to commit `h`
        // here is cheaper than handing it off and being woken by another thread.
        for _ in 0..32 {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if self.hid.load(Ordering::Acquire) == h && self.claim(h) {
                self.commit_from(h, commit);
                return;
            }
        }
        handoff();
        self.slot(h).ready.store(true, Ordering::Release);
        if self.claim(h) {
            self.commit_from(h, commit);
        }
    }

    fn claim(&self, h: u64) -> bool {
        self.hid
            .compare_exchange(h, h + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn commit_from(&self, mut h: u64, commit: &dyn Fn(&G)) {
        loop {
            self.do_commit(h, commit);
            h += 1;
            if !(self.slot(h).ready.load(Ordering::Acquire) && self.claim(h)) {
                return;
            }
        }
    }

    /// Stage 4 (Alg. 3).
    fn do_commit(&self, h: u64, commit: &dyn Fn(&G)) {
        wait_until(|| self.pid.load(Ordering::Acquire) == h);
        let payload = self
            .slot(h)
            .payload
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = payload {
            commit(&p);
        }
        self.pid.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn commits_follow_grant_order_under_contention() {
        let ring: Arc<Ring<u64>> = Arc::new(Ring::new(4));
        let log = Arc::new(Mutex::new(Vec::new()));
        let granted = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (ring, log, granted) = (ring.clone(), log.clone(), granted.clone());
                s.spawn(move || {
                    for i in 0..500u64 {
                        let (h, ()) = ring.grant(t << 32 | i, || {});
                        granted.lock().map(|mut g| g.push(h)).ok();
                        if (h + t) % 3 == 0 {
                            std::thread::yield_now();
                        }
                        ring.finish(h, &|| {}, &|_| {
                            log.lock().map(|mut l| l.push(h_of(&ring))).ok();
                        });
                    }
                });
            }
        });
        let log = log.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(log.len(), 2000);
        assert!(
            log.windows(2).all(|w| w[0] + 1 == w[1]),
            "commits out of order"
        );
    }

    fn h_of(ring: &Ring<u64>) -> u64 {
        ring.pid.load(Ordering::Acquire)
    }
}
