//! `nacre-bench ror`: Reorder Ring commit throughput and per-put latency (seed 000 §3.2),
//! 24-byte records (8-byte random key, 16-byte value) through `Db::put` by T writer threads,
//! swept over the group batch size (`Options::batch_size`) and over the writer threads.
//!
//! Each measurement opens a fresh database on the `emulated` backend (tmpfs: an acknowledged
//! put survives a process crash only), times every put with `Instant`, and reports the median
//! over repeats of throughput, mean and p99 latency.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use nacre_pmem::Backend;
use serde::Serialize;

use super::{mix64, put_footprint, require, BenchDb, EMULATED_SURVIVES};
use crate::bench::{clock_overhead_ns, median};
use crate::error::Result;
use crate::report::{sig3, MachineInfo};

const KEY: usize = 8;
const VALUE: usize = 16;

/// Parameters of `nacre-bench ror`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct RorConfig {
    /// Puts per writer thread in each measurement.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Batch sizes of the batch sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 5, 10, 25, 50, 100])]
    pub batch_sizes: Vec<usize>,
    /// Writer threads of the batch sweep.
    #[arg(long, default_value_t = 4)]
    pub batch_threads: usize,
    /// Writer threads of the thread sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8])]
    pub threads: Vec<usize>,
    /// Batch size of the thread sweep.
    #[arg(long, default_value_t = 50)]
    pub thread_batch: usize,
    /// Leader/follower buckets (`Options::commit_buckets`). With one bucket per writer no
    /// put ever waits for a leader, so grouping (and the batch size) has no effect.
    #[arg(long, default_value_t = 1)]
    pub commit_buckets: usize,
    /// Groups in flight (`Options::ring_capacity`).
    #[arg(long, default_value_t = 64)]
    pub ring_capacity: usize,
    /// Repeats of each measurement; the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Directory for the pool files [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 0x524F_52)]
    pub seed: u64,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// Which sweep a row belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sweep {
    /// Batch size varies, threads fixed.
    BatchSize,
    /// Threads vary, batch size fixed.
    Threads,
}

/// One measured configuration, every repeat.
#[derive(Clone, Debug, Serialize)]
pub struct RorRow {
    /// The sweep.
    pub sweep: Sweep,
    /// `Options::batch_size`.
    pub batch_size: usize,
    /// Writer threads.
    pub threads: usize,
    /// Million puts per second, per repeat.
    pub mops: Vec<f64>,
    /// Mean ns per put, per repeat.
    pub mean_ns: Vec<f64>,
    /// 99th percentile ns per put, per repeat.
    pub p99_ns: Vec<f64>,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct RorRun {
    /// The machine.
    pub machine: MachineInfo,
    /// Cost of the clock reads included in each latency sample.
    pub clock_overhead_ns: f64,
    /// Rows, batch sweep first.
    pub rows: Vec<RorRow>,
}

/// Measures one configuration once: returns (Mops/s, mean ns, p99 ns).
fn measure(cfg: &RorConfig, batch: usize, threads: usize, rep: usize) -> Result<(f64, f64, f64)> {
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let memtable = 64 << 20;
    let data = cfg.records * threads as u64 * put_footprint(KEY, VALUE);
    let pool = super::pool_size_for(data, memtable);
    let bdb = BenchDb::create(&dir, "ror", Backend::Emulated, pool, |o| {
        o.batch_size = batch;
        o.commit_buckets = cfg.commit_buckets;
        o.ring_capacity = cfg.ring_capacity;
        o.memtable_size = memtable;
    })?;
    let (db, table) = (&bdb.db, &bdb.table);
    let seed = cfg.seed ^ ((rep as u64) << 48);
    let (secs, samples) = super::run_threads(threads, |t| {
        let mut lat: Vec<u64> = Vec::with_capacity(cfg.records as usize);
        let base = seed.wrapping_add((t as u64) << 40);
        let mut value = [0u8; VALUE];
        for i in 0..cfg.records {
            let key = mix64(base.wrapping_add(i)).to_be_bytes();
            value[..8].copy_from_slice(&i.to_le_bytes());
            let t0 = Instant::now();
            db.put(table, key, value)?;
            lat.push(t0.elapsed().as_nanos() as u64);
        }
        Ok(lat)
    })?;
    let mut all: Vec<u64> = samples.into_iter().flatten().collect();
    let ops = all.len() as f64;
    let (mean, p99) = super::mean_p99(&mut all);
    Ok((ops / secs / 1e6, mean, p99))
}

/// Runs both sweeps, repeats interleaved.
pub fn run(cfg: &RorConfig) -> Result<RorRun> {
    require(
        cfg.records > 0
            && cfg.repeats > 0
            && !cfg.batch_sizes.is_empty()
            && !cfg.threads.is_empty()
            && cfg.batch_threads > 0
            && cfg.thread_batch > 0
            && cfg.batch_sizes.iter().chain(&cfg.threads).all(|&x| x > 0),
        "ror needs records, repeats, batch sizes and thread counts above zero",
    )?;
    let mut rows: Vec<RorRow> = Vec::new();
    let mut add = |sweep, batch_size, threads| {
        rows.push(RorRow {
            sweep,
            batch_size,
            threads,
            mops: Vec::new(),
            mean_ns: Vec::new(),
            p99_ns: Vec::new(),
        })
    };
    for &b in &cfg.batch_sizes {
        add(Sweep::BatchSize, b, cfg.batch_threads);
    }
    for &t in &cfg.threads {
        add(Sweep::Threads, cfg.thread_batch, t);
    }
    for rep in 0..cfg.repeats {
        for row in rows.iter_mut() {
            let (mops, mean, p99) = measure(cfg, row.batch_size, row.threads, rep)?;
            tracing::info!(
                sweep = ?row.sweep, batch = row.batch_size, threads = row.threads, rep,
                mops, mean_ns = mean, p99_ns = p99, "ror measured"
            );
            row.mops.push(mops);
            row.mean_ns.push(mean);
            row.p99_ns.push(p99);
        }
    }
    Ok(RorRun {
        machine: MachineInfo::collect(),
        clock_overhead_ns: clock_overhead_ns(),
        rows,
    })
}

/// The report printed to stdout.
pub fn markdown(cfg: &RorConfig, run: &RorRun) -> String {
    let mut s = String::from("## nacre-bench ror\n\n");
    let _ = writeln!(s, "{}", super::machine_line(&run.machine));
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let _ = writeln!(
        s,
        "Backend: emulated, pools in {} ({EMULATED_SURVIVES}: an acknowledged put survives a \
         process crash, not a power loss). {KEY}-byte random keys, {VALUE}-byte values (24-byte \
         records) through `Db::put`, {} puts per writer thread, commit_buckets {}, \
         ring_capacity {}; fresh database per measurement; median of {} repeats. Latency: every \
         put timed with `Instant` (each sample includes ~{} ns of clock reads). A group holds at \
         most one put per writer (each put waits for its commit), so batch sizes above the \
         writer count cannot fill.\n",
        dir.display(),
        cfg.records,
        cfg.commit_buckets,
        cfg.ring_capacity,
        cfg.repeats,
        sig3(run.clock_overhead_ns)
    );
    for (sweep, title) in [
        (
            Sweep::BatchSize,
            format!("Batch size sweep ({} writer threads)", cfg.batch_threads),
        ),
        (
            Sweep::Threads,
            format!("Writer thread sweep (batch size {})", cfg.thread_batch),
        ),
    ] {
        let _ = writeln!(s, "### {title}\n");
        s.push_str("| batch size | threads | Mops/s | avg latency µs | p99 latency µs |\n");
        s.push_str("|---|---|---|---|---|\n");
        for r in run.rows.iter().filter(|r| r.sweep == sweep) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                r.batch_size,
                r.threads,
                sig3(median(&r.mops)),
                sig3(median(&r.mean_ns) / 1e3),
                sig3(median(&r.p99_ns) / 1e3)
            );
        }
        s.push('\n');
    }
    s
}

/// One JSON object per row.
pub fn json_rows(cfg: &RorConfig, run: &RorRun) -> Vec<serde_json::Value> {
    run.rows
        .iter()
        .map(|r| {
            let mut params = serde_json::json!(cfg);
            let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
            params["dir"] = dir.display().to_string().into();
            params["key_bytes"] = KEY.into();
            params["value_bytes"] = VALUE.into();
            params["sweep"] = serde_json::json!(r.sweep);
            params["batch_size"] = r.batch_size.into();
            params["writer_threads"] = r.threads.into();
            params["clock_overhead_ns"] = run.clock_overhead_ns.into();
            let results = serde_json::json!({
                "mops": {"median": median(&r.mops), "values": r.mops},
                "mean_ns": {"median": median(&r.mean_ns), "values": r.mean_ns},
                "p99_ns": {"median": median(&r.p99_ns), "values": r.p99_ns},
            });
            super::json_row(
                "ror",
                &run.machine,
                "emulated",
                EMULATED_SURVIVES,
                params,
                results,
            )
        })
        .collect()
}

/// `nacre-bench ror`: runs, prints the table, writes JSON lines if asked.
pub fn main(cfg: &RorConfig) -> Result<()> {
    let run = run(cfg)?;
    super::emit(&markdown(cfg, &run), cfg.json.as_deref(), || {
        json_rows(cfg, &run)
    })
}
