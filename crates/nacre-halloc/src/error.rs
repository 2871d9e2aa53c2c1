//! Typed errors for Halloc.

use nacre_pmem::PmemError;

/// Result alias for Halloc.
pub type Result<T, E = HallocError> = std::result::Result<T, E>;

/// Everything Halloc can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HallocError {
    /// The underlying pool failed (I/O, full region table, ...).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// No free object is left.
    #[error(
        "object pool {pool:?} exhausted: all {count} objects of {object_size} bytes are in use"
    )]
    Exhausted {
        /// Pool name.
        pool: String,
        /// Objects in the pool.
        count: u64,
        /// Size of each object.
        object_size: u64,
    },
    /// Object size outside what a pool accepts.
    #[error("object size {size} out of range ({min}..={max} bytes)")]
    ObjectSizeOutOfRange {
        /// Size asked for.
        size: u64,
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// A pool needs at least one object.
    #[error("object pool {pool:?} must hold at least one object")]
    EmptyPool {
        /// Pool name.
        pool: String,
    },
    /// `release`, `commit` or `abort` on an object that is not in the state it requires.
    #[error("object {id} of pool {pool:?} is {state}, cannot {op}")]
    BadObjectState {
        /// Pool name.
        pool: String,
        /// Object index.
        id: u64,
        /// Its current state.
        state: &'static str,
        /// Operation refused.
        op: &'static str,
    },
    /// An object index past the end of the pool.
    #[error("object {id} out of range for pool {pool:?} ({count} objects)")]
    NoSuchObject {
        /// Pool name.
        pool: String,
        /// Index given.
        id: u64,
        /// Objects in the pool.
        count: u64,
    },
    /// A pool of this name exists with a different shape.
    #[error("pool {name:?} exists with {found}, asked for {asked}")]
    ShapeMismatch {
        /// Pool name.
        name: String,
        /// Shape on media.
        found: String,
        /// Shape requested.
        asked: String,
    },
    /// Persistent Halloc metadata failed validation.
    #[error("corrupt halloc metadata: {0}")]
    Corrupt(String),
    /// A checked word of engine metadata (a memtable or subtable object field) fails its
    /// check: damaged media, never a crash (each such word is written with one atomic store).
    #[error("{what} at offset {at:#x} fails its check")]
    DamagedWord {
        /// Which field.
        what: &'static str,
        /// Its pool offset.
        at: u64,
    },
    /// The name does not fit the registry.
    #[error("pool name {name:?} invalid: 1 to {max} bytes, no NUL")]
    BadName {
        /// Name given.
        name: String,
        /// Longest accepted.
        max: usize,
    },
    /// The registry has no free entry.
    #[error("halloc registry full ({max} pools)")]
    RegistryFull {
        /// Entries the registry holds.
        max: usize,
    },
}
