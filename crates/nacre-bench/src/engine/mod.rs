//! Engine benchmarks: the `nacre` engine through its public API (`Db::put`, `Db::get`,
//! `Db::open`), each beside its anchor or sweep in the same run (DESIGN.md §7).
//!
//! - [`ror`]: `nacre-bench ror`, Reorder Ring throughput and latency against batch size and
//!   writer threads.
//! - [`memtable`]: `nacre-bench memtable`, memtable inserts and lookups against a DRAM
//!   skip-list memtable (the paper's SLM).
//! - [`fill`]: `nacre-bench fillrandom`, durable random puts against RocksDB's `db_bench`
//!   ([`dbbench`]).
//! - [`forever`]: `nacre-bench forever`, YCSB A until many pools are written: throughput
//!   over time, write amplification, the cleaner's work.
//! - [`async_writes`]: `nacre-bench async`, `Db::write_async` with batches queued against
//!   `Db::put`.
//! - [`verify`]: `nacre-bench verify`, `Db::verify()` throughput against a crc32c loop.
//! - [`recovery`]: `nacre-bench recovery`, restart time after SIGKILL against data size and
//!   recovery threads (children in [`recovery_child`]).
//!
//! Every database here lives in a pool file this process creates and removes ([`BenchDb`]).

pub mod async_writes;
pub mod dbbench;
pub mod fill;
pub mod forever;
pub mod memtable;
pub mod piled;
pub mod recovery;
pub mod recovery_child;
pub mod recovery_redis;
pub mod ror;
pub mod verify;

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Instant;

use nacre::{Db, Options, Subtable, DEFAULT_SUBTABLE};
use nacre_pmem::Backend;

use crate::bench::{file_name, percentile, TempFile};
use crate::error::{io_err, BenchError, Result};
use crate::report::MachineInfo;

/// What an acknowledged write on the `emulated` backend on tmpfs survives.
pub const EMULATED_SURVIVES: &str = "process crash only";
/// What an acknowledged write on the `msync` backend on a disk file survives.
pub const MSYNC_SURVIVES: &str = "power loss";

/// The tmpfs directory pools go to by default: /dev/shm, else the temp dir.
pub fn default_shm_dir() -> PathBuf {
    crate::config::PmemConfig::default().shm_dir
}

/// Bijective 64-bit mix (the SplitMix64 finaliser): distinct inputs give distinct, uniformly
/// spread outputs, so `mix64(i)` numbers random keys without duplicates and any thread can
/// recompute key `i`.
pub fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// PM bytes one put of a `klen`-byte key and `vlen`-byte value may take: its record plus, at
/// worst, an item header of its own.
pub fn put_footprint(klen: usize, vlen: usize) -> u64 {
    nacre::put_footprint(klen, vlen)
}

/// A pool size that holds `data` bytes of records: 1.5x the data, two spare memtables (the
/// active one may be mostly empty when it switches) and 64 MiB of metadata, in whole MiB.
pub fn pool_size_for(data: u64, memtable_size: u64) -> u64 {
    let bytes = data + data / 2 + 2 * memtable_size + (64 << 20);
    bytes.next_multiple_of(1 << 20)
}

/// A database on a pool file this run created; closing drops the database, then removes the
/// file.
pub struct BenchDb {
    /// The database.
    pub db: Db,
    /// The subtable benchmarks write to.
    pub table: Subtable,
    _file: TempFile,
    _disk: Option<dbbench::TempDir>,
}

impl BenchDb {
    /// Creates a fresh database in `dir` (file named after this process and `tag`) with
    /// `backend`, `pool_size` bytes, and `tune` applied to the options.
    pub fn create(
        dir: &Path,
        tag: &str,
        backend: Backend,
        pool_size: u64,
        tune: impl FnOnce(&mut Options),
    ) -> Result<BenchDb> {
        let path = dir.join(file_name(tag));
        let file = TempFile::new(path.clone());
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err("remove stale pool", &path)(e))
            }
            _ => {}
        }
        let mut opts = Options::new(&path).backend(backend);
        opts.pool_size = pool_size;
        tune(&mut opts);
        // Disk levels the options name are this run's too (removed after the database).
        let disk = match &opts.disk_dir {
            Some(d) => Some(dbbench::TempDir::fresh(d.clone())?),
            None => None,
        };
        let db = Db::open(opts)?;
        let table = db.subtable(DEFAULT_SUBTABLE)?;
        Ok(BenchDb {
            db,
            table,
            _file: file,
            _disk: disk,
        })
    }
}

/// The binary a benchmark re-executes for its child processes: `exe`, else this one.
pub fn child_exe(exe: &Option<PathBuf>) -> Result<PathBuf> {
    match exe {
        Some(e) => Ok(e.clone()),
        None => std::env::current_exe().map_err(io_err("find", Path::new("nacre-bench"))),
    }
}

/// Runs `f(thread)` for `thread` in `0..threads`, started together behind a barrier. Returns
/// the wall seconds from the common start to the last thread's end, and each thread's output.
pub fn run_threads<R: Send>(
    threads: usize,
    f: impl Fn(usize) -> Result<R> + Sync,
) -> Result<(f64, Vec<R>)> {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(t)
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        let mut out = Vec::with_capacity(threads);
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(r)) => out.push(r),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err = first_err.or(Some(BenchError::Process {
                        what: "benchmark thread".into(),
                        why: "panicked".into(),
                    }))
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        match first_err {
            Some(e) => Err(e),
            None => Ok((secs, out)),
        }
    })
}

/// Mean and 99th percentile (nanoseconds) of per-operation samples; sorts them.
pub fn mean_p99(samples: &mut [u64]) -> (f64, f64) {
    samples.sort_unstable();
    let sum: u128 = samples.iter().map(|&x| u128::from(x)).sum();
    let mean = if samples.is_empty() {
        f64::NAN
    } else {
        sum as f64 / samples.len() as f64
    };
    (mean, percentile(samples, 99.0))
}

/// The one-line machine description every report starts with.
pub fn machine_line(m: &MachineInfo) -> String {
    format!(
        "Machine: {} ({} CPUs), Linux {}, clock source {}.",
        m.cpu_model, m.nproc, m.kernel, m.clocksource
    )
}

/// One JSON-lines row: the bench, machine, backend, durability, parameters and results.
pub fn json_row(
    bench: &str,
    machine: &MachineInfo,
    backend: &str,
    durability: &str,
    params: serde_json::Value,
    results: serde_json::Value,
) -> serde_json::Value {
    let unix_time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    serde_json::json!({
        "bench": bench, "unix_time": unix_time, "machine": machine, "backend": backend,
        "durability": durability, "params": params, "results": results,
    })
}

/// Writes `rows` as JSON lines to `path` (replaced if it exists), creating its directory.
pub fn write_json(path: &Path, rows: &[serde_json::Value]) -> Result<()> {
    let mut text = String::new();
    for r in rows {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    write_json_text(path, &text, rows.len())
}

/// Writes `text` (`rows` JSON lines) to `path` (replaced if it exists), creating its
/// directory.
pub fn write_json_text(path: &Path, text: &str, rows: usize) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    }
    std::fs::write(path, text).map_err(io_err("write", path))?;
    tracing::info!(path = %path.display(), rows, "wrote JSON lines");
    Ok(())
}

/// Prints a benchmark's table and, if `json` is set, writes its rows as JSON lines.
pub fn emit(
    table: &str,
    json: Option<&Path>,
    rows: impl FnOnce() -> Vec<serde_json::Value>,
) -> Result<()> {
    print!("{table}");
    match json {
        Some(path) => write_json(path, &rows()),
        None => Ok(()),
    }
}

/// Checks that every list is non-empty and every count positive.
pub fn require(ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(BenchError::InvalidParams(what.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_is_spread_and_distinct() {
        let keys: std::collections::HashSet<u64> = (0..10_000).map(mix64).collect();
        assert_eq!(keys.len(), 10_000);
        assert_ne!(mix64(0), 0);
    }

    #[test]
    fn mean_p99_and_pool_size() {
        let mut s: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(mean_p99(&mut s), (50.5, 99.0));
        assert!(mean_p99(&mut []).0.is_nan());
        let p = pool_size_for(100 << 20, 64 << 20);
        assert_eq!(p % (1 << 20), 0);
        assert!(p >= (150 << 20) + (128 << 20));
    }

    #[test]
    fn threads_start_together_and_errors_surface() {
        let (secs, out) = run_threads(3, |t| Ok(t * 2)).unwrap_or_else(|e| panic!("{e}"));
        assert!(secs >= 0.0);
        assert_eq!(out, [0, 2, 4]);
        let r = run_threads(2, |t| {
            if t == 1 {
                Err(BenchError::InvalidParams("boom".into()))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(BenchError::InvalidParams(_))));
    }
}
