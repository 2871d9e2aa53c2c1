//! Reads while the volatile Global Index is rebuilt in the background
//! (`Options::background_index_rebuild`, step 4 of docs/persistent-index.md): open returns
//! once the memtables that are not merged into the persistent index have their volatile
//! indexes, and point reads that reach the Global Index answer from those indexes and the
//! persistent index's tree. The background worker rebuilds the volatile index from every
//! memtable as open did before, brings the tree to it (M3), installs it in each subtable's
//! view and only then starts merging, cleaning and spilling.
//!
//! Invariants:
//! - R1 (what answers): open defers the rebuild only when the trees are trusted
//!   (`index_trusted`) and none failed. Then, for every key, the trees together with the
//!   memtables not marked merged answer as all the memtables do (M6 in mirror.rs: the
//!   audit checks exactly this at every crash point of the tortures): the newer of the
//!   key's tree entry and its newest version in those memtables is the key's newest
//!   version, and a key in neither has nothing in PM (the disk levels are read next, as
//!   after the volatile index). A read therefore takes the newest of the two, by sequence
//!   number (a record and its relocated copy share one: either answers).
//! - R2 (nothing moves under it): until the rebuilt index is installed, the worker merges,
//!   cleans and spills nothing and no zone is given back, so every record the tree or a
//!   shadow index names stays where it is. The tree changes only through the reconcile,
//!   which writes each entry to the key's newest version found in PM (R1 holds before and
//!   after each write). New writes go to the active memtable, read before the Global Index.
//! - R3 (what waits): a key the tree cannot hold (too long), a subtable without a usable
//!   tree (its trees dropped by recovery, or stale), iterators and checks wait for the
//!   rebuild, then read the rebuilt index; statistics say it is not rebuilt yet. A rebuild that fails poisons the
//!   database and every waiter gets the error.
//!
//! Thread safety: shadow indexes are only read; the tree is latch-free; the rebuilt index
//! is published once, before the engine-wide flag says ready.

use std::sync::{Arc, OnceLock};

use nacre_pmem::PmOffset;
use parking_lot::{Condvar, Mutex};

use crate::art::ArtIndex;
use crate::error::{Error, Result};
use crate::gi::index::GlobalIndex;
use crate::gi::mirror::Mirror;
use crate::index::MemIndex;

/// Whether the volatile Global Indexes are rebuilt and installed (R3).
#[derive(Default)]
pub(crate) struct IndexReady {
    done: std::sync::atomic::AtomicBool,
    state: Mutex<Option<std::result::Result<(), String>>>,
    cv: Condvar,
    /// Tests hold the rebuild back to read through the stand-ins (`Options::hold_rebuild`).
    held: Mutex<bool>,
    held_cv: Condvar,
}

impl IndexReady {
    /// Holds the rebuild back until [`IndexReady::release`] (tests).
    pub fn hold(&self) {
        *self.held.lock() = true;
    }

    /// Lets a held rebuild go.
    pub fn release(&self) {
        *self.held.lock() = false;
        self.held_cv.notify_all();
    }

    /// Waits while the rebuild is held back.
    pub fn wait_released(&self) {
        let mut h = self.held.lock();
        while *h {
            self.held_cv.wait(&mut h);
        }
    }

    /// Records the rebuild's outcome and wakes every waiter.
    pub fn set(&self, outcome: std::result::Result<(), String>) {
        let mut s = self.state.lock();
        let ok = outcome.is_ok();
        *s = Some(outcome);
        if ok {
            self.done.store(true, std::sync::atomic::Ordering::Release);
        }
        self.cv.notify_all();
    }

    /// Whether the rebuilt indexes are installed.
    pub fn is_ready(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits for the rebuild; its error if it failed. A rebuild held back goes now (a
    /// hold only delays it until something needs it).
    pub fn wait(&self) -> Result<()> {
        if self.is_ready() {
            return Ok(());
        }
        self.release();
        let mut s = self.state.lock();
        loop {
            match &*s {
                Some(Ok(())) => return Ok(()),
                Some(Err(why)) => return Err(Error::Poisoned(why.clone())),
                None => self.cv.wait(&mut s),
            }
        }
    }
}

/// A subtable's Global Index while its volatile index is rebuilt (R1).
pub(crate) struct Pending {
    /// Indexes of the memtables not marked merged into the tree.
    pub shadows: Vec<Arc<ArtIndex>>,
    /// The subtable's live tree, if it can answer.
    pub mirror: Option<Arc<Mirror>>,
    pub ready: Arc<IndexReady>,
    /// The rebuilt index, set before `ready` says so.
    pub rebuilt: OnceLock<Arc<GlobalIndex>>,
}

impl Pending {
    /// The newest version of `key` at or below `seq` in PM besides the memtables a view
    /// reads first (R1), waiting for the rebuild where the tree cannot say (R3).
    /// Whether a point read of `key` that no unmarked memtable answers would wait for the
    /// rebuild (R3: the tree cannot answer for it).
    pub fn would_wait(&self, key: &[u8]) -> bool {
        !self.ready.is_ready() && !self.mirror.as_ref().is_some_and(|m| m.can_serve(key))
    }

    pub fn get_at(&self, key: &[u8], seq: u64) -> Result<Option<(u64, PmOffset)>> {
        // The newer of two versions by sequence number (a record and its relocated copy
        // share one: either answers).
        let newer = |a: Option<(u64, PmOffset)>, b: (u64, PmOffset)| match a {
            Some(a) if a.0 >= b.0 => Some(a),
            _ => Some(b),
        };
        let best = self
            .shadows
            .iter()
            .filter_map(|ix| ix.get(key, seq))
            .fold(None, newer);
        if let Some(m) = self.mirror.as_ref().filter(|m| m.can_serve(key)) {
            match m.newest(key)? {
                None => return Ok(best),
                Some(hit) if hit.0 <= seq => return Ok(newer(best, hit)),
                // Every entry is at most the commit id at open, and every read point is at
                // or above it; should one not be, the rebuilt index answers.
                Some(_) => {}
            }
        }
        self.ready.wait()?;
        match self.rebuilt.get() {
            Some(gi) => gi.get_at(key, seq),
            None => Err(Error::corrupt(
                "the Global Index was reported rebuilt but is not installed",
            )),
        }
    }
}
