//! `PmOffset`: a persistent pointer, stored as a byte offset from the pool base so that it stays
//! valid wherever the pool is mapped on the next run.

use std::fmt;

/// A byte offset from the start of a pool. Offset 0 is the superblock, so `PmOffset::NULL`
/// never names user data and serves as the null pointer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct PmOffset(pub u64);

impl PmOffset {
    /// The null persistent pointer.
    pub const NULL: PmOffset = PmOffset(0);

    /// True for [`PmOffset::NULL`].
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }

    /// The raw offset.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// This offset moved forward by `bytes`.
    ///
    /// # Panics
    /// On overflow of `u64`, which no valid pool reaches.
    #[must_use]
    pub const fn add(self, bytes: u64) -> PmOffset {
        match self.0.checked_add(bytes) {
            Some(v) => PmOffset(v),
            None => panic!("PmOffset overflow"),
        }
    }
}

impl fmt::Debug for PmOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PmOffset({:#x})", self.0)
    }
}

impl fmt::Display for PmOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl From<u64> for PmOffset {
    fn from(v: u64) -> Self {
        PmOffset(v)
    }
}
