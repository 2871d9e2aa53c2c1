//! `Engine`: the volatile side of a PMwCAS instance: descriptor allocation, execution by the
//! owner, epoch-based reclamation and the memory policies applied at reclamation.
//!
//! Invariants:
//! - D1: a descriptor index is in exactly one place: the free list, one owner (a `Descriptor`
//!   being built or executed), or the epoch limbo list. Its status on media is free exactly
//!   while it is on the free list or being built.
//! - D2 (owner, before phase 1): body persisted, then status Undecided persisted, then fresh
//!   policy objects committed (N2).
//! - D3 (reclamation, after the epoch grace period, E3): flush every target word and fence
//!   (P4); under the allocation gate release the objects the outcome's policy frees, then
//!   store the free status and fence (N1); only then push the index on the free list.
//!
//! Thread safety: `Engine` is `Send + Sync`; executing, helping and reclaiming run on any
//! thread; reclamation batches are disjoint (each taken from the limbo list under its lock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nacre_halloc::ObjId;

use crate::epoch::Epochs;
use crate::error::{PmwcasError, Result};
use crate::free_list::FreeList;
use crate::layout::{checksum, decode_policy, status_word, Entry, State, MAX_ENTRIES};
use crate::nodes::{lock_gate, Gate, NodePool};
use crate::protocol::Protocol;

/// How long `take` waits for a descriptor before reporting that none is free.
const TAKE_PATIENCE: Duration = Duration::from_secs(5);

/// A finished operation awaiting reclamation.
pub(crate) struct Retired {
    pub index: u32,
    pub succeeded: bool,
}

pub(crate) struct Engine {
    pub id: u64,
    pub protocol: Protocol,
    pub epochs: Epochs<Retired>,
    pub free: FreeList,
    pub nodes: Vec<NodePool>,
    pub gate: Gate,
    pub seq: AtomicU64,
    pub reclaim_batch: usize,
}

impl Engine {
    /// Takes a free descriptor, reclaiming finished ones if none is free. Waits (up to
    /// `TAKE_PATIENCE`) for threads whose guards hold the epoch back: on a loaded machine one
    /// may be descheduled inside its guard for a whole time slice.
    pub fn take(&self) -> Result<u32> {
        let start = Instant::now();
        for attempt in 0u64.. {
            if let Some(i) = self.free.pop() {
                return Ok(i);
            }
            self.collect()?;
            if attempt > 4 {
                if start.elapsed() > TAKE_PATIENCE {
                    break;
                }
                if attempt > 100 {
                    std::thread::sleep(Duration::from_micros(50));
                } else {
                    std::thread::yield_now();
                }
            }
        }
        Err(PmwcasError::NoFreeDescriptor {
            count: self.protocol.table.count,
        })
    }

    /// Takes a free descriptor without waiting (one reclamation pass if none is free).
    pub fn try_take(&self) -> Result<Option<u32>> {
        if let Some(i) = self.free.pop() {
            return Ok(Some(i));
        }
        self.collect()?;
        Ok(self.free.pop())
    }

    /// Gives back a descriptor that was taken but never executed (its status is still free).
    pub fn give_back(&self, i: u32) {
        self.free.push(i);
    }

    /// Executes descriptor `i` with `entries` (sorted by address by the caller, validated)
    /// and the fresh objects it commits (D2); returns whether it succeeded.
    pub fn execute(&self, i: u32, entries: &[Entry], fresh: &[(u8, ObjId)]) -> Result<bool> {
        let t = &self.protocol.table;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let sum = checksum(t.desc_off(i), seq, entries);
        t.write_body(i, seq, entries, sum);
        t.pool.fence()?;
        t.pool
            .persist_u64(t.status_off(i), status_word(seq, State::Undecided))?;
        for &(p, id) in fresh {
            self.nodes[p as usize].commit(id)?;
        }
        let ok = {
            let _g = self.epochs.pin()?;
            self.protocol.run(i)?
        };
        let waiting = self.epochs.retire(Retired {
            index: i,
            succeeded: ok,
        });
        if waiting >= self.reclaim_batch {
            self.collect()?;
        }
        Ok(ok)
    }

    /// Reclaims every finished descriptor the epochs allow (D3).
    pub fn collect(&self) -> Result<usize> {
        let batch = self.epochs.collect();
        if batch.is_empty() {
            return Ok(0);
        }
        let t = &self.protocol.table;
        let mut frees: Vec<Vec<ObjId>> = vec![Vec::new(); self.nodes.len()];
        for r in &batch {
            let n = (t.count_of(r.index) as usize).min(MAX_ENTRIES);
            for e in t.entries(r.index, n) {
                if !e.addr.is_null() {
                    t.pool.flush(e.addr, 8);
                }
                let Some((policy, p)) = decode_policy(e.policy) else {
                    continue;
                };
                let obj = if r.succeeded && policy.frees_old() {
                    e.old
                } else if !r.succeeded && policy.frees_new() {
                    e.new
                } else {
                    continue;
                };
                if let Some(pool) = self.nodes.get(p as usize) {
                    frees[p as usize].push(pool.id(obj.into())?);
                }
            }
        }
        t.pool.fence()?;
        {
            let _g = lock_gate(&self.gate);
            for (pool, ids) in self.nodes.iter().zip(&frees) {
                if !ids.is_empty() {
                    pool.release(ids)?;
                }
            }
            for r in &batch {
                t.pool.store_u64(t.status_off(r.index), 0);
            }
            t.pool.fence()?;
        }
        for r in &batch {
            self.free.push(r.index);
        }
        tracing::trace!(descriptors = batch.len(), "pmwcas reclaimed descriptors");
        Ok(batch.len())
    }
}
