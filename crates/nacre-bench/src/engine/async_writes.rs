//! `nacre-bench async`: puts through `Db::write_async` with a window of batches queued per
//! client thread (as a server's connections queue pipelined writes), against `Db::put` from the
//! same threads in the same run. Reports puts per second and puts per group commit.

use std::time::Instant;

use nacre::WriteBatch;
use nacre_pmem::Backend;

use super::{default_shm_dir, BenchDb, EMULATED_SURVIVES, MSYNC_SURVIVES};
use crate::error::Result;

/// Parameters of `nacre-bench async`.
#[derive(clap::Args, Clone, Debug)]
pub struct AsyncConfig {
    /// Puts per client thread.
    #[arg(long, default_value_t = 20_000)]
    pub puts: u64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Batches each thread keeps queued.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 16, 64])]
    pub windows: Vec<usize>,
    /// Backend: emulated (pool in --dir, default /dev/shm) or msync (pool in --disk-dir).
    #[arg(long, default_value = "emulated")]
    pub backend: String,
    /// Directory of the pool for `emulated`.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Directory of the pool for `msync`.
    #[arg(long, default_value = "bench-results")]
    pub disk_dir: std::path::PathBuf,
    /// Value bytes.
    #[arg(long, default_value_t = 128)]
    pub value_bytes: usize,
}

/// (puts per second, puts per group commit) of one measurement.
fn run(cfg: &AsyncConfig, window: Option<usize>) -> Result<(f64, f64)> {
    let msync = cfg.backend == "msync";
    let (dir, backend) = if msync {
        std::fs::create_dir_all(&cfg.disk_dir)
            .map_err(crate::error::io_err("create", &cfg.disk_dir))?;
        (cfg.disk_dir.clone(), Backend::Msync)
    } else {
        (
            cfg.dir.clone().unwrap_or_else(default_shm_dir),
            Backend::Emulated,
        )
    };
    let bench = BenchDb::create(&dir, "async", backend, 256 << 20, |o| {
        o.memtable_size = 16 << 20;
    })?;
    let (db, t) = (&bench.db, &bench.table);
    let value = vec![0x61u8; cfg.value_bytes];
    let before = db.stats().commit_groups;
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..cfg.threads)
            .map(|th| {
                let value = &value;
                s.spawn(move || -> Result<()> {
                    let mut queued = std::collections::VecDeque::new();
                    for i in 0..cfg.puts {
                        let key = format!("t{th}/{i:010}");
                        match window {
                            None => db.put(t, key, value)?,
                            Some(w) => {
                                let mut b = WriteBatch::new();
                                b.put(t, key, value);
                                queued.push_back(db.write_async(b));
                                if queued.len() >= w {
                                    if let Some(f) = queued.pop_front() {
                                        f.wait()?;
                                    }
                                }
                            }
                        }
                    }
                    for f in queued {
                        f.wait()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| crate::error::BenchError::Process {
                what: "client thread".into(),
                why: "panicked".into(),
            })??;
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    let puts = (cfg.puts * cfg.threads as u64) as f64;
    let groups = (db.stats().commit_groups - before).max(1) as f64;
    Ok((puts / secs, puts / groups))
}

/// Runs the benchmark and prints its table.
pub fn main(cfg: &AsyncConfig) -> Result<()> {
    let survives = if cfg.backend == "msync" {
        MSYNC_SURVIVES
    } else {
        EMULATED_SURVIVES
    };
    let (anchor, anchor_group) = run(cfg, None)?;
    println!("## nacre-bench async\n");
    println!(
        "{} client threads x {} puts of {} B values; backend {} ({survives}).\n",
        cfg.threads, cfg.puts, cfg.value_bytes, cfg.backend
    );
    println!("| writes | queued per thread | puts/s | puts per commit | vs anchor |");
    println!("|---|---|---|---|---|");
    println!("| anchor: Db::put | 1 | {anchor:.0} | {anchor_group:.2} | - |");
    for &w in &cfg.windows {
        let (r, g) = run(cfg, Some(w.max(1)))?;
        println!(
            "| Db::write_async | {w} | {r:.0} | {g:.2} | {:.2}x |",
            r / anchor
        );
    }
    Ok(())
}
