//! `nacre-bench verify`: `Db::verify()` throughput on a loaded database, beside its anchor in
//! the same run: one thread reading and crc32c-checking a DRAM buffer of the same size (what
//! a scrub can at most do on one core).

use std::time::Instant;

use nacre_pmem::Backend;

use super::{default_shm_dir, pool_size_for, BenchDb};
use crate::error::Result;

/// Parameters of `nacre-bench verify`.
#[derive(clap::Args, Clone, Debug)]
pub struct VerifyConfig {
    /// Live data to load, in MiB (1 KiB values).
    #[arg(long, default_value_t = 512)]
    pub mib: u64,
    /// Values of this many KiB stored out of line, as a share of the data (0 to 1).
    #[arg(long, default_value_t = 0.25)]
    pub blob_share: f64,
    /// Repeats; the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Directory for the pool [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark and prints its table.
pub fn main(cfg: &VerifyConfig) -> Result<()> {
    let dir = cfg.dir.clone().unwrap_or_else(default_shm_dir);
    let data = cfg.mib << 20;
    let memtable = 64 << 20;
    let bench = BenchDb::create(
        &dir,
        "verify",
        Backend::Emulated,
        pool_size_for(data, memtable),
        |o| {
            o.memtable_size = memtable;
        },
    )?;
    let (db, t) = (&bench.db, &bench.table);
    let blob_bytes = (data as f64 * cfg.blob_share.clamp(0.0, 1.0)) as u64;
    let value = vec![0x5au8; 1024];
    let mut written = 0u64;
    let mut i = 0u64;
    while written < data - blob_bytes {
        db.put(t, format!("key{i:012}"), &value)?;
        written += 1024;
        i += 1;
    }
    let blob = vec![0xa5u8; 4 << 20];
    let mut b = 0u64;
    while b < blob_bytes {
        db.put(t, format!("blob{b:012}"), &blob)?;
        b += blob.len() as u64;
    }
    let mut rep = db.verify();
    let mut runs = vec![rep.gb_per_sec()];
    for _ in 1..cfg.repeats.max(1) {
        rep = db.verify();
        runs.push(rep.gb_per_sec());
    }
    if !rep.problems.is_empty() {
        eprintln!(
            "verify found problems on a whole database: {:#?}",
            rep.problems
        );
    }
    // Anchor: crc32c over a DRAM buffer of the bytes verify read, one thread.
    let total = (rep.bytes + rep.blob_bytes) as usize;
    let buf = vec![0x3cu8; total.min(1 << 30)];
    let mut anchor = Vec::new();
    for _ in 0..cfg.repeats.max(1) {
        let t0 = Instant::now();
        let mut crc = 0u32;
        for chunk in buf.chunks(1 << 20) {
            crc = crc32c::crc32c_append(crc, std::hint::black_box(chunk));
        }
        std::hint::black_box(crc);
        anchor.push(buf.len() as f64 / t0.elapsed().as_secs_f64() / 1e9);
    }
    let (v, a) = (median(runs), median(anchor));
    println!("## nacre-bench verify\n");
    println!(
        "{} MiB loaded ({} records, {} values out of line); emulated backend in {}; median of {}.\n",
        cfg.mib,
        rep.records,
        rep.blobs,
        dir.display(),
        cfg.repeats
    );
    println!("| what | bytes checked | GB/s | vs anchor |");
    println!("|---|---|---|---|");
    println!(
        "| Db::verify (items, records, blobs) | {} | {v:.2} | {:.2}x |",
        rep.bytes + rep.blob_bytes,
        v / a
    );
    println!(
        "| anchor: crc32c over a DRAM buffer, one thread | {} | {a:.2} | - |",
        buf.len()
    );
    println!(
        "\nproblems found: {} (a whole database: 0 expected)",
        rep.problems.len()
    );
    Ok(())
}
