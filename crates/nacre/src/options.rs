//! `Options`: everything `Db::open` can be told, with defaults.

use std::path::PathBuf;
use std::time::Duration;

use nacre_pmem::{Backend, PoolOptions};

/// A recovery rule switched off, so a test can show that the power-failure torture test
/// catches its absence. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMutation {
    /// Keep the newest group even when fewer of its items are present than it has.
    SkipItemCount,
    /// Keep `commit_id` when it names a group that was rolled back or never became visible.
    SkipCommitIdLowering,
    /// Keep tail items whose group is above `commit_id`.
    SkipAboveCommitId,
}

/// Database options. `Options::new(path)` gives the defaults below.
#[derive(Clone, Debug)]
pub struct Options {
    /// Pool file (or device-DAX device). Created if missing.
    pub path: PathBuf,
    /// Pool size in bytes when creating (default 1 GiB).
    pub pool_size: u64,
    /// Durability backend and flush options (default `auto`).
    pub pool: PoolOptions,
    /// Bytes per memtable when creating; a multiple of `zone_size` (default 64 MiB).
    pub memtable_size: u64,
    /// Bytes per zone when creating (default 4 MiB). One write batch's records for one
    /// subtable must fit in a zone.
    pub zone_size: u64,
    /// Most subtables the database can hold (fixed at creation, default 256).
    pub max_subtables: u64,
    /// Reorder Ring capacity: groups in flight at once (default 64).
    pub ring_capacity: usize,
    /// Most write batches a bucket leader groups into one commit (default 32).
    pub batch_size: usize,
    /// How long a leader waits (spinning) for more writers to queue before committing; a full
    /// batch of `batch_size` ends the wait early (default 0: group whatever is queued). A few
    /// microseconds trade latency for fewer commits when writers arrive close together.
    pub batch_wait: Duration,
    /// Leader/follower buckets writers are spread over (default 4).
    pub commit_buckets: usize,
    /// Threads rebuilding memtable indexes on open (default: available parallelism).
    pub recovery_threads: usize,
    #[doc(hidden)]
    pub recovery_mutation: Option<RecoveryMutation>,
}

impl Options {
    /// Defaults for a database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Options {
        Options {
            path: path.into(),
            pool_size: 1 << 30,
            pool: PoolOptions::default(),
            memtable_size: 64 << 20,
            zone_size: 4 << 20,
            max_subtables: 256,
            ring_capacity: 64,
            batch_size: 32,
            batch_wait: Duration::ZERO,
            commit_buckets: 4,
            recovery_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            recovery_mutation: None,
        }
    }

    /// Sets the backend.
    pub fn backend(mut self, backend: Backend) -> Options {
        self.pool.backend = backend;
        self
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(crate::Error::InvalidOptions(m));
        if self.zone_size < 64 << 10 || self.zone_size % 4096 != 0 || self.zone_size > 1 << 30 {
            return bad(format!(
                "zone_size {} must be a multiple of 4096 between 64 KiB and 1 GiB",
                self.zone_size
            ));
        }
        if self.memtable_size < self.zone_size
            || self.memtable_size % self.zone_size != 0
            || self.memtable_size > u32::MAX as u64
        {
            return bad(format!(
                "memtable_size {} must be a multiple of zone_size {} and below 4 GiB",
                self.memtable_size, self.zone_size
            ));
        }
        if self.ring_capacity < 2 || self.batch_size == 0 || self.commit_buckets == 0 {
            return bad("ring_capacity >= 2, batch_size >= 1, commit_buckets >= 1".into());
        }
        if self.max_subtables == 0 {
            return bad("max_subtables must be at least 1".into());
        }
        Ok(())
    }
}
