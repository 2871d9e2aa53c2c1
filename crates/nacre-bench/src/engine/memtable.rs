//! `nacre-bench memtable`: memtable insert and point-lookup throughput (seed 000 §3.1), 8-byte
//! keys (23-byte YCSB keys, `user` and 19 digits, all sharing their first bytes) and 32-byte
//! values, sequential, random and YCSB key orders, 1..T threads. Nacre inserts
//! through `Db::write` with `--records-per-write` records per `WriteBatch` (default 50, the
//! paper's "ROR batch size 50", so the commit is amortised and the memtable itself is
//! measured: records persisted in PM zones plus the volatile index; `1` measures one durable
//! commit per put) and looks up through `Db::get`; the anchor is a DRAM memtable on crossbeam's lock-free skip list
//! (`SkipMap<Vec<u8>, Vec<u8>>`), standing in for the paper's SLM. Both copy the value out on
//! a lookup.
//!
//! Thread `t` of `T` owns keys `t*N/T .. (t+1)*N/T`: inserted in ascending order
//! (sequential), as `mix64(i)` (random) or as YCSB's hashed keys, then looked up in the same
//! order.
//!
//! Each measurement runs in a child process of its own (this binary, `memtable-one`), so no
//! subject starts on a heap the previous one fragmented: freed skip-list nodes left in the
//! allocator's free lists slowed the next Nacre run by up to 40% when both ran in one process.

use std::fmt::Write as _;
use std::path::PathBuf;

use crossbeam_skiplist::SkipMap;
use nacre_pmem::Backend;
use serde::Serialize;

use super::{mix64, put_footprint, require, BenchDb, EMULATED_SURVIVES};
use crate::bench::median;
use crate::error::{io_err, BenchError, Result};
use crate::report::{sig3, MachineInfo};

const VALUE: usize = 32;

/// Parameters of `nacre-bench memtable`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct MemtableConfig {
    /// Keys per measurement (split across the threads).
    #[arg(long, default_value_t = 400_000)]
    pub keys: u64,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4])]
    pub threads: Vec<usize>,
    /// Key orders, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [Order::Sequential, Order::Random, Order::Ycsb])]
    pub orders: Vec<Order>,
    /// Nacre's `Options::batch_size`.
    #[arg(long, default_value_t = 50)]
    pub batch_size: usize,
    /// Records per Nacre `WriteBatch` (1: a durable commit per put).
    #[arg(long, default_value_t = 50)]
    pub records_per_write: usize,
    /// Nacre's `Options::commit_buckets` (default: the engine's default, 4, so writer
    /// threads lead their own groups and copy and index in parallel).
    #[arg(long, default_value_t = 4)]
    pub commit_buckets: usize,
    /// Repeats of each measurement; the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Directory for the pool files [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Measure in this process instead of a child process per measurement.
    #[arg(long)]
    pub in_process: bool,
    /// The nacre-bench binary to re-execute as the children [default: this one].
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub exe: Option<PathBuf>,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// `memtable-one`: one measurement, run by `memtable` in a child process.
#[derive(clap::Args, Clone, Debug)]
pub struct OneArgs {
    /// The memtable measured.
    #[arg(long, value_enum)]
    pub subject: Subject,
    /// Key order.
    #[arg(long, value_enum)]
    pub order: Order,
    /// Threads.
    #[arg(long)]
    pub threads: usize,
    /// Keys.
    #[arg(long)]
    pub keys: u64,
    /// Nacre's `Options::batch_size`.
    #[arg(long)]
    pub batch_size: usize,
    /// Records per Nacre `WriteBatch`.
    #[arg(long)]
    pub records_per_write: usize,
    /// Nacre's `Options::commit_buckets`.
    #[arg(long)]
    pub commit_buckets: usize,
    /// Directory for the pool file.
    #[arg(long)]
    pub dir: PathBuf,
}

/// What a child prints before its two figures.
const ONE_TAG: &str = "MEMTABLE";

/// `memtable-one`: measures and prints `MEMTABLE <insert Mops/s> <lookup Mops/s>`.
pub fn one_main(a: &OneArgs) -> Result<()> {
    let cfg = MemtableConfig {
        keys: a.keys,
        threads: vec![a.threads],
        orders: vec![a.order],
        batch_size: a.batch_size,
        records_per_write: a.records_per_write,
        commit_buckets: a.commit_buckets,
        repeats: 1,
        dir: Some(a.dir.clone()),
        in_process: true,
        exe: None,
        json: None,
    };
    let (ins, get) = measure(&cfg, a.subject, a.order, a.threads)?;
    println!("{ONE_TAG} {ins} {get}");
    Ok(())
}

fn measure(
    cfg: &MemtableConfig,
    subject: Subject,
    order: Order,
    threads: usize,
) -> Result<(f64, f64)> {
    match subject {
        Subject::Nacre => nacre(cfg, order, threads),
        Subject::Slm => slm(cfg, order, threads),
    }
}

/// The command-line spelling of a value.
fn arg_name(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// One measurement in a child process of `exe`.
fn measure_child(
    cfg: &MemtableConfig,
    exe: &std::path::Path,
    subject: Subject,
    order: Order,
    threads: usize,
) -> Result<(f64, f64)> {
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let out = std::process::Command::new(exe)
        .arg("memtable-one")
        .args([
            "--subject",
            &arg_name(&subject),
            "--order",
            &arg_name(&order),
        ])
        .args([
            "--threads",
            &threads.to_string(),
            "--keys",
            &cfg.keys.to_string(),
        ])
        .args(["--batch-size", &cfg.batch_size.to_string()])
        .args(["--records-per-write", &cfg.records_per_write.to_string()])
        .args(["--commit-buckets", &cfg.commit_buckets.to_string()])
        .arg("--dir")
        .arg(&dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(io_err("run", exe))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let figures = text.lines().find_map(|l| {
        let mut t = l.strip_prefix(ONE_TAG)?.split_whitespace();
        Some((t.next()?.parse().ok()?, t.next()?.parse().ok()?))
    });
    match figures {
        Some(f) if out.status.success() => Ok(f),
        _ => Err(BenchError::Process {
            what: format!("{} memtable-one", exe.display()),
            why: format!("{} with output {text:?}", out.status),
        }),
    }
}

/// Key order.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Ascending within each thread's range.
    Sequential,
    /// `mix64` of the index.
    Random,
    /// YCSB's keys: `user` and the index's hash in 19 decimal digits, in hashed order. Every
    /// key shares its first bytes.
    Ycsb,
}

/// The memtable measured.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// Nacre `Db::put` / `Db::get`.
    Nacre,
    /// DRAM skip list.
    Slm,
}

/// One subject, order and thread count: Mops/s per repeat.
#[derive(Clone, Debug, Serialize)]
pub struct MemtableRow {
    /// Subject.
    pub subject: Subject,
    /// Key order.
    pub order: Order,
    /// Threads.
    pub threads: usize,
    /// Insert Mops/s per repeat.
    pub insert_mops: Vec<f64>,
    /// Lookup Mops/s per repeat.
    pub lookup_mops: Vec<f64>,
}

impl MemtableRow {
    fn insert(&self) -> f64 {
        median(&self.insert_mops)
    }
    fn lookup(&self) -> f64 {
        median(&self.lookup_mops)
    }
}

/// A key of up to 23 bytes, built without allocating.
#[derive(Clone, Copy)]
struct Key {
    b: [u8; 23],
    n: usize,
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        &self.b[..self.n]
    }
}

fn key(order: Order, i: u64) -> Key {
    let mut k = Key { b: [0; 23], n: 8 };
    match order {
        Order::Sequential => k.b[..8].copy_from_slice(&i.to_be_bytes()),
        Order::Random => k.b[..8].copy_from_slice(&mix64(i).to_be_bytes()),
        Order::Ycsb => {
            k.b[..4].copy_from_slice(b"user");
            let mut h = mix64(i) % 10_000_000_000_000_000_000;
            for d in k.b[4..].iter_mut().rev() {
                *d = b'0' + (h % 10) as u8;
                h /= 10;
            }
            k.n = 23;
        }
    }
    k
}

/// The key's bytes repeated (a few copies, no per-byte work: this is not what is measured).
fn value(k: &Key) -> [u8; VALUE] {
    let mut v = [0u8; VALUE];
    for c in v.chunks_mut(k.n) {
        c.copy_from_slice(&k.as_ref()[..c.len()]);
    }
    v
}

fn range(n: u64, threads: usize, t: usize) -> std::ops::Range<u64> {
    let per = |t: usize| n * t as u64 / threads as u64;
    per(t)..per(t + 1)
}

fn missing(what: &str, k: &Key) -> BenchError {
    BenchError::Process {
        what: what.into(),
        why: format!(
            "lookup of inserted key {:02x?} found no 32-byte value",
            k.as_ref()
        ),
    }
}

fn nacre(cfg: &MemtableConfig, order: Order, threads: usize) -> Result<(f64, f64)> {
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let memtable = 64 << 20;
    let pool = super::pool_size_for(cfg.keys * put_footprint(23, VALUE), memtable);
    let bdb = BenchDb::create(&dir, "memtable", Backend::Emulated, pool, |o| {
        o.batch_size = cfg.batch_size;
        o.commit_buckets = cfg.commit_buckets;
        o.memtable_size = memtable;
    })?;
    let (db, table) = (&bdb.db, &bdb.table);
    let (put_s, _) = super::run_threads(threads, |t| {
        let mut batch = nacre::WriteBatch::new();
        for i in range(cfg.keys, threads, t) {
            let k = key(order, i);
            batch.put(table, k, value(&k));
            if batch.len() >= cfg.records_per_write {
                db.write(std::mem::take(&mut batch))?;
            }
        }
        db.write(batch)?;
        Ok(())
    })?;
    let (get_s, _) = super::run_threads(threads, |t| {
        for i in range(cfg.keys, threads, t) {
            let k = key(order, i);
            match db.get(table, k)? {
                Some(v) if v.len() == VALUE => {}
                _ => return Err(missing("nacre", &k)),
            }
        }
        Ok(())
    })?;
    let n = cfg.keys as f64;
    Ok((n / put_s / 1e6, n / get_s / 1e6))
}

fn slm(cfg: &MemtableConfig, order: Order, threads: usize) -> Result<(f64, f64)> {
    let map: SkipMap<Vec<u8>, Vec<u8>> = SkipMap::new();
    let (put_s, _) = super::run_threads(threads, |t| {
        for i in range(cfg.keys, threads, t) {
            let k = key(order, i);
            map.insert(k.as_ref().to_vec(), value(&k).to_vec());
        }
        Ok(())
    })?;
    let (get_s, _) = super::run_threads(threads, |t| {
        for i in range(cfg.keys, threads, t) {
            let k = key(order, i);
            match map.get(k.as_ref()).map(|e| e.value().clone()) {
                Some(v) if v.len() == VALUE => {}
                _ => return Err(missing("slm", &k)),
            }
        }
        Ok(())
    })?;
    let n = cfg.keys as f64;
    Ok((n / put_s / 1e6, n / get_s / 1e6))
}

/// Every subject, order and thread count; the two subjects of a configuration run back to
/// back, repeats interleaved.
pub fn run(cfg: &MemtableConfig) -> Result<(MachineInfo, Vec<MemtableRow>)> {
    require(
        cfg.keys > 0
            && cfg.repeats > 0
            && cfg.batch_size > 0
            && cfg.records_per_write > 0
            && cfg.commit_buckets > 0
            && !cfg.threads.is_empty()
            && !cfg.orders.is_empty()
            && cfg.threads.iter().all(|&t| t > 0),
        "memtable needs keys, repeats, batch size, buckets, thread counts above zero and an order",
    )?;
    let exe = if cfg.in_process {
        None
    } else {
        Some(super::child_exe(&cfg.exe)?)
    };
    let mut rows = Vec::new();
    for &order in &cfg.orders {
        for &threads in &cfg.threads {
            for subject in [Subject::Nacre, Subject::Slm] {
                rows.push(MemtableRow {
                    subject,
                    order,
                    threads,
                    insert_mops: Vec::new(),
                    lookup_mops: Vec::new(),
                });
            }
        }
    }
    for rep in 0..cfg.repeats {
        for row in rows.iter_mut() {
            let (ins, get) = match &exe {
                Some(exe) => measure_child(cfg, exe, row.subject, row.order, row.threads)?,
                None => measure(cfg, row.subject, row.order, row.threads)?,
            };
            tracing::info!(subject = ?row.subject, order = ?row.order, threads = row.threads,
                rep, insert_mops = ins, lookup_mops = get, "memtable measured");
            row.insert_mops.push(ins);
            row.lookup_mops.push(get);
        }
    }
    Ok((MachineInfo::collect(), rows))
}

/// The report printed to stdout.
pub fn markdown(cfg: &MemtableConfig, machine: &MachineInfo, rows: &[MemtableRow]) -> String {
    let mut s = String::from("## nacre-bench memtable\n\n");
    let _ = writeln!(s, "{}", super::machine_line(machine));
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let _ = writeln!(
        s,
        "{} keys per measurement (8-byte keys; 23 for YCSB keys; {VALUE}-byte values), split across the threads. \
         Nacre: `Db::write` of {} records per `WriteBatch` (batch_size {}, commit_buckets {}) \
         then `Db::get` of every key, \
         emulated backend, pools in {} ({EMULATED_SURVIVES}). SLM: crossbeam \
         `SkipMap<Vec<u8>, Vec<u8>>` in DRAM (survives nothing). {}. Median of {} repeats. Ratio = \
         Nacre / SLM (target 2x).\n",
        cfg.keys,
        cfg.records_per_write,
        cfg.batch_size,
        cfg.commit_buckets,
        dir.display(),
        if cfg.in_process {
            "All measurements in one process"
        } else {
            "Each measurement in a fresh process"
        },
        cfg.repeats
    );
    s.push_str(
        "| keys | threads | Nacre insert Mops/s | SLM insert Mops/s | insert Nacre/SLM | \
         Nacre lookup Mops/s | SLM lookup Mops/s | lookup Nacre/SLM |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for &order in &cfg.orders {
        for &t in &cfg.threads {
            let get = |sub| {
                rows.iter()
                    .find(|r| r.subject == sub && r.order == order && r.threads == t)
            };
            let (Some(n), Some(d)) = (get(Subject::Nacre), get(Subject::Slm)) else {
                continue;
            };
            let name = match order {
                Order::Sequential => "sequential",
                Order::Random => "random",
                Order::Ycsb => "ycsb keys",
            };
            let _ = writeln!(
                s,
                "| {name} | {t} | {} | {} | {}x | {} | {} | {}x |",
                sig3(n.insert()),
                sig3(d.insert()),
                sig3(n.insert() / d.insert()),
                sig3(n.lookup()),
                sig3(d.lookup()),
                sig3(n.lookup() / d.lookup())
            );
        }
    }
    s.push('\n');
    s
}

/// One JSON object per row.
pub fn json_rows(
    cfg: &MemtableConfig,
    machine: &MachineInfo,
    rows: &[MemtableRow],
) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            let mut params = serde_json::json!(cfg);
            let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
            params["dir"] = dir.display().to_string().into();
            params["subject"] = serde_json::json!(r.subject);
            params["order"] = serde_json::json!(r.order);
            params["threads_measured"] = r.threads.into();
            params["key_bytes"] = 8.into();
            params["value_bytes"] = VALUE.into();
            let (backend, durability) = match r.subject {
                Subject::Nacre => ("emulated", EMULATED_SURVIVES),
                Subject::Slm => ("dram", "nothing (volatile)"),
            };
            let results = serde_json::json!({
                "insert_mops": {"median": r.insert(), "values": r.insert_mops},
                "lookup_mops": {"median": r.lookup(), "values": r.lookup_mops},
            });
            super::json_row("memtable", machine, backend, durability, params, results)
        })
        .collect()
}

/// `nacre-bench memtable`: runs, prints the table, writes JSON lines if asked.
pub fn main(cfg: &MemtableConfig) -> Result<()> {
    let (machine, rows) = run(cfg)?;
    super::emit(&markdown(cfg, &machine, &rows), cfg.json.as_deref(), || {
        json_rows(cfg, &machine, &rows)
    })
}
