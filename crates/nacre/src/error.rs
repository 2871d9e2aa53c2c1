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
    Halloc(#[from] HallocError),
    /// Persistent memory is full: nothing of this write was applied, everything acknowledged
    /// before it is intact.
    #[error("pool full: {0}")]
    PoolFull(String),
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
    /// A subtable name is empty or too long.
    #[error("subtable name {name:?} invalid: 1 to {max} bytes")]
    BadSubtableName {
        /// Name given.
        name: String,
        /// Longest accepted.
        max: usize,
    },
    /// Options out of range.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// Persistent engine metadata failed validation.
    #[error("corrupt database: {0}")]
    Corrupt(String),
    /// An earlier failure to make a write durable stopped all writes; reopen to recover.
    #[error("database poisoned by an earlier write failure ({0}); reopen it")]
    Poisoned(String),
}

impl Error {
    /// Maps allocator exhaustion to [`Error::PoolFull`], keeping other errors.
    pub(crate) fn from_alloc(e: HallocError) -> Error {
        match e {
            HallocError::Exhausted { .. } => Error::PoolFull(e.to_string()),
            HallocError::Pmem(PmemError::PoolFull { .. }) => Error::PoolFull(e.to_string()),
            other => Error::Halloc(other),
        }
    }
}

/// The message a caught panic carried ("panic" if it carried none that is text).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
