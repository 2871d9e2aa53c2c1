//! The power-failure simulator behind the `sim` backend.
//!
//! The pool's mapping is the *view* (what the CPU sees, caches included). A separate *media*
//! image holds what would survive a power failure. `flush` snapshots the flushed cache lines
//! into a per-thread pending list, stamped with a global write-back clock; `fence` copies this
//! thread's pending lines to media, except where media already holds a later write-back of
//! the same line (another thread flushed newer contents and fenced first: on hardware the
//! line is coherent, and the last write-back wins). A
//! crash image is media plus, per [`CrashPolicy`], some of the 8-byte words where view and
//! media differ: words the hardware might have evicted on its own. Eight-byte aligned stores are
//! atomic on x86-64, so words are the unit of tearing.
//!
//! Invariants:
//! - M1: media changes only at a fence, and only by lines this thread flushed since its last
//!   fence (flushes of other threads are not ordered by this thread's `sfence`).
//! - M3: a line on media never goes back to contents older than a write-back it already holds
//!   (write-backs apply in flush-stamp order per line).
//! - M2: fences are numbered 1, 2, ... in the order they take the state lock; when stop-at-N
//!   is armed the N-th fence and everything after it never reaches media, and the view as it
//!   was at that instant is frozen for [`SimControl::crash`].
//!
//! Thread safety: all state sits behind one mutex; pending lines are thread-local, keyed by
//! pool id, so concurrent writers on one pool behave as separate CPUs.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::error::PmemError;
use crate::flush::CACHE_LINE;

/// Which unflushed (or flushed but unfenced) words a crash image keeps from the view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CrashPolicy {
    /// Keep none: media only, the harshest crash.
    KeepNone,
    /// Keep each differing word with probability `keep` (0.0..=1.0), chosen by a seeded RNG.
    KeepRandom {
        /// RNG seed; the same seed over the same state gives the same image.
        seed: u64,
        /// Probability of keeping a word.
        keep: f64,
    },
    /// Keep all: as if every cache line had been written back.
    KeepAll,
}

/// Deterministic 64-bit generator (SplitMix64) for reproducible crash images.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct PendingLine {
    pool: u64,
    off: usize,
    stamp: u64,
    data: [u8; CACHE_LINE],
}

thread_local! {
    static PENDING: RefCell<Vec<PendingLine>> = const { RefCell::new(Vec::new()) };
}

struct SimState {
    media: Vec<u8>,
    /// Per cache line: stamp of the write-back media holds (invariant M3).
    line_stamp: Vec<u64>,
    /// The write-back clock.
    clock: u64,
    fences: u64,
    stop_at: Option<u64>,
    /// Fences from this number on fail (an injected media error).
    fail_from: Option<u64>,
    frozen_view: Option<Vec<u8>>,
}

/// Control over a `sim` pool: fence counting, stop-at-fence, crash images.
pub struct SimControl {
    pool: u64,
    view: *const u8,
    len: usize,
    stopped: AtomicBool,
    fences: AtomicU64,
    state: Mutex<SimState>,
}

// SAFETY: `view` points into the owning pool's mapping, which outlives this control (both are
// fields of `Pool`, and the mapping is dropped after it); reads of it use atomic loads.
unsafe impl Send for SimControl {}
// SAFETY: as above; all mutable state is behind the mutex or atomics.
unsafe impl Sync for SimControl {}

impl SimControl {
    pub(crate) fn new(pool: u64, view: *const u8, len: usize, media: Vec<u8>) -> Self {
        debug_assert_eq!(media.len(), len);
        SimControl {
            pool,
            view,
            len,
            stopped: AtomicBool::new(false),
            fences: AtomicU64::new(0),
            state: Mutex::new(SimState {
                line_stamp: vec![0; len / CACHE_LINE],
                clock: 0,
                media,
                fences: 0,
                stop_at: None,
                fail_from: None,
                frozen_view: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock cannot leave the images half-updated in a way that
        // matters to tests, so recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_view_word(&self, word: usize) -> u64 {
        // SAFETY: `word * 8 < len`, the view is 8-byte aligned (page-aligned mapping) and
        // lives as long as `self`; an atomic load tolerates concurrent writers.
        unsafe { (*(self.view.add(word * 8) as *const AtomicU64)).load(Ordering::Relaxed) }
    }

    fn snapshot_view(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for w in 0..self.len / 8 {
            out.extend_from_slice(&self.read_view_word(w).to_le_bytes());
        }
        out
    }

    /// Records the cache lines of `[off, off + len)` as flushed by this thread.
    pub(crate) fn flush(&self, off: usize, len: usize) {
        if len == 0 || self.stopped.load(Ordering::Acquire) {
            return;
        }
        let first = off & !(CACHE_LINE - 1);
        let end = (off + len).min(self.len);
        // Snapshot and stamp under the lock, so stamps order snapshots of a line as the
        // stores they observed were ordered.
        let mut st = self.lock();
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let mut line = first;
            while line < end {
                let mut data = [0u8; CACHE_LINE];
                for (i, chunk) in data.chunks_exact_mut(8).enumerate() {
                    chunk.copy_from_slice(&self.read_view_word(line / 8 + i).to_le_bytes());
                }
                st.clock += 1;
                p.push(PendingLine {
                    pool: self.pool,
                    off: line,
                    stamp: st.clock,
                    data,
                });
                line += CACHE_LINE;
            }
        });
    }

    fn take_pending(&self) -> Vec<PendingLine> {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            let (mine, rest): (Vec<_>, Vec<_>) = p.drain(..).partition(|l| l.pool == self.pool);
            *p = rest;
            mine
        })
    }

    /// Completes this thread's flushes (invariants M1, M2).
    pub(crate) fn fence(&self) -> Result<(), PmemError> {
        let lines = self.take_pending();
        let mut st = self.lock();
        st.fences += 1;
        self.fences.store(st.fences, Ordering::Relaxed);
        if st.fail_from.is_some_and(|n| st.fences >= n) {
            return Err(PmemError::Io {
                op: "fence",
                path: "sim".into(),
                source: std::io::Error::other("injected media error"),
            });
        }
        if self.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        if st.stop_at == Some(st.fences) {
            st.frozen_view = Some(self.snapshot_view());
            self.stopped.store(true, Ordering::Release);
            tracing::debug!(fence = st.fences, "sim: power failure at fence");
            return Ok(());
        }
        for l in lines {
            let i = l.off / CACHE_LINE;
            if st.line_stamp[i] < l.stamp {
                st.line_stamp[i] = l.stamp;
                st.media[l.off..l.off + CACHE_LINE].copy_from_slice(&l.data);
            }
        }
        Ok(())
    }

    /// Drops this thread's pending lines for the pool (called when the pool closes).
    pub(crate) fn discard_pending(&self) {
        drop(self.take_pending());
    }

    /// Number of fences issued on this pool since it was opened.
    pub fn fence_count(&self) -> u64 {
        self.fences.load(Ordering::Relaxed)
    }

    /// Arms a power failure at fence number `n` (counting since open, see
    /// [`SimControl::fence_count`]): fences before it complete, it and all later ones don't.
    /// If `n` is not above the current count, the failure happens at the next fence.
    pub fn stop_at_fence(&self, n: u64) {
        let mut st = self.lock();
        st.stop_at = Some(n.max(st.fences + 1));
    }

    /// Makes fence number `n` and every later one fail with an I/O error (nothing they would
    /// have completed reaches media), as a failing device would.
    pub fn fail_fences_from(&self, n: u64) {
        let mut st = self.lock();
        st.fail_from = Some(n.max(st.fences + 1));
    }

    /// Fails the power now: nothing after this reaches media.
    pub fn stop_now(&self) {
        let mut st = self.lock();
        if !self.stopped.load(Ordering::Acquire) {
            st.frozen_view = Some(self.snapshot_view());
            self.stopped.store(true, Ordering::Release);
        }
    }

    /// Runs `f` unless the simulated power failure has happened, with every fence held off
    /// while it runs: what `f` does outside PM (a file made durable, say) happens before the
    /// failure or not at all, as in a real crash, where nothing runs after it.
    pub fn unless_stopped<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _st = self.lock();
        if self.stopped.load(Ordering::Acquire) {
            return None;
        }
        Some(f())
    }

    /// Whether the simulated power failure has happened.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// A copy of the media image: exactly what has been fenced.
    pub fn media(&self) -> Vec<u8> {
        self.lock().media.clone()
    }

    /// Number of 8-byte words where the view (frozen at the failure, if one happened) differs
    /// from media: the data a crash now could lose.
    pub fn volatile_words(&self) -> usize {
        let st = self.lock();
        let view = st
            .frozen_view
            .clone()
            .unwrap_or_else(|| self.snapshot_view());
        view.chunks_exact(8)
            .zip(st.media.chunks_exact(8))
            .filter(|(v, m)| v != m)
            .count()
    }

    /// The image a power failure leaves: media plus the words `policy` keeps from the view.
    /// Without an armed failure this uses the live view, so writers should be quiescent.
    /// Open it with [`crate::Pool::open_sim`] (or write it to a file and open that).
    pub fn crash(&self, policy: CrashPolicy) -> Vec<u8> {
        let st = self.lock();
        let mut image = st.media.clone();
        if policy == CrashPolicy::KeepNone {
            return image;
        }
        let view = st
            .frozen_view
            .clone()
            .unwrap_or_else(|| self.snapshot_view());
        let mut rng = match policy {
            CrashPolicy::KeepRandom { seed, .. } => Some(SplitMix64::new(seed)),
            _ => None,
        };
        let keep = match policy {
            CrashPolicy::KeepRandom { keep, .. } => keep,
            _ => 1.0,
        };
        for (img, v) in image.chunks_exact_mut(8).zip(view.chunks_exact(8)) {
            if img != v && rng.as_mut().is_none_or(|r| r.next_f64() < keep) {
                img.copy_from_slice(v);
            }
        }
        image
    }
}
