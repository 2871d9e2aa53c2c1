//! Typed errors for PMwCAS.

use nacre_halloc::HallocError;
use nacre_pmem::PmemError;

/// Result alias for PMwCAS.
pub type Result<T, E = PmwcasError> = std::result::Result<T, E>;

/// Everything PMwCAS can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmwcasError {
    /// The pool failed (an I/O error at a fence, a full region table, ...).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// The allocator failed.
    #[error(transparent)]
    Halloc(#[from] HallocError),
    /// Persistent PMwCAS metadata failed validation at open: damaged media, never a crash.
    #[error("corrupt {structure} at offset {offset:#x}: {detail}")]
    Corrupt {
        /// Which structure: "descriptor region header" or "descriptor".
        structure: &'static str,
        /// Pool offset of the structure (of the descriptor, for descriptors).
        offset: u64,
        /// What is wrong, with the numbers involved.
        detail: String,
    },
    /// A descriptor already holds its maximum number of entries.
    #[error("a descriptor holds at most {max} entries")]
    TooManyEntries {
        /// Entries a descriptor holds.
        max: usize,
    },
    /// The same target word was added twice to one descriptor.
    #[error("word {addr:#x} is already part of this descriptor")]
    DuplicateAddress {
        /// The repeated address.
        addr: u64,
    },
    /// A target address PMwCAS cannot manage.
    #[error("word {addr:#x} cannot be a PMwCAS target: {reason}")]
    BadAddress {
        /// The address given.
        addr: u64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A value with one of the reserved flag bits (61..63) set.
    #[error("value {value:#x} uses reserved flag bits 61..63")]
    ValueHasFlagBits {
        /// The value given.
        value: u64,
    },
    /// No descriptor became free in time: every descriptor is in use or awaiting reclamation.
    #[error("all {count} descriptors are in use")]
    NoFreeDescriptor {
        /// Descriptors in the pool.
        count: u32,
    },
    /// Every epoch slot is taken by a live thread.
    #[error("more than {max} threads use this PMwCAS instance at once")]
    TooManyThreads {
        /// Slots available.
        max: usize,
    },
    /// A memory-policy operand is not an object of the node pool named.
    #[error("{offset:#x} is not an object of node pool {pool:?}")]
    NotAnObject {
        /// The offset given.
        offset: u64,
        /// The node pool's name.
        pool: String,
    },
    /// A fresh-object operand was not allocated by [`crate::NodePool::alloc`] or was already
    /// handed to a descriptor.
    #[error("object {offset:#x} of node pool {pool:?} is not a fresh allocation")]
    NotFresh {
        /// The object's offset.
        offset: u64,
        /// The node pool's name.
        pool: String,
    },
    /// The node pool does not belong to this PMwCAS instance.
    #[error("node pool {pool:?} does not belong to this PMwCAS instance")]
    ForeignNodePool {
        /// The node pool's name.
        pool: String,
    },
    /// The options are out of range or disagree with what the pool holds.
    #[error("invalid PMwCAS options: {0}")]
    InvalidOptions(String),
}
