//! The Halloc registry: which pools exist, their kind and shape. Reachable from pool root 0 so
//! the engine finds every pool on open.
//!
//! Layout (4 KiB region `halloc.registry`):
//! ```text
//! +0    magic "HALLOCRG"
//! +8    count: entries in use (8-byte atomic; an entry is valid iff its index < count)
//! +64   entries, 64 bytes each: name [24], kind u64, object size u64, count u64, region
//!       offset u64, reserved u64
//! ```
//!
//! Invariant R1: an entry is written and persisted before `count` is advanced past it, so a
//! crash mid-registration leaves the entry invisible (its region, reserved in the pmem region
//! table under the same name, is found and reused by the next registration).

use nacre_pmem::{PmOffset, Pool};

use crate::error::{HallocError, Result};
use crate::object_pool::PoolShape;

const MAGIC: u64 = u64::from_le_bytes(*b"HALLOCRG");
/// Name of the registry's region.
pub const REGISTRY_REGION: &str = "halloc.registry";
/// Pool root slot holding the registry's offset.
pub const REGISTRY_ROOT: usize = 0;
const SIZE: u64 = 4096;
const ENTRY: u64 = 64;
const ENTRIES_AT: u64 = 64;
/// Longest pool name.
pub const NAME_MAX: usize = 20;
/// Most pools one registry holds.
pub const MAX_POOLS: usize = ((SIZE - ENTRIES_AT) / ENTRY) as usize;

/// One registered pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Pool name.
    pub name: String,
    /// Shape (kind included).
    pub shape: PoolShape,
    /// Start of the pool's region.
    pub base: PmOffset,
}

/// Region-table name of a pool's region.
pub fn region_name(pool: &str) -> String {
    format!("hp.{pool}")
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > NAME_MAX || name.as_bytes().contains(&0) {
        return Err(HallocError::BadName {
            name: name.to_string(),
            max: NAME_MAX,
        });
    }
    Ok(())
}

/// Finds or creates the registry of `pool`; returns its offset.
pub(crate) fn open_or_create(pool: &Pool) -> Result<PmOffset> {
    let root = pool.root(REGISTRY_ROOT)?;
    if !root.is_null() {
        pool.check_range(root, SIZE)?;
        if pool.load_u64(root) != MAGIC {
            return Err(HallocError::Corrupt(format!(
                "root {REGISTRY_ROOT} does not point at a halloc registry"
            )));
        }
        return Ok(root);
    }
    let region = match pool.region(REGISTRY_REGION) {
        Some(r) => r,
        None => pool.reserve_region(REGISTRY_REGION, SIZE, 4096, 0)?,
    };
    let at = region.offset;
    // SAFETY: the region was just reserved and no root points at it yet: nothing else reads
    // or writes it.
    unsafe { pool.write(at, &[0u8; SIZE as usize]) };
    pool.store_u64(at, MAGIC);
    pool.persist(at, SIZE as usize)?;
    pool.set_root(REGISTRY_ROOT, at)?;
    Ok(at)
}

/// Every valid entry.
pub(crate) fn entries(pool: &Pool, reg: PmOffset) -> Result<Vec<Entry>> {
    let count = pool.load_u64(reg.add(8));
    if count > MAX_POOLS as u64 {
        return Err(HallocError::Corrupt(format!("registry count {count}")));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = reg.add(ENTRIES_AT + i * ENTRY);
        let mut raw = [0u8; 24];
        // SAFETY: entries below the count are written once, before the count is advanced past
        // them, and never again.
        unsafe { pool.read(at, &mut raw) };
        let n = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        let word = |k: u64| pool.load_u64(at.add(24 + 8 * k));
        out.push(Entry {
            name: String::from_utf8_lossy(&raw[..n]).into_owned(),
            shape: PoolShape {
                kind: word(0),
                object_size: word(1),
                count: word(2),
            },
            base: PmOffset(word(3)),
        });
    }
    Ok(out)
}

/// Appends an entry (invariant R1).
pub(crate) fn add(pool: &Pool, reg: PmOffset, e: &Entry) -> Result<()> {
    let count = pool.load_u64(reg.add(8));
    if count >= MAX_POOLS as u64 {
        return Err(HallocError::RegistryFull { max: MAX_POOLS });
    }
    let at = reg.add(ENTRIES_AT + count * ENTRY);
    let mut buf = [0u8; ENTRY as usize];
    buf[..e.name.len()].copy_from_slice(e.name.as_bytes());
    for (k, v) in [
        e.shape.kind,
        e.shape.object_size,
        e.shape.count,
        e.base.get(),
    ]
    .into_iter()
    .enumerate()
    {
        buf[24 + 8 * k..32 + 8 * k].copy_from_slice(&v.to_le_bytes());
    }
    // SAFETY: the entry lies at the count, where no reader looks until the count is advanced
    // below; registrations are serialised by the caller.
    unsafe { pool.write(at, &buf) };
    pool.persist(at, buf.len())?;
    pool.persist_u64(reg.add(8), count + 1)?;
    Ok(())
}
