//! The engine's shared state: the store, space accounting, blob registry, subtables, read
//! tickets and snapshots, the visible sequence number and the poison flag. The commit path
//! (`commit.rs`), the background worker and the public `Db` all work on it; it knows none of
//! them (imports go one way: core, then the commit path, then the engine, then `Db`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;

use crate::batch::WriteBatch;
use crate::blob::{inline_max, Blobs};
use crate::disk::DiskTier;
use crate::error::{Error, Result};
use crate::gi::Horizon;
use crate::options::{Inject, Options, RecoveryMutation};
use crate::record::Kind;
use crate::space::{Space, Stop};
use crate::store::Store;
use crate::subtable::Subtable;
use crate::view::{Snapshots, Tickets};

/// What every part of an open database shares.
pub(crate) struct Shared {
    pub opts: Options,
    pub store: Store,
    /// The last sequence number readers may see (C4 in commit.rs).
    pub visible: AtomicU64,
    pub poisoned: AtomicBool,
    pub poison_reason: parking_lot::Mutex<String>,
    /// This instance's identity, stamped on its subtable handles.
    pub id: u64,
    pub subtables: RwLock<HashMap<String, Subtable>>,
    pub by_id: ArcSwap<Vec<Option<Subtable>>>,
    pub create_lock: Mutex<()>,
    pub snapshots: Arc<Snapshots>,
    pub tickets: Arc<Tickets>,
    pub space: Space,
    pub blobs: Blobs,
    pub stop: AtomicBool,
    /// Held by the background worker for each round, and by `Db::check`.
    pub pause: parking_lot::Mutex<()>,
    /// The disk levels, if the database has them.
    pub disk: Option<Arc<DiskTier>>,
    /// `Db::flush` asks the background worker to spill every Global Index.
    pub spill_all: AtomicBool,
    /// Spilled Global Index generations whose persistent trees go once no view can read
    /// them, before their zones do (M2 in gi/mirror.rs): (ticket, index).
    pub retired_trees: parking_lot::Mutex<Vec<(u64, Arc<crate::gi::GlobalIndex>)>>,
    /// Whether the volatile Global Indexes are installed (R3 in gi/pending.rs).
    pub index_ready: Arc<crate::gi::pending::IndexReady>,
    /// What the background worker rebuilds first, if open left it (rebuild.rs).
    pub deferred: parking_lot::Mutex<Option<crate::recovery::Deferred>>,
}

impl Shared {
    /// Stores the batch's long values as blobs (B1 in blob.rs), putting their descriptors in
    /// their place, and returns the descriptors. Waits for space as writes do.
    pub(crate) fn write_blobs(&self, batch: &mut WriteBatch) -> Result<Vec<Vec<u8>>> {
        let limit = inline_max(self.store.zone_size);
        let mut made: Vec<Vec<u8>> = Vec::new();
        for op in batch.ops.iter_mut() {
            if op.kind != Kind::Put || op.value.len() <= limit {
                continue;
            }
            let mut verdicts = 0;
            let desc = loop {
                match self.blobs.write(&self.store, self.space.keep, &op.value) {
                    Ok(d) => break d,
                    Err(Error::NoSpace { free, .. }) => {
                        if let Err(e) = self.wait_for_room(free, &mut verdicts) {
                            return Err(self.give_back(e, &made));
                        }
                    }
                    Err(e @ Error::PoolFull { .. }) => return Err(self.give_back(e, &made)),
                    Err(e) => {
                        // A failed fence: the media can no longer be trusted.
                        let why = format!("writing a blob failed: {e}");
                        self.poison(why.clone());
                        return Err(Error::Poisoned(why));
                    }
                }
            };
            let n = op.value.len() as u64;
            self.space.pm_bytes.fetch_add(n, Ordering::Relaxed);
            self.space.user_bytes.fetch_add(n, Ordering::Relaxed);
            op.value = desc.clone();
            op.kind = Kind::Blob;
            made.push(desc);
        }
        Ok(made)
    }

    /// A write found no room with `free` zones free: waits for the background worker. `Ok`
    /// means try again. A pool-full verdict yields to zones freed since the write found no
    /// room (the write tries again, `verdicts` counting how often, a few times at most);
    /// a poisoned database or a failed worker gives [`Error::Poisoned`], a spill waiting to be
    /// retried [`Error::SpillFailed`].
    pub(crate) fn wait_for_room(&self, free: u64, verdicts: &mut u32) -> Result<()> {
        let Err(stop) = self.space.wait_for_space(free) else {
            return Ok(());
        };
        let cause = match (self.poisoned(), stop) {
            (Some(p), _) | (None, Stop::Failed(p)) => return Err(Error::Poisoned(p)),
            (None, Stop::Full(cause)) => cause,
            (
                None,
                Stop::SpillFailed {
                    cause,
                    kind,
                    failures,
                    retry_in,
                },
            ) => {
                return Err(Error::SpillFailed {
                    cause,
                    kind,
                    failures,
                    retry_in,
                })
            }
        };
        *verdicts += 1;
        if self.store.zones.free_zones() > free && *verdicts <= 8 {
            return Ok(());
        }
        Err(Error::PoolFull {
            cause,
            free_zones: free,
        })
    }

    /// A write that made the blobs `made` failed with `e`: nothing of it was applied, so
    /// their zones go back (unless the database is poisoned: a write that failed then may
    /// still be in PM, and recovery decides). Returns `e`.
    pub(crate) fn give_back(&self, e: Error, made: &[Vec<u8>]) -> Error {
        if !matches!(e, Error::Poisoned(_)) {
            for d in made {
                if let Err(err) = self.blobs.forget(&self.store, d) {
                    tracing::warn!(error = %err, "giving back a failed write's blob");
                }
            }
        }
        e
    }

    /// Whether `key` of subtable `sub` has a version (a tombstone included) with a sequence
    /// number above `since`, among the versions any index or the disk levels hold (C5 in
    /// commit.rs). The newest version of a key is in PM whenever any of its versions is:
    /// spills take whole Global Indexes, older than every memtable and than the index that
    /// replaced them. The view is loaded before the disk levels are read (G3).
    pub(crate) fn newer_than(&self, sub: u32, key: &[u8], since: u64) -> Result<bool> {
        let Some(view) = self.with_subtable(sub, |s| s.inner.view.load_full()) else {
            return Ok(false);
        };
        if let Some((seq, _)) = view.newest(key, u64::MAX)? {
            return Ok(seq > since);
        }
        match self.disk.as_ref().and_then(|d| d.existing(sub)) {
            Some(t) if t.newest() > since => Ok(t.newest_seq(key)?.is_some_and(|s| s > since)),
            _ => Ok(false),
        }
    }

    /// Runs `f` on subtable `id`, if it exists, without taking a counted reference (a
    /// clone's reference count would be a cache line every writer shares).
    pub(crate) fn with_subtable<R>(&self, id: u32, f: impl FnOnce(&Subtable) -> R) -> Option<R> {
        self.by_id.load().get(id as usize)?.as_ref().map(f)
    }

    /// Every subtable.
    pub(crate) fn all_subtables(&self) -> Vec<Subtable> {
        self.by_id.load().iter().flatten().cloned().collect()
    }

    /// The read points background work must keep answering (V2 in view.rs): tickets are read
    /// before snapshots, so a snapshot registered after this reads at or above `h`.
    pub(crate) fn horizon(&self) -> Horizon {
        let h = self
            .tickets
            .oldest()
            .map_or_else(|| self.visible.load(Ordering::Acquire), |(_, s)| s);
        let snaps = self
            .snapshots
            .held()
            .into_iter()
            .map(|(s, _)| s)
            .filter(|&s| s < h)
            .collect();
        Horizon {
            h,
            snaps,
            ignore_ghosts: self.opts.recovery_mutation == Some(RecoveryMutation::IgnoreGhosts),
            keep_tombstones: self.disk.is_some()
                && self.opts.recovery_mutation != Some(RecoveryMutation::DropTombstonesAboveDisk),
        }
    }

    /// Zones a subtable's Global Index may take before it is spilled.
    pub(crate) fn gi_limit_zones(&self) -> u64 {
        let zones = self.store.zones.objects().shape().count;
        match self.opts.gi_size_limit {
            0 => (zones / 2).max(1),
            b => (b / self.store.zone_size).max(1),
        }
    }

    /// The compaction threshold of a tree whose newest spilled sequence number is `newest`
    /// (G5 in disk/mod.rs): versions shadowed below it may go only if every read point is at
    /// or above `newest`, where each reads every key's newest version.
    pub(crate) fn disk_gc_threshold(&self, newest: u64) -> u64 {
        let hz = self.horizon();
        let oldest = hz.snaps.first().map_or(hz.h, |&s| s.min(hz.h));
        if oldest < newest {
            0
        } else {
            newest + 1
        }
    }

    /// Whether the database is closing (the background worker stops).
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Runs a fault injected into the background worker (tests).
    pub(crate) fn inject_background_fault(&self) {
        if self.opts.inject == Some(Inject::BackgroundPanic) && self.space.writers_waiting() {
            panic!("injected background panic");
        }
    }

    /// Why the database is poisoned, if it is.
    pub(crate) fn poisoned(&self) -> Option<String> {
        if self.poisoned.load(Ordering::Acquire) {
            Some(self.poison_reason.lock().clone())
        } else {
            None
        }
    }

    pub(crate) fn poison(&self, why: String) {
        tracing::error!(reason = %why, "database poisoned: writes stop until reopen");
        *self.poison_reason.lock() = why.clone();
        self.poisoned.store(true, Ordering::Release);
        // Writers held for space or throttled would wait for progress that may never come
        // (a poisoned database spills nothing, so merges can stall): release them.
        self.space.stop_writes(why);
    }
}
