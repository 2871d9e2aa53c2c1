//! `nacre-bench forever`: YCSB workload A (50% reads, 50% updates of whole 1 KiB records,
//! scrambled zipfian) on a pool whose live data is a given fraction of it, run until many
//! times the pool has been written: merges into the Global Index and zone cleaning carry the
//! whole run. Reports throughput per tenth of the run (the last against the first), update
//! p99 and p99.9 per tenth, PM write amplification (PM bytes written per user byte) and what
//! the cleaner did. The `emulated` backend on tmpfs: an acknowledged write survives a process
//! crash only.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nacre_pmem::{Backend, SplitMix64};
use serde::Serialize;

use super::{require, BenchDb, EMULATED_SURVIVES};
use crate::error::{BenchError, Result};
use crate::report::MachineInfo;
use crate::ycsb::generators::{NumberGenerator, ScrambledZipfian};

/// Parameters of `nacre-bench forever`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct ForeverConfig {
    /// Pool size in MiB.
    #[arg(long, default_value_t = 256)]
    pub pool_mib: u64,
    /// Live data (records loaded) as a fraction of the pool.
    #[arg(long, default_value_t = 0.5)]
    pub live_fraction: f64,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1000)]
    pub value_bytes: usize,
    /// Stop once updates have written this many times the pool.
    #[arg(long, default_value_t = 20)]
    pub write_factor: u64,
    /// Memtable size in MiB.
    #[arg(long, default_value_t = 16)]
    pub memtable_mib: u64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Directory for the pool [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the request streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write one JSON object with the results to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// One tenth of the run.
#[derive(Clone, Debug, Serialize)]
pub struct Tenth {
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Update latency percentiles, microseconds.
    pub update_p99_us: f64,
    /// Update latency 99.9th percentile, microseconds.
    pub update_p999_us: f64,
}

/// The results.
#[derive(Clone, Debug, Serialize)]
pub struct ForeverRun {
    /// The machine.
    pub machine: MachineInfo,
    /// Records loaded.
    pub records: u64,
    /// Operations run.
    pub operations: u64,
    /// Wall seconds of the run (load excluded).
    pub seconds: f64,
    /// Operations per second over the run.
    pub ops_per_sec: f64,
    /// Operations per second, each second of the run.
    pub per_second: Vec<u64>,
    /// The run in tenths.
    pub tenths: Vec<Tenth>,
    /// Last tenth's throughput over the first's.
    pub last_over_first: f64,
    /// User bytes (keys and values) the run wrote.
    pub user_bytes: u64,
    /// User bytes written over the pool size.
    pub pools_written: f64,
    /// PM bytes written during the run per user byte (item headers, records, relocations).
    pub write_amplification: f64,
    /// Bytes the cleaner moved during the run.
    pub cleaner_moved_bytes: u64,
    /// Zones the cleaner gave back during the run.
    pub zones_freed: u64,
    /// Writer stalls and their total time.
    pub stalls: u64,
    /// Seconds writers spent stalled.
    pub stall_secs: f64,
    /// Live bytes at the end (Global Index plus memtables).
    pub live_bytes: u64,
}

fn key(i: u64) -> Vec<u8> {
    format!("user{:019}", super::mix64(i)).into_bytes()
}

fn value(i: u64, n: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(i ^ n) as u8; len];
    v[..8].copy_from_slice(&n.to_le_bytes());
    v
}

/// Loads the records, then runs workload A until `write_factor` pools are written.
pub fn run(cfg: &ForeverConfig) -> Result<ForeverRun> {
    require(
        cfg.pool_mib >= 16
            && cfg.live_fraction > 0.0
            && cfg.live_fraction < 0.9
            && cfg.value_bytes > 8
            && cfg.threads > 0
            && cfg.write_factor > 0,
        "pool >= 16 MiB, 0 < live fraction < 0.9, values above 8 bytes, threads and write factor >= 1",
    )?;
    let dir = cfg.dir.clone().unwrap_or_else(super::default_shm_dir);
    let pool = cfg.pool_mib << 20;
    let record = super::put_footprint(23, cfg.value_bytes);
    let records = (pool as f64 * cfg.live_fraction / record as f64) as u64;
    let bdb = BenchDb::create(&dir, "forever", Backend::Emulated, pool, |o| {
        o.memtable_size = cfg.memtable_mib << 20;
    })?;
    let (db, table) = (&bdb.db, &bdb.table);
    let (_, _) = super::run_threads(cfg.threads, |t| {
        let mut i = t as u64;
        while i < records {
            db.put(table, key(i), value(i, 0, cfg.value_bytes))?;
            i += cfg.threads as u64;
        }
        Ok(())
    })?;
    let before = db.stats();
    let target = cfg.write_factor * pool;
    let per_thread_bytes = target / cfg.threads as u64;
    let start = Instant::now();
    let (secs, per_thread) = super::run_threads(cfg.threads, |t| {
        let mut rng = SplitMix64::new(cfg.seed ^ (t as u64) << 32);
        let mut zipf = ScrambledZipfian::new(0, records - 1);
        let mut ops: Vec<u64> = Vec::new();
        let mut hists: Vec<Histogram<u64>> = Vec::new();
        let mut written = 0u64;
        let mut n = 0u64;
        while written < per_thread_bytes {
            let i = zipf.next_value(&mut rng);
            n += 1;
            let t0 = Instant::now();
            let update = rng.next_u64() % 2 == 0;
            if update {
                let k = key(i);
                written += (k.len() + cfg.value_bytes) as u64;
                db.put(table, k, value(i, n, cfg.value_bytes))?;
            } else if db.get(table, key(i))?.is_none() {
                return Err(BenchError::InvalidParams(format!("record {i} missing")));
            }
            let end = Instant::now();
            let sec = end.duration_since(start).as_secs() as usize;
            if ops.len() <= sec {
                ops.resize(sec + 1, 0);
                while hists.len() <= sec {
                    hists.push(
                        Histogram::new(3)
                            .map_err(|e| BenchError::InvalidParams(format!("histogram: {e}")))?,
                    );
                }
            }
            ops[sec] += 1;
            if update {
                let us = end.duration_since(t0).as_nanos().max(1) as u64;
                let _ = hists[sec].record(us);
            }
        }
        Ok((ops, hists))
    })?;
    let after = db.stats();
    let mut per_second: Vec<u64> = Vec::new();
    let mut hists: Vec<Histogram<u64>> = Vec::new();
    for (ops, hs) in per_thread {
        if per_second.len() < ops.len() {
            per_second.resize(ops.len(), 0);
        }
        for (s, n) in ops.iter().enumerate() {
            per_second[s] += n;
        }
        for (s, h) in hs.into_iter().enumerate() {
            match hists.get_mut(s) {
                Some(x) => {
                    let _ = x.add(&h);
                }
                None => hists.push(h),
            }
        }
    }
    let operations: u64 = per_second.iter().sum();
    let tenths = tenths(&per_second, &hists, secs)?;
    let user_bytes = after.user_bytes_written - before.user_bytes_written;
    let pm_bytes = after.pm_bytes_written - before.pm_bytes_written;
    let last_over_first = match (tenths.first(), tenths.last()) {
        (Some(f), Some(l)) if f.ops_per_sec > 0.0 => l.ops_per_sec / f.ops_per_sec,
        _ => 0.0,
    };
    Ok(ForeverRun {
        machine: MachineInfo::collect(),
        records,
        operations,
        seconds: secs,
        ops_per_sec: operations as f64 / secs,
        per_second,
        tenths,
        last_over_first,
        user_bytes,
        pools_written: user_bytes as f64 / pool as f64,
        write_amplification: pm_bytes as f64 / user_bytes.max(1) as f64,
        cleaner_moved_bytes: after.cleaner_moved_bytes - before.cleaner_moved_bytes,
        zones_freed: after.cleaner_zones_freed - before.cleaner_zones_freed,
        stalls: after.stalls - before.stalls,
        stall_secs: (after.stall_time.saturating_sub(before.stall_time)).as_secs_f64(),
        live_bytes: after.live_bytes,
    })
}

/// Splits the run's seconds into ten equal spans (whole seconds; a run of fewer than ten
/// seconds is an error).
fn tenths(per_second: &[u64], hists: &[Histogram<u64>], secs: f64) -> Result<Vec<Tenth>> {
    let n = per_second.len();
    require(
        n >= 10,
        "the run must last at least ten seconds (raise --write-factor)",
    )?;
    let mut out = Vec::new();
    for t in 0..10 {
        let (a, b) = (t * n / 10, (t + 1) * n / 10);
        // The last second is partial: time it by the run's end.
        let span = if b == n {
            secs - a as f64
        } else {
            (b - a) as f64
        };
        let ops: u64 = per_second[a..b].iter().sum();
        let mut h = Histogram::<u64>::new(3)
            .map_err(|e| BenchError::InvalidParams(format!("histogram: {e}")))?;
        for x in &hists[a..b.min(hists.len())] {
            let _ = h.add(x);
        }
        out.push(Tenth {
            ops_per_sec: ops as f64 / span.max(1e-9),
            update_p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
            update_p999_us: h.value_at_quantile(0.999) as f64 / 1e3,
        });
    }
    Ok(out)
}

/// The results as markdown.
pub fn render(cfg: &ForeverConfig, r: &ForeverRun) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "YCSB A (zipfian, 50% reads, 50% updates of {} B values), Nacre `emulated` ({EMULATED_SURVIVES}), {} MiB pool, {:.0}% live ({} records), memtables {} MiB, {} threads; {} {}",
        cfg.value_bytes,
        cfg.pool_mib,
        cfg.live_fraction * 100.0,
        r.records,
        cfg.memtable_mib,
        cfg.threads,
        super::machine_line(&r.machine),
        Duration::from_secs_f64(r.seconds).as_secs()
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "| tenth | ops/s | update p99 us | update p99.9 us |");
    let _ = writeln!(s, "|---|---|---|---|");
    for (i, t) in r.tenths.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.1} | {:.1} |",
            i + 1,
            t.ops_per_sec,
            t.update_p99_us,
            t.update_p999_us
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| ops | seconds | ops/s | last/first tenth | pools written | PM write amplification | cleaner moved MiB | zones freed | stalls | stall s |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        s,
        "| {} | {:.1} | {:.0} | {:.2} | {:.1} | {:.2} | {:.1} | {} | {} | {:.2} |",
        r.operations,
        r.seconds,
        r.ops_per_sec,
        r.last_over_first,
        r.pools_written,
        r.write_amplification,
        r.cleaner_moved_bytes as f64 / (1u64 << 20) as f64,
        r.zones_freed,
        r.stalls,
        r.stall_secs
    );
    s
}

/// `nacre-bench forever`: runs, prints the tables, writes the JSON object.
pub fn main(cfg: &ForeverConfig) -> Result<()> {
    let run = run(cfg)?;
    super::emit(&render(cfg, &run), cfg.json.as_deref(), || {
        let mut row = serde_json::json!(run);
        row["bench"] = "forever".into();
        row["params"] = serde_json::json!(cfg);
        row["backend"] = "emulated".into();
        row["survives"] = EMULATED_SURVIVES.into();
        vec![row]
    })
}
