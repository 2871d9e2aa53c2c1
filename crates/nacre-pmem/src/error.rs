//! Typed errors for pool access. Opening never panics on bad input: every way a file can fail
//! to be a usable pool has its own variant with the path and the numbers involved.

use std::path::PathBuf;

/// Result alias used throughout `nacre-pmem`.
pub type Result<T, E = PmemError> = std::result::Result<T, E>;

/// Everything that can go wrong creating, opening or using a pool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmemError {
    /// The file does not start with the Nacre pool magic.
    #[error("{path}: not a Nacre pool (bad magic)")]
    NotAPool {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The pool was written by a format version this build does not read.
    #[error("{path}: pool format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// The file that was opened.
        path: PathBuf,
        /// Version recorded in the superblock.
        found: u32,
        /// Version this build reads and writes.
        supported: u32,
    },
    /// The file is shorter than its superblock says.
    #[error("{path}: pool is truncated: superblock says {expected} bytes, file has {actual}")]
    Truncated {
        /// The file that was opened.
        path: PathBuf,
        /// Size recorded in the superblock.
        expected: u64,
        /// Size of the file on disk.
        actual: u64,
    },
    /// A checksummed part of the superblock does not match its checksum.
    #[error("{path}: bad checksum in {what}")]
    BadChecksum {
        /// The file that was opened.
        path: PathBuf,
        /// Which part failed: "superblock header" or "superblock metadata".
        what: &'static str,
    },
    /// The superblock is internally inconsistent (checksum fine, contents impossible).
    #[error("{path}: corrupt superblock: {detail}")]
    CorruptSuperblock {
        /// The file that was opened.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Another process (or another handle in this process) holds the pool open.
    #[error("{path}: pool is locked by another opener")]
    Locked {
        /// The file that was opened.
        path: PathBuf,
    },
    /// The requested pool size is below the minimum.
    #[error("pool size {size} is too small: the minimum is {min} bytes")]
    TooSmall {
        /// Requested size.
        size: u64,
        /// Smallest size accepted.
        min: u64,
    },
    /// The path (or its directory) cannot be written.
    #[error("{path}: not writable: {source}")]
    NotWritable {
        /// The path that was refused.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// `create` was asked to make a pool where a file already exists.
    #[error("{path}: already exists")]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },
    /// Another process (or another handle in this process) is creating this pool now.
    #[error("{path}: another opener is creating this pool (under {temporary})")]
    CreationInProgress {
        /// The pool being created.
        path: PathBuf,
        /// The temporary file it is being built in.
        temporary: PathBuf,
    },
    /// `open` was asked for a path that does not exist.
    #[error("{path}: no such pool file")]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// The file system could not reserve the pool's space.
    #[error("{path}: cannot reserve {size} bytes: {source}")]
    NoSpace {
        /// The pool file.
        path: PathBuf,
        /// Bytes requested.
        size: u64,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The requested backend cannot run on this file or machine.
    #[error("backend {backend} is unavailable: {reason}")]
    BackendUnavailable {
        /// Backend that was asked for.
        backend: &'static str,
        /// Why it cannot be used.
        reason: String,
    },
    /// The options are contradictory or out of range.
    #[error("invalid pool options: {0}")]
    InvalidOptions(String),
    /// A persistent structure read an offset or length that does not fit in the pool.
    #[error("range {offset:#x}+{len} is outside the pool (size {pool_size})")]
    OutOfBounds {
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// Size of the pool.
        pool_size: u64,
    },
    /// The superblock's region table has no free entry.
    #[error("region table is full ({max} regions)")]
    RegionTableFull {
        /// Number of entries the table holds.
        max: usize,
    },
    /// A region with this name already exists.
    #[error("region {name:?} already exists")]
    RegionExists {
        /// The name asked for.
        name: String,
    },
    /// The region name is empty or too long.
    #[error("region name {name:?} is invalid: 1 to {max} bytes required")]
    BadRegionName {
        /// The name asked for.
        name: String,
        /// Longest name accepted.
        max: usize,
    },
    /// The pool has no unreserved space left for a region of this size.
    #[error("pool full: region {name:?} needs {len} bytes, {free} left of {pool_size}")]
    PoolFull {
        /// The region asked for.
        name: String,
        /// Bytes asked for.
        len: u64,
        /// Bytes still unreserved.
        free: u64,
        /// Size of the pool.
        pool_size: u64,
    },
    /// A root slot index past the end of the root table.
    #[error("root index {index} out of range (0..{max})")]
    BadRootIndex {
        /// The index asked for.
        index: usize,
        /// Number of root slots.
        max: usize,
    },
    /// An I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
}
