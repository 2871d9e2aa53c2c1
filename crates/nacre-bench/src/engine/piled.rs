//! `nacre-bench piled-l0`: the Global Index against a piled-up L0 (seed 000 §4.4, Figure 15).
//! Random writes of 8-byte keys, then random reads and random scans, at a data size that fits
//! the Global Index, for several value sizes. The anchor is RocksDB's `db_bench` with
//! compactions off (so every flushed memtable stays an unsorted L0 file, as in the paper's
//! XS with L0->L1 compaction disabled), its WAL written but not synced, on the same tmpfs as
//! Nacre's `emulated` pool: both survive a process crash.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nacre::IterOptions;
use nacre_pmem::Backend;
use serde::Serialize;

use super::dbbench::TempDir;
use super::{mix64, put_footprint, require, BenchDb, EMULATED_SURVIVES};
use crate::error::{io_err, BenchError, Result};
use crate::report::{sig3, MachineInfo};

/// Parameters of `nacre-bench piled-l0`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct PiledConfig {
    /// Value sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 256, 1024, 4096])]
    pub value_sizes: Vec<usize>,
    /// Bytes of keys and values written per value size, in MiB.
    #[arg(long, default_value_t = 256)]
    pub data_mib: u64,
    /// Random reads.
    #[arg(long, default_value_t = 200_000)]
    pub reads: u64,
    /// Random scans (a seek and `scan_length` rows each).
    #[arg(long, default_value_t = 20_000)]
    pub scans: u64,
    /// Rows per scan.
    #[arg(long, default_value_t = 10)]
    pub scan_length: u64,
    /// RocksDB's memtable size in MiB (each flush adds an L0 file: data / this many files).
    #[arg(long, default_value_t = 4)]
    pub write_buffer_mib: u64,
    /// RocksDB's block cache in MiB (default: enough for the data, as the paper's 10 GB).
    #[arg(long, default_value_t = 1024)]
    pub cache_mib: u64,
    /// Directory of the pool and the RocksDB database [default: /dev/shm, else temp].
    #[arg(long)]
    pub shm_dir: Option<PathBuf>,
    /// The db_bench binary.
    #[arg(long, default_value = "/usr/bin/db_bench")]
    pub db_bench: PathBuf,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// One store at one value size: operations per second of each phase.
#[derive(Clone, Debug, Serialize)]
pub struct PiledRow {
    /// `nacre` or `rocksdb`.
    pub store: &'static str,
    /// Value bytes.
    pub value_size: usize,
    /// Records written.
    pub records: u64,
    /// Random writes per second.
    pub write: f64,
    /// Random reads per second.
    pub read: f64,
    /// Random scans per second.
    pub scan: f64,
    /// L0 files RocksDB held after the writes (Nacre: 0, its L0 is the Global Index).
    pub l0_files: u64,
}

const KEY: usize = 8;

fn key(i: u64) -> [u8; KEY] {
    mix64(i).to_be_bytes()
}

fn nacre(cfg: &PiledConfig, dir: &Path, value_size: usize, n: u64) -> Result<PiledRow> {
    let memtable = 64 << 20;
    let pool = super::pool_size_for(n * put_footprint(KEY, value_size), memtable);
    let bdb = BenchDb::create(dir, "piled", Backend::Emulated, pool, |o| {
        o.memtable_size = memtable;
    })?;
    let (db, t) = (&bdb.db, &bdb.table);
    let value: Vec<u8> = (0..value_size).map(|i| (i * 31 + 7) as u8).collect();
    let t0 = Instant::now();
    for i in 0..n {
        db.put(t, key(i), &value)?;
    }
    let write = n as f64 / t0.elapsed().as_secs_f64();
    // The paper's point is the Global Index: let the sealed memtables merge into it first.
    let t1 = Instant::now();
    while db
        .stats()
        .subtables
        .iter()
        .any(|s| s.immutable_memtables > 0)
    {
        if t1.elapsed().as_secs() > 120 {
            return Err(BenchError::InvalidParams(
                "merges did not finish in 2 minutes".into(),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let mut found = 0u64;
    for r in 0..cfg.reads {
        let i = mix64(r ^ 0x5EED) % n;
        found += u64::from(db.get(t, key(i))?.is_some());
    }
    let read = cfg.reads as f64 / t0.elapsed().as_secs_f64();
    if found != cfg.reads {
        return Err(BenchError::InvalidParams(format!(
            "Nacre found {found} of {} keys read",
            cfg.reads
        )));
    }
    let t0 = Instant::now();
    for s in 0..cfg.scans {
        let from = key(mix64(s ^ 0xCAFE) % n).to_vec();
        let it = db.iter(
            t,
            IterOptions {
                lower: Some(from),
                ..Default::default()
            },
        )?;
        for row in it.take(cfg.scan_length as usize) {
            row?;
        }
    }
    let scan = cfg.scans as f64 / t0.elapsed().as_secs_f64();
    Ok(PiledRow {
        store: "nacre",
        value_size,
        records: n,
        write,
        read,
        scan,
        l0_files: 0,
    })
}

/// The db_bench arguments for a database at `db`.
fn rocksdb_argv(cfg: &PiledConfig, db: &Path, value_size: usize, n: u64) -> Vec<String> {
    vec![
        "--benchmarks=fillrandom,readrandom,seekrandom,levelstats".into(),
        format!("--num={n}"),
        format!("--reads={}", cfg.reads),
        format!("--seek_nexts={}", cfg.scan_length),
        format!("--key_size={KEY}"),
        format!("--value_size={value_size}"),
        "--threads=1".into(),
        "--sync=0".into(),
        "--disable_wal=0".into(),
        "--compression_type=none".into(),
        format!("--write_buffer_size={}", cfg.write_buffer_mib << 20),
        format!("--cache_size={}", cfg.cache_mib << 20),
        "--bloom_bits=10".into(),
        "--disable_auto_compactions=1".into(),
        "--level0_file_num_compaction_trigger=1000000".into(),
        "--level0_slowdown_writes_trigger=1000000".into(),
        "--level0_stop_writes_trigger=1000000".into(),
        format!("--db={}", db.display()),
    ]
}

/// `name : X micros/op Y ops/sec` from db_bench's output.
fn ops_per_sec(out: &str, name: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let (n, rest) = l.split_once(':')?;
        if n.trim() != name {
            return None;
        }
        let toks: Vec<&str> = rest.split_whitespace().collect();
        let i = toks.iter().position(|t| *t == "ops/sec")?;
        toks.get(i.checked_sub(1)?)?.parse().ok()
    })
}

/// The L0 file count from db_bench's `levelstats` table (`  0  files size(MB)` rows).
fn l0_files(out: &str) -> Option<u64> {
    out.lines().find_map(|l| {
        let mut t = l.split_whitespace();
        (t.next()? == "0").then_some(())?;
        t.next()?.parse().ok()
    })
}

fn rocksdb(cfg: &PiledConfig, dir: &Path, value_size: usize, n: u64) -> Result<PiledRow> {
    let db = TempDir::fresh(dir.join(format!("nacre-bench-{}-piled", std::process::id())))?;
    let out = Command::new(&cfg.db_bench)
        .args(rocksdb_argv(cfg, db.path(), value_size, n))
        .output()
        .map_err(io_err("run", &cfg.db_bench))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let fail = |why: String| BenchError::Process {
        what: format!("{} piled-l0", cfg.db_bench.display()),
        why,
    };
    if !out.status.success() {
        return Err(fail(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let get = |name| ops_per_sec(&text, name).ok_or_else(|| fail(format!("no {name} line")));
    // db_bench's seekrandom counts each seek as one operation (its nexts included).
    Ok(PiledRow {
        store: "rocksdb",
        value_size,
        records: n,
        write: get("fillrandom")?,
        read: get("readrandom")?,
        scan: get("seekrandom")?,
        l0_files: l0_files(&text).unwrap_or(0),
    })
}

/// Runs both stores at every value size.
pub fn run(cfg: &PiledConfig) -> Result<(MachineInfo, Vec<PiledRow>)> {
    require(
        !cfg.value_sizes.is_empty()
            && cfg.value_sizes.iter().all(|&v| v > 0)
            && cfg.data_mib > 0
            && cfg.reads > 0
            && cfg.scans > 0,
        "piled-l0 needs value sizes, data, reads and scans above zero",
    )?;
    if let Some(why) = super::dbbench::unavailable(&cfg.db_bench) {
        return Err(BenchError::InvalidParams(why));
    }
    let dir = cfg.shm_dir.clone().unwrap_or_else(super::default_shm_dir);
    let mut rows = Vec::new();
    for &v in &cfg.value_sizes {
        let n = (cfg.data_mib << 20) / (KEY + v) as u64;
        tracing::info!(value_size = v, records = n, "piled-l0");
        rows.push(nacre(cfg, &dir, v, n)?);
        rows.push(rocksdb(cfg, &dir, v, n)?);
    }
    Ok((MachineInfo::collect(), rows))
}

/// The report.
pub fn markdown(cfg: &PiledConfig, machine: &MachineInfo, rows: &[PiledRow]) -> String {
    let mut s = String::from("## nacre-bench piled-l0\n\n");
    let _ = writeln!(s, "{}", super::machine_line(machine));
    let _ = writeln!(
        s,
        "{} MiB of 8-byte keys and values per value size, written in random order, then {} \
         random reads and {} random scans of {} rows, one thread. Nacre: `emulated` backend, \
         PM only (the data fits the Global Index), reads after the merges finished. RocksDB \
         (db_bench): compactions off so flushed memtables of {} MiB pile up in L0 (the \
         paper's XS with L0->L1 compaction disabled), WAL not synced, {} MiB block cache, 10 \
         bloom bits per key, no compression. Both in {}: an acknowledged write survives a \
         process crash ({EMULATED_SURVIVES}).\n",
        cfg.data_mib,
        cfg.reads,
        cfg.scans,
        cfg.scan_length,
        cfg.write_buffer_mib,
        cfg.cache_mib,
        cfg.shm_dir
            .clone()
            .unwrap_or_else(super::default_shm_dir)
            .display()
    );
    s.push_str(
        "| value bytes | records | RocksDB L0 files | write ops/s (Nacre / RocksDB) | x | read ops/s | x | scan ops/s | x |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for &v in &cfg.value_sizes {
        let find = |st: &str| rows.iter().find(|r| r.store == st && r.value_size == v);
        let (Some(n), Some(r)) = (find("nacre"), find("rocksdb")) else {
            continue;
        };
        let pair = |a: f64, b: f64| format!("{} / {} | {}x", sig3(a), sig3(b), sig3(a / b));
        let _ = writeln!(
            s,
            "| {v} | {} | {} | {} | {} | {} |",
            n.records,
            r.l0_files,
            pair(n.write, r.write),
            pair(n.read, r.read),
            pair(n.scan, r.scan),
        );
    }
    let argv: Vec<String> = rocksdb_argv(cfg, Path::new("DIR"), 0, 0)
        .into_iter()
        .map(|a| match a.as_str() {
            "--num=0" => "--num=RECORDS".into(),
            "--value_size=0" => "--value_size=VALUE_BYTES".into(),
            _ => a,
        })
        .collect();
    let _ = writeln!(
        s,
        "\nRocksDB command (per value size): `db_bench {}`\n",
        argv.join(" ")
    );
    s
}

/// `nacre-bench piled-l0`.
pub fn main(cfg: &PiledConfig) -> Result<()> {
    let (machine, rows) = run(cfg)?;
    super::emit(&markdown(cfg, &machine, &rows), cfg.json.as_deref(), || {
        rows.iter()
            .map(|r| {
                super::json_row(
                    "piled-l0",
                    &machine,
                    "emulated / db_bench sync=0",
                    EMULATED_SURVIVES,
                    serde_json::json!({"config": cfg, "store": r.store, "value_size": r.value_size}),
                    serde_json::json!(r),
                )
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_db_bench_lines_and_level_stats() {
        let out = "fillrandom   :       2.5 micros/op 400000 ops/sec 1.0 seconds\n\
                   readrandom   :       9.0 micros/op 111111 ops/sec\n\
                   Level Files Size(MB)\n--------------------\n  0       58      232\n  1        0        0\n";
        assert_eq!(ops_per_sec(out, "fillrandom"), Some(400000.0));
        assert_eq!(ops_per_sec(out, "readrandom"), Some(111111.0));
        assert_eq!(ops_per_sec(out, "seekrandom"), None);
        assert_eq!(l0_files(out), Some(58));
    }
}
