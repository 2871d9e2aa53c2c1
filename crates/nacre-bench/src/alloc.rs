//! `nacre-bench alloc`: allocation latency of Halloc (object pool, zone-backed appends) against
//! PMDK's `pmemobj_alloc`, same sizes, same tmpfs, same run (seed 000 §4.5, Figure 17).
//!
//! Each subject performs `allocs` allocations of each size, single thread. At most
//! `live_bytes` are live at once: allocations run in rounds, and everything is freed between
//! rounds (freeing is not timed). One untimed round first fills and frees the pool, so no
//! subject pays first-touch page faults on the fresh tmpfs file. What one allocation costs:
//! - Halloc object pool: `get` + `commit` (one flush, one fence).
//! - Halloc zone: bump a cursor inside a 4 MiB zone and persist it (one 8-byte persistent
//!   store), granting and committing a new zone when the current one is full; the way
//!   memtables allocate.
//! - pmemobj: `pmemobj_alloc` into a DRAM handle, with `PMEM_IS_PMEM_FORCE=1` so PMDK uses cache
//!   flushes on tmpfs like Halloc's `emulated` backend (both survive a process crash only).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use nacre_halloc::{Halloc, ObjId};
use nacre_pmem::{Backend, Pool, PoolOptions};

use crate::bench::{file_name, median, TempFile};
use crate::error::{BenchError, Result};

/// Parameters of `nacre-bench alloc`.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocConfig {
    /// Object sizes in bytes.
    pub sizes: Vec<u64>,
    /// Allocations per size and subject.
    pub allocs: u64,
    /// Most bytes live at once.
    pub live_bytes: u64,
    /// Zone size for the zone subject.
    pub zone_size: u64,
    /// Directory for pool files (tmpfs for the comparison the paper makes).
    pub dir: PathBuf,
    /// Repeats; the report shows the median.
    pub repeats: usize,
}

impl Default for AllocConfig {
    fn default() -> Self {
        AllocConfig {
            sizes: vec![128, 256, 1024, 4096, 16384],
            allocs: 1_000_000,
            live_bytes: 1 << 30,
            zone_size: 4 << 20,
            dir: crate::config::PmemConfig::default().shm_dir,
            repeats: 3,
        }
    }
}

/// One allocator at one size: nanoseconds per allocation, per repeat.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AllocRow {
    /// Subject name.
    pub allocator: &'static str,
    /// Object size.
    pub size: u64,
    /// ns per allocation in each repeat.
    pub ns: Vec<f64>,
    /// Why the subject could not run, if it could not.
    pub unavailable: Option<String>,
}

impl AllocRow {
    /// Median ns per allocation.
    pub fn median_ns(&self) -> f64 {
        median(&self.ns)
    }
}

fn live_objects(cfg: &AllocConfig, size: u64) -> u64 {
    (cfg.live_bytes / size).clamp(1, cfg.allocs)
}

fn pool_file(cfg: &AllocConfig, tag: &str, bytes: u64) -> Result<(TempFile, Arc<Pool>)> {
    let path = cfg.dir.join(file_name(tag));
    let tmp = TempFile::new(path.clone());
    let pool = Pool::create(&path, bytes, &PoolOptions::with_backend(Backend::Emulated))?;
    Ok((tmp, Arc::new(pool)))
}

/// Runs allocation rounds of at most `live` allocations until `cfg.allocs` were timed, after
/// one untimed warm-up round; `alloc(n)` performs `n` allocations (timed), `free()` releases a
/// round (not timed). Returns ns per allocation.
fn rounds(
    cfg: &AllocConfig,
    live: u64,
    mut alloc: impl FnMut(u64) -> Result<()>,
    mut free: impl FnMut() -> Result<()>,
) -> Result<f64> {
    let (mut done, mut secs) = (0u64, 0.0);
    let mut warm = true;
    while done < cfg.allocs {
        let n = if warm {
            live
        } else {
            live.min(cfg.allocs - done)
        };
        let t = Instant::now();
        alloc(n)?;
        let spent = t.elapsed().as_secs_f64();
        free()?;
        if !std::mem::take(&mut warm) {
            secs += spent;
            done += n;
        }
    }
    Ok(secs * 1e9 / cfg.allocs as f64)
}

fn halloc_objects(cfg: &AllocConfig, size: u64) -> Result<f64> {
    let live = live_objects(cfg, size);
    let shape = nacre_halloc::PoolShape {
        object_size: size,
        count: live,
        kind: 1,
    };
    let (_tmp, pool) = pool_file(cfg, "halloc-obj", shape.region_len() + (4 << 20))?;
    let h = Halloc::open(pool)?;
    let objs = h.object_pool("bench", size, live)?;
    let ids = std::cell::RefCell::new(Vec::<ObjId>::with_capacity(live as usize));
    rounds(
        cfg,
        live,
        |n| {
            let mut ids = ids.borrow_mut();
            for _ in 0..n {
                let id = objs.get()?;
                objs.commit(id)?;
                ids.push(id);
            }
            Ok(())
        },
        || {
            let mut ids = ids.borrow_mut();
            for chunk in ids.chunks(4096) {
                objs.release_many(chunk)?;
            }
            ids.clear();
            Ok(())
        },
    )
}

fn halloc_zones(cfg: &AllocConfig, size: u64) -> Result<f64> {
    if size > cfg.zone_size {
        return Err(BenchError::InvalidParams(format!(
            "size {size} exceeds zone size"
        )));
    }
    let live_bytes = live_objects(cfg, size) * size;
    let zones = live_bytes.div_ceil(cfg.zone_size) + 1;
    let shape = nacre_halloc::PoolShape {
        object_size: cfg.zone_size,
        count: zones,
        kind: 2,
    };
    let (_tmp, pool) = pool_file(cfg, "halloc-zone", shape.region_len() + (4 << 20))?;
    let h = Halloc::open(pool.clone())?;
    let zp = h.zone_pool("bench", cfg.zone_size, zones)?;
    // The owner: one word per zone slot, then the persisted cursor (zone slot << 32 | offset).
    let owner = pool.reserve_region("owner", 8 * (zones + 1), 64, 0)?;
    let cursor_at = owner.offset.add(8 * zones);
    let granted = std::cell::RefCell::new(Vec::<ObjId>::new());
    rounds(
        cfg,
        live_bytes / size,
        |n| {
            let mut granted = granted.borrow_mut();
            let mut cursor = cfg.zone_size; // forces a grant on the first allocation
            for _ in 0..n {
                if cursor + size > cfg.zone_size {
                    let z = zp.grant()?;
                    pool.store_u64(owner.offset.add(8 * granted.len() as u64), z.0 + 1);
                    zp.commit(z)?; // its fence also persists the owner's slot
                    granted.push(z);
                    cursor = 0;
                }
                cursor += size;
                pool.persist_u64(cursor_at, (granted.len() as u64) << 32 | cursor)?;
            }
            Ok(())
        },
        || {
            let mut granted = granted.borrow_mut();
            zp.reclaim(&granted)?;
            granted.clear();
            Ok(())
        },
    )
}

#[cfg(feature = "pmdk")]
fn pmemobj(cfg: &AllocConfig, size: u64) -> Result<f64> {
    let live = live_objects(cfg, size);
    let path = cfg.dir.join(file_name("pmemobj"));
    let _tmp = TempFile::new(path.clone());
    // PMDK rounds each allocation up to its size class and adds a 16-byte header.
    let bytes = (live * (size + 64)) * 5 / 4 + (64 << 20);
    let pool = std::cell::RefCell::new(crate::pmdk::PmdkPool::create(&path, bytes as usize)?);
    rounds(
        cfg,
        live,
        |n| {
            let mut pool = pool.borrow_mut();
            for _ in 0..n {
                pool.alloc(size as usize)?;
            }
            Ok(())
        },
        || {
            pool.borrow_mut().free_all();
            Ok(())
        },
    )
}

#[cfg(not(feature = "pmdk"))]
fn pmemobj(_: &AllocConfig, _: u64) -> Result<f64> {
    Err(BenchError::InvalidParams(
        "not built: rebuild with --features pmdk (needs libpmemobj-dev)".into(),
    ))
}

type Subject = (&'static str, fn(&AllocConfig, u64) -> Result<f64>);

const SUBJECTS: [Subject; 3] = [
    ("halloc object pool", halloc_objects),
    ("halloc zone", halloc_zones),
    ("pmemobj_alloc", pmemobj),
];

/// Runs every subject at every size, repeats interleaved.
pub fn run(cfg: &AllocConfig) -> Result<Vec<AllocRow>> {
    if cfg.sizes.is_empty() || cfg.allocs == 0 || cfg.repeats == 0 {
        return Err(BenchError::InvalidParams(
            "need sizes, allocations and repeats".into(),
        ));
    }
    if std::env::var_os("PMEM_IS_PMEM_FORCE").is_none() {
        // Process-global: set before PMDK (or any other thread) reads the environment.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
    }
    let mut rows: Vec<AllocRow> = Vec::new();
    for &size in &cfg.sizes {
        for (name, _) in SUBJECTS {
            rows.push(AllocRow {
                allocator: name,
                size,
                ns: Vec::new(),
                unavailable: None,
            });
        }
    }
    for rep in 0..cfg.repeats {
        for row in rows.iter_mut().filter(|r| r.unavailable.is_none()) {
            let f = SUBJECTS.iter().find(|s| s.0 == row.allocator).map(|s| s.1);
            let Some(f) = f else { continue };
            match f(cfg, row.size) {
                Ok(ns) => {
                    tracing::info!(
                        allocator = row.allocator,
                        size = row.size,
                        rep,
                        ns,
                        "measured"
                    );
                    row.ns.push(ns);
                }
                Err(e) => {
                    tracing::warn!(allocator = row.allocator, size = row.size, error = %e, "unavailable");
                    row.unavailable = Some(e.to_string());
                }
            }
        }
    }
    Ok(rows)
}

/// Markdown table: ns per allocation per size, and the pmemobj / Halloc ratios.
pub fn markdown(cfg: &AllocConfig, rows: &[AllocRow]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "## nacre-bench alloc\n");
    let _ = writeln!(
        s,
        "{} allocations per size, single thread, at most {} MiB live; pools on {} (Halloc: emulated backend; PMDK: PMEM_IS_PMEM_FORCE=1); median of {} repeats.\n",
        cfg.allocs,
        cfg.live_bytes >> 20,
        cfg.dir.display(),
        cfg.repeats
    );
    let _ = writeln!(s, "| size | halloc object pool ns | halloc zone ns | pmemobj_alloc ns | pmemobj / halloc pool | pmemobj / halloc zone |");
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for &size in &cfg.sizes {
        let get = |name: &str| rows.iter().find(|r| r.size == size && r.allocator == name);
        let cell = |r: Option<&AllocRow>| match r {
            Some(r) if r.unavailable.is_none() => crate::report::sig3(r.median_ns()),
            _ => "unavailable".into(),
        };
        let ratio = |a: Option<&AllocRow>, b: Option<&AllocRow>| match (a, b) {
            (Some(a), Some(b)) if a.unavailable.is_none() && b.unavailable.is_none() => {
                format!("{}x", crate::report::sig3(a.median_ns() / b.median_ns()))
            }
            _ => "-".into(),
        };
        let (p, z, o) = (
            get("halloc object pool"),
            get("halloc zone"),
            get("pmemobj_alloc"),
        );
        let _ = writeln!(
            s,
            "| {size} | {} | {} | {} | {} | {} |",
            cell(p),
            cell(z),
            cell(o),
            ratio(o, p),
            ratio(o, z)
        );
    }
    for r in rows.iter().filter(|r| r.unavailable.is_some()).take(1) {
        let _ = writeln!(
            s,
            "\n- {} unavailable: {}",
            r.allocator,
            r.unavailable.as_deref().unwrap_or("")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_measures_halloc_subjects() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let cfg = AllocConfig {
            sizes: vec![128, 4096],
            allocs: 3000,
            live_bytes: 1 << 20,
            zone_size: 64 << 10,
            dir: dir.path().to_path_buf(),
            repeats: 1,
        };
        let rows = run(&cfg)?;
        for r in rows.iter().filter(|r| r.allocator != "pmemobj_alloc") {
            assert!(r.unavailable.is_none(), "{r:?}");
            assert!(r.median_ns() > 0.0 && r.median_ns().is_finite(), "{r:?}");
        }
        let md = markdown(&cfg, &rows);
        assert!(md.contains("| 4096 |"), "{md}");
        assert_eq!(std::fs::read_dir(dir.path())?.count(), 0, "files left");
        Ok(())
    }
}
