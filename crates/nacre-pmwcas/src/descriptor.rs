//! `Descriptor`: one PMwCAS operation being assembled by its owner, then executed.

use nacre_halloc::ObjId;
use nacre_pmem::{PmOffset, DATA_START};

use crate::engine::Engine;
use crate::error::{PmwcasError, Result};
use crate::layout::{policy_word, Entry, Policy, MAX_ENTRIES};
use crate::nodes::NodePool;
use crate::word::is_plain;

/// A PMwCAS operation under construction. Dropping it without [`Descriptor::execute`]
/// discards it: no word changes and its fresh objects go back to their pools.
pub struct Descriptor<'a> {
    engine: &'a Engine,
    index: u32,
    entries: Vec<Entry>,
    fresh: Vec<(u8, ObjId)>,
    done: bool,
}

impl std::fmt::Debug for Descriptor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor")
            .field("index", &self.index)
            .field("entries", &self.entries)
            .finish()
    }
}

impl<'a> Descriptor<'a> {
    pub(crate) fn new(engine: &'a Engine, index: u32) -> Self {
        Descriptor {
            engine,
            index,
            entries: Vec::with_capacity(MAX_ENTRIES),
            fresh: Vec::new(),
            done: false,
        }
    }

    fn room(&self) -> Result<()> {
        if self.entries.len() >= MAX_ENTRIES {
            return Err(PmwcasError::TooManyEntries { max: MAX_ENTRIES });
        }
        Ok(())
    }

    fn check_addr(&self, addr: PmOffset) -> Result<()> {
        let a = addr.get();
        let bad = |reason| Err(PmwcasError::BadAddress { addr: a, reason });
        let t = &self.engine.protocol.table;
        if a % 8 != 0 {
            return bad("not 8-byte aligned");
        }
        if a < DATA_START || a.checked_add(8).is_none_or(|e| e > t.pool.size()) {
            return bad("outside the pool's data area");
        }
        if t.covers(a) {
            return bad("inside the descriptor region");
        }
        if self.entries.iter().any(|e| e.addr == addr) {
            return Err(PmwcasError::DuplicateAddress { addr: a });
        }
        Ok(())
    }

    fn check_values(old: u64, new: u64) -> Result<()> {
        for value in [old, new] {
            if !is_plain(value) {
                return Err(PmwcasError::ValueHasFlagBits { value });
            }
        }
        Ok(())
    }

    fn check_pool(&self, pool: &NodePool) -> Result<()> {
        if pool.owner() != self.engine.id {
            return Err(PmwcasError::ForeignNodePool {
                pool: pool.name().to_string(),
            });
        }
        Ok(())
    }

    /// Adds the word at `addr`: it changes from `old` to `new` if every word of the operation
    /// holds its `old` value. `addr` must be 8-aligned, in the pool's data area, and not yet
    /// part of this descriptor; values must leave bits 61..63 clear.
    pub fn add(&mut self, addr: PmOffset, old: u64, new: u64) -> Result<()> {
        self.add_with_policy(addr, old, new, Policy::None, None)
    }

    /// [`Descriptor::add`] with a memory policy over objects of `pool`: the old value is an
    /// object to free on success ([`Policy::FreeOldOnSuccess`], [`Policy::FreeOne`]), the new
    /// value a fresh object from [`NodePool::alloc`] to free on failure
    /// ([`Policy::FreeNewOnFailure`], [`Policy::FreeOne`]).
    pub fn add_with_policy(
        &mut self,
        addr: PmOffset,
        old: u64,
        new: u64,
        policy: Policy,
        pool: Option<&NodePool>,
    ) -> Result<()> {
        self.room()?;
        self.check_addr(addr)?;
        Self::check_values(old, new)?;
        let word = self.policy_operands(policy, pool, old, new)?;
        self.entries.push(Entry {
            addr,
            old,
            new,
            policy: word,
        });
        Ok(())
    }

    fn policy_operands(
        &mut self,
        policy: Policy,
        pool: Option<&NodePool>,
        old: u64,
        new: u64,
    ) -> Result<u64> {
        let Some(pool) = pool.filter(|_| policy != Policy::None) else {
            return if policy == Policy::None {
                Ok(0)
            } else {
                Err(PmwcasError::InvalidOptions(format!(
                    "policy {policy:?} needs a node pool"
                )))
            };
        };
        self.check_pool(pool)?;
        if policy.frees_old() {
            pool.id(PmOffset(old))?;
        }
        if policy.frees_new() {
            let id = pool.take_fresh(PmOffset(new))?;
            self.fresh.push((pool.index(), id));
        }
        Ok(policy_word(policy, pool.index()))
    }

    /// Adds a memory-only entry: the committed object at `obj` is freed if the operation
    /// succeeds (e.g. a node a split replaces that no target word points to).
    pub fn free_on_success(&mut self, pool: &NodePool, obj: PmOffset) -> Result<()> {
        self.room()?;
        let word = self.policy_operands(Policy::FreeOldOnSuccess, Some(pool), obj.get(), 0)?;
        self.entries.push(Entry {
            addr: PmOffset::NULL,
            old: obj.get(),
            new: 0,
            policy: word,
        });
        Ok(())
    }

    /// Adds a memory-only entry: the fresh object at `obj` (from [`NodePool::alloc`]) is
    /// committed with the operation and freed if it fails (e.g. a new child node that only
    /// the new parent points to).
    pub fn free_on_failure(&mut self, pool: &NodePool, obj: PmOffset) -> Result<()> {
        self.room()?;
        let word = self.policy_operands(Policy::FreeNewOnFailure, Some(pool), 0, obj.get())?;
        self.entries.push(Entry {
            addr: PmOffset::NULL,
            old: 0,
            new: obj.get(),
            policy: word,
        });
        Ok(())
    }

    /// Entries added so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Executes the operation: returns `Ok(true)` if every word held its old value and now
    /// holds its new one, durably; `Ok(false)` if some word did not, and then no word changed.
    /// An `Err` (an I/O error at a fence) leaves the outcome to recovery.
    pub fn execute(mut self) -> Result<bool> {
        self.done = true;
        if self.entries.is_empty() {
            self.engine.give_back(self.index);
            return Ok(true);
        }
        self.entries.sort_by_key(|e| e.addr);
        self.engine.execute(self.index, &self.entries, &self.fresh)
    }
}

impl Drop for Descriptor<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for &(p, id) in &self.fresh {
            if let Err(e) = self.engine.nodes[p as usize].abort_claimed(id) {
                tracing::warn!(error = %e, "discarded descriptor could not return an object");
            }
        }
        self.engine.give_back(self.index);
    }
}
