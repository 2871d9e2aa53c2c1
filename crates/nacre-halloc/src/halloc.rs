//! `Halloc`: the entry point. Finds the registry from pool root 0 and creates or opens named
//! pools of each kind, running their recovery on first open.
//!
//! Thread safety: `Halloc` is `Send + Sync`; opening pools serialises on one mutex, and each
//! opened pool is shared as an `Arc` (recovery runs once per pool per process).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nacre_pmem::{PmOffset, Pool};

use crate::error::{HallocError, Result};
use crate::meta_pools::{MemtablePool, SubtablePool};
use crate::object_pool::{ObjectPool, PoolShape};
use crate::registry::{self, Entry};
use crate::zone_pool::ZonePool;

/// What a registered pool holds; recorded in its header and the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum PoolKind {
    /// Plain fixed-size objects.
    Object = 1,
    /// Large zones for append-only, batch-reclaimed use.
    Zone = 2,
    /// Memtable objects: zone slots and `gidx`.
    Memtable = 3,
    /// Subtable objects: id, name and memtable list head.
    Subtable = 4,
}

impl PoolKind {
    fn name(self) -> &'static str {
        match self {
            PoolKind::Object => "object",
            PoolKind::Zone => "zone",
            PoolKind::Memtable => "memtable",
            PoolKind::Subtable => "subtable",
        }
    }
}

fn describe(s: &PoolShape) -> String {
    format!(
        "kind {} x {} objects of {} bytes",
        s.kind, s.count, s.object_size
    )
}

/// The allocator over one persistent-memory pool.
pub struct Halloc {
    pool: Arc<Pool>,
    registry: PmOffset,
    open: Mutex<HashMap<String, Arc<ObjectPool>>>,
}

impl std::fmt::Debug for Halloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Halloc").field("pool", &self.pool).finish()
    }
}

impl Halloc {
    /// Opens the allocator on `pool`, creating its registry on first use.
    pub fn open(pool: Arc<Pool>) -> Result<Halloc> {
        let registry = registry::open_or_create(&pool)?;
        Ok(Halloc {
            pool,
            registry,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The pools recorded in the registry.
    pub fn registered(&self) -> Result<Vec<Entry>> {
        registry::entries(&self.pool, self.registry)
    }

    /// The persistent-memory pool underneath.
    pub fn pmem(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Creates (first time) or opens and recovers (later) the pool `name` with this shape.
    /// A pool of that name with another shape or kind is an error.
    pub(crate) fn pool_of(&self, name: &str, shape: PoolShape) -> Result<Arc<ObjectPool>> {
        registry::check_name(name)?;
        shape.validate(name)?;
        let mismatch = |found: &PoolShape| HallocError::ShapeMismatch {
            name: name.to_string(),
            found: describe(found),
            asked: describe(&shape),
        };
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = open.get(name) {
            return if p.shape() == shape {
                Ok(p.clone())
            } else {
                Err(mismatch(&p.shape()))
            };
        }
        let known = self.registered()?.into_iter().find(|e| e.name == name);
        let base = match known {
            Some(e) if e.shape != shape => return Err(mismatch(&e.shape)),
            Some(e) => {
                // The entry must point at the pool's own region: a damaged entry is an error,
                // never an access outside the pool.
                let region = self.pool.region(&registry::region_name(name));
                if !region.is_some_and(|r| r.offset == e.base && r.len >= shape.region_len()) {
                    return Err(HallocError::Corrupt(format!(
                        "registry entry of pool {name:?} points at {:#x}, which is not its region",
                        e.base.get()
                    )));
                }
                if ObjectPool::read_shape(&self.pool, e.base) != Some(shape) {
                    return Err(HallocError::Corrupt(format!(
                        "registered pool {name:?} has no valid header"
                    )));
                }
                e.base
            }
            None => self.create(name, shape, &mismatch)?,
        };
        let p = Arc::new(ObjectPool::open(name, self.pool.clone(), base, shape)?);
        open.insert(name.to_string(), p.clone());
        Ok(p)
    }

    fn create(
        &self,
        name: &str,
        shape: PoolShape,
        mismatch: &dyn Fn(&PoolShape) -> HallocError,
    ) -> Result<PmOffset> {
        let rname = registry::region_name(name);
        let len = shape.region_len();
        // A region left by a crash mid-registration is reused (registry invariant R1).
        let region = match self.pool.region(&rname) {
            Some(r) => r,
            None => self.pool.reserve_region(&rname, len, 4096, shape.kind)?,
        };
        if region.len < len {
            return Err(mismatch(&PoolShape {
                object_size: shape.object_size,
                count: region.len / shape.object_size,
                kind: region.tag,
            }));
        }
        match ObjectPool::read_shape(&self.pool, region.offset) {
            Some(found) if found != shape => return Err(mismatch(&found)),
            Some(_) => {}
            None => ObjectPool::format(&self.pool, region.offset, &shape)?,
        }
        registry::add(
            &self.pool,
            self.registry,
            &Entry {
                name: name.to_string(),
                shape,
                base: region.offset,
            },
        )?;
        tracing::info!(
            pool = name,
            kind = shape.kind,
            object_size = shape.object_size,
            count = shape.count,
            "halloc created pool"
        );
        Ok(region.offset)
    }

    /// A pool of `count` objects of `object_size` bytes.
    pub fn object_pool(&self, name: &str, object_size: u64, count: u64) -> Result<Arc<ObjectPool>> {
        self.pool_of(
            name,
            PoolShape {
                object_size,
                count,
                kind: PoolKind::Object as u64,
            },
        )
    }

    /// A zone pool of `count` zones of `zone_size` bytes (4 KiB-aligned).
    pub fn zone_pool(&self, name: &str, zone_size: u64, count: u64) -> Result<ZonePool> {
        let p = self.pool_of(
            name,
            PoolShape {
                object_size: zone_size.next_multiple_of(4096),
                count,
                kind: PoolKind::Zone as u64,
            },
        )?;
        Ok(ZonePool::new(p))
    }

    /// A memtable pool: `count` memtable objects of `slots` zone slots each.
    pub fn memtable_pool(&self, name: &str, slots: u64, count: u64) -> Result<MemtablePool> {
        let p = self.pool_of(
            name,
            PoolShape {
                object_size: MemtablePool::object_size(slots),
                count,
                kind: PoolKind::Memtable as u64,
            },
        )?;
        Ok(MemtablePool::new(p, slots))
    }

    /// A subtable pool of `count` subtable objects.
    pub fn subtable_pool(&self, name: &str, count: u64) -> Result<SubtablePool> {
        let p = self.pool_of(
            name,
            PoolShape {
                object_size: SubtablePool::OBJECT_SIZE,
                count,
                kind: PoolKind::Subtable as u64,
            },
        )?;
        Ok(SubtablePool::new(p))
    }

    /// Human-readable kind name for a registry entry.
    pub fn kind_name(kind: u64) -> &'static str {
        [
            PoolKind::Object,
            PoolKind::Zone,
            PoolKind::Memtable,
            PoolKind::Subtable,
        ]
        .into_iter()
        .find(|k| *k as u64 == kind)
        .map_or("unknown", PoolKind::name)
    }
}
