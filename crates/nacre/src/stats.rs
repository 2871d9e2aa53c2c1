//! `Db::stats()`: what the engine holds and has done, per subtable and in total.

use std::time::Duration;

/// One subtable's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubtableStats {
    /// The subtable's name.
    pub name: String,
    /// Keys in the Global Index.
    pub gi_keys: u64,
    /// Versions the Global Index points at.
    pub gi_versions: u64,
    /// Bytes of the records the Global Index points at.
    pub gi_live_bytes: u64,
    /// Zones that belong to the Global Index.
    pub gi_zones: u64,
    /// Committed bytes of the active and immutable memtables (records and item headers,
    /// superseded versions included until they are merged).
    pub memtable_bytes: u64,
    /// Active memtables (0 or 1).
    pub active_memtables: u64,
    /// Sealed memtables waiting to be merged into the Global Index.
    pub immutable_memtables: u64,
}

/// The disk levels' figures (databases with [`crate::Options::disk_dir`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskStats {
    /// Tables per level, L1 first (the Global Index in PM is L0), summed over subtables.
    pub level_tables: Vec<u64>,
    /// Bytes of tables per level, as `level_tables`.
    pub level_bytes: Vec<u64>,
    /// Bytes of tables on disk.
    pub disk_bytes: u64,
    /// Spills of a frozen Global Index, and the time they took.
    pub spills: u64,
    /// Time spent spilling (reading PM, writing and registering tables).
    pub spill_time: Duration,
    /// Versions spilled.
    pub spilled_entries: u64,
    /// Bytes of tables spills wrote.
    pub spill_bytes_written: u64,
    /// Compaction steps that changed a tree, and the bytes of the tables they wrote.
    pub compactions: u64,
    /// Bytes of tables compactions wrote.
    pub compaction_bytes_written: u64,
    /// Spills that failed with an I/O error and were retried (a full disk, say).
    pub failed_spills: u64,
    /// Block-cache hits per block load, over every tree (1.0 before any load).
    pub cache_hit_rate: f64,
    /// Bytes the shared block cache holds.
    pub cache_bytes: u64,
}

impl DiskStats {
    /// Bytes written to disk: spills and compactions.
    pub fn bytes_written(&self) -> u64 {
        self.spill_bytes_written + self.compaction_bytes_written
    }
}

/// The whole database's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Per subtable, by name.
    pub subtables: Vec<SubtableStats>,
    /// The Global Index is being rebuilt in the background after open
    /// (`Options::background_index_rebuild`): its figures (`gi_keys`, `gi_versions`,
    /// `gi_live_bytes`, `gi_zones`, and `live_bytes` with them) count nothing of it yet.
    pub rebuilding: bool,
    /// Live data: Global Index bytes, memtable bytes and blob zones.
    pub live_bytes: u64,
    /// Zones in the pool.
    pub zones: u64,
    /// Zones free.
    pub zones_free: u64,
    /// Bytes per zone.
    pub zone_size: u64,
    /// Zones kept free for the cleaner.
    pub zones_kept: u64,
    /// Bytes the cleaner moved.
    pub cleaner_moved_bytes: u64,
    /// Zones given back: zones the cleaner emptied and zones of blobs no longer readable.
    pub cleaner_zones_freed: u64,
    /// Zones holding values stored out of line (blobs) that reads may still need.
    pub blob_zones: u64,
    /// Bytes of values written out of line (counted in the written bytes below too).
    pub blob_bytes_written: u64,
    /// Bytes written into zones: records and item headers, user writes and relocations.
    pub pm_bytes_written: u64,
    /// Bytes of keys and values users wrote.
    pub user_bytes_written: u64,
    /// Groups committed (each one durable commit of one or more write batches, and of the
    /// cleaner's relocations).
    pub commit_groups: u64,
    /// Times a writer was slowed or waited for space.
    pub stalls: u64,
    /// Zones the cleaner found damaged records in and leaves alone for this run.
    pub damaged_zones: u64,
    /// Time writers spent slowed or waiting for space.
    pub stall_time: Duration,
    /// Whether writers are being slowed now (free zones are low).
    pub slowing_writers: bool,
    /// Snapshots and iterators holding a read point.
    pub snapshots: u64,
    /// The oldest read point held, if any.
    pub oldest_snapshot: Option<u64>,
    /// Keys pessimistic transactions hold locks on.
    pub locked_keys: u64,
    /// The disk levels, if the database has them.
    pub disk: Option<DiskStats>,
    /// The persistent index (`Options::persistent_index`), if on.
    pub persistent_index: Option<PersistentIndexStats>,
}

/// The persistent index's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistentIndexStats {
    /// A failure (a full node pool, damage, I/O) stopped it following the volatile index;
    /// the next open rebuilds it.
    pub stale: bool,
    /// Changes it left out because their key is longer than it holds (each change of such
    /// a key counts its versions).
    pub long_versions: u64,
}

impl Stats {
    /// PM bytes used (zones not free).
    pub fn pm_used_bytes(&self) -> u64 {
        (self.zones - self.zones_free) * self.zone_size
    }

    /// PM bytes free.
    pub fn pm_free_bytes(&self) -> u64 {
        self.zones_free * self.zone_size
    }

    /// PM bytes written per user byte written (0 before any write).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.pm_bytes_written as f64 / self.user_bytes_written as f64
        }
    }
}
