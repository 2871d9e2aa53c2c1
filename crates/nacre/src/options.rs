//! `Options`: everything `Db::open` can be told, with defaults.

use std::path::PathBuf;
use std::time::Duration;

use nacre_pmem::{ActiveBackend, Backend, PoolOptions};

/// How stage 4 of the Reorder Ring makes a group's commit durable.
///
/// Both modes give the same guarantees (an acknowledged batch survives what the backend
/// survives; after a crash a batch is all there or not at all); they differ in fences per
/// group, which on the `msync` backend are file syncs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommitMode {
    /// [`CommitMode::SingleFence`] on the `msync` backend (including `auto` when it falls
    /// back to `msync`), [`CommitMode::TwoFence`] on every other backend.
    #[default]
    Auto,
    /// Advance every touched memtable's `gidx`, fence, then write `commit_id`, fence. A crash
    /// can cut only the second fence's `commit_id`, which recovery checks against each
    /// memtable's last item.
    TwoFence,
    /// Advance every `gidx`, write `commit_id`, one fence: one sync per group on `msync`. A
    /// crash in that fence can leave any subset of the group's records, headers, commit points
    /// and `commit_id` durable; recovery detects the torn group from item checksums and the
    /// group's item count in every item header, and rolls it back everywhere
    /// (docs/format.md).
    SingleFence,
}

impl CommitMode {
    /// The mode used on a pool whose active backend is `backend` (resolves `Auto`).
    pub fn resolve(self, backend: ActiveBackend) -> CommitMode {
        match self {
            CommitMode::Auto if backend == ActiveBackend::Msync => CommitMode::SingleFence,
            CommitMode::Auto => CommitMode::TwoFence,
            m => m,
        }
    }
}

/// When a bucket's next leader may form its group.
///
/// Pipelined groups overlap: the next leader takes whatever is queued as soon as the previous
/// group is taken, and groups persist their records in parallel. When a commit costs a device
/// round trip (`msync`), waiting for the previous group's commit lets every writer that
/// arrives meanwhile join one group, so one sync covers them all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pipelining {
    /// [`Pipelining::Off`] on the `msync` backend, [`Pipelining::On`] elsewhere.
    #[default]
    Auto,
    /// Leadership passes on when a leader takes its group.
    On,
    /// Leadership passes on when the leader's group has committed, and every writer queues
    /// in one bucket (`commit_buckets` is ignored): one group is in flight at a time.
    Off,
}

impl Pipelining {
    /// Whether groups pipeline on a pool whose active backend is `backend` (resolves `Auto`).
    pub fn resolve(self, backend: ActiveBackend) -> bool {
        match self {
            Pipelining::Auto => backend != ActiveBackend::Msync,
            Pipelining::On => true,
            Pipelining::Off => false,
        }
    }
}

/// A recovery rule switched off, so a test can show that the power-failure torture test
/// catches its absence. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMutation {
    /// Keep the newest group even when fewer of its items are present than it has.
    SkipItemCount,
    /// Judge each memtable's last group by one item, as before a group could write several
    /// (its records for a subtable exceeding a zone): a tail of more than one item reads as
    /// torn, and each memtable showing the group counts as one of its items.
    OneItemPerMemtable,
    /// Keep `commit_id` when it names a group that was rolled back or never became visible.
    SkipCommitIdLowering,
    /// Keep tail items whose group is above `commit_id`.
    SkipAboveCommitId,
    /// Write and read items and zone-end markers without binding them to their place
    /// (memtable birth and position), as if zones were never reused within a run.
    SkipPlaceCheck,
    /// Count a record and its relocated copy (found together after a crash mid-relocation)
    /// as one copy, so the ghost count misses the second.
    CountCopiesOnce,
    /// Drop a tombstone from the Global Index even while older copies of its key remain.
    IgnoreGhosts,
    /// Register the zones of every blob record found, not only of each key's newest version
    /// (older blobs' zones may have been given back and reused).
    ClaimEveryBlob,
    /// Register no blob: their zones are given back as if no record named them.
    SkipBlobClaims,
    /// Take every torn last item for a torn write, even where a later group committed after
    /// it (damaged media then rolls back acknowledged writes).
    SkipTornCheck,
    /// Index the memtables a registered spill names, as if their records were not on disk
    /// (their blobs' zones may have been given back and reused).
    SkipSpilledRelease,
    /// With disk levels, drop a key's oldest tombstone from the Global Index as in PM-only
    /// mode (disk may still hold older versions of the key).
    DropTombstonesAboveDisk,
    /// Lower `commit_id` to the newest record found in PM, ignoring the records on disk (the
    /// newest groups may have been spilled).
    IgnoreDiskSequences,
    /// Judge the newest group by the items PM shows alone, even when the disk levels hold its
    /// records or a later group's: its items in memtables that were spilled and given back
    /// then count as missing, and the rest of the committed group is rolled back.
    IgnoreSpilledItems,
    /// Open and verify the disk levels' trees without checking their version files (the
    /// checksum `current` records, the tables' global sequence numbers: disk/version.rs), as
    /// lsm-tree alone does.
    SkipDiskVersionCheck,
    /// The persistent index does not follow the cleaner's relocations (M1 in gi/mirror.rs).
    MirrorSkipsRelocation,
    /// Open keeps the persistent index as the crash left it instead of bringing it to the
    /// rebuilt volatile index (M3 in gi/mirror.rs).
    SkipIndexReconcile,
    /// Recovery gives back the zones of memtables a spill already holds without first
    /// dropping the subtable's persistent index trees (M2 in gi/mirror.rs).
    KeepSpilledTrees,
    /// Recovery trusts the persistent index's trees even when the engine root says a run
    /// without the index, or a stale tree, left them behind (`index_trusted` in store.rs).
    TrustIndexAlways,
    /// The worker marks a memtable merged into the persistent index before it merges it,
    /// instead of after (the `merged` mark in docs/format.md).
    MarkMergedEarly,
    /// While the Global Index is rebuilt in the background, reads answer from the trees
    /// alone, without the memtables not marked merged (R1 in gi/pending.rs).
    NoShadowIndexes,
    /// While the Global Index is rebuilt in the background, reads use a subtable's first
    /// tree even when both of its slots hold one (a crash during a spill), dropping the
    /// other (R1 in gi/pending.rs).
    ReadsFromEitherTree,
    /// Open leaves the memtables merged into the trees to the background rebuild even when
    /// the newest record it read is below the commit id (which it then lowers without them).
    ScanMergedLater,
    /// Open finds a memtable's tail from the zone of its last item before `prev` alone, even
    /// when the last group's run of items may begin in an earlier zone.
    TailWindowOneZone,
}

/// A fault injected so that a test can reach a failure path. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// The background worker panics in its first round in which writers wait for space.
    BackgroundPanic,
    /// Stage 3 of the commit path panics on a group that writes a key starting with `panic`.
    CommitPanic,
    /// Transactions' commits skip their conflict check (C5 in commit.rs), so that tests can
    /// show they fail without it.
    SkipConflictCheck,
}

/// An I/O failure injected into the disk levels so that a test can reach the path of a
/// failed spill (`Db::inject_disk_fault`). Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// Writing a spill's tables fails with `StorageFull` (ENOSPC) after its first entries,
    /// so that a partly written table file is left behind.
    FullWritingTables,
    /// Registering a spill's tables fails with `StorageFull` (ENOSPC) before the tree's
    /// version changes on disk.
    FullRegistering,
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
    /// Bytes per memtable when creating; a multiple of `zone_size`, at most 256 MiB (default
    /// 64 MiB).
    pub memtable_size: u64,
    /// Bytes per zone when creating (default 4 MiB). A record must fit in a zone (values
    /// longer than an eighth of one are stored out of line); a batch's records may span any
    /// number of zones and memtables.
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
    /// Leader/follower buckets writers are spread over (default 4; one when
    /// [`Options::pipelining`] resolves to off).
    pub commit_buckets: usize,
    /// Threads rebuilding memtable indexes on open (default: available parallelism).
    pub recovery_threads: usize,
    /// Fences per group commit (default [`CommitMode::Auto`]: one on `msync`, two elsewhere).
    /// Any mode works on any backend and on databases written in the other mode.
    pub commit_mode: CommitMode,
    /// Whether a bucket forms its next group while the previous one commits (default
    /// [`Pipelining::Auto`]: not on `msync`, where a commit is a file sync).
    pub pipelining: Pipelining,
    /// Check each record's checksum when a read (`get`, iterators) returns its value
    /// (default true): a damaged byte is then [`crate::Error::Corrupt`], never data. Off
    /// saves a crc32c over the key and value per read; only benchmarks that say so should
    /// turn it off. Values stored out of line are always checked.
    pub verify_checksums: bool,
    /// Open a damaged database as far as it is intact (default false: damage to what decides
    /// what is live fails the open with `Corrupt`). A subtable whose object, memtable list,
    /// memtable objects or items fail their checks is left out whole, named with the reason
    /// in [`crate::RecoveryReport::lost`], and nothing it may own is freed; every other
    /// subtable opens and reads exactly as before the damage. Damage to what the whole
    /// database depends on (the pool superblock, the engine root, Halloc's registry) still
    /// fails the open.
    pub salvage: bool,
    /// Directory of the disk levels (default `None`: PM only, where the zone cleaner reclaims
    /// space in place). With a directory, the Global Index is frozen when it reaches
    /// `gi_size_limit` and spilled into lsm-tree tables there, so the data can outgrow PM.
    /// Once a database has disk levels it must always be opened with their directory.
    pub disk_dir: Option<PathBuf>,
    /// PM bytes a subtable's Global Index may take before it is spilled to the disk levels
    /// (default 0: half the pool, which leaves the other half to writes while a spill runs).
    /// Ignored without `disk_dir`.
    pub gi_size_limit: u64,
    /// Bytes of the block cache all disk levels share (default 64 MiB).
    pub disk_cache_size: u64,
    /// Keeps a copy of the Global Index in PM, a BzTree per subtable generation
    /// (docs/persistent-index.md), beside the volatile one (default off). The tree is
    /// written by every merge, relocation and spill, reconciled with the volatile index
    /// after open and checked against it (`Db::check`); open serves point reads from it
    /// while the volatile index is rebuilt in the background (`background_index_rebuild`),
    /// and afterwards point reads use it only with `persistent_index_reads`. It takes
    /// `persistent_index_share` of a new pool; a database created without it cannot turn it
    /// on. Off on the `msync` backend, with a warning: each of the index's persists would be
    /// an msync(2) (a run there is caught up by the next open with the index elsewhere).
    pub persistent_index: bool,
    /// Percent of a new pool the persistent index's nodes take, 1 to 50 (default 12). Keys
    /// the index cannot hold (longer than [`crate::limits::PERSISTENT_INDEX_KEY_MAX`]) and
    /// a full node pool leave it incomplete, which is logged, until the next open rebuilds it.
    pub persistent_index_share: u32,
    /// Point reads that reach the Global Index read the persistent index instead of the
    /// volatile one (default off; needs `persistent_index`). Scans still use the volatile
    /// index. For measuring the tree's read cost on the way to an open that does not
    /// rebuild the volatile index.
    pub persistent_index_reads: bool,
    /// With `persistent_index`, open serves reads as soon as the memtables not yet merged
    /// into the persistent index have their volatile indexes, and the background worker
    /// rebuilds the volatile Global Index from the rest before it merges, cleans or spills
    /// anything (default on; docs/persistent-index.md). Until then point reads answer from
    /// those memtables and the trees; iterators, `Db::check` and reads of keys
    /// too long for the trees wait for the rebuild. Applies when the trees are trusted (the
    /// last run kept them following every change); otherwise open rebuilds as without it.
    pub background_index_rebuild: bool,
    /// Open checks every entry of the persistent index against the record it names before
    /// reconciling it (tests: the trees as a crash left them never name a freed zone or
    /// another record). Costs a read of every record the index names.
    #[doc(hidden)]
    pub audit_persistent_index: bool,
    #[doc(hidden)]
    pub recovery_mutation: Option<RecoveryMutation>,
    #[doc(hidden)]
    pub inject: Option<Inject>,
    /// A background rebuild of the Global Index waits for `Db::release_rebuild` (tests that
    /// read through the stand-ins of gi/pending.rs).
    #[doc(hidden)]
    pub hold_rebuild: bool,
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
            commit_mode: CommitMode::Auto,
            pipelining: Pipelining::Auto,
            verify_checksums: true,
            salvage: false,
            disk_dir: None,
            gi_size_limit: 0,
            disk_cache_size: 64 << 20,
            persistent_index: false,
            persistent_index_share: 12,
            persistent_index_reads: false,
            background_index_rebuild: true,
            audit_persistent_index: false,
            recovery_mutation: None,
            inject: None,
            hold_rebuild: false,
        }
    }

    /// Sets the directory of the disk levels (see [`Options::disk_dir`]).
    pub fn disk_dir(mut self, dir: impl Into<PathBuf>) -> Options {
        self.disk_dir = Some(dir.into());
        self
    }

    /// Sets the backend.
    pub fn backend(mut self, backend: Backend) -> Options {
        self.pool.backend = backend;
        self
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(crate::Error::InvalidOptions(m));
        if self.zone_size < 64 << 10
            || self.zone_size % 4096 != 0
            || self.zone_size > limits::MEMTABLE_SIZE_MAX
        {
            return bad(format!(
                "zone_size {} must be a multiple of 4096 between 64 KiB and 256 MiB",
                self.zone_size
            ));
        }
        if self.memtable_size < self.zone_size
            || self.memtable_size % self.zone_size != 0
            || self.memtable_size > limits::MEMTABLE_SIZE_MAX
        {
            return bad(format!(
                "memtable_size {} must be a multiple of zone_size {} and at most {} (256 MiB)",
                self.memtable_size,
                self.zone_size,
                limits::MEMTABLE_SIZE_MAX
            ));
        }
        if self.pool_size > limits::POOL_SIZE_MAX {
            return bad(format!(
                "pool_size {} exceeds {} (64 TiB)",
                self.pool_size,
                limits::POOL_SIZE_MAX
            ));
        }
        let ranges: [(&str, u64, u64, u64); 5] = [
            (
                "max_subtables",
                self.max_subtables,
                1,
                limits::MAX_SUBTABLES,
            ),
            (
                "ring_capacity",
                self.ring_capacity as u64,
                2,
                limits::RING_CAPACITY_MAX as u64,
            ),
            (
                "batch_size",
                self.batch_size as u64,
                1,
                limits::BATCH_SIZE_MAX as u64,
            ),
            (
                "commit_buckets",
                self.commit_buckets as u64,
                1,
                limits::COMMIT_BUCKETS_MAX as u64,
            ),
            (
                "recovery_threads",
                self.recovery_threads as u64,
                1,
                limits::RECOVERY_THREADS_MAX as u64,
            ),
        ];
        for (name, v, lo, hi) in ranges {
            if v < lo || v > hi {
                return bad(format!("{name} {v} must be between {lo} and {hi}"));
            }
        }
        if self.persistent_index {
            if !(1..=50).contains(&self.persistent_index_share) {
                return bad(format!(
                    "persistent_index_share {} must be between 1 and 50",
                    self.persistent_index_share
                ));
            }
            let trees = 2 * self.max_subtables + 1;
            if trees > u64::from(nacre_bztree::TREES_MAX) {
                return bad(format!(
                    "max_subtables {} must be at most {} with persistent_index (two trees each)",
                    self.max_subtables,
                    (nacre_bztree::TREES_MAX - 1) / 2
                ));
            }
        }
        if self.gi_size_limit != 0 && self.gi_size_limit < self.zone_size {
            return bad(format!(
                "gi_size_limit {} must be 0 (half the pool) or at least zone_size {}",
                self.gi_size_limit, self.zone_size
            ));
        }
        if self.disk_cache_size > limits::POOL_SIZE_MAX {
            return bad(format!(
                "disk_cache_size {} exceeds {} (64 TiB)",
                self.disk_cache_size,
                limits::POOL_SIZE_MAX
            ));
        }
        if self.batch_wait > limits::BATCH_WAIT_MAX {
            return bad(format!(
                "batch_wait {:?} exceeds {:?} (a leader spins while it waits)",
                self.batch_wait,
                limits::BATCH_WAIT_MAX
            ));
        }
        if self.pool.flush_delay_ns > limits::FLUSH_DELAY_NS_MAX {
            return bad(format!(
                "pool.flush_delay_ns {} exceeds {} (the delay is spun per cache line)",
                self.pool.flush_delay_ns,
                limits::FLUSH_DELAY_NS_MAX
            ));
        }
        Ok(())
    }
}

/// The ranges [`Options`] values must lie in; [`crate::Db::open`] refuses others with
/// [`crate::Error::InvalidOptions`] before it creates or changes anything.
pub mod limits {
    use std::time::Duration;

    /// Largest `memtable_size` (a memtable's commit point holds positions below 512 MiB).
    pub const MEMTABLE_SIZE_MAX: u64 = 256 << 20;
    /// Largest `pool_size` (64 TiB).
    pub const POOL_SIZE_MAX: u64 = 1 << 46;
    /// Largest `max_subtables` (subtable ids are 32-bit; each one reserves PM objects).
    pub const MAX_SUBTABLES: u64 = 1 << 16;
    /// Longest key the persistent index holds (`Options::persistent_index`), each zero byte
    /// counted twice; longer keys are left out of it.
    pub const PERSISTENT_INDEX_KEY_MAX: usize = 200;
    /// Largest `ring_capacity`.
    pub const RING_CAPACITY_MAX: usize = 1 << 16;
    /// Largest `batch_size`.
    pub const BATCH_SIZE_MAX: usize = 1 << 16;
    /// Largest `commit_buckets`.
    pub const COMMIT_BUCKETS_MAX: usize = 1024;
    /// Largest `recovery_threads`.
    pub const RECOVERY_THREADS_MAX: usize = 1024;
    /// Longest `batch_wait`.
    pub const BATCH_WAIT_MAX: Duration = Duration::from_millis(10);
    /// Largest `pool.flush_delay_ns`.
    pub const FLUSH_DELAY_NS_MAX: u64 = 1_000_000;
}
