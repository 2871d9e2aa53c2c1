//! The PMwCAS protocol (Wang, Levandoski, Larson, ICDE 2018; seed 002 §6.1): executing,
//! helping and reading.
//!
//! An operation on descriptor D with entries (addr_k, old_k, new_k), sorted by address:
//! 0. (owner, `engine.rs`) write D's body and persist it; persist status Undecided; commit
//!    fresh policy objects.
//! 1. Phase 1, for each word in address order: install a condition pointer to the entry if the
//!    word holds old_k (RDCSS), then replace it by the descriptor pointer with the dirty bit
//!    if D is still Undecided, else by old_k. A word holding another descriptor is helped
//!    first; a dirty word is flushed and cleaned first; any other value decides Failed. When
//!    every word holds D, flush them all, fence, clear their dirty bits.
//! 2. Compare-and-swap the status from Undecided to Succeeded/Failed with its dirty bit,
//!    persist it, clear the dirty bit.
//! 3. Phase 2: replace every pointer to D by new_k (Succeeded) or old_k (otherwise) with the
//!    dirty bit, flush, fence, clear the dirty bits.
//!
//! Any thread that meets D (a reader, or another operation's phase 1) runs steps 1-3 for it.
//!
//! Invariants (the recovery rules in `recovery.rs` rely on them):
//! - P1: a target word holds a plain value (maybe dirty), a descriptor pointer (maybe dirty)
//!   or a condition pointer. A descriptor pointer to D, on media or not, exists only while D's
//!   status is durable and not free, and D's body is durable before it (step 0).
//! - P2: no thread acts on a dirty value: a reader that sees the dirty bit flushes the word,
//!   fences, and clears the bit before returning or using the value. The same holds for the
//!   status word: a decided status is persisted before any phase-2 write, so a phase-2 value
//!   on media always follows a durable decision. (A dirty bit cleared by a compare-and-swap
//!   that raced a later write of the same value cannot expose a non-durable value: a phase-2
//!   value replaces a durable pointer of a durably decided descriptor, which recovery rolls
//!   to the same value until the descriptor is reclaimed, after the word is flushed.)
//! - P3: every descriptor pointer is durable before the status that depends on it: when D's
//!   Succeeded status is on media, every target word on media holds D's pointer, D's new
//!   value, or a later value; recovery rolls such a D forward and anything else back.
//! - P4: a descriptor is reclaimed (status set free) only after its target words were flushed
//!   and fenced with no pointer to it left in them (`engine.rs`), so a free descriptor has no
//!   pointer to it on media and no dirty bit of its making is left on media.
//! - P5: words are installed in address order, so helping never cycles.
//!
//! Thread safety: every function here runs inside an epoch guard held by the caller, so a
//! descriptor it reaches through a pointer is not reclaimed under it. All shared words change
//! only by compare-and-swap (except a descriptor's body, owned by its owner before step 1).

use std::sync::atomic::{AtomicU64, Ordering};

use nacre_pmem::PmOffset;

use crate::error::{PmwcasError, Result};
use crate::layout::{decode_status, status_word, Entry, State, MAX_ENTRIES, STATUS_DIRTY};
use crate::table::DescTable;
use crate::word::{condition_ptr, descriptor_ptr, held, Held, DIRTY};

/// Protocol rules a mutation test can switch off (never set outside such tests).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ProtocolHooks {
    /// The power fails right after the n-th condition pointer is installed (sim pools only).
    pub crash_at_condition: Option<u64>,
}

pub(crate) struct Protocol {
    pub table: DescTable,
    hooks: ProtocolHooks,
    conditions: AtomicU64,
}

impl Protocol {
    pub fn new(table: DescTable, hooks: ProtocolHooks) -> Self {
        Protocol {
            table,
            hooks,
            conditions: AtomicU64::new(0),
        }
    }

    fn word(&self, addr: PmOffset) -> &std::sync::atomic::AtomicU64 {
        let p = self.table.pool.ptr(addr, 8);
        assert!(addr.get() % 8 == 0, "unaligned target word {addr}");
        // SAFETY: `ptr` checked the 8 bytes are inside the mapping, which lives as long as
        // the pool `self.table` holds; the address is 8-aligned (asserted, the mapping is
        // page-aligned) and AtomicU64 has the layout of u64. Target words are only accessed
        // atomically.
        unsafe { &*(p as *const std::sync::atomic::AtomicU64) }
    }

    fn load(&self, addr: PmOffset) -> u64 {
        self.word(addr).load(Ordering::Acquire)
    }

    fn cas(&self, addr: PmOffset, cur: u64, new: u64) -> std::result::Result<u64, u64> {
        self.word(addr)
            .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
    }

    /// Flushes a dirty word, fences, and clears its dirty bit (P2).
    fn clean(&self, addr: PmOffset, w: u64) -> Result<()> {
        self.table.pool.flush(addr, 8);
        self.table.pool.fence()?;
        let _ = self.cas(addr, w, w & !DIRTY);
        Ok(())
    }

    fn bad_pointer(&self, addr: PmOffset, w: u64) -> PmwcasError {
        PmwcasError::Corrupt {
            structure: "target word",
            offset: addr.get(),
            detail: format!("{w:#x} points at no descriptor"),
        }
    }

    /// Reads the value of a target word, helping any operation in flight on it (P2).
    pub fn read(&self, addr: PmOffset) -> Result<u64> {
        loop {
            let w = self.load(addr);
            match held(w) {
                Held::Condition(_) => self.complete_condition(addr, w)?,
                _ if w & DIRTY != 0 => self.clean(addr, w)?,
                Held::Descriptor(d) => {
                    let i = self
                        .table
                        .index_of(d)
                        .ok_or_else(|| self.bad_pointer(addr, w))?;
                    self.run(i)?;
                }
                Held::Value(v) => return Ok(v),
            }
        }
    }

    /// The status of descriptor `i`, persisted first if dirty (P2).
    fn status(&self, i: u32) -> Result<u64> {
        let off = self.table.status_off(i);
        let s = self.table.status(i);
        if s & STATUS_DIRTY != 0 {
            self.table.pool.flush(off, 8);
            self.table.pool.fence()?;
            let _ = self.cas(off, s, s & !STATUS_DIRTY);
        }
        Ok(s & !STATUS_DIRTY)
    }

    fn state(&self, i: u32, seq: u64, s: u64) -> Result<State> {
        match decode_status(s, seq) {
            Ok(Some(st)) => Ok(st),
            Ok(None) => Err(PmwcasError::Corrupt {
                structure: "descriptor",
                offset: self.table.desc_off(i).get(),
                detail: "a pointer leads to a free descriptor".into(),
            }),
            Err(detail) => Err(PmwcasError::Corrupt {
                structure: "descriptor",
                offset: self.table.desc_off(i).get(),
                detail,
            }),
        }
    }

    /// Second half of RDCSS: the word at `addr` holds condition pointer `w`; replace it by the
    /// descriptor pointer if that descriptor is Undecided, else by the entry's old value.
    fn complete_condition(&self, addr: PmOffset, w: u64) -> Result<()> {
        let Held::Condition(entry) = held(w) else {
            return Ok(());
        };
        let (i, k) = self
            .table
            .entry_of(entry)
            .ok_or_else(|| self.bad_pointer(addr, w))?;
        let e = self.table.entry(i, k);
        let s = self.table.status(i) & !STATUS_DIRTY;
        let undecided = decode_status(s, self.table.seq(i)) == Ok(Some(State::Undecided));
        let to = if undecided {
            descriptor_ptr(self.table.desc_off(i).get()) | DIRTY
        } else {
            e.old
        };
        let _ = self.cas(addr, w, to);
        Ok(())
    }

    /// RDCSS of entry `k` of descriptor `i`: returns the value found (`e.old` if this call
    /// installed the descriptor or found its condition pointer completed).
    fn install(&self, i: u32, k: usize, e: &Entry) -> Result<u64> {
        let c = condition_ptr(self.table.entry_off(i, k).get());
        loop {
            match self.cas(e.addr, e.old, c) {
                Ok(_) => {
                    self.inject_condition();
                    self.complete_condition(e.addr, c)?;
                    return Ok(e.old);
                }
                Err(cur) if matches!(held(cur), Held::Condition(_)) => {
                    self.complete_condition(e.addr, cur)?
                }
                Err(cur) => return Ok(cur),
            }
        }
    }

    fn inject_condition(&self) {
        if let Some(n) = self.hooks.crash_at_condition {
            if self.conditions.fetch_add(1, Ordering::Relaxed) + 1 == n {
                if let Some(sim) = self.table.pool.sim() {
                    sim.stop_now();
                }
            }
        }
    }

    /// Runs (or helps) the operation of descriptor `i` to its end; returns whether it
    /// succeeded. Precondition: `i`'s status was durable and not free when the caller found
    /// it (it owns `i`, or read a pointer to it inside its epoch guard).
    pub fn run(&self, i: u32) -> Result<bool> {
        let t = &self.table;
        let seq = t.seq(i);
        let n = (t.count_of(i) as usize).min(MAX_ENTRIES);
        let entries: Vec<(usize, Entry)> = t
            .entries(i, n)
            .into_iter()
            .enumerate()
            .filter(|(_, e)| !e.addr.is_null())
            .collect();
        let me = descriptor_ptr(t.desc_off(i).get());
        let undecided = status_word(seq, State::Undecided);
        if self.status(i)? == undecided {
            let mut outcome = State::Succeeded;
            'words: for (k, e) in &entries {
                loop {
                    let r = self.install(i, *k, e)?;
                    if r == e.old || r & !DIRTY == me {
                        break;
                    }
                    if r & DIRTY != 0 {
                        self.clean(e.addr, r)?;
                        continue;
                    }
                    match held(r) {
                        Held::Descriptor(d) => {
                            let j = t.index_of(d).ok_or_else(|| self.bad_pointer(e.addr, r))?;
                            self.run(j)?;
                        }
                        _ => {
                            outcome = State::Failed;
                            break 'words;
                        }
                    }
                }
            }
            if outcome == State::Succeeded {
                // P3: every pointer durable before the status.
                for (_, e) in &entries {
                    t.pool.flush(e.addr, 8);
                }
                t.pool.fence()?;
                for (_, e) in &entries {
                    let _ = self.cas(e.addr, me | DIRTY, me);
                }
            }
            let decided = status_word(seq, outcome) | STATUS_DIRTY;
            let _ = self.cas(t.status_off(i), undecided, decided);
        }
        let state = self.state(i, seq, self.status(i)?)?;
        let ok = state == State::Succeeded;
        // Phase 2.
        for (_, e) in &entries {
            let v = if ok { e.new } else { e.old };
            loop {
                let w = self.load(e.addr);
                if w & !DIRTY != me {
                    break;
                }
                if self.cas(e.addr, w, v | DIRTY).is_ok() {
                    t.pool.flush(e.addr, 8);
                    break;
                }
            }
        }
        t.pool.fence()?;
        for (_, e) in &entries {
            let v = if ok { e.new } else { e.old };
            let _ = self.cas(e.addr, v | DIRTY, v);
        }
        Ok(ok)
    }
}
