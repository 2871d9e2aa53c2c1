//! `Store`: the pool, the Halloc pools the engine uses, and the engine root.
//!
//! Engine root (region `nacre.engine`, pool root slot 1), 8-byte words:
//! `magic | version | commit_id | clean | zone_size | memtable slots | memtables | subtables |
//! zones | run | settled_run | births`. `commit_id` is the last sequence number of the last committed
//! group (C1); `clean` is 1 only between a clean close and the next open. `run` numbers the
//! engine's runs (opens): items carry the run that wrote them. `settled_run == run` records
//! that recovery of that run's writes has decided and applied its rollbacks, so a crash during
//! the rest of the open does not decide again on a half-rewritten state. `births` counts
//! memtable incarnations: each new memtable takes the next number, persisted before the
//! memtable object records it, so no two incarnations ever share one (T5 in memtable.rs).

use std::sync::Arc;

use nacre_halloc::{Halloc, MemtablePool, PoolShape, SubtablePool, ZonePool};
use nacre_pmem::{PmOffset, Pool};

use crate::error::{Error, Result};
use crate::options::Options;

const MAGIC: u64 = u64::from_le_bytes(*b"NACREDB1");
const VERSION: u64 = 5;
const ROOT_SLOT: usize = 1;
const ROOT_REGION: &str = "nacre.engine";
const ROOT_LEN: u64 = 128;
const COMMIT_ID: u64 = 16;
const CLEAN: u64 = 24;
const RUN: u64 = 72;
const SETTLED_RUN: u64 = 80;
const BIRTHS: u64 = 88;
/// Fewest zones a new database may have.
const MIN_ZONES: u64 = 6;

/// The engine's persistent pieces.
pub(crate) struct Store {
    pub pool: Arc<Pool>,
    pub zones: ZonePool,
    pub mems: MemtablePool,
    pub subs: SubtablePool,
    pub zone_size: u64,
    /// Most subtables (the subtable object pool's size, fixed at creation).
    pub max_subtables: u64,
    /// A recovery rule switched off (mutation tests only).
    pub mutation: Option<crate::options::RecoveryMutation>,
    root: PmOffset,
    _halloc: Halloc,
}

#[derive(Clone, Copy)]
struct Shape {
    zone_size: u64,
    slots: u64,
    memtables: u64,
    subtables: u64,
    zones: u64,
}

fn read_shape(pool: &Pool, root: PmOffset) -> Shape {
    let w = |i: u64| pool.load_u64(root.add(8 * i));
    Shape {
        zone_size: w(4),
        slots: w(5),
        memtables: w(6),
        subtables: w(7),
        zones: w(8),
    }
}

/// Plans pool sizes for a new database on `pool`.
fn plan(pool: &Pool, opts: &Options) -> Result<Shape> {
    let slots = opts.memtable_size / opts.zone_size;
    let mem_obj = MemtablePool::object_size(slots);
    let free = pool.unreserved().saturating_sub(ROOT_LEN + 64 * 4096);
    let per_zone = opts.zone_size + 8;
    // Every memtable but the active and the relocation one of each subtable holds a zone.
    let memtables = free / opts.zone_size + 2 * opts.max_subtables + 2;
    let meta = PoolShape {
        object_size: mem_obj,
        count: memtables,
        kind: 3,
    }
    .region_len()
        + PoolShape {
            object_size: 64,
            count: opts.max_subtables,
            kind: 4,
        }
        .region_len();
    let zones = free.saturating_sub(meta) / per_zone;
    // Two zones at least are kept for the cleaner; the rest must hold some data.
    if zones < MIN_ZONES {
        return Err(Error::InvalidOptions(format!(
            "pool_size {} holds {zones} zones of zone_size {} after {meta} bytes of memtable and \
             subtable objects for max_subtables {}; at least {MIN_ZONES} are needed",
            pool.size(),
            opts.zone_size,
            opts.max_subtables
        )));
    }
    Ok(Shape {
        zone_size: opts.zone_size,
        slots,
        memtables,
        subtables: opts.max_subtables,
        zones,
    })
}

impl Store {
    /// Opens the engine's pieces on `pool`, creating them on first use.
    pub fn open(pool: Arc<Pool>, opts: &Options) -> Result<Store> {
        let mut root = pool.root(ROOT_SLOT)?;
        if root.is_null() {
            let region = match pool.region(ROOT_REGION) {
                Some(r) => r,
                None => pool.reserve_region(ROOT_REGION, ROOT_LEN, 64, 0)?,
            };
            let shape = plan(&pool, opts)?;
            let words = [
                MAGIC,
                VERSION,
                0,
                0,
                shape.zone_size,
                shape.slots,
                shape.memtables,
                shape.subtables,
                shape.zones,
                1,
                0,
                0,
            ];
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            // SAFETY: the engine root was just reserved and is not shared yet.
            unsafe { pool.write(region.offset, &bytes) };
            pool.persist(region.offset, bytes.len())?;
            pool.set_root(ROOT_SLOT, region.offset)?;
            root = region.offset;
        }
        pool.check_range(root, ROOT_LEN)?;
        if pool.load_u64(root) != MAGIC {
            return Err(Error::corrupt("engine root has a bad magic"));
        }
        if pool.load_u64(root.add(8)) != VERSION {
            return Err(Error::corrupt(format!(
                "engine format version {} (this build reads {VERSION})",
                pool.load_u64(root.add(8))
            )));
        }
        let s = read_shape(&pool, root);
        let halloc = Halloc::open(pool.clone())?;
        let subs = halloc.subtable_pool("subtables", s.subtables)?;
        let mems = halloc.memtable_pool("memtables", s.slots, s.memtables)?;
        let zones = halloc
            .zone_pool("zones", s.zone_size, s.zones)
            .map_err(Error::from_alloc)?;
        Ok(Store {
            pool,
            zones,
            mems,
            subs,
            zone_size: s.zone_size,
            max_subtables: s.subtables,
            mutation: opts.recovery_mutation,
            root,
            _halloc: halloc,
        })
    }

    /// The persisted commit id.
    pub fn commit_id(&self) -> u64 {
        self.pool.load_u64(self.root.add(COMMIT_ID))
    }

    /// Stores the commit id and flushes it (the caller fences).
    pub fn set_commit_id(&self, id: u64) {
        self.pool.store_u64(self.root.add(COMMIT_ID), id);
    }

    /// Durably sets the commit id.
    pub fn persist_commit_id(&self, id: u64) -> Result<()> {
        Ok(self.pool.persist_u64(self.root.add(COMMIT_ID), id)?)
    }

    /// The run whose writes the engine holds: items written from now on carry it.
    pub fn run(&self) -> u64 {
        self.pool.load_u64(self.root.add(RUN))
    }

    /// Durably starts run `run`.
    pub fn set_run(&self, run: u64) -> Result<()> {
        Ok(self.pool.persist_u64(self.root.add(RUN), run)?)
    }

    /// The last run whose recovery decided and applied its rollbacks.
    pub fn settled_run(&self) -> u64 {
        self.pool.load_u64(self.root.add(SETTLED_RUN))
    }

    /// Durably records that recovery of `run`'s writes is decided and applied.
    pub fn set_settled_run(&self, run: u64) -> Result<()> {
        Ok(self.pool.persist_u64(self.root.add(SETTLED_RUN), run)?)
    }

    /// Takes the next memtable birth number, durably (T5).
    pub fn next_birth(&self) -> Result<u64> {
        let at = self.root.add(BIRTHS);
        let birth = self.pool.load_u64(at) + 1;
        self.pool.persist_u64(at, birth)?;
        Ok(birth)
    }

    /// Whether the last close was clean.
    pub fn clean(&self) -> bool {
        self.pool.load_u64(self.root.add(CLEAN)) == 1
    }

    /// Durably records a clean close (true) or an open database (false).
    pub fn set_clean(&self, clean: bool) -> Result<()> {
        Ok(self
            .pool
            .persist_u64(self.root.add(CLEAN), u64::from(clean))?)
    }
}
