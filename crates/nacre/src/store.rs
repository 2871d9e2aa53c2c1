//! `Store`: the pool, the Halloc pools the engine uses, and the engine root.
//!
//! Engine root (region `nacre.engine`, pool root slot 1), 8-byte words:
//! `magic | version | commit_id | clean | zone_size | memtable slots | memtables | subtables |
//! zones | run | settled_run | births | shape_crc | disk_tier | index_trusted`. `commit_id` is the last sequence number of the last committed
//! group (C1); `clean` is 1 only between a clean close and the next open. `run` numbers the
//! engine's runs (opens): items carry the run that wrote them. `settled_run == run` records
//! that recovery of that run's writes has decided and applied its rollbacks, so a crash during
//! the rest of the open does not decide again on a half-rewritten state. `births` counts
//! memtable incarnations: each new memtable takes the next number, persisted before the
//! memtable object records it, so no two incarnations ever share one (T5 in memtable.rs).
//! `disk_tier` is 0 for a PM-only database, else the identity of its disk levels (written in
//! their directory too, so a database is never opened on another one's disk levels, nor
//! without its own). `index_trusted` is 1 while the persistent Global Index's trees have
//! followed every change since the open that last reconciled them. A run without
//! `Options::persistent_index` sets it to 0, and a tree that went stale (M4 in
//! gi/mirror.rs) to 2, before it changes anything the trees name; the next open with the
//! index starts the trees over instead of trusting entries whose zones may be gone. Word 12 (`shape_crc`) is the crc32c of the words written once (magic, version, shape) and
//! the root's offset; each word written later (`commit_id`, `clean`, `run`, `settled_run`,
//! `births`, `disk_tier`) checks itself: a 48-bit value under the low 16 bits of the crc32c of the value
//! and the word's offset. Open validates all of them, so a flipped bit is `Corrupt` naming
//! the word, never a wrong commit id or run.

use std::sync::Arc;

use nacre_halloc::{Halloc, MemtablePool, PoolShape, SubtablePool, ZonePool};
use nacre_pmem::{PmOffset, Pool};

use crate::error::{Error, Result};
use crate::gi::mirror::GiForest;
use crate::options::Options;

const MAGIC: u64 = u64::from_le_bytes(*b"NACREDB1");
const VERSION: u64 = 9;
const ROOT_SLOT: usize = 1;
const ROOT_REGION: &str = "nacre.engine";
const ROOT_LEN: u64 = 128;
const COMMIT_ID: u64 = 16;
const CLEAN: u64 = 24;
const RUN: u64 = 72;
const SETTLED_RUN: u64 = 80;
const BIRTHS: u64 = 88;
const SHAPE_CRC: u64 = 96;
const DISK_TIER: u64 = 104;
const INDEX_TRUSTED: u64 = 112;
/// `index_trusted` after a tree failed (M4 in gi/mirror.rs).
const INDEX_FAILED: u64 = 2;
/// The words written after creation, each checked by itself (see [`seal`]).
const CHECKED: [(u64, &str); 7] = [
    (COMMIT_ID, "engine root commit_id"),
    (CLEAN, "engine root clean flag"),
    (RUN, "engine root run"),
    (SETTLED_RUN, "engine root settled_run"),
    (BIRTHS, "engine root births"),
    (DISK_TIER, "engine root disk_tier"),
    (INDEX_TRUSTED, "engine root index_trusted"),
];
/// Values of checked root words stay below this (sequence numbers, runs, births).
const VALUE_LIMIT: u64 = 1 << 48;

/// The checked word for `v` stored at `at`: the low 16 bits of `crc32c(v, at)` over `v`.
fn seal(v: u64, at: PmOffset) -> u64 {
    debug_assert!(v < VALUE_LIMIT);
    u64::from(check(v, at)) << 48 | v
}

fn check(v: u64, at: PmOffset) -> u16 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_le_bytes());
    b[8..].copy_from_slice(&at.get().to_le_bytes());
    crc32c::crc32c(&b) as u16
}

/// The value of checked word `w` read at `at`, if it passes.
fn unseal(w: u64, at: PmOffset) -> Option<u64> {
    let v = w & (VALUE_LIMIT - 1);
    ((w >> 48) as u16 == check(v, at)).then_some(v)
}

/// crc32c of the words written once at creation (magic, version, shape) and the root's
/// offset; never 0.
fn shape_crc(pool: &Pool, root: PmOffset) -> u64 {
    let mut b = Vec::with_capacity(80);
    for w in [0, 8, 32, 40, 48, 56, 64] {
        b.extend_from_slice(&pool.load_u64(root.add(w)).to_le_bytes());
    }
    b.extend_from_slice(&root.get().to_le_bytes());
    u64::from(crc32c::crc32c(&b)) | 1 << 32
}
/// Fewest zones a new database may have.
const MIN_ZONES: u64 = 6;

/// The engine's persistent pieces.
pub(crate) struct Store {
    pub pool: Arc<Pool>,
    pub zones: ZonePool,
    pub mems: MemtablePool,
    pub subs: SubtablePool,
    pub zone_size: u64,
    /// The persistent index's trees (`Options::persistent_index`).
    pub gi_forest: Option<Arc<GiForest>>,
    /// Most subtables (the subtable object pool's size, fixed at creation).
    pub max_subtables: u64,
    /// A recovery rule switched off (mutation tests only).
    pub mutation: Option<crate::options::RecoveryMutation>,
    /// `Options::audit_persistent_index`.
    pub audit_index: bool,
    /// `Options::background_index_rebuild`.
    pub background_rebuild: bool,
    /// Whether this open wrote the engine root: a new database, with nothing to recover.
    pub created: bool,
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
    /// Nodes of the persistent index planned for a new pool (not kept in the root: the
    /// forest's node pool records it).
    gi_nodes: u64,
}

fn read_shape(pool: &Pool, root: PmOffset) -> Shape {
    let w = |i: u64| pool.load_u64(root.add(8 * i));
    Shape {
        zone_size: w(4),
        slots: w(5),
        memtables: w(6),
        subtables: w(7),
        zones: w(8),
        gi_nodes: 0,
    }
}

/// Plans pool sizes for a new database on `pool`.
fn plan(pool: &Pool, opts: &Options) -> Result<Shape> {
    let slots = opts.memtable_size / opts.zone_size;
    let mem_obj = MemtablePool::object_size(slots);
    let free = pool.unreserved().saturating_sub(ROOT_LEN + 64 * 4096);
    // The persistent index's forest takes its share first.
    let gi = opts.persistent_index.then(|| gi_forest_options(opts, free));
    let free = free.saturating_sub(gi.as_ref().map_or(0, |o| o.pool_bytes()));
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
        gi_nodes: gi.map_or(0, |o| o.nodes),
    })
}

/// The persistent index's forest for a new pool with `free` bytes to share out.
fn gi_forest_options(opts: &Options, free: u64) -> nacre_bztree::BzTreeOptions {
    crate::gi::mirror::forest_options(
        opts.max_subtables,
        crate::gi::mirror::nodes_for(free, opts.persistent_index_share),
    )
}

/// Opens the persistent index's forest (`Options::persistent_index`): with the node count
/// it was created with, or for a new database its share of the pool. A database created
/// without it has no room left for it.
fn open_gi_forest(
    halloc: &Halloc,
    opts: &Options,
    subtables: u64,
    planned: Option<u64>,
    distrust: crate::gi::mirror::Distrust,
) -> Result<Option<Arc<GiForest>>> {
    if !opts.persistent_index {
        return Ok(None);
    }
    let mut fo = crate::gi::mirror::forest_options(subtables, 1);
    let nodes = halloc
        .registered()?
        .into_iter()
        .find(|e| e.name == format!("bzn.{}", fo.name))
        .map(|e| e.shape.count);
    match nodes {
        Some(n) => fo.nodes = n,
        None if planned.is_some_and(|n| n > 0) => fo.nodes = planned.unwrap_or_default(),
        None => {
            return Err(Error::InvalidOptions(
                "persistent_index: this database was created without it, and its pool has no \
                 room for it"
                    .into(),
            ))
        }
    }
    GiForest::open(
        halloc,
        &fo,
        (opts.recovery_mutation, opts.persistent_index_reads),
        distrust,
    )
    .map(Some)
}

/// Checks the engine root's shape crc and checked words.
fn check_root(pool: &Pool, root: PmOffset) -> Result<()> {
    if pool.load_u64(root.add(SHAPE_CRC)) != shape_crc(pool, root) {
        return Err(Error::corrupt_at(
            "engine root shape (zone size, slots, pool sizes) fails its check",
            root,
        ));
    }
    for (at, what) in CHECKED {
        if unseal(pool.load_u64(root.add(at)), root.add(at)).is_none() {
            return Err(Error::corrupt_at(
                format!("{what} fails its check"),
                root.add(at),
            ));
        }
    }
    Ok(())
}

impl Store {
    /// `Db::verify`: the engine root's checks again.
    pub fn verify_root(&self) -> Result<()> {
        if self.pool.load_u64(self.root) != MAGIC || self.pool.load_u64(self.root.add(8)) != VERSION
        {
            return Err(Error::corrupt_at("engine root magic or version", self.root));
        }
        check_root(&self.pool, self.root)
    }

    /// Opens the engine's pieces on `pool`, creating them on first use.
    pub fn open(pool: Arc<Pool>, opts: &Options) -> Result<Store> {
        let mut root = pool.root(ROOT_SLOT)?;
        let created = root.is_null();
        let mut planned = None;
        if created {
            let region = match pool.region(ROOT_REGION) {
                Some(r) => r,
                None => pool.reserve_region(ROOT_REGION, ROOT_LEN, 64, 0)?,
            };
            let shape = plan(&pool, opts)?;
            planned = Some(shape.gi_nodes);
            let r = region.offset;
            let words = [
                MAGIC,
                VERSION,
                seal(0, r.add(COMMIT_ID)),
                seal(0, r.add(CLEAN)),
                shape.zone_size,
                shape.slots,
                shape.memtables,
                shape.subtables,
                shape.zones,
                seal(1, r.add(RUN)),
                seal(0, r.add(SETTLED_RUN)),
                seal(0, r.add(BIRTHS)),
            ];
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            // SAFETY: the engine root was just reserved and is not shared yet.
            unsafe { pool.write(r, &bytes) };
            pool.store_u64(r.add(SHAPE_CRC), 0);
            let crc = shape_crc(&pool, r);
            pool.store_u64(r.add(SHAPE_CRC), crc);
            pool.store_u64(r.add(DISK_TIER), seal(0, r.add(DISK_TIER)));
            pool.store_u64(r.add(INDEX_TRUSTED), seal(0, r.add(INDEX_TRUSTED)));
            pool.persist(r, ROOT_LEN as usize)?;
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
        check_root(&pool, root)?;
        let s = read_shape(&pool, root);
        let halloc = Halloc::open(pool.clone())?;
        let subs = halloc.subtable_pool("subtables", s.subtables)?;
        let mems = halloc.memtable_pool("memtables", s.slots, s.memtables)?;
        let zones = halloc
            .zone_pool("zones", s.zone_size, s.zones)
            .map_err(Error::from_alloc)?;
        let distrust = {
            let (pool, at) = (pool.clone(), root.add(INDEX_TRUSTED));
            Arc::new(move || Ok(pool.persist_u64(at, seal(INDEX_FAILED, at))?))
        };
        let gi_forest = open_gi_forest(&halloc, opts, s.subtables, planned, distrust)?;
        let store = Store {
            pool,
            gi_forest,
            zones,
            mems,
            subs,
            zone_size: s.zone_size,
            max_subtables: s.subtables,
            mutation: opts.recovery_mutation,
            audit_index: opts.audit_persistent_index,
            background_rebuild: opts.background_index_rebuild,
            created,
            root,
            _halloc: halloc,
        };
        if store.gi_forest.is_none() && store.index_trusted() {
            // A run without the index: nothing it changes reaches the trees.
            store.set_index_trusted(false)?;
        }
        Ok(store)
    }

    /// The value of checked root word `at` (validated at open; only this process writes it
    /// since).
    fn get(&self, at: u64) -> u64 {
        self.pool.load_u64(self.root.add(at)) & (VALUE_LIMIT - 1)
    }

    fn put(&self, at: u64, v: u64) -> Result<()> {
        let at = self.root.add(at);
        Ok(self.pool.persist_u64(at, seal(v, at))?)
    }

    /// The persisted commit id.
    pub fn commit_id(&self) -> u64 {
        self.get(COMMIT_ID)
    }

    /// Stores the commit id and flushes it (the caller fences).
    pub fn set_commit_id(&self, id: u64) {
        let at = self.root.add(COMMIT_ID);
        self.pool.store_u64(at, seal(id, at));
    }

    /// Durably sets the commit id.
    pub fn persist_commit_id(&self, id: u64) -> Result<()> {
        self.put(COMMIT_ID, id)
    }

    /// The run whose writes the engine holds: items written from now on carry it.
    pub fn run(&self) -> u64 {
        self.get(RUN)
    }

    /// Durably starts run `run`.
    pub fn set_run(&self, run: u64) -> Result<()> {
        self.put(RUN, run)
    }

    /// The last run whose recovery decided and applied its rollbacks.
    pub fn settled_run(&self) -> u64 {
        self.get(SETTLED_RUN)
    }

    /// Durably records that recovery of `run`'s writes is decided and applied.
    pub fn set_settled_run(&self, run: u64) -> Result<()> {
        self.put(SETTLED_RUN, run)
    }

    /// Takes the next memtable birth number, durably (T5).
    pub fn next_birth(&self) -> Result<u64> {
        let birth = self.get(BIRTHS) + 1;
        self.put(BIRTHS, birth)?;
        Ok(birth)
    }

    /// The identity of the database's disk levels (0: none).
    pub fn disk_tier(&self) -> u64 {
        self.get(DISK_TIER)
    }

    /// Durably records the identity of the database's disk levels.
    pub fn set_disk_tier(&self, id: u64) -> Result<()> {
        self.put(DISK_TIER, id)
    }

    /// Whether the persistent Global Index's trees can be trusted (see the module doc).
    pub fn index_trusted(&self) -> bool {
        self.get(INDEX_TRUSTED) == 1
    }

    /// Whether the trees are untrusted because one failed in the last run that had them
    /// (not because a run went without them).
    pub fn index_failed(&self) -> bool {
        self.get(INDEX_TRUSTED) == INDEX_FAILED
    }

    /// Durably records whether the trees can be trusted.
    pub fn set_index_trusted(&self, trusted: bool) -> Result<()> {
        self.put(INDEX_TRUSTED, u64::from(trusted))
    }

    /// Whether the last close was clean.
    pub fn clean(&self) -> bool {
        self.get(CLEAN) == 1
    }

    /// Durably records a clean close (true) or an open database (false).
    pub fn set_clean(&self, clean: bool) -> Result<()> {
        self.put(CLEAN, u64::from(clean))
    }
}
