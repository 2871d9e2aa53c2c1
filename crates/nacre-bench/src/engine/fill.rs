//! `nacre-bench fillrandom`: fully durable random puts (16-byte keys, 500-byte values, 2
//! threads) against RocksDB's `db_bench fillrandom`, in two pairings measured in the same run:
//! - process crash: Nacre on `emulated` (tmpfs) against `db_bench --sync=0` (WAL written,
//!   not synced: survives a process crash);
//! - power loss: Nacre on `msync` (pool file on disk) against `db_bench --sync=1` (WAL synced
//!   on every write).
//!
//! The two subjects of a pairing run back to back, repeats interleaved; medians reported.

use std::fmt::Write as _;
use std::path::PathBuf;

use nacre_pmem::{Backend, SplitMix64};
use serde::Serialize;

use super::dbbench::{self, FillArgs};
use super::{mix64, put_footprint, require, BenchDb, EMULATED_SURVIVES, MSYNC_SURVIVES};
use crate::bench::median;
use crate::error::{io_err, Result};
use crate::report::{sig3, MachineInfo};

/// Parameters of `nacre-bench fillrandom`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct FillConfig {
    /// Puts (all threads) of the process-crash pairing (Nacre emulated, db_bench --sync=0).
    #[arg(long, default_value_t = 200_000)]
    pub num: u64,
    /// Puts (all threads) of the power-loss pairing (Nacre msync, db_bench --sync=1).
    #[arg(long, default_value_t = 5_000)]
    pub sync_num: u64,
    /// Writer threads (db_bench --threads).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Key bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 500)]
    pub value_size: usize,
    /// Nacre's `Options::batch_size`.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Nacre's `Options::commit_buckets` (default: the engine's default).
    #[arg(long, default_value_t = nacre::Options::new("").commit_buckets)]
    pub commit_buckets: usize,
    /// Nacre's `Options::batch_wait`, in microseconds (0: commit whatever is queued).
    #[arg(long, default_value_t = 0)]
    pub batch_wait_us: u64,
    /// Nacre's `Options::pipelining` (auto: off on msync, on elsewhere).
    #[arg(long, value_enum, default_value_t = PipeliningArg::Auto)]
    pub pipelining: PipeliningArg,
    /// Nacre's `Options::commit_mode` (auto: one fence on msync, two elsewhere).
    #[arg(long, value_enum, default_value_t = CommitModeArg::Auto)]
    pub commit_mode: CommitModeArg,
    /// Repeats; the report shows the median.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Directory for the emulated pool [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub shm_dir: Option<PathBuf>,
    /// Directory on disk for the msync pool and the RocksDB databases.
    #[arg(long, default_value = "bench-results")]
    pub disk_dir: PathBuf,
    /// The db_bench binary (RocksDB's benchmark tool).
    #[arg(long, default_value = "/usr/bin/db_bench")]
    pub db_bench: PathBuf,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// A measured subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// Nacre, `emulated` backend on tmpfs.
    NacreEmulated,
    /// `db_bench --sync=0`.
    RocksDbNoSync,
    /// Nacre, `msync` backend on disk.
    NacreMsync,
    /// `db_bench --sync=1`.
    RocksDbSync,
}

impl Subject {
    const ALL: [Subject; 4] = [
        Subject::NacreEmulated,
        Subject::RocksDbNoSync,
        Subject::NacreMsync,
        Subject::RocksDbSync,
    ];

    fn sync(self) -> bool {
        matches!(self, Subject::NacreMsync | Subject::RocksDbSync)
    }

    fn backend(self) -> &'static str {
        match self {
            Subject::NacreEmulated => "emulated (tmpfs)",
            Subject::RocksDbNoSync => "WAL on disk, --sync=0",
            Subject::NacreMsync => "msync (disk)",
            Subject::RocksDbSync => "WAL on disk, --sync=1",
        }
    }

    fn durability(self) -> &'static str {
        if self.sync() {
            MSYNC_SURVIVES
        } else {
            EMULATED_SURVIVES
        }
    }
}

/// One subject: ops/s per repeat.
#[derive(Clone, Debug, Serialize)]
pub struct FillRow {
    /// Subject.
    pub subject: Subject,
    /// Puts per repeat (all threads).
    pub ops: u64,
    /// Ops/s per repeat.
    pub ops_per_sec: Vec<f64>,
    /// Why the subject could not run, if it could not.
    pub unavailable: Option<String>,
}

impl FillRow {
    fn median(&self) -> Option<f64> {
        (self.unavailable.is_none() && !self.ops_per_sec.is_empty())
            .then(|| median(&self.ops_per_sec))
    }
}

/// `--pipelining`: Nacre's [`nacre::Pipelining`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PipeliningArg {
    /// Off on msync, on elsewhere.
    Auto,
    /// A bucket's next group forms while the previous one commits.
    On,
    /// A bucket's next group forms after the previous one committed.
    Off,
}

impl From<PipeliningArg> for nacre::Pipelining {
    fn from(p: PipeliningArg) -> nacre::Pipelining {
        match p {
            PipeliningArg::Auto => nacre::Pipelining::Auto,
            PipeliningArg::On => nacre::Pipelining::On,
            PipeliningArg::Off => nacre::Pipelining::Off,
        }
    }
}

/// `--commit-mode`: Nacre's [`nacre::CommitMode`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitModeArg {
    /// One fence on msync, two elsewhere.
    Auto,
    /// `gidx`, fence, `commit_id`, fence.
    TwoFence,
    /// `gidx` and `commit_id`, one fence.
    SingleFence,
}

impl From<CommitModeArg> for nacre::CommitMode {
    fn from(m: CommitModeArg) -> nacre::CommitMode {
        match m {
            CommitModeArg::Auto => nacre::CommitMode::Auto,
            CommitModeArg::TwoFence => nacre::CommitMode::TwoFence,
            CommitModeArg::SingleFence => nacre::CommitMode::SingleFence,
        }
    }
}

fn nacre(cfg: &FillConfig, subject: Subject, values: &[u8]) -> Result<f64> {
    let (dir, backend, n) = match subject {
        Subject::NacreMsync => (cfg.disk_dir.clone(), Backend::Msync, cfg.sync_num),
        _ => (
            cfg.shm_dir.clone().unwrap_or_else(super::default_shm_dir),
            Backend::Emulated,
            cfg.num,
        ),
    };
    let memtable = 64 << 20;
    let pool = super::pool_size_for(n * put_footprint(cfg.key_size, cfg.value_size), memtable);
    let bdb = BenchDb::create(&dir, "fillrandom", backend, pool, |o| {
        o.batch_size = cfg.batch_size;
        o.commit_buckets = cfg.commit_buckets;
        o.batch_wait = std::time::Duration::from_micros(cfg.batch_wait_us);
        o.pipelining = cfg.pipelining.into();
        o.commit_mode = cfg.commit_mode.into();
        o.memtable_size = memtable;
    })?;
    let (db, table) = (&bdb.db, &bdb.table);
    let per = n / cfg.threads as u64;
    let span = (values.len() - cfg.value_size) as u64;
    let (secs, _) = super::run_threads(cfg.threads, |t| {
        let mut key = vec![0u8; cfg.key_size];
        for i in 0..per {
            let g = t as u64 * per + i;
            let h = mix64(g);
            for (j, c) in key.chunks_mut(8).enumerate() {
                let w = if j % 2 == 0 { h } else { g }.to_be_bytes();
                c.copy_from_slice(&w[..c.len()]);
            }
            let at = (h % span) as usize;
            db.put(table, &key, &values[at..at + cfg.value_size])?;
        }
        Ok(())
    })?;
    Ok((per * cfg.threads as u64) as f64 / secs)
}

fn rocksdb(cfg: &FillConfig, subject: Subject) -> Result<f64> {
    let sync = subject.sync();
    let n = if sync { cfg.sync_num } else { cfg.num };
    let args = fill_args(cfg, sync, n);
    Ok(args.run(if sync { "sync" } else { "nosync" })?.ops_per_sec)
}

fn fill_args(cfg: &FillConfig, sync: bool, n: u64) -> FillArgs<'_> {
    FillArgs {
        exe: &cfg.db_bench,
        dir: &cfg.disk_dir,
        sync,
        threads: cfg.threads,
        num_per_thread: n / cfg.threads as u64,
        key_size: cfg.key_size,
        value_size: cfg.value_size,
    }
}

/// Runs both pairings, `repeats` times.
pub fn run(cfg: &FillConfig) -> Result<(MachineInfo, Vec<FillRow>)> {
    require(
        cfg.threads > 0
            && cfg.num >= cfg.threads as u64
            && cfg.sync_num >= cfg.threads as u64
            && cfg.key_size > 0
            && cfg.value_size > 0
            && cfg.repeats > 0,
        "fillrandom needs threads, repeats, key and value sizes above zero and a put per thread",
    )?;
    let created = !cfg.disk_dir.exists();
    std::fs::create_dir_all(&cfg.disk_dir).map_err(io_err("create", &cfg.disk_dir))?;
    let r = measure_all(cfg);
    if created {
        // Only if empty: never remove what someone else put there.
        let _ = std::fs::remove_dir(&cfg.disk_dir);
    }
    Ok((MachineInfo::collect(), r?))
}

fn measure_all(cfg: &FillConfig) -> Result<Vec<FillRow>> {
    let missing = dbbench::unavailable(&cfg.db_bench);
    let mut rows: Vec<FillRow> = Subject::ALL
        .iter()
        .map(|&subject| FillRow {
            subject,
            ops: if subject.sync() {
                cfg.sync_num
            } else {
                cfg.num
            } / cfg.threads as u64
                * cfg.threads as u64,
            ops_per_sec: Vec::new(),
            unavailable: match subject {
                Subject::RocksDbNoSync | Subject::RocksDbSync => missing.clone(),
                _ => None,
            },
        })
        .collect();
    let mut rng = SplitMix64::new(0x0F11_1234);
    let values: Vec<u8> = (0..(1 << 20) + cfg.value_size)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for rep in 0..cfg.repeats {
        for row in rows.iter_mut().filter(|r| r.unavailable.is_none()) {
            let r = match row.subject {
                Subject::NacreEmulated | Subject::NacreMsync => nacre(cfg, row.subject, &values),
                Subject::RocksDbNoSync | Subject::RocksDbSync => rocksdb(cfg, row.subject),
            };
            match r {
                Ok(v) => {
                    tracing::info!(subject = ?row.subject, rep, ops_per_sec = v, "fillrandom measured");
                    row.ops_per_sec.push(v);
                }
                Err(e) if matches!(row.subject, Subject::RocksDbNoSync | Subject::RocksDbSync) => {
                    tracing::warn!(subject = ?row.subject, error = %e, "anchor unavailable");
                    row.unavailable = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(rows)
}

/// The report printed to stdout.
pub fn markdown(cfg: &FillConfig, machine: &MachineInfo, rows: &[FillRow]) -> String {
    let mut s = String::from("## nacre-bench fillrandom\n\n");
    let _ = writeln!(s, "{}", super::machine_line(machine));
    let version = dbbench::version(&cfg.db_bench).unwrap_or_else(|| "db_bench".into());
    let shm = cfg.shm_dir.clone().unwrap_or_else(super::default_shm_dir);
    let _ = writeln!(
        s,
        "Random puts, {}-byte keys, {}-byte values, {} threads, every put acknowledged only \
         once durable on its backend. Nacre: `Db::put` (batch_size {}, commit_buckets {}, \
         batch_wait {} us, pipelining {:?}, commit_mode {:?}), \
         emulated pool in {}, msync pool in {}. RocksDB ({version}, default options, \
         compression as built): `{}` and `{}` in {}. Median of {} repeats, the two subjects \
         of a pairing back to back.\n",
        cfg.key_size,
        cfg.value_size,
        cfg.threads,
        cfg.batch_size,
        cfg.commit_buckets,
        cfg.batch_wait_us,
        cfg.pipelining,
        cfg.commit_mode,
        shm.display(),
        cfg.disk_dir.display(),
        fill_args(cfg, false, cfg.num).command_line("DIR"),
        fill_args(cfg, true, cfg.sync_num).command_line("DIR"),
        cfg.disk_dir.display(),
        cfg.repeats
    );
    s.push_str("| subject | backend | survives | puts | ops/s |\n|---|---|---|---|---|\n");
    for r in rows {
        let name = match r.subject {
            Subject::NacreEmulated | Subject::NacreMsync => "Nacre",
            _ => "RocksDB db_bench",
        };
        let cell = r.median().map_or_else(|| "unavailable".into(), sig3);
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | {cell} |",
            r.subject.backend(),
            r.subject.durability(),
            r.ops
        );
    }
    s.push('\n');
    for r in rows.iter().filter(|r| r.unavailable.is_some()) {
        let why = r.unavailable.as_deref().unwrap_or_default();
        let _ = writeln!(s, "- {} unavailable: {why}", r.subject.backend());
    }
    if rows.iter().any(|r| r.unavailable.is_some()) {
        s.push('\n');
    }
    s.push_str("| pairing | Nacre ops/s | RocksDB ops/s | Nacre/RocksDB | target |\n");
    s.push_str("|---|---|---|---|---|\n");
    let get = |sub| {
        rows.iter()
            .find(|r| r.subject == sub)
            .and_then(FillRow::median)
    };
    for (label, a, b, target) in [
        (
            "process crash: emulated vs --sync=0",
            Subject::NacreEmulated,
            Subject::RocksDbNoSync,
            "3x",
        ),
        (
            "power loss: msync vs --sync=1",
            Subject::NacreMsync,
            Subject::RocksDbSync,
            "10x",
        ),
    ] {
        let (na, rb) = (get(a), get(b));
        let cell = |x: Option<f64>| x.map_or_else(|| "unavailable".into(), sig3);
        let ratio = match (na, rb) {
            (Some(x), Some(y)) => format!("{}x", sig3(x / y)),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {label} | {} | {} | {ratio} | {target} |",
            cell(na),
            cell(rb)
        );
    }
    s.push('\n');
    s
}

/// One JSON object per subject.
pub fn json_rows(
    cfg: &FillConfig,
    machine: &MachineInfo,
    rows: &[FillRow],
) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            let mut params = serde_json::json!(cfg);
            let dir = cfg.shm_dir.clone().unwrap_or_else(super::default_shm_dir);
            params["shm_dir"] = dir.display().to_string().into();
            params["subject"] = serde_json::json!(r.subject);
            params["puts"] = r.ops.into();
            if matches!(r.subject, Subject::RocksDbNoSync | Subject::RocksDbSync) {
                let a = fill_args(cfg, r.subject.sync(), r.ops);
                params["command"] = a.command_line("DIR").into();
            }
            let results = serde_json::json!({
                "available": r.unavailable.is_none(),
                "unavailable_reason": r.unavailable,
                "ops_per_sec": {"median": r.median(), "values": r.ops_per_sec},
            });
            let (b, d) = (r.subject.backend(), r.subject.durability());
            super::json_row("fillrandom", machine, b, d, params, results)
        })
        .collect()
}

/// `nacre-bench fillrandom`: runs, prints the tables, writes JSON lines if asked.
pub fn main(cfg: &FillConfig) -> Result<()> {
    let (machine, rows) = run(cfg)?;
    super::emit(&markdown(cfg, &machine, &rows), cfg.json.as_deref(), || {
        json_rows(cfg, &machine, &rows)
    })
}
