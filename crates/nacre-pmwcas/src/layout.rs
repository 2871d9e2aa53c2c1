//! The descriptor region on media (docs/format.md, "PMwCAS"): a header line, then a fixed
//! array of descriptors.
//!
//! ```text
//! region header (64 B)
//! +0   magic "NACREPMW"        +8   layout version (1)
//! +16  descriptor count        +24  entries per descriptor (MAX_ENTRIES)
//! +32  descriptor size         +40  offset of the first descriptor from the region start
//! +48  reserved (0)            +56  crc32c of bytes 0..56
//!
//! descriptor (DESC_SIZE = 320 B, 64-aligned)
//! +0   status    0 = free; else seq_lo32 << 8 | state code, bit 63 = dirty
//! +8   count     entries in use (1..=MAX_ENTRIES)
//! +16  seq       incarnation number, unique per use of the descriptor
//! +24  checksum  crc32c of count, seq, the used entries and the descriptor's own offset
//! +32  reserved (0)
//! +64  entries: MAX_ENTRIES x 32 B { addr, old, new, policy }
//! ```
//! State codes are bytes at Hamming distance 4 from each other and from 0, and carry the
//! descriptor's sequence number, so a flipped status byte reads as corrupt rather than as
//! another state. An entry with `addr` 0 names no target word: it only carries a memory policy.

use nacre_pmem::PmOffset;

/// Entries (target words plus memory-only entries) one descriptor holds. BzTree's largest
/// operation (a split or merge installation: three words, plus up to three nodes to free on
/// success or on failure) fits.
pub const MAX_ENTRIES: usize = 8;
/// Bytes per descriptor.
pub const DESC_SIZE: u64 = 64 + 32 * MAX_ENTRIES as u64;
/// Offset of the first descriptor from the region start.
pub const DESCS_AT: u64 = 64;
/// Offset of the first entry from the descriptor start.
pub const ENTRIES_AT: u64 = 64;
/// Bytes per entry.
pub const ENTRY_SIZE: u64 = 32;

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"NACREPMW");
pub(crate) const LAYOUT_VERSION: u64 = 1;

pub(crate) const STATUS: u64 = 0;
pub(crate) const COUNT: u64 = 8;
pub(crate) const SEQ: u64 = 16;
pub(crate) const CHECKSUM: u64 = 24;

/// Bytes of region a table of `count` descriptors needs.
pub fn region_len(count: u32) -> u64 {
    DESCS_AT + DESC_SIZE * u64::from(count)
}

/// The decided or undecided state of an in-use descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Phase 1 may still install pointers.
    Undecided,
    /// Every target word takes its new value.
    Succeeded,
    /// Every target word keeps (gets back) its old value.
    Failed,
}

const CODE_UNDECIDED: u64 = 0x0F;
const CODE_SUCCEEDED: u64 = 0x33;
const CODE_FAILED: u64 = 0x3C;
/// Dirty bit of the status word (its latest store may not be durable).
pub(crate) const STATUS_DIRTY: u64 = 1 << 63;

impl State {
    fn code(self) -> u64 {
        match self {
            State::Undecided => CODE_UNDECIDED,
            State::Succeeded => CODE_SUCCEEDED,
            State::Failed => CODE_FAILED,
        }
    }
}

/// The status word of an in-use descriptor of incarnation `seq`.
pub(crate) fn status_word(seq: u64, state: State) -> u64 {
    (seq & 0xFFFF_FFFF) << 8 | state.code()
}

/// Decodes a status word (dirty bit ignored): `Ok(None)` for a free descriptor, `Err` with
/// what is wrong for a value no writer produces.
pub(crate) fn decode_status(w: u64, seq: u64) -> Result<Option<State>, String> {
    let w = w & !STATUS_DIRTY;
    if w == 0 {
        return Ok(None);
    }
    if w >> 40 != 0 || (w >> 8) & 0xFFFF_FFFF != seq & 0xFFFF_FFFF {
        return Err(format!(
            "status {w:#x} does not carry the descriptor's sequence number {seq}"
        ));
    }
    match w & 0xFF {
        CODE_UNDECIDED => Ok(Some(State::Undecided)),
        CODE_SUCCEEDED => Ok(Some(State::Succeeded)),
        CODE_FAILED => Ok(Some(State::Failed)),
        c => Err(format!("unknown state code {c:#x}")),
    }
}

/// What happens to the memory an entry's old and new values point to (seed 002 §6.1, the
/// paper's "memory recycling policy"). Values under a policy are offsets of objects of one
/// [`crate::NodePool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The values are not pointers to managed memory.
    None,
    /// On success, the object the old value points to is freed (once no thread can still be
    /// reading it).
    FreeOldOnSuccess,
    /// On failure, the object the new value points to is freed. It must be a fresh allocation
    /// ([`crate::NodePool::alloc`]); the descriptor commits it before phase 1.
    FreeNewOnFailure,
    /// Both: the old object is freed on success, the fresh new one on failure.
    FreeOne,
}

impl Policy {
    fn code(self) -> u64 {
        match self {
            Policy::None => 0,
            Policy::FreeOldOnSuccess => 1,
            Policy::FreeNewOnFailure => 2,
            Policy::FreeOne => 3,
        }
    }

    /// Whether the old value's object is freed when the operation succeeds.
    pub fn frees_old(self) -> bool {
        matches!(self, Policy::FreeOldOnSuccess | Policy::FreeOne)
    }

    /// Whether the new value's object is freed when the operation fails.
    pub fn frees_new(self) -> bool {
        matches!(self, Policy::FreeNewOnFailure | Policy::FreeOne)
    }
}

/// The policy word: code | node pool index << 8.
pub(crate) fn policy_word(p: Policy, pool: u8) -> u64 {
    if p == Policy::None {
        0
    } else {
        p.code() | u64::from(pool) << 8
    }
}

/// Decodes a policy word into the policy and its node pool index.
pub(crate) fn decode_policy(w: u64) -> Option<(Policy, u8)> {
    if w >> 16 != 0 {
        return None;
    }
    let pool = (w >> 8) as u8;
    let p = match w & 0xFF {
        0 if pool == 0 => Policy::None,
        1 => Policy::FreeOldOnSuccess,
        2 => Policy::FreeNewOnFailure,
        3 => Policy::FreeOne,
        _ => return None,
    };
    Some((p, pool))
}

/// One entry of a descriptor as stored on media.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Target word (NULL: a memory-only entry).
    pub addr: PmOffset,
    pub old: u64,
    pub new: u64,
    /// Encoded policy word.
    pub policy: u64,
}

/// The checksum of a descriptor's immutable part.
pub(crate) fn checksum(desc: PmOffset, seq: u64, entries: &[Entry]) -> u64 {
    let mut c = crc32c::crc32c(&desc.get().to_le_bytes());
    c = crc32c::crc32c_append(c, &(entries.len() as u64).to_le_bytes());
    c = crc32c::crc32c_append(c, &seq.to_le_bytes());
    for e in entries {
        for w in [e.addr.get(), e.old, e.new, e.policy] {
            c = crc32c::crc32c_append(c, &w.to_le_bytes());
        }
    }
    u64::from(c) | 1 << 32
}

/// The region header words (checksum last).
pub(crate) fn header_words(count: u32) -> [u64; 8] {
    let mut h = [
        MAGIC,
        LAYOUT_VERSION,
        u64::from(count),
        MAX_ENTRIES as u64,
        DESC_SIZE,
        DESCS_AT,
        0,
        0,
    ];
    h[7] = header_checksum(&h);
    h
}

pub(crate) fn header_checksum(h: &[u64; 8]) -> u64 {
    let bytes: Vec<u8> = h[..7].iter().flat_map(|w| w.to_le_bytes()).collect();
    u64::from(crc32c::crc32c(&bytes))
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn status_words_decode_and_reject_flips() {
        for s in [State::Undecided, State::Succeeded, State::Failed] {
            let w = status_word(77, s);
            assert_eq!(decode_status(w, 77), Ok(Some(s)));
            assert_eq!(decode_status(w | STATUS_DIRTY, 77), Ok(Some(s)));
            assert!(decode_status(w, 78).is_err());
            for byte in 0..5 {
                assert!(
                    decode_status(w ^ 0xFF << (8 * byte), 77).is_err(),
                    "{s:?} flip in byte {byte}"
                );
            }
        }
        assert_eq!(decode_status(0, 5), Ok(None));
    }

    #[test]
    fn policies_round_trip() {
        for p in [
            Policy::None,
            Policy::FreeOldOnSuccess,
            Policy::FreeNewOnFailure,
            Policy::FreeOne,
        ] {
            let pool = if p == Policy::None { 0 } else { 3 };
            assert_eq!(decode_policy(policy_word(p, pool)), Some((p, pool)));
        }
        assert_eq!(decode_policy(4), None);
        assert_eq!(decode_policy(1 << 20), None);
    }
}
