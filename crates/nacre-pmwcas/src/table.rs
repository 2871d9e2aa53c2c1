//! `DescTable`: typed access to the descriptor region (layout in `layout.rs`).
//!
//! Thread safety: a descriptor's count, seq, checksum and entries are written only by the
//! thread that took it off the free list, before its status becomes Undecided; from then on
//! they are immutable until the descriptor is reclaimed, so helpers read them with plain
//! atomic loads. The status word changes only by compare-and-swap.

use std::sync::Arc;

use nacre_pmem::{PmOffset, Pool};

use crate::layout::{
    Entry, CHECKSUM, COUNT, DESCS_AT, DESC_SIZE, ENTRIES_AT, ENTRY_SIZE, SEQ, STATUS,
};

/// The descriptor array of one PMwCAS instance.
pub(crate) struct DescTable {
    pub pool: Arc<Pool>,
    /// Region start.
    pub base: PmOffset,
    /// Number of descriptors.
    pub count: u32,
}

impl DescTable {
    /// Pool offset of descriptor `i`.
    pub fn desc_off(&self, i: u32) -> PmOffset {
        self.base.add(DESCS_AT + DESC_SIZE * u64::from(i))
    }

    /// Pool offset of entry `k` of descriptor `i`.
    pub fn entry_off(&self, i: u32, k: usize) -> PmOffset {
        self.desc_off(i).add(ENTRIES_AT + ENTRY_SIZE * k as u64)
    }

    /// First byte past the region.
    pub fn end(&self) -> u64 {
        self.desc_off(self.count).get()
    }

    /// Whether `[addr, addr + 8)` overlaps the region.
    pub fn covers(&self, addr: u64) -> bool {
        addr + 8 > self.base.get() && addr < self.end()
    }

    /// The descriptor whose pool offset is `off`, if `off` is one.
    pub fn index_of(&self, off: u64) -> Option<u32> {
        let rel = off.checked_sub(self.base.get() + DESCS_AT)?;
        let i = rel / DESC_SIZE;
        (rel % DESC_SIZE == 0 && i < u64::from(self.count)).then_some(i as u32)
    }

    /// The (descriptor, entry) whose entry offset is `off`, if `off` is one.
    pub fn entry_of(&self, off: u64) -> Option<(u32, usize)> {
        let rel = off.checked_sub(self.base.get() + DESCS_AT)?;
        let i = rel / DESC_SIZE;
        let within = (rel % DESC_SIZE).checked_sub(ENTRIES_AT)?;
        (i < u64::from(self.count) && within % ENTRY_SIZE == 0)
            .then_some((i as u32, (within / ENTRY_SIZE) as usize))
    }

    pub fn status_off(&self, i: u32) -> PmOffset {
        self.desc_off(i).add(STATUS)
    }

    pub fn status(&self, i: u32) -> u64 {
        self.pool.load_u64(self.status_off(i))
    }

    pub fn count_of(&self, i: u32) -> u64 {
        self.pool.load_u64(self.desc_off(i).add(COUNT))
    }

    pub fn seq(&self, i: u32) -> u64 {
        self.pool.load_u64(self.desc_off(i).add(SEQ))
    }

    pub fn stored_checksum(&self, i: u32) -> u64 {
        self.pool.load_u64(self.desc_off(i).add(CHECKSUM))
    }

    /// Entry `k` of descriptor `i` (k < MAX_ENTRIES).
    pub fn entry(&self, i: u32, k: usize) -> Entry {
        let at = self.entry_off(i, k);
        Entry {
            addr: PmOffset(self.pool.load_u64(at)),
            old: self.pool.load_u64(at.add(8)),
            new: self.pool.load_u64(at.add(16)),
            policy: self.pool.load_u64(at.add(24)),
        }
    }

    /// The first `n` entries of descriptor `i` (n <= MAX_ENTRIES, checked by the caller).
    pub fn entries(&self, i: u32, n: usize) -> Vec<Entry> {
        (0..n).map(|k| self.entry(i, k)).collect()
    }

    /// Writes descriptor `i`'s immutable part and flushes it (the caller fences).
    ///
    /// Precondition: the caller owns descriptor `i` (took it off the free list) and its status
    /// is free, so no other thread reads these words.
    pub fn write_body(&self, i: u32, seq: u64, entries: &[Entry], checksum: u64) {
        let d = self.desc_off(i);
        let mut buf = Vec::with_capacity((ENTRIES_AT + ENTRY_SIZE * entries.len() as u64) as usize);
        for w in [0, entries.len() as u64, seq, checksum, 0, 0, 0, 0] {
            buf.extend_from_slice(&w.to_le_bytes());
        }
        for e in entries {
            for w in [e.addr.get(), e.old, e.new, e.policy] {
                buf.extend_from_slice(&w.to_le_bytes());
            }
        }
        // The status word (first 8 bytes) is free (0) and stays 0 here: write from COUNT on.
        // SAFETY: the caller owns descriptor `i` (precondition): no other thread reads or
        // writes these bytes until its status is set, after the caller's fence.
        unsafe { self.pool.write(d.add(COUNT), &buf[8..]) };
        self.pool.flush(d, buf.len());
    }
}
