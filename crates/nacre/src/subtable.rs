//! Subtables: named, independent key spaces (RocksDB's column families), each a list of
//! memtables, newest (active) first. The list lives in PM as the subtable object's memlist
//! (a chain through the memtable objects' `next` words) and in DRAM as a shared vector.
//!
//! Invariant: a memtable is committed in the memtable pool before the memlist head points at
//! it, so the memlist only ever links committed memtables; a memtable committed but not yet
//! linked when a crash hits is released by recovery.
//!
//! Thread safety: the DRAM list is replaced atomically (arc-swap), only in stage 2 of the
//! Reorder Ring (serial); readers load the current list without locking.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use nacre_halloc::ObjId;

use crate::error::Result;
use crate::memtable::Memtable;
use crate::store::Store;

/// A handle to a subtable of a [`crate::Db`]. Cheap to clone.
#[derive(Clone)]
pub struct Subtable {
    pub(crate) inner: Arc<SubtableInner>,
}

pub(crate) struct SubtableInner {
    pub id: u32,
    pub name: String,
    pub obj: ObjId,
    /// Identity of the owning database instance (handles from another `Db` are refused).
    pub db: u64,
    pub memtables: ArcSwap<Vec<Arc<Memtable>>>,
    /// Serialises switches (they happen in stage 2, which is serial anyway).
    switch: Mutex<()>,
}

impl std::fmt::Debug for Subtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subtable")
            .field("id", &self.inner.id)
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Subtable {
    pub(crate) fn new(
        db: u64,
        id: u32,
        name: String,
        obj: ObjId,
        memtables: Vec<Arc<Memtable>>,
    ) -> Self {
        Subtable {
            inner: Arc::new(SubtableInner {
                id,
                name,
                obj,
                db,
                memtables: ArcSwap::from_pointee(memtables),
                switch: Mutex::new(()),
            }),
        }
    }

    /// The subtable's id (stable across restarts).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The subtable's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Memtables, newest first (a counted reference, for iterators).
    pub(crate) fn memtables(&self) -> Arc<Vec<Arc<Memtable>>> {
        self.inner.memtables.load_full()
    }

    /// Memtables, newest first, for a short read (no reference count traffic).
    pub(crate) fn memtables_guard(&self) -> arc_swap::Guard<Arc<Vec<Arc<Memtable>>>> {
        self.inner.memtables.load()
    }

    /// The active memtable.
    pub(crate) fn active(&self) -> Option<Arc<Memtable>> {
        self.memtables_guard().first().cloned()
    }

    /// Starts a new active memtable (stage 2); the old one becomes immutable.
    pub(crate) fn switch(&self, store: &Store) -> Result<Arc<Memtable>> {
        let next = self
            .active()
            .map_or(nacre_pmem::PmOffset::NULL, |m| m.offset(store));
        let m = Arc::new(Memtable::create(store, u64::from(self.inner.id), next)?);
        store.subs.set_memlist(self.inner.obj, m.offset(store))?;
        let _g = self.inner.switch.lock().unwrap_or_else(|e| e.into_inner());
        let list = self.inner.memtables.load_full();
        let mut v = Vec::with_capacity(list.len() + 1);
        v.push(m.clone());
        v.extend(list.iter().cloned());
        let n = v.len();
        self.inner.memtables.store(Arc::new(v));
        tracing::debug!(subtable = %self.inner.name, memtables = n, "memtable switch");
        Ok(m)
    }
}
