//! The processes `nacre-bench recovery` re-executes itself as (hidden subcommands), and the
//! parent's side of talking to them.
//!
//! - `recovery-child`: creates a database (Nacre, or RocksDB with its WAL written but not
//!   synced), loads it with several writers, prints
//!   `READY records=.. bytes=.. per=<records per writer> probe=<hex key>` and waits to be
//!   SIGKILLed.
//! - `recovery-open`: opens a crashed database (Nacre with N recovery threads, or RocksDB),
//!   gets the probe key (first read), then reads a sample of loaded keys (full service),
//!   prints `OPENED <json>` and waits to be SIGKILLed, so the pool stays crashed (a dropped
//!   `Db` would record a clean close) for the next measurement.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nacre::{Db, Options, DEFAULT_SUBTABLE};
use nacre_pmem::{Backend, SplitMix64};

use super::mix64;
use crate::error::{io_err, BenchError, Result};

/// The engine a recovery child runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Nacre on the `emulated` backend.
    Nacre,
    /// RocksDB (WAL on, not synced; needs the `rocksdb` feature).
    Rocksdb,
    /// redis-server with AOF on, `appendfsync no` (driven by the parent, not a child).
    Redis,
}

impl Engine {
    /// The optional part of this build the engine needs, if any.
    pub fn needs(self) -> Option<crate::features::Feature> {
        (self == Engine::Rocksdb).then_some(crate::features::Feature::Rocksdb)
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Nacre => "nacre",
            Engine::Rocksdb => "rocksdb",
            Engine::Redis => "redis",
        }
    }
}

/// Arguments of `nacre-bench recovery-child`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct LoadArgs {
    /// The engine.
    #[arg(long, value_enum, default_value_t = Engine::Nacre)]
    pub engine: Engine,
    /// Pool file (Nacre) or database directory (RocksDB) to create (must not exist).
    #[arg(long)]
    pub path: PathBuf,
    /// User bytes (keys + values) to load.
    #[arg(long)]
    pub bytes: u64,
    /// Pool size in bytes.
    #[arg(long)]
    pub pool_size: u64,
    /// Bytes per memtable.
    #[arg(long, default_value_t = 64 << 20)]
    pub memtable_size: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Key bytes (at least 16).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// User bytes of overwrites of random loaded keys after the load (Nacre reclaims the
    /// space of what they supersede while it runs).
    #[arg(long, default_value_t = 0)]
    pub overwrites: u64,
    /// `Options::persistent_index` (Nacre).
    #[arg(long)]
    pub persistent_index: bool,
}

/// Arguments of `nacre-bench recovery-open`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct OpenArgs {
    /// The engine.
    #[arg(long, value_enum, default_value_t = Engine::Nacre)]
    pub engine: Engine,
    /// Pool file or database directory of a crashed database.
    #[arg(long)]
    pub path: PathBuf,
    /// `Options::recovery_threads` (Nacre).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// A key acknowledged before the crash, in hex.
    #[arg(long)]
    pub probe: String,
    /// Writers of the load (for the full-service sample).
    #[arg(long, default_value_t = 1)]
    pub writers: usize,
    /// Records each writer loaded (for the full-service sample).
    #[arg(long, default_value_t = 1)]
    pub per: u64,
    /// Key bytes of the load.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Loaded keys read (all must be found) before the database counts as in full service.
    #[arg(long, default_value_t = 1000)]
    pub sample: u64,
    /// `Options::persistent_index` (Nacre).
    #[arg(long)]
    pub persistent_index: bool,
}

/// Key `i` of writer `writer` among `per` per writer, as the loader wrote it; the sample of
/// `n` keys the open child verifies.
pub fn sample_keys(size: usize, writers: usize, per: u64, n: u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|j| {
            let h = mix64(j ^ 0x5A5A);
            let w = (h % writers.max(1) as u64) as usize;
            key(size, w, (h >> 16) % per.max(1))
        })
        .collect()
}

/// The put/get/open surface both engines offer the children.
trait ChildDb: Sync {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Whether the engine is still rebuilding an index in the background after serving.
    fn rebuilding(&self) -> bool {
        false
    }
}

struct NacreChild {
    db: Db,
    table: nacre::Subtable,
}

impl ChildDb for NacreChild {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put(&self.table, key, value)?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(&self.table, key)?)
    }
    fn rebuilding(&self) -> bool {
        self.db.rebuilding()
    }
}

#[cfg(feature = "rocksdb")]
impl ChildDb for crate::rocksdb::RocksDb {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        crate::rocksdb::RocksDb::put(self, key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        crate::rocksdb::RocksDb::get(self, key)
    }
}

fn redis_is_not_a_child() -> BenchError {
    BenchError::InvalidParams(
        "redis-server runs as its own process: `nacre-bench recovery --anchors redis` drives it"
            .into(),
    )
}

/// The values the loaders write: value `i` of writer `t` is `value_size` bytes of this
/// buffer at `value_at(i, t)`.
pub fn value_buffer(value_size: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(0x5EC0_7E57);
    (0..(1 << 20) + value_size)
        .map(|_| rng.next_u64() as u8)
        .collect()
}

/// Where value `i` of writer `t` starts in [`value_buffer`].
pub fn value_at(i: u64, t: usize) -> usize {
    (mix64(i ^ t as u64) % (1 << 20)) as usize
}

#[cfg(feature = "rocksdb")]
fn open_rocksdb(path: &std::path::Path) -> Result<Box<dyn ChildDb>> {
    Ok(Box::new(crate::rocksdb::RocksDb::open(path, false, 4)?))
}

#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(_: &std::path::Path) -> Result<Box<dyn ChildDb>> {
    let f = crate::features::Feature::Rocksdb;
    Err(BenchError::MissingFeature {
        target: "the RocksDB recovery anchor".into(),
        option: "--anchors",
        feature: f.name(),
        needs: f.needs(),
    })
}

/// Key `i` of writer `writer`, `size` bytes (at least 16).
pub fn key(size: usize, writer: usize, i: u64) -> Vec<u8> {
    let g = (writer as u64) << 40 | i;
    let mut k = vec![0u8; size.max(16)];
    k[..8].copy_from_slice(&mix64(g).to_be_bytes());
    k[8..16].copy_from_slice(&g.to_be_bytes());
    k
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>> {
    let bad = || BenchError::InvalidParams(format!("--probe {s:?} is not hex"));
    if s.len() % 2 != 0 {
        return Err(bad());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect()
}

fn announce(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(io_err("write", std::path::Path::new("stdout")))
}

fn wait_for_kill() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `recovery-child`: loads the database, announces READY, and waits for SIGKILL.
pub fn load(a: &LoadArgs) -> Result<()> {
    super::require(
        a.writers > 0 && a.value_size > 0 && a.bytes > 0,
        "load needs writers, bytes and a value size",
    )?;
    let db: Box<dyn ChildDb> = match a.engine {
        Engine::Nacre => {
            let mut opts = Options::new(&a.path).backend(Backend::Emulated);
            opts.pool_size = a.pool_size;
            opts.memtable_size = a.memtable_size;
            opts.persistent_index = a.persistent_index;
            let db = Db::open(opts)?;
            let table = db.subtable(DEFAULT_SUBTABLE)?;
            Box::new(NacreChild { db, table })
        }
        Engine::Rocksdb => open_rocksdb(&a.path)?,
        Engine::Redis => return Err(redis_is_not_a_child()),
    };
    let klen = a.key_size.max(16);
    let per = a
        .bytes
        .div_ceil((klen + a.value_size) as u64 * a.writers as u64);
    let values = value_buffer(a.value_size);
    let (secs, _) = super::run_threads(a.writers, |t| {
        for i in 0..per {
            let k = key(klen, t, i);
            let at = value_at(i, t);
            db.put(&k, &values[at..at + a.value_size])?;
            if t == 0 && i % 100_000 == 0 && i > 0 {
                tracing::info!(records = i * a.writers as u64, "loading");
            }
        }
        Ok(())
    })?;
    if a.overwrites > 0 {
        let each = a.overwrites / a.writers as u64;
        let (osecs, _) = super::run_threads(a.writers, |t| {
            let mut rng = SplitMix64::new(0x0E5E ^ t as u64);
            let mut written = 0u64;
            let mut n = 0u64;
            while written < each {
                let i = rng.next_u64() % per;
                let at = value_at(i ^ n, t);
                db.put(&key(klen, t, i), &values[at..at + a.value_size])?;
                written += (klen + a.value_size) as u64;
                n += 1;
                if t == 0 && n % 1_000_000 == 0 {
                    tracing::info!(written = written * a.writers as u64, "overwriting");
                }
            }
            Ok(())
        })?;
        tracing::info!(bytes = a.overwrites, secs = osecs, "overwrote");
    }
    let records = per * a.writers as u64;
    let bytes = records * (klen + a.value_size) as u64;
    tracing::info!(records, bytes, secs, "loaded; waiting for SIGKILL");
    announce(&format!(
        "READY records={records} bytes={bytes} per={per} probe={}",
        hex(&key(klen, 0, 0))
    ))?;
    let _keep = db;
    wait_for_kill()
}

/// `recovery-open`: opens the crashed database, gets the probe, announces OPENED with the
/// timings and the recovery report, and waits for SIGKILL.
pub fn open(a: &OpenArgs) -> Result<()> {
    let probe = unhex(&a.probe)?;
    let sample = sample_keys(a.key_size.max(16), a.writers, a.per, a.sample);
    let t0 = Instant::now();
    let (db, report): (Box<dyn ChildDb>, serde_json::Value) = match a.engine {
        Engine::Nacre => {
            let mut opts = Options::new(&a.path).backend(Backend::Emulated);
            opts.recovery_threads = a.threads.max(1);
            opts.persistent_index = a.persistent_index;
            let db = Db::open(opts)?;
            let r = db.recovery_report();
            let v = serde_json::json!({
                "elapsed_ns": r.elapsed.as_nanos() as u64, "clean": r.clean,
                "memtables": r.memtables, "records": r.records, "items": r.items,
                "bytes_scanned": r.bytes_scanned, "rolled_back": r.rolled_back,
                "threads": r.threads, "released_memtables": r.released_memtables,
                "released_zones": r.released_zones,
                "scan_ns": r.scan_elapsed.as_nanos() as u64,
                "gi_ns": r.gi_elapsed.as_nanos() as u64,
                "reconcile_ns": r.reconcile_elapsed.as_nanos() as u64,
                "background_rebuild": r.background_rebuild,
            });
            let table = db.subtable(DEFAULT_SUBTABLE)?;
            (Box::new(NacreChild { db, table }), v)
        }
        Engine::Rocksdb => (open_rocksdb(&a.path)?, serde_json::json!({"clean": false})),
        Engine::Redis => return Err(redis_is_not_a_child()),
    };
    let open_ns = t0.elapsed().as_nanos() as u64;
    let mut tries = 0u64;
    while db.get(&probe)?.is_none() {
        tries += 1;
        if tries > 1000 {
            return Err(BenchError::Process {
                what: "recovery-open".into(),
                why: "the probe key, acknowledged before the crash, is missing".into(),
            });
        }
    }
    let first_get_ns = t0.elapsed().as_nanos() as u64;
    for k in &sample {
        if db.get(k)?.is_none() {
            return Err(BenchError::Process {
                what: "recovery-open".into(),
                why: format!("loaded key {} is missing after recovery", hex(k)),
            });
        }
    }
    let full_service_ns = t0.elapsed().as_nanos() as u64;
    // With the persistent index, open may leave the volatile Global Index's rebuild to the
    // background: when it is done too (scans, merges and the cleaner wait for it).
    while db.rebuilding() {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let rebuilt_ns = t0.elapsed().as_nanos() as u64;
    let mut v = report;
    v["rebuilt_ns"] = rebuilt_ns.into();
    v["open_ns"] = open_ns.into();
    v["first_get_ns"] = first_get_ns.into();
    v["full_service_ns"] = full_service_ns.into();
    v["sample"] = a.sample.into();
    announce(&format!("OPENED {v}"))?;
    let _keep = db;
    wait_for_kill()
}

/// A child process, SIGKILLed and reaped when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `exe args`, waits for the stdout line starting with `prefix`, SIGKILLs the child
/// and returns the rest of that line and the seconds from spawn to the line.
pub fn spawn_until(exe: &std::path::Path, args: &[String], prefix: &str) -> Result<(String, f64)> {
    let t0 = Instant::now();
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(io_err("spawn", exe))?;
    let mut child = Killed(child);
    let fail = |why: String| BenchError::Process {
        what: format!("{} {}", exe.display(), args.first().map_or("", |s| s)),
        why,
    };
    let out = child
        .0
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    for line in BufReader::new(out).lines() {
        let line = line.map_err(|e| fail(e.to_string()))?;
        if let Some(rest) = line.strip_prefix(prefix) {
            let secs = t0.elapsed().as_secs_f64();
            child.0.kill().map_err(|e| fail(format!("SIGKILL: {e}")))?;
            return Ok((rest.trim().to_string(), secs));
        }
    }
    let status = child.0.wait().map_err(|e| fail(e.to_string()))?;
    Err(fail(format!("exited ({status}) before printing {prefix}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_keys_are_distinct() {
        let k = key(16, 3, 7);
        assert_eq!(k.len(), 16);
        assert_eq!(unhex(&hex(&k)).ok(), Some(k.clone()));
        assert_ne!(key(16, 0, 7), k);
        assert!(unhex("abc").is_err() && unhex("zz").is_err());
    }
}
