//! `nacre-bench recovery`: restart time after SIGKILL against PM data size and recovery
//! threads (seed 000 §3.1, invariant C5: recovery cost is bounded by PM data, not history).
//!
//! For each size: a child process (this binary, `recovery-child`) loads a fresh database on
//! the `emulated` backend with several writers and ~1 KiB values, says READY, and is
//! SIGKILLed. One untimed warm-up open follows (reported apart: the first process to rebuild
//! the index after the loader died pays extra page faults). Then for each thread count and
//! repeat, another child (`recovery-open`) times
//! `Db::open` with `recovery_threads = T` and the first successful `get` of a key acknowledged
//! before the crash, reports `Db::recovery_report()`, and is SIGKILLed too, so every open
//! recovers a crashed (not cleanly closed) database. One pool exists at a time; each is
//! removed before the next size.
//!
//! Anchors, same data and keys, same run: RocksDB (WAL on, not synced, database on the same
//! tmpfs) is loaded by a child the same way and SIGKILLed; its crashed directory is copied
//! aside, and each timed open starts from a fresh copy (RocksDB replays the WAL into a new
//! table file on open, so a second open would find nothing to replay). Every open also reads
//! a sample of loaded keys after the first one: "full service" is when all are found.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::recovery_child::{spawn_until, Engine};
use super::{put_footprint, require, EMULATED_SURVIVES};
use crate::bench::{file_name, median, TempFile};
use crate::error::{io_err, BenchError, Result};
use crate::features::{self, Feature, Selection};
use crate::report::{sig3, MachineInfo};

/// Largest data size accepted (the pool is ~1.5x this, on tmpfs: 16 GiB needs 24 GiB free
/// there, and the 8 GiB target 12 GiB).
pub const MAX_MIB: u64 = 16384;

/// The anchors measured when `--anchors` is not given (those this build has).
pub const DEFAULT_ANCHORS: [Engine; 2] = [Engine::Rocksdb, Engine::Redis];

/// The anchors to measure: checked against this build before anything runs (see
/// [`features::select`]).
pub fn anchors(cfg: &RecoveryConfig) -> Result<Selection<Engine>> {
    features::select(
        "--anchors",
        cfg.anchors.as_deref(),
        &DEFAULT_ANCHORS,
        Engine::needs,
        Feature::enabled,
    )
}

/// Parameters of `nacre-bench recovery`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct RecoveryConfig {
    /// User data sizes (keys + values) in MiB, comma-separated; at most 16384.
    #[arg(long, value_delimiter = ',', default_values_t = [64u64, 256, 1024])]
    pub sizes_mib: Vec<u64>,
    /// Recovery thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    pub threads: Vec<usize>,
    /// Writer threads loading the data.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Key bytes (at least 16).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Bytes per memtable, in MiB.
    #[arg(long, default_value_t = 64)]
    pub memtable_mib: u64,
    /// After the load, overwrite random loaded keys with this many times the loaded bytes
    /// (the restart then follows a long write history over the same live data).
    #[arg(long, default_value_t = 0)]
    pub overwrite_factor: u64,
    /// Nacre with `Options::persistent_index` (the Global Index's copy in PM written
    /// beside the volatile one, and reconciled at open).
    #[arg(long)]
    pub persistent_index: bool,
    /// Anchors measured beside Nacre, comma-separated (none: `--anchors` with no value)
    /// [default: rocksdb,redis; without the `rocksdb` feature RocksDB is left out, and the
    /// report says so]. A named anchor this build cannot run stops the command before
    /// anything runs.
    #[arg(long, value_enum, value_delimiter = ',', num_args = 0..)]
    pub anchors: Option<Vec<Engine>>,
    /// The redis-server binary for the `redis` anchor.
    #[arg(long, default_value = crate::resp::DEFAULT_REDIS_SERVER)]
    pub redis_server: PathBuf,
    /// Loaded keys each open reads after its first get (full service).
    #[arg(long, default_value_t = 1000)]
    pub sample: u64,
    /// Opens per size and thread count; the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Directory for the pool files [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The nacre-bench binary to re-execute as the children [default: this one].
    #[arg(long, hide = true)]
    pub exe: Option<PathBuf>,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// One engine, data size and thread count.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRow {
    /// The engine.
    pub engine: Engine,
    /// Why the engine could not be measured, if it could not (anchors only).
    pub unavailable: Option<String>,
    /// Requested user data in MiB.
    pub size_mib: u64,
    /// Records loaded before the crash.
    pub loaded_records: u64,
    /// Pool size in bytes.
    pub pool_size: u64,
    /// Seconds the load took (spawn to READY).
    pub load_secs: f64,
    /// The untimed warm-up open right after the loader's SIGKILL (most recovery threads).
    pub first_open: serde_json::Value,
    /// `Options::recovery_threads` (Nacre; 0 for anchors).
    pub threads: usize,
    /// Each open's `OPENED` report.
    pub opens: Vec<serde_json::Value>,
    /// Seconds from spawning each open child to its report (process start included).
    pub restart_secs: Vec<f64>,
}

impl RecoveryRow {
    fn ms(&self, field: &str) -> f64 {
        let v: Vec<f64> = self
            .opens
            .iter()
            .filter_map(|o| o[field].as_f64())
            .map(|ns| ns / 1e6)
            .collect();
        median(&v)
    }

    fn last(&self, field: &str) -> u64 {
        self.opens
            .last()
            .and_then(|o| o[field].as_u64())
            .unwrap_or(0)
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// What a load child reported.
struct Loaded {
    records: u64,
    per: String,
    probe: String,
    secs: f64,
}

fn load_child(exe: &std::path::Path, args: Vec<String>) -> Result<Loaded> {
    let (ready, secs) = spawn_until(exe, &args, "READY")?;
    let bad = || BenchError::Process {
        what: "recovery-child".into(),
        why: format!("bad READY line {ready:?}"),
    };
    Ok(Loaded {
        records: field(&ready, "records")
            .and_then(|x| x.parse().ok())
            .ok_or_else(bad)?,
        per: field(&ready, "per").ok_or_else(bad)?.to_string(),
        probe: field(&ready, "probe").ok_or_else(bad)?.to_string(),
        secs,
    })
}

/// One `recovery-open` child: its report and the seconds from spawn to the report.
fn open_once(
    cfg: &RecoveryConfig,
    exe: &std::path::Path,
    engine: Engine,
    path: &str,
    threads: usize,
    loaded: &Loaded,
) -> Result<(serde_json::Value, f64)> {
    let engine = engine.name();
    let args = [
        "recovery-open",
        "--engine",
        engine,
        "--path",
        path,
        "--threads",
        &threads.to_string(),
        "--probe",
        &loaded.probe,
        "--writers",
        &cfg.writers.to_string(),
        "--per",
        &loaded.per,
        "--key-size",
        &cfg.key_size.max(16).to_string(),
        "--sample",
        &cfg.sample.to_string(),
    ]
    .map(String::from)
    .to_vec();
    let mut args = args;
    if cfg.persistent_index {
        args.push("--persistent-index".into());
    }
    let (line, secs) = spawn_until(exe, &args, "OPENED")?;
    let v: serde_json::Value = serde_json::from_str(&line)?;
    // The child reports after waiting for a background index rebuild too; restart ends at
    // full service (the child's own clock gives the wait).
    let waited = match (v["rebuilt_ns"].as_f64(), v["full_service_ns"].as_f64()) {
        (Some(r), Some(f)) if r > f => (r - f) / 1e9,
        _ => 0.0,
    };
    Ok((v, secs - waited))
}

/// Copies the files of directory `from` (no subdirectories) into a new directory `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(io_err("create", to))?;
    for e in std::fs::read_dir(from).map_err(io_err("read", from))? {
        let e = e.map_err(io_err("read", from))?;
        let dest = to.join(e.file_name());
        std::fs::copy(e.path(), &dest).map_err(io_err("copy to", &dest))?;
    }
    Ok(())
}

/// The RocksDB anchor for one size: load, SIGKILL, then each open from a copy of the crashed
/// directory.
fn rocksdb_size(cfg: &RecoveryConfig, exe: &std::path::Path, mib: u64) -> Result<RecoveryRow> {
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let path = dir.join(file_name(&format!("recovery-rocksdb-{mib}")));
    let crashed = dir.join(file_name(&format!("recovery-rocksdb-{mib}-crashed")));
    let _guards = (
        super::dbbench::TempDir::fresh(path.clone())?,
        super::dbbench::TempDir::fresh(crashed.clone())?,
    );
    let p = path.display().to_string();
    let mut args = load_args(cfg, mib, &p, 0, 0);
    args.extend(["--engine".to_string(), "rocksdb".to_string()]);
    tracing::info!(mib, path = %p, "loading RocksDB, then SIGKILL");
    let loaded = load_child(exe, args)?;
    copy_dir(&path, &crashed)?;
    let mut row = RecoveryRow {
        engine: Engine::Rocksdb,
        unavailable: None,
        size_mib: mib,
        loaded_records: loaded.records,
        pool_size: 0,
        load_secs: loaded.secs,
        first_open: serde_json::Value::Null,
        threads: 0,
        opens: Vec::new(),
        restart_secs: Vec::new(),
    };
    for rep in 0..cfg.repeats {
        std::fs::remove_dir_all(&path).map_err(io_err("remove", &path))?;
        copy_dir(&crashed, &path)?;
        let (v, secs) = open_once(cfg, exe, Engine::Rocksdb, &p, 0, &loaded)?;
        tracing::info!(mib, rep, report = %v, "RocksDB recovered");
        row.opens.push(v);
        row.restart_secs.push(secs);
    }
    Ok(row)
}

fn load_args(cfg: &RecoveryConfig, mib: u64, path: &str, pool: u64, memtable: u64) -> Vec<String> {
    let klen = cfg.key_size.max(16);
    [
        "recovery-child",
        "--path",
        path,
        "--bytes",
        &(mib << 20).to_string(),
        "--pool-size",
        &pool.to_string(),
        "--memtable-size",
        &memtable.to_string(),
        "--writers",
        &cfg.writers.to_string(),
        "--key-size",
        &klen.to_string(),
        "--value-size",
        &cfg.value_size.to_string(),
        "--overwrites",
        &((mib << 20) * cfg.overwrite_factor).to_string(),
    ]
    .map(String::from)
    .into_iter()
    .chain(
        cfg.persistent_index
            .then(|| "--persistent-index".to_string()),
    )
    .collect()
}

fn one_size(cfg: &RecoveryConfig, exe: &std::path::Path, mib: u64) -> Result<Vec<RecoveryRow>> {
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let path = dir.join(file_name(&format!("recovery-{mib}")));
    let _file = TempFile::new(path.clone());
    if path.exists() {
        std::fs::remove_file(&path).map_err(io_err("remove stale pool", &path))?;
    }
    let klen = cfg.key_size.max(16);
    let bytes = mib << 20;
    let records = bytes.div_ceil((klen + cfg.value_size) as u64);
    let memtable = cfg.memtable_mib << 20;
    let pool = super::pool_size_for(records * put_footprint(klen, cfg.value_size), memtable);
    let p = path.display().to_string();
    let args = load_args(cfg, mib, &p, pool, memtable);
    tracing::info!(mib, pool, path = %p, "loading, then SIGKILL");
    let loaded = load_child(exe, args)?;
    // Every open starts from the pool as the crash left it: an open that finishes its work
    // changes it (with the persistent index, the background rebuild marks the memtables it
    // merged), and each timed open must recover the same crash.
    let crashed = path.with_extension("crashed");
    let _crashed = TempFile::new(crashed.clone());
    std::fs::copy(&path, &crashed).map_err(io_err("copy the crashed pool to", &crashed))?;
    let fresh = || -> Result<()> {
        std::fs::copy(&crashed, &path).map_err(io_err("restore the crashed pool to", &path))?;
        Ok(())
    };
    let most = cfg.threads.iter().copied().max().unwrap_or(1);
    fresh()?;
    let first_open = open_once(cfg, exe, Engine::Nacre, &p, most, &loaded)?.0;
    tracing::info!(mib, threads = most, report = %first_open, "first open after the crash (warm-up)");
    let mut rows: Vec<RecoveryRow> = cfg
        .threads
        .iter()
        .map(|&threads| RecoveryRow {
            engine: Engine::Nacre,
            unavailable: None,
            size_mib: mib,
            loaded_records: loaded.records,
            pool_size: pool,
            load_secs: loaded.secs,
            first_open: first_open.clone(),
            threads,
            opens: Vec::new(),
            restart_secs: Vec::new(),
        })
        .collect();
    for rep in 0..cfg.repeats {
        for row in rows.iter_mut() {
            fresh()?;
            let (v, secs) = open_once(cfg, exe, Engine::Nacre, &p, row.threads, &loaded)?;
            tracing::info!(mib, threads = row.threads, rep, report = %v, "recovered");
            if v["clean"].as_bool() != Some(false) {
                tracing::warn!(mib, "open found a clean close: not a crash recovery");
            }
            row.opens.push(v);
            row.restart_secs.push(secs);
        }
    }
    Ok(rows)
}

/// Every size and thread count.
pub fn run(cfg: &RecoveryConfig) -> Result<(MachineInfo, Vec<RecoveryRow>)> {
    require(
        !cfg.sizes_mib.is_empty()
            && cfg.sizes_mib.iter().all(|&m| m > 0 && m <= MAX_MIB)
            && !cfg.threads.is_empty()
            && cfg.threads.iter().all(|&t| t > 0)
            && cfg.writers > 0
            && cfg.value_size > 0
            && cfg.memtable_mib > 0
            && cfg.repeats > 0,
        "recovery needs sizes of 1..=16384 MiB, thread counts, writers, a value size, a \
         memtable size and repeats",
    )?;
    let anchors = anchors(cfg)?;
    if let Some(note) = anchors.left_out_note() {
        tracing::warn!("recovery anchors: {note}");
    }
    let exe = super::child_exe(&cfg.exe)?;
    let mut rows = Vec::new();
    for &mib in &cfg.sizes_mib {
        rows.extend(one_size(cfg, &exe, mib)?);
        for &anchor in &anchors.run {
            let r = match anchor {
                Engine::Nacre => continue,
                Engine::Rocksdb => rocksdb_size(cfg, &exe, mib),
                Engine::Redis => super::recovery_redis::redis_size(cfg, mib),
            };
            match r {
                Ok(row) => rows.push(row),
                Err(e) => {
                    tracing::warn!(?anchor, error = %e, "recovery anchor unavailable");
                    rows.push(RecoveryRow {
                        engine: anchor,
                        unavailable: Some(e.to_string()),
                        size_mib: mib,
                        loaded_records: 0,
                        pool_size: 0,
                        load_secs: f64::NAN,
                        first_open: serde_json::Value::Null,
                        threads: 0,
                        opens: Vec::new(),
                        restart_secs: Vec::new(),
                    });
                }
            }
        }
    }
    Ok((MachineInfo::collect(), rows))
}

/// The report printed to stdout.
pub fn markdown(cfg: &RecoveryConfig, machine: &MachineInfo, rows: &[RecoveryRow]) -> String {
    let mut s = String::from("## nacre-bench recovery\n\n");
    let _ = writeln!(s, "{}", super::machine_line(machine));
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let _ = writeln!(
        s,
        "Emulated backend, pools in {} ({EMULATED_SURVIVES}). A child process loads the data \
         ({} writers, {}-byte keys, {}-byte values, {} MiB memtables) and is SIGKILLed; each \
         open runs in a fresh process that is SIGKILLed after its first `get`, so every open \
         recovers a crashed database, each from a copy of the pool as the crash left it \
         (RocksDB: from a fresh copy of the crashed directory, WAL \
         on, not synced, same directory, same keys and values); an untimed warm-up open runs \
         first for Nacre (the first process to \
         rebuild the DRAM index after the loader died pays extra page-zeroing faults on this \
         VM). `Db::open` and first get are timed in that process from \
         just before `Db::open`; full service: the first get plus {} gets of random loaded keys, \
         all found; restart adds process start (spawn to full service). With the persistent \
         index, open may serve reads before the volatile Global Index is rebuilt in the \
         background: index rebuilt is when that was done (scans, merges and the cleaner wait \
         for it). Median of {} opens.\n",
        dir.display(),
        cfg.writers,
        cfg.key_size.max(16),
        cfg.value_size,
        cfg.memtable_mib,
        cfg.sample,
        cfg.repeats
    );
    if let Some(note) = anchors(cfg).ok().and_then(|a| a.left_out_note()) {
        let _ = writeln!(s, "Anchors {note}.\n");
    }
    s.push_str(
        "| engine | data MiB | records | memtables | MiB scanned | recovery threads | open ms | \
         recovery_report.elapsed ms | first get ms | full service ms | restart ms | \
         index rebuilt ms |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let name = match r.engine {
            Engine::Nacre => "Nacre (emulated)",
            Engine::Rocksdb => "RocksDB (WAL, sync=0)",
            Engine::Redis => "Redis (AOF, appendfsync no)",
        };
        if let Some(why) = &r.unavailable {
            let _ = writeln!(
                s,
                "| {name} | {} | unavailable: {} | | | | | | | | | |",
                r.size_mib,
                why.replace('|', "/")
            );
            continue;
        }
        let used = r.last("threads");
        let threads = match r.engine {
            Engine::Rocksdb | Engine::Redis => "-".to_string(),
            Engine::Nacre if used as usize == r.threads || used == 0 => r.threads.to_string(),
            Engine::Nacre => format!("{} (used {used})", r.threads),
        };
        let nacre_only = |x: String| {
            if r.engine == Engine::Nacre {
                x
            } else {
                "-".into()
            }
        };
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | {} | {threads} | {} | {} | {} | {} | {} | {} |",
            r.size_mib,
            r.loaded_records,
            nacre_only(r.last("memtables").to_string()),
            nacre_only(sig3(r.last("bytes_scanned") as f64 / (1 << 20) as f64)),
            sig3(r.ms("open_ns")),
            nacre_only(sig3(r.ms("elapsed_ns"))),
            sig3(r.ms("first_get_ns")),
            sig3(r.ms("full_service_ns")),
            sig3(median(&r.restart_secs) * 1e3),
            if r.opens
                .last()
                .and_then(|o| o["background_rebuild"].as_bool())
                == Some(true)
            {
                sig3(r.ms("rebuilt_ns"))
            } else {
                "-".into()
            }
        );
    }
    s.push('\n');
    let mut seen = Vec::new();
    for r in rows.iter().filter(|r| r.engine == Engine::Nacre) {
        if seen.contains(&r.size_mib) {
            continue;
        }
        seen.push(r.size_mib);
        let first = &r.first_open;
        let _ = writeln!(
            s,
            "- {} MiB: {} records loaded in {} s, pool {} MiB; first open after the crash \
             (warm-up, not in the table, {} threads): {} ms",
            r.size_mib,
            r.loaded_records,
            sig3(r.load_secs),
            r.pool_size >> 20,
            first["threads"],
            sig3(first["open_ns"].as_f64().unwrap_or(f64::NAN) / 1e6)
        );
    }
    s
}

/// One JSON object per size and thread count.
pub fn json_rows(
    cfg: &RecoveryConfig,
    machine: &MachineInfo,
    rows: &[RecoveryRow],
) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            let mut params = serde_json::json!(cfg);
            let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
            params["dir"] = dir.display().to_string().into();
            params["size_mib"] = r.size_mib.into();
            params["recovery_threads"] = r.threads.into();
            params["pool_size"] = r.pool_size.into();
            params["engine"] = serde_json::json!(r.engine);
            let results = serde_json::json!({
                "available": r.unavailable.is_none(), "unavailable_reason": r.unavailable,
                "full_service_ms_median": r.ms("full_service_ns"),
                "loaded_records": r.loaded_records, "load_secs": r.load_secs,
                "open_ms_median": r.ms("open_ns"), "first_get_ms_median": r.ms("first_get_ns"),
                "recovery_elapsed_ms_median": r.ms("elapsed_ns"),
                "restart_ms_median": median(&r.restart_secs) * 1e3,
                "opens": r.opens, "restart_secs": r.restart_secs, "first_open": r.first_open,
            });
            let backend = match r.engine {
                Engine::Nacre => "emulated",
                Engine::Rocksdb => "sync=0",
                Engine::Redis => "aof-no",
            };
            super::json_row(
                "recovery",
                machine,
                backend,
                EMULATED_SURVIVES,
                params,
                results,
            )
        })
        .collect()
}

/// `nacre-bench recovery`: runs, prints the table, writes JSON lines if asked.
pub fn main(cfg: &RecoveryConfig) -> Result<()> {
    let (machine, rows) = run(cfg)?;
    super::emit(&markdown(cfg, &machine, &rows), cfg.json.as_deref(), || {
        json_rows(cfg, &machine, &rows)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        recovery: RecoveryConfig,
    }

    fn anchors_of(args: &[&str]) -> Result<Selection<Engine>> {
        let argv = std::iter::once("recovery").chain(args.iter().copied());
        match Cli::try_parse_from(argv) {
            Ok(c) => anchors(&c.recovery),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn default_anchors_are_those_this_build_has() {
        let sel = match anchors_of(&[]) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        if cfg!(feature = "rocksdb") {
            assert_eq!(sel.run, DEFAULT_ANCHORS);
            assert!(sel.left_out.is_empty());
        } else {
            assert_eq!(sel.run, [Engine::Redis]);
            assert_eq!(sel.left_out, [(Engine::Rocksdb, Feature::Rocksdb)]);
        }
    }

    #[test]
    fn named_anchors_are_checked_and_none_means_none() {
        let sel = anchors_of(&["--anchors"]);
        assert!(sel.is_ok_and(|s| s.run.is_empty() && s.left_out.is_empty()));
        let sel = anchors_of(&["--anchors", "redis"]);
        assert!(sel.is_ok_and(|s| s.run == [Engine::Redis]));
        let r = anchors_of(&["--anchors", "rocksdb,redis"]);
        assert_eq!(r.is_ok(), cfg!(feature = "rocksdb"), "{r:?}");
        match r {
            Ok(s) => assert_eq!(s.run, DEFAULT_ANCHORS),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("`rocksdb` feature") && text.contains("--anchors"),
                    "{text}"
                );
            }
        }
    }
}
