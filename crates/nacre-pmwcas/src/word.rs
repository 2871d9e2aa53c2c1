//! Target words: the flag bits PMwCAS reserves in every 8-byte word it manages.
//!
//! ```text
//! bit 63  DIRTY   the word was written and may not be durable yet: a reader flushes it, fences,
//!                 and clears the bit before acting on the value (invariant P2)
//! bit 62  MWCAS   the other bits are the pool offset of a descriptor: a PMwCAS is in flight
//! bit 61  RDCSS   the other bits are the pool offset of one word entry of a descriptor: phase 1
//!                 is installing that descriptor here, conditioned on its status
//! 0..61           the value (user values must leave bits 61..63 clear)
//! ```
//! DIRTY may accompany a plain value or an MWCAS pointer; an RDCSS pointer is never dirty.

/// Set on a word whose latest store may not have reached media yet.
pub const DIRTY: u64 = 1 << 63;
/// Set on a word holding a descriptor pointer.
pub const MWCAS: u64 = 1 << 62;
/// Set on a word holding a conditional (RDCSS) pointer to a descriptor's word entry.
pub const RDCSS: u64 = 1 << 61;
/// Every bit PMwCAS reserves.
pub const FLAGS: u64 = DIRTY | MWCAS | RDCSS;
/// Largest value a target word may hold.
pub const MAX_VALUE: u64 = !FLAGS;

/// What a word holds, ignoring its dirty bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// A plain value.
    Value(u64),
    /// A pointer to the descriptor at this pool offset.
    Descriptor(u64),
    /// A conditional pointer to the word entry at this pool offset.
    Condition(u64),
}

/// Classifies a raw word.
pub(crate) fn held(w: u64) -> Held {
    let v = w & MAX_VALUE;
    if w & RDCSS != 0 {
        Held::Condition(v)
    } else if w & MWCAS != 0 {
        Held::Descriptor(v)
    } else {
        Held::Value(v)
    }
}

/// The word that points at the descriptor at `desc_off` (without the dirty bit).
pub(crate) fn descriptor_ptr(desc_off: u64) -> u64 {
    MWCAS | desc_off
}

/// The word that conditionally points at the word entry at `entry_off`.
pub(crate) fn condition_ptr(entry_off: u64) -> u64 {
    RDCSS | entry_off
}

/// Whether `v` is a value a target word may hold (no reserved bit set).
pub fn is_plain(v: u64) -> bool {
    v & FLAGS == 0
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn classification_round_trips() {
        assert_eq!(held(42), Held::Value(42));
        assert_eq!(held(42 | DIRTY), Held::Value(42));
        assert_eq!(held(descriptor_ptr(4096)), Held::Descriptor(4096));
        assert_eq!(held(descriptor_ptr(4096) | DIRTY), Held::Descriptor(4096));
        assert_eq!(held(condition_ptr(4160)), Held::Condition(4160));
        assert!(is_plain(MAX_VALUE));
        assert!(!is_plain(MAX_VALUE + 1));
    }
}
