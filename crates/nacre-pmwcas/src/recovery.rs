//! Recovery at open: finish or undo every operation a crash interrupted, using only the
//! descriptor region and the target words it names, so its cost is bounded by the number of
//! descriptors, never by the data.
//!
//! Rules, for each descriptor whose status on media is not free (checked first, all of them,
//! before anything is written: a damaged descriptor fails the open with `Corrupt`):
//! - R1 roll forward: status Succeeded: every target word holding the descriptor's pointer
//!   (dirty or not) gets the entry's new value (P3: the decision is durable and every word
//!   not holding the pointer already holds the new value or a later one).
//! - R2 roll back: status Undecided or Failed: every target word holding the descriptor's
//!   pointer gets the entry's old value (no phase-2 write happened: P2).
//! - R3 condition pointers: a target word holding a condition pointer to one of the
//!   descriptor's entries gets that entry's old value (the RDCSS never completed).
//! - R4 dirty bits: a target word holding a plain value with the dirty bit gets the value
//!   without it (any dirty value on media is a decided one: P2).
//! - R5 memory policies: Succeeded frees the old objects of its free-old entries, anything
//!   else the new objects of its free-new entries, each only if Halloc still has it
//!   committed (N1: it cannot have been reallocated while the descriptor is not free).
//! - R6 the word writes and releases are fenced before any status is set free, so a crash
//!   during recovery leaves it to be run again with the same result.
//!
//! Afterwards (P4 with R1-R4): no target word of any descriptor holds a pointer or a dirty bit.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nacre_halloc::ObjId;
use nacre_pmem::{PmOffset, DATA_START};

use crate::error::{PmwcasError, Result};
use crate::layout::{checksum, decode_policy, decode_status, Entry, Policy, State, MAX_ENTRIES};
use crate::nodes::NodePool;
use crate::options::RecoveryMutation;
use crate::table::DescTable;
use crate::word::{held, is_plain, Held, DIRTY};

/// What recovery found and did at open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Descriptors scanned.
    pub descriptors: u32,
    /// Descriptors whose status was not free.
    pub in_flight: u32,
    /// Of those, Succeeded ones (rolled forward).
    pub rolled_forward: u32,
    /// Of those, Undecided or Failed ones (rolled back).
    pub rolled_back: u32,
    /// Target words that held a descriptor pointer.
    pub pointers_replaced: u32,
    /// Target words that held a condition pointer.
    pub conditions_undone: u32,
    /// Target words whose dirty bit was cleared.
    pub dirty_cleared: u32,
    /// Objects released by memory policies.
    pub objects_freed: u32,
    /// Highest descriptor sequence number found.
    pub max_seq: u64,
    /// Wall time of the descriptor scan and repair.
    pub elapsed: Duration,
}

struct InFlight {
    index: u32,
    state: State,
    entries: Vec<Entry>,
}

fn corrupt(t: &DescTable, i: u32, detail: String) -> PmwcasError {
    PmwcasError::Corrupt {
        structure: "descriptor",
        offset: t.desc_off(i).get(),
        detail,
    }
}

/// Reads and checks descriptor `i`; `None` if free.
fn check(t: &DescTable, nodes: &[NodePool], i: u32) -> Result<Option<InFlight>> {
    let seq = t.seq(i);
    let state = match decode_status(t.status(i), seq) {
        Ok(None) => return Ok(None),
        Ok(Some(s)) => s,
        Err(d) => return Err(corrupt(t, i, d)),
    };
    let n = t.count_of(i);
    if !(1..=MAX_ENTRIES as u64).contains(&n) {
        return Err(corrupt(
            t,
            i,
            format!("entry count {n} not in 1..={MAX_ENTRIES}"),
        ));
    }
    let entries = t.entries(i, n as usize);
    let stored = t.stored_checksum(i);
    let sum = checksum(t.desc_off(i), seq, &entries);
    if stored != sum {
        return Err(corrupt(
            t,
            i,
            format!("checksum {stored:#x}, contents give {sum:#x}"),
        ));
    }
    for (k, e) in entries.iter().enumerate() {
        let a = e.addr.get();
        let in_pool = a.checked_add(8).is_some_and(|end| end <= t.pool.size());
        if !e.addr.is_null() && (a % 8 != 0 || a < DATA_START || !in_pool || t.covers(a)) {
            return Err(corrupt(
                t,
                i,
                format!("entry {k}: target {a:#x} is not a word of the data area"),
            ));
        }
        if !is_plain(e.old) || !is_plain(e.new) {
            return Err(corrupt(t, i, format!("entry {k}: value with flag bits")));
        }
        let Some((policy, p)) = decode_policy(e.policy) else {
            return Err(corrupt(
                t,
                i,
                format!("entry {k}: bad policy word {:#x}", e.policy),
            ));
        };
        if policy == Policy::None {
            if e.addr.is_null() {
                return Err(corrupt(t, i, format!("entry {k}: neither word nor policy")));
            }
            continue;
        }
        let Some(pool) = nodes.get(p as usize) else {
            return Err(corrupt(
                t,
                i,
                format!("entry {k}: node pool {p} of {} opened", nodes.len()),
            ));
        };
        for (frees, v) in [(policy.frees_old(), e.old), (policy.frees_new(), e.new)] {
            if frees && pool.id(PmOffset(v)).is_err() {
                return Err(corrupt(
                    t,
                    i,
                    format!("entry {k}: {v:#x} is no object of node pool {p}"),
                ));
            }
        }
    }
    Ok(Some(InFlight {
        index: i,
        state,
        entries,
    }))
}

/// Runs rules R1-R6 over the table. Single-threaded: runs before the instance is shared.
pub(crate) fn recover(
    t: &DescTable,
    nodes: &[NodePool],
    mutation: Option<RecoveryMutation>,
) -> Result<RecoveryStats> {
    let start = Instant::now();
    let off = |m| mutation == Some(m);
    let mut stats = RecoveryStats {
        descriptors: t.count,
        ..Default::default()
    };
    let mut found = Vec::new();
    for i in 0..t.count {
        stats.max_seq = stats.max_seq.max(t.seq(i));
        if let Some(f) = check(t, nodes, i)? {
            found.push(f);
        }
    }
    let mut frees: Vec<BTreeSet<ObjId>> = vec![BTreeSet::new(); nodes.len()];
    for f in &found {
        stats.in_flight += 1;
        let forward = f.state == State::Succeeded && !off(RecoveryMutation::RollBackSucceeded);
        if forward {
            stats.rolled_forward += 1;
        } else {
            stats.rolled_back += 1;
        }
        let me = t.desc_off(f.index).get();
        for (k, e) in f.entries.iter().enumerate() {
            if e.addr.is_null() {
                continue;
            }
            let w = t.pool.load_u64(e.addr);
            let fix = match held(w) {
                Held::Descriptor(d) if d == me => {
                    if !forward && off(RecoveryMutation::SkipRollBack) {
                        None
                    } else {
                        stats.pointers_replaced += 1;
                        Some(if forward { e.new } else { e.old })
                    }
                }
                Held::Condition(c)
                    if c == t.entry_off(f.index, k).get()
                        && !off(RecoveryMutation::SkipConditionRestore) =>
                {
                    stats.conditions_undone += 1;
                    Some(e.old)
                }
                Held::Value(v) if w & DIRTY != 0 && !off(RecoveryMutation::SkipDirtyClear) => {
                    stats.dirty_cleared += 1;
                    Some(v)
                }
                _ => None,
            };
            if let Some(v) = fix {
                t.pool.store_u64(e.addr, v);
            }
        }
        if off(RecoveryMutation::SkipPolicies) {
            continue;
        }
        let succeeded = f.state == State::Succeeded;
        for e in &f.entries {
            let Some((policy, p)) = decode_policy(e.policy) else {
                continue;
            };
            let obj = if succeeded && policy.frees_old() {
                e.old
            } else if !succeeded && policy.frees_new() {
                e.new
            } else {
                continue;
            };
            let pool = &nodes[p as usize];
            let id = pool.id(PmOffset(obj))?;
            if off(RecoveryMutation::IgnoreCommittedCheck) || pool.committed_id(id)? {
                frees[p as usize].insert(id);
            }
        }
    }
    if off(RecoveryMutation::FreeBeforeRepairsDurable) {
        for f in &found {
            t.pool.store_u64(t.status_off(f.index), 0);
        }
    }
    t.pool.fence()?;
    for (pool, ids) in nodes.iter().zip(&frees) {
        if !ids.is_empty() {
            let ids: Vec<ObjId> = ids.iter().copied().collect();
            stats.objects_freed += ids.len() as u32;
            pool.release(&ids)?;
        }
    }
    for f in &found {
        t.pool.store_u64(t.status_off(f.index), 0);
    }
    t.pool.fence()?;
    stats.elapsed = start.elapsed();
    if stats.in_flight > 0 {
        tracing::info!(?stats, "pmwcas recovery finished interrupted operations");
    }
    Ok(stats)
}
