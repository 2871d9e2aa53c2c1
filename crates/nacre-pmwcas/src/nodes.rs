//! `NodePool`: memory whose lifetime PMwCAS memory policies manage (seed 002 §6.5, "Memory
//! Lifetime"): fixed-size Halloc objects, e.g. BzTree nodes.
//!
//! An object is allocated with [`NodePool::alloc`] (taken off Halloc's freelist, not
//! committed), filled and persisted by the caller, then handed to a descriptor as the new
//! value of an entry under [`crate::Policy::FreeNewOnFailure`] or [`crate::Policy::FreeOne`]
//! (or as a memory-only entry). The descriptor commits it after its own body is durable and
//! before phase 1, so from then on exactly one durable record owns it: the descriptor until
//! the operation is decided, then the target word (success) or the descriptor's failure
//! policy. Objects a policy frees are released only when the descriptor is reclaimed.
//!
//! Invariants:
//! - N1: an object is released by a policy only while the deciding descriptor's status is
//!   durable and not free, and the descriptor's free status is made durable before the object
//!   can be allocated again: releases and the free status are written under `gate`, which
//!   `alloc` also takes. Recovery therefore releases an object named by a decided policy iff
//!   Halloc still has it committed: exactly once.
//! - N2: a fresh object is committed only after the descriptor naming it is durable with an
//!   Undecided status, so a crash before that leaves it uncommitted and Halloc reclaims it.
//!
//! Thread safety: `alloc` and reclamation serialise on `gate`; `fresh` flags change by
//! compare-and-swap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nacre_halloc::{ObjId, ObjectPool};
use nacre_pmem::PmOffset;

use crate::error::{PmwcasError, Result};

/// Shape of a node pool, given in [`crate::PmwcasOptions::node_pools`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePoolSpec {
    /// Halloc pool name (at most 20 bytes).
    pub name: String,
    /// Bytes per object.
    pub object_size: u64,
    /// Number of objects.
    pub count: u64,
}

/// The allocation gate shared by every node pool of one PMwCAS instance (invariant N1).
pub(crate) type Gate = Arc<Mutex<()>>;

pub(crate) fn lock_gate(g: &Gate) -> MutexGuard<'_, ()> {
    // The gate guards no data of its own: a poisoned lock is still a valid lock.
    g.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pool of fixed-size objects whose release PMwCAS memory policies decide.
pub struct NodePool {
    index: u8,
    owner: u64,
    objs: Arc<ObjectPool>,
    gate: Gate,
    fresh: Vec<AtomicBool>,
}

impl std::fmt::Debug for NodePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePool")
            .field("name", &self.objs.name())
            .field("index", &self.index)
            .finish()
    }
}

impl NodePool {
    pub(crate) fn new(index: u8, owner: u64, objs: Arc<ObjectPool>, gate: Gate) -> Self {
        let n = objs.shape().count as usize;
        NodePool {
            index,
            owner,
            objs,
            gate,
            fresh: (0..n).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Allocates an object. Its contents are undefined: fill and persist them, then hand it to
    /// a descriptor (or give it back with [`NodePool::abort`]). A crash before a descriptor
    /// commits it returns it to the pool.
    pub fn alloc(&self) -> Result<PmOffset> {
        let _g = lock_gate(&self.gate);
        let id = self.objs.get()?;
        self.fresh[id.0 as usize].store(true, Ordering::Release);
        Ok(self.objs.offset(id))
    }

    /// Gives back a fresh object that was never handed to a descriptor.
    pub fn abort(&self, off: PmOffset) -> Result<()> {
        let id = self.take_fresh(off)?;
        self.objs.abort(id)?;
        Ok(())
    }

    /// Whether the object at `off` is committed (as media says).
    pub fn is_committed(&self, off: PmOffset) -> Result<bool> {
        let id = self.id(off)?;
        Ok(self.objs.check(id)?)
    }

    /// Offsets of every committed object.
    pub fn committed(&self) -> Vec<PmOffset> {
        self.objs
            .committed_ids()
            .into_iter()
            .map(|id| self.objs.offset(id))
            .collect()
    }

    /// Whether `off` is the start of an object of this pool (a cheap range check, for
    /// validating pointers read from media).
    pub fn is_object(&self, off: PmOffset) -> bool {
        self.objs.id_at(off).is_some()
    }

    /// Objects currently free.
    pub fn free_count(&self) -> u64 {
        self.objs.free_count()
    }

    /// Bytes per object.
    pub fn object_size(&self) -> u64 {
        self.objs.object_size()
    }

    /// The Halloc pool's name.
    pub fn name(&self) -> &str {
        self.objs.name()
    }

    /// Checks Halloc invariant H1 on media (see `ObjectPool::verify`).
    pub fn verify(&self) -> Result<()> {
        Ok(self.objs.verify()?)
    }

    pub(crate) fn index(&self) -> u8 {
        self.index
    }

    pub(crate) fn owner(&self) -> u64 {
        self.owner
    }

    pub(crate) fn id(&self, off: PmOffset) -> Result<ObjId> {
        self.objs
            .id_at(off)
            .ok_or_else(|| PmwcasError::NotAnObject {
                offset: off.get(),
                pool: self.name().to_string(),
            })
    }

    /// Claims a fresh object for one descriptor (or for `abort`).
    pub(crate) fn take_fresh(&self, off: PmOffset) -> Result<ObjId> {
        let id = self.id(off)?;
        self.fresh[id.0 as usize]
            .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| PmwcasError::NotFresh {
                offset: off.get(),
                pool: self.name().to_string(),
            })?;
        Ok(id)
    }

    /// Hands back a claimed fresh object of a discarded descriptor.
    pub(crate) fn abort_claimed(&self, id: ObjId) -> Result<()> {
        Ok(self.objs.abort(id)?)
    }

    /// Commits a claimed fresh object (N2: the caller's descriptor is durable, Undecided).
    pub(crate) fn commit(&self, id: ObjId) -> Result<()> {
        Ok(self.objs.commit(id)?)
    }

    /// Releases committed objects (N1: the caller holds the gate).
    pub(crate) fn release(&self, ids: &[ObjId]) -> Result<()> {
        Ok(self.objs.release_many(ids)?)
    }

    /// Whether Halloc has object `id` committed (as media says).
    pub(crate) fn committed_id(&self, id: ObjId) -> Result<bool> {
        Ok(self.objs.check(id)?)
    }
}
