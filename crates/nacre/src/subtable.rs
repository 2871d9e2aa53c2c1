//! Subtables: named, independent key spaces (RocksDB's column families), each a list of
//! memtables, newest (active) first. The list lives in PM as the subtable object's memlist
//! (a chain through the memtable objects' `next` words) and in DRAM as a shared vector.
//!
//! Invariant: a memtable is committed in the memtable pool before the memlist head points at
//! it, so the memlist only ever links committed memtables; a memtable committed but not yet
//! linked when a crash hits is released by recovery.
//!
//! Thread safety: the DRAM list is swapped under a write lock, only in stage 2 of the Reorder
//! Ring (serial); readers clone the current list under a read lock.

use std::sync::{Arc, RwLock};

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
    pub memtables: RwLock<Arc<Vec<Arc<Memtable>>>>,
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
    pub(crate) fn new(id: u32, name: String, obj: ObjId, memtables: Vec<Arc<Memtable>>) -> Self {
        Subtable {
            inner: Arc::new(SubtableInner {
                id,
                name,
                obj,
                memtables: RwLock::new(Arc::new(memtables)),
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

    /// Memtables, newest first.
    pub(crate) fn memtables(&self) -> Arc<Vec<Arc<Memtable>>> {
        self.inner
            .memtables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The active memtable.
    pub(crate) fn active(&self) -> Option<Arc<Memtable>> {
        self.memtables().first().cloned()
    }

    /// Starts a new active memtable (stage 2); the old one becomes immutable.
    pub(crate) fn switch(&self, store: &Store) -> Result<Arc<Memtable>> {
        let next = self
            .active()
            .map_or(nacre_pmem::PmOffset::NULL, |m| m.offset(store));
        let m = Arc::new(Memtable::create(store, u64::from(self.inner.id), next)?);
        store.subs.set_memlist(self.inner.obj, m.offset(store))?;
        let mut list = self
            .inner
            .memtables
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let mut v = Vec::with_capacity(list.len() + 1);
        v.push(m.clone());
        v.extend(list.iter().cloned());
        *list = Arc::new(v);
        tracing::debug!(subtable = %self.inner.name, memtables = list.len(), "memtable switch");
        Ok(m)
    }
}
