//! The zone pool: large fixed-size zones for append-only use with batch reclaim (seed 000
//! §3.4.2). A zone is an object of an [`ObjectPool`] and inherits its invariants: after
//! recovery a zone is either free or committed, and a committed zone belongs to exactly one
//! owner because the owner records the zone id durably before committing it.

use std::sync::Arc;

use nacre_pmem::PmOffset;

use crate::error::Result;
use crate::object_pool::{ObjId, ObjectPool};

/// A zone pool.
#[derive(Clone, Debug)]
pub struct ZonePool {
    inner: Arc<ObjectPool>,
}

impl ZonePool {
    pub(crate) fn new(inner: Arc<ObjectPool>) -> Self {
        ZonePool { inner }
    }

    /// Takes a free zone. Record its id durably in the owner, then [`ZonePool::commit`].
    pub fn grant(&self) -> Result<ObjId> {
        self.inner.get()
    }

    /// Marks a granted zone owned (one 8-byte persistent store).
    pub fn commit(&self, zone: ObjId) -> Result<()> {
        self.inner.commit(zone)
    }

    /// Returns a granted, uncommitted zone.
    pub fn abort(&self, zone: ObjId) -> Result<()> {
        self.inner.abort(zone)
    }

    /// Frees many committed zones with one fence (batch reclaim of a whole memtable).
    pub fn reclaim(&self, zones: &[ObjId]) -> Result<()> {
        self.inner.release_many(zones)
    }

    /// Whether a zone is committed.
    pub fn is_owned(&self, zone: ObjId) -> Result<bool> {
        self.inner.check(zone)
    }

    /// First byte of a zone.
    pub fn offset(&self, zone: ObjId) -> PmOffset {
        self.inner.offset(zone)
    }

    /// The zone holding byte `off`, if any.
    pub fn zone_of(&self, off: PmOffset) -> Option<ObjId> {
        self.inner.id_containing(off)
    }

    /// Bytes per zone.
    pub fn zone_size(&self) -> u64 {
        self.inner.object_size()
    }

    /// Free zones.
    pub fn free_zones(&self) -> u64 {
        self.inner.free_count()
    }

    /// The object pool underneath (recovery statistics, verification).
    pub fn objects(&self) -> &Arc<ObjectPool> {
        &self.inner
    }
}
