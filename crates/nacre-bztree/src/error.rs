//! Typed errors for the BzTree.

use nacre_halloc::HallocError;
use nacre_pmem::PmemError;
use nacre_pmwcas::PmwcasError;

/// Result alias for the BzTree.
pub type Result<T, E = BzError> = std::result::Result<T, E>;

/// Everything the BzTree can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BzError {
    /// The pool failed (an I/O error at a fence, a full region table, ...).
    #[error(transparent)]
    Pmem(#[from] PmemError),
    /// The allocator failed (e.g. the node pool is exhausted).
    #[error(transparent)]
    Halloc(#[from] HallocError),
    /// PMwCAS failed (or found its own metadata damaged).
    #[error(transparent)]
    Pmwcas(PmwcasError),
    /// A node or the tree header failed validation: damaged media, never a crash.
    #[error("corrupt {structure} at offset {offset:#x}: {detail}")]
    Corrupt {
        /// Which structure ("leaf status", "record metadata", "record", "node info", ...).
        structure: &'static str,
        /// Pool offset of the node (or header) holding it.
        offset: u64,
        /// What is wrong, with the numbers involved.
        detail: String,
    },
    /// A key longer than the tree's maximum.
    #[error("key of {len} bytes exceeds the maximum of {max}")]
    KeyTooLong {
        /// The key's length.
        len: usize,
        /// The tree's maximum.
        max: usize,
    },
    /// A value using the bits PMwCAS reserves (61..63).
    #[error("value {value:#x} is not below 2^61")]
    ValueTooLarge {
        /// The value given.
        value: u64,
    },
    /// An insert waited too long for an earlier insert into the same node to finish (its
    /// thread died or stalls).
    #[error("an insert into node {node:#x} waited too long for a concurrent insert")]
    Stalled {
        /// The node.
        node: u64,
    },
    /// The options are out of range or disagree with what the pool holds.
    #[error("invalid BzTree options: {0}")]
    InvalidOptions(String),
}

impl From<PmwcasError> for BzError {
    fn from(e: PmwcasError) -> Self {
        match e {
            PmwcasError::Halloc(h) => BzError::Halloc(h),
            PmwcasError::Pmem(p) => BzError::Pmem(p),
            other => BzError::Pmwcas(other),
        }
    }
}

/// A `Corrupt` error.
pub(crate) fn corrupt(structure: &'static str, offset: u64, detail: String) -> BzError {
    BzError::Corrupt {
        structure,
        offset,
        detail,
    }
}
