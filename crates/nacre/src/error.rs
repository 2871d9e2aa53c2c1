//! Typed errors for the engine.

use nacre_halloc::HallocError;
use nacre_pmem::PmemError;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The pool underneath failed (open errors, I/O during a fence, ...).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// The allocator failed.
    #[error(transparent)]
    Halloc(HallocError),
    /// Persistent memory is full: nothing of this write was applied, everything acknowledged
    /// before it is intact. Deletes make room again.
    #[error("pool full ({free_zones} zones free): {cause}")]
    PoolFull {
        /// What holds the space.
        cause: FullCause,
        /// Zones free when the write found no room.
        free_zones: u64,
    },
    /// No free zone beyond those kept for the cleaner: the write waits for merges and
    /// cleaning (internal; users see a stall, or [`Error::PoolFull`] if nothing can be freed).
    #[error("no free zone: {free} free, {keep} kept for the cleaner")]
    NoSpace {
        /// Free zones.
        free: u64,
        /// Zones kept for relocation.
        keep: u64,
    },
    /// A background worker failed; writes stop until reopen.
    #[error("background {worker} failed: {reason}")]
    Background {
        /// Which worker.
        worker: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A key or value (or a whole batch for one subtable) exceeds what one zone holds.
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Which part.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A subtable name is empty, too long or holds a NUL byte.
    #[error("subtable name {name:?} invalid: 1 to {max} bytes, no NUL")]
    BadSubtableName {
        /// Name given.
        name: String,
        /// Longest accepted.
        max: usize,
    },
    /// The database already holds `max_subtables` subtables (fixed at creation).
    #[error(
        "the database holds its limit of {max} subtables (Options::max_subtables at creation)"
    )]
    TooManySubtables {
        /// The limit.
        max: u64,
    },
    /// `Db::close` found snapshots or iterators alive. The database is closed all the same;
    /// the snapshots can no longer be read through it, and each live iterator keeps the pool
    /// mapped and its file locked until it is dropped.
    #[error("closed with {snapshots} snapshots and {iterators} iterators alive (an iterator keeps the pool mapped and its file locked until it is dropped)")]
    StillOpen {
        /// Live snapshots.
        snapshots: usize,
        /// Live iterators.
        iterators: usize,
    },
    /// Options out of range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// Persistent data failed validation: nothing damaged is ever returned.
    #[error("corrupt database: {what}{}", at.map(|a| format!(" at offset {a:#x}")).unwrap_or_default())]
    Corrupt {
        /// What failed its check, and how.
        what: String,
        /// Where in the pool, when one place is to blame.
        at: Option<u64>,
    },
    /// The disk levels failed: an I/O error, a full disk, or a table that fails its checksum
    /// (`reason` then names it). Nothing is returned from a table that fails its check.
    #[error("disk levels at {}: {what}: {reason}", path.display())]
    Disk {
        /// What the engine was doing.
        what: &'static str,
        /// The subtable's disk directory.
        path: std::path::PathBuf,
        /// lsm-tree's error.
        reason: String,
    },
    /// A batch declared to depend on an earlier one ([`crate::WriteBatch::after`]) that
    /// failed: nothing of it was applied.
    #[error("an earlier write this one depends on failed; nothing of it was applied")]
    DependencyFailed,
    /// A transaction's commit found a key it wrote, or read for update, written by someone
    /// else after the transaction read it (optimistic: after its snapshot; pessimistic: after
    /// it locked the key, by a write that took no lock). Nothing of the transaction was
    /// applied; retry it from the start.
    #[error("transaction conflict: key {} of subtable {subtable:?} was written after this transaction read or locked it; nothing was applied", show_key(key))]
    Conflict {
        /// The subtable.
        subtable: String,
        /// The key written by someone else.
        key: Vec<u8>,
    },
    /// A pessimistic transaction waited longer than its lock timeout for a key another
    /// transaction holds. The operation did nothing; the transaction stays usable.
    #[error(
        "lock timeout after {waited:?} waiting for key {} of subtable {subtable:?}",
        show_key(key)
    )]
    LockTimeout {
        /// The subtable.
        subtable: String,
        /// The key.
        key: Vec<u8>,
        /// How long the transaction waited.
        waited: std::time::Duration,
    },
    /// Waiting for a key would close a cycle of pessimistic transactions each waiting for a
    /// lock the next one holds. The operation did nothing; the transaction stays usable
    /// (usually it is rolled back and retried).
    #[error("deadlock: waiting for key {} of subtable {subtable:?} would close a cycle of {cycle} transactions", show_key(key))]
    Deadlock {
        /// The subtable.
        subtable: String,
        /// The key.
        key: Vec<u8>,
        /// Transactions in the cycle, this one included.
        cycle: usize,
    },
    /// `rollback_to_savepoint` without a savepoint set.
    #[error("no savepoint to roll back to")]
    NoSavepoint,
    /// Persistent memory has no room for this write until a spill to the disk levels
    /// succeeds, and the last spill failed with an I/O error that left the disk levels as they
    /// were (a full disk, a quota, a failed table write). Nothing of this write was applied;
    /// everything acknowledged is intact and readable. The background worker retries the
    /// spill (waiting 100 ms, doubling up to 5 s); once one succeeds, writes go through again
    /// without a reopen.
    #[error("no room in persistent memory until a spill to the disk levels succeeds: {failures} spill attempts failed in a row, the next in {retry_in:?}; the last failed with: {cause}")]
    SpillFailed {
        /// The last failure.
        cause: String,
        /// Its I/O error kind (`StorageFull` for ENOSPC, `QuotaExceeded` for EDQUOT).
        kind: std::io::ErrorKind,
        /// Failed attempts in a row.
        failures: u32,
        /// Time until the next attempt, when the write failed.
        retry_in: std::time::Duration,
    },
    /// An earlier failure to make a write durable stopped all writes; reopen to recover.
    #[error("database poisoned by an earlier write failure ({0}); reopen it")]
    Poisoned(String),
}

/// What fills persistent memory when a write finds no room.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FullCause {
    /// Live data fills the zones: no zone holds enough dead bytes to gain one by cleaning.
    #[error("live data fills the pool: no zone holds enough dead bytes to gain one")]
    LiveData,
    /// Zones that would be free are held by readers (iterators, snapshots) that may still
    /// point into them.
    #[error(
        "{zones} zones wait for readers (iterators, snapshots) that may still point into them"
    )]
    HeldByReaders {
        /// Zones held.
        zones: u64,
    },
    /// One value needs more zones than the pool has besides those kept for the cleaner.
    #[error("a value of {len} bytes needs {needs} zones; the pool has {zones}, {kept} kept for the cleaner")]
    ValueLargerThanPool {
        /// The value's length.
        len: u64,
        /// Zones it needs.
        needs: u64,
        /// Zones in the pool.
        zones: u64,
        /// Zones kept for the cleaner.
        kept: u64,
    },
    /// One batch's records need more zones than the pool has besides those kept for the
    /// cleaner.
    #[error("a batch of {len} record bytes needs {needs} zones; the pool has {zones}, {kept} kept for the cleaner")]
    BatchLargerThanPool {
        /// The batch's record bytes (values stored out of line count by their descriptors).
        len: u64,
        /// Zones its records need.
        needs: u64,
        /// Zones in the pool.
        zones: u64,
        /// Zones kept for the cleaner.
        kept: u64,
    },
    /// A fixed-size allocator pool (zones, memtable or subtable objects) is used up.
    #[error("{0}")]
    Exhausted(String),
}

impl From<HallocError> for Error {
    /// A damaged metadata word is [`Error::Corrupt`] at its offset; the rest stay allocator
    /// errors.
    fn from(e: HallocError) -> Error {
        match e {
            HallocError::DamagedWord { what, at } => Error::Corrupt {
                what: format!("{what} fails its check"),
                at: Some(at),
            },
            other => Error::Halloc(other),
        }
    }
}

impl Error {
    /// Maps allocator exhaustion to [`Error::PoolFull`], keeping other errors.
    pub(crate) fn from_alloc(e: HallocError) -> Error {
        match e {
            HallocError::Exhausted { .. } | HallocError::Pmem(PmemError::PoolFull { .. }) => {
                Error::PoolFull {
                    cause: FullCause::Exhausted(e.to_string()),
                    free_zones: 0,
                }
            }
            other => Error::from(other),
        }
    }

    /// [`Error::Disk`] for lsm-tree's error `e` in the tree at `path`.
    pub(crate) fn disk(
        what: &'static str,
        path: &std::path::Path,
        e: impl std::fmt::Debug,
    ) -> Error {
        Error::Disk {
            what,
            path: path.to_path_buf(),
            reason: format!("{e:?}"),
        }
    }

    /// [`Error::Corrupt`] with no single place to blame.
    pub(crate) fn corrupt(what: impl Into<String>) -> Error {
        Error::Corrupt {
            what: what.into(),
            at: None,
        }
    }

    /// [`Error::Corrupt`] at pool offset `at`.
    pub(crate) fn corrupt_at(what: impl Into<String>, at: nacre_pmem::PmOffset) -> Error {
        Error::Corrupt {
            what: what.into(),
            at: Some(at.get()),
        }
    }
}

/// A key for an error message: printable ASCII as is, other bytes escaped, long keys cut.
fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 64;
    let head = &key[..key.len().min(SHOWN)];
    let mut s = format!("\"{}\"", head.escape_ascii());
    if key.len() > SHOWN {
        s.push_str(&format!(" ({} bytes)", key.len()));
    }
    s
}

/// The message a caught panic carried ("panic" if it carried none that is text).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
