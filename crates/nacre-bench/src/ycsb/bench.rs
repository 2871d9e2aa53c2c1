//! `nacre-bench ycsb`: YCSB workloads against the stores, in the durability pairings of
//! DESIGN.md §7, every pairing measured in the same run:
//! - process crash: Nacre on `emulated` (pool on tmpfs) against RocksDB with the WAL written
//!   but not synced (`sync=0`, database on the same tmpfs);
//! - power loss: Nacre on `msync` (pool on disk) against RocksDB syncing the WAL on every
//!   write (`sync=1`, database on the same disk).
//!
//! Each store is created empty, loaded, then runs the workloads in the order given (default
//! A, B, C, F, D, E: the read-only and update workloads before the ones that insert); keys a
//! workload inserts stay for the next one, whose key range grows to include them.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use nacre_pmem::Backend;
use serde::Serialize;

use super::measure::PhaseResult;
use super::runner::{self, RunOptions};
use super::target::Store;
use super::targets::nacre::NacreStore;
use super::targets::resp::RespStore;
use super::workload::{RequestDistribution, Workload};
use crate::engine::{
    default_shm_dir, json_row, machine_line, pool_size_for, put_footprint, BenchDb,
    EMULATED_SURVIVES, MSYNC_SURVIVES,
};
use crate::error::{io_err, BenchError, Result};
use crate::report::{sig3, MachineInfo};
use crate::resp::RedisServer;

/// Bytes of the block cache RocksDB 7.8.3 creates when none is set (its `table.h`): Nacre's
/// disk levels get the same.
const ROCKSDB_DEFAULT_CACHE: u64 = 8 << 20;

/// A store `nacre-bench ycsb` can run against.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// Embedded Nacre, `emulated` backend, pool in the tmpfs directory.
    NacreEmulated,
    /// As `nacre-emulated` with record checksums not verified on reads
    /// (`Options::verify_checksums` off): its ratio is to `nacre-emulated`, the cost of the
    /// checks.
    NacreEmulatedUnverified,
    /// As `nacre-emulated` with the Global Index also written to its BzTree in PM
    /// (`Options::persistent_index`): its ratio is to `nacre-emulated`, the index's cost.
    NacreEmulatedIndexed,
    /// As `nacre-emulated-indexed`, with point reads served by the BzTree
    /// (`Options::persistent_index_reads`): its ratio is to `nacre-emulated`.
    NacreEmulatedTreeReads,
    /// Embedded RocksDB, WAL not synced, database in the tmpfs directory (needs the
    /// `rocksdb` feature).
    RocksdbSync0,
    /// Embedded Nacre, `msync` backend, pool in the disk directory.
    NacreMsync,
    /// Embedded RocksDB, WAL synced on every write, database in the disk directory (needs
    /// the `rocksdb` feature).
    RocksdbSync1,
    /// A redis-server this run starts, AOF on with `appendfsync no` (each write reaches the
    /// OS before the reply: survives a process crash), YCSB's Redis mapping.
    RedisAofNo,
    /// A redis-server this run starts, AOF on with `appendfsync always` (fsync before the
    /// reply: survives power loss).
    RedisAofAlways,
    /// The RESP server at `--resp-addr` (e.g. nacre-server), YCSB's Redis mapping.
    Resp,
}

impl TargetKind {
    /// Whether this store pays for power-loss durability (and gets the smaller sizes).
    pub fn power_loss(self) -> bool {
        matches!(
            self,
            TargetKind::NacreMsync | TargetKind::RocksdbSync1 | TargetKind::RedisAofAlways
        )
    }
}

/// A workload letter.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadName {
    /// 50% reads, 50% updates, zipfian.
    A,
    /// 95% reads, 5% updates, zipfian.
    B,
    /// Reads only, zipfian.
    C,
    /// 95% reads, 5% inserts, latest.
    D,
    /// 95% scans, 5% inserts, zipfian.
    E,
    /// 50% reads, 50% read-modify-writes, zipfian.
    F,
}

impl WorkloadName {
    /// The letter.
    pub fn letter(self) -> &'static str {
        match self {
            WorkloadName::A => "a",
            WorkloadName::B => "b",
            WorkloadName::C => "c",
            WorkloadName::D => "d",
            WorkloadName::E => "e",
            WorkloadName::F => "f",
        }
    }

    fn workload(self, records: u64, ops: u64) -> Workload {
        match self {
            WorkloadName::A => Workload::a(records, ops),
            WorkloadName::B => Workload::b(records, ops),
            WorkloadName::C => Workload::c(records, ops),
            WorkloadName::D => Workload::d(records, ops),
            WorkloadName::E => Workload::e(records, ops),
            WorkloadName::F => Workload::f(records, ops),
        }
    }
}

/// A request distribution named on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DistributionName {
    /// Uniform.
    Uniform,
    /// Scrambled zipfian.
    Zipfian,
    /// Skewed towards the latest inserts.
    Latest,
    /// Hot set.
    Hotspot,
}

/// Parameters of `nacre-bench ycsb`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct YcsbConfig {
    /// Stores, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [TargetKind::NacreEmulated, TargetKind::RocksdbSync0,
                              TargetKind::NacreMsync, TargetKind::RocksdbSync1])]
    pub targets: Vec<TargetKind>,
    /// Workloads in the order they run on each loaded store, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',',
          default_values_t = [WorkloadName::A, WorkloadName::B, WorkloadName::C,
                              WorkloadName::F, WorkloadName::D, WorkloadName::E])]
    pub workloads: Vec<WorkloadName>,
    /// Records loaded (`recordcount`), process-crash pairing.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Operations per workload (`operationcount`), process-crash pairing.
    #[arg(long, default_value_t = 100_000)]
    pub operations: u64,
    /// Records loaded, power-loss pairing (every write waits for a disk sync).
    #[arg(long, default_value_t = 10_000)]
    pub sync_records: u64,
    /// Operations per workload, power-loss pairing.
    #[arg(long, default_value_t = 10_000)]
    pub sync_operations: u64,
    /// Fields per record (`fieldcount`).
    #[arg(long, default_value_t = 10)]
    pub field_count: usize,
    /// Bytes per field (`fieldlength`).
    #[arg(long, default_value_t = 100)]
    pub field_length: usize,
    /// Overrides every workload's request distribution.
    #[arg(long, value_enum)]
    pub distribution: Option<DistributionName>,
    /// Zipfian constant (`zipfianconstant`).
    #[arg(long, default_value_t = 0.99)]
    pub zipfian_constant: f64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Target operations per second over all threads (default: as fast as possible).
    #[arg(long)]
    pub target_ops: Option<f64>,
    /// Operations (all threads) at the start of each run left out of latencies and
    /// throughput; capped at a tenth of the run.
    #[arg(long, default_value_t = 10_000)]
    pub warmup_ops: u64,
    /// Stop each phase after this many seconds (`maxexecutiontime`).
    #[arg(long)]
    pub max_secs: Option<f64>,
    /// Operations handed to a store at once (each is charged the batch's latency).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 10)]
    pub progress_secs: u64,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Nacre memtable size in MiB.
    #[arg(long, default_value_t = 64)]
    pub memtable_mib: u64,
    /// Nacre pool size in MiB, with disk levels beside the pool (lsm-tree tables in the same
    /// directory) taking what the pool cannot hold [default 0: a pool sized for every
    /// version the run writes, PM only].
    #[arg(long, default_value_t = 0)]
    pub nacre_pm_mib: u64,
    /// With `--nacre-pm-mib`: the Global Index limit in MiB [default 0: half the pool].
    #[arg(long, default_value_t = 0)]
    pub nacre_gi_mib: u64,
    /// Directory for the process-crash pairing [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub shm_dir: Option<PathBuf>,
    /// Directory on disk for the power-loss pairing.
    #[arg(long, default_value = "bench-results")]
    pub disk_dir: PathBuf,
    /// The redis-server binary for the `redis-*` targets.
    #[arg(long, default_value = crate::resp::DEFAULT_REDIS_SERVER)]
    pub redis_server: PathBuf,
    /// Address (host:port) of the server for the `resp` target.
    #[arg(long)]
    pub resp_addr: Option<String>,
    /// What an acknowledged write to the `resp` target survives, for the report.
    #[arg(long, default_value = "as the server is configured")]
    pub resp_durability: String,
    /// Write one JSON object per phase to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// One measured phase of one store.
#[derive(Clone, Debug, Serialize)]
pub struct YcsbRow {
    /// The store.
    pub target: TargetKind,
    /// Its label, e.g. `Nacre (emulated)`.
    pub label: String,
    /// Its backend or sync setting.
    pub backend: String,
    /// What an acknowledged write survives.
    pub durability: String,
    /// Records present when the phase began.
    pub records: u64,
    /// The measurement.
    pub result: PhaseResult,
    /// Bytes the device holding the store's directory wrote during the phase (from the
    /// kernel's block statistics), where they could be read.
    pub disk_bytes: Option<u64>,
    /// Durable commits the store made during the phase, where it counts them.
    pub commits: Option<u64>,
    /// Bytes this process wrote to files during the phase (`wchar` of /proc/self/io: WAL,
    /// tables; Nacre's PM stores through a mapping are not in it), where it can be read.
    pub file_bytes: Option<u64>,
    /// Bytes Nacre wrote into PM zones during the phase.
    pub pm_bytes: Option<u64>,
}

/// Bytes this process has passed to write(2) and its kind (`wchar` in /proc/self/io).
fn process_written_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Bytes written so far by the block device holding `dir` (`/sys/dev/block/M:m/stat`,
/// sectors of 512 bytes), if it can be found.
fn device_written_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// Operations of a phase that write.
fn writes(r: &PhaseResult) -> u64 {
    r.per_op
        .iter()
        .filter(|o| o.op != "READ" && o.op != "SCAN")
        .map(|o| o.count)
        .sum()
}

impl YcsbConfig {
    fn shm(&self) -> PathBuf {
        self.shm_dir.clone().unwrap_or_else(default_shm_dir)
    }

    fn sizes(&self, t: TargetKind) -> (u64, u64) {
        if t.power_loss() {
            (self.sync_records, self.sync_operations)
        } else {
            (self.records, self.operations)
        }
    }

    fn workload(&self, name: WorkloadName, records: u64, ops: u64) -> Workload {
        let mut w = name.workload(records, ops);
        w.field_count = self.field_count;
        w.field_length = self.field_length;
        w.zipfian_constant = self.zipfian_constant;
        if let Some(d) = self.distribution {
            w.request_distribution = match d {
                DistributionName::Uniform => RequestDistribution::Uniform,
                DistributionName::Zipfian => RequestDistribution::Zipfian,
                DistributionName::Latest => RequestDistribution::Latest,
                DistributionName::Hotspot => RequestDistribution::Hotspot,
            };
        }
        w
    }

    fn run_options(&self, ops: u64) -> RunOptions {
        RunOptions {
            threads: self.threads,
            target_ops_per_sec: self.target_ops,
            warmup_ops: self.warmup_ops.min(ops / 10),
            max_time: self.max_secs.map(Duration::from_secs_f64),
            pipeline: self.pipeline,
            progress_secs: self.progress_secs,
            seed: self.seed,
        }
    }

    /// PM bytes a Nacre store needs: every record version the load and the runs write.
    fn nacre_pool(&self, records: u64, ops: u64) -> u64 {
        let record = put_footprint(24, self.field_count * (self.field_length + 6));
        let versions = records + ops * self.workloads.len() as u64;
        pool_size_for(versions * record, self.memtable_mib << 20)
    }
}

fn open_store(cfg: &YcsbConfig, t: TargetKind) -> Result<Box<dyn Store>> {
    let (records, ops) = cfg.sizes(t);
    match t {
        TargetKind::NacreEmulated
        | TargetKind::NacreEmulatedUnverified
        | TargetKind::NacreEmulatedIndexed
        | TargetKind::NacreEmulatedTreeReads
        | TargetKind::NacreMsync => {
            let verify = t != TargetKind::NacreEmulatedUnverified;
            let tree_reads = t == TargetKind::NacreEmulatedTreeReads;
            let indexed = t == TargetKind::NacreEmulatedIndexed || tree_reads;
            let (dir, backend, name, survives) = if t.power_loss() {
                (
                    cfg.disk_dir.clone(),
                    Backend::Msync,
                    "msync",
                    MSYNC_SURVIVES,
                )
            } else if indexed {
                let name = if tree_reads {
                    "emulated, reads from the persistent index"
                } else {
                    "emulated, persistent index"
                };
                (cfg.shm(), Backend::Emulated, name, EMULATED_SURVIVES)
            } else if verify {
                (cfg.shm(), Backend::Emulated, "emulated", EMULATED_SURVIVES)
            } else {
                (
                    cfg.shm(),
                    Backend::Emulated,
                    "emulated, unverified",
                    EMULATED_SURVIVES,
                )
            };
            let tiered = cfg.nacre_pm_mib > 0;
            let pool = if tiered {
                cfg.nacre_pm_mib << 20
            } else {
                cfg.nacre_pool(records, ops)
            };
            // The index's nodes take their share of the pool (12%): the zones keep theirs.
            let pool = if indexed { pool + pool / 7 } else { pool };
            let memtable = cfg.memtable_mib << 20;
            let gi = cfg.nacre_gi_mib << 20;
            let bench = BenchDb::create(&dir, "ycsb", backend, pool, |o| {
                o.memtable_size = memtable;
                o.verify_checksums = verify;
                o.persistent_index = indexed;
                o.persistent_index_reads = tree_reads;
                if tiered {
                    o.disk_dir = Some(o.path.with_extension("disk"));
                    o.gi_size_limit = gi;
                    // The block cache RocksDB's C API creates when none is set.
                    o.disk_cache_size = ROCKSDB_DEFAULT_CACHE;
                }
            })?;
            let name = if tiered {
                format!("{name}, disk levels")
            } else {
                name.to_string()
            };
            Ok(Box::new(NacreStore::new(
                bench,
                &name,
                survives,
                cfg.field_count,
            )))
        }
        TargetKind::RocksdbSync0 | TargetKind::RocksdbSync1 => rocksdb_store(cfg, t),
        TargetKind::RedisAofNo | TargetKind::RedisAofAlways => {
            let fsync = if t.power_loss() { "always" } else { "no" };
            let server = RedisServer::start(
                &cfg.redis_server,
                &["--appendonly", "yes", "--appendfsync", fsync],
            )
            .map_err(|e| BenchError::Process {
                what: "redis-server".into(),
                why: e.to_string(),
            })?;
            let survives = if t.power_loss() {
                MSYNC_SURVIVES
            } else {
                EMULATED_SURVIVES
            };
            let label = format!("Redis (appendfsync {fsync})");
            let backend = format!("aof-{fsync}");
            Ok(Box::new(RespStore::started(
                server, &label, &backend, survives,
            )?))
        }
        TargetKind::Resp => {
            let addr = cfg.resp_addr.as_deref().ok_or_else(|| {
                BenchError::InvalidParams("the resp target needs --resp-addr host:port".into())
            })?;
            let label = format!("RESP server at {addr}");
            Ok(Box::new(RespStore::connect(
                addr,
                &label,
                "resp",
                &cfg.resp_durability,
            )?))
        }
    }
}

#[cfg(feature = "rocksdb")]
fn rocksdb_store(cfg: &YcsbConfig, t: TargetKind) -> Result<Box<dyn Store>> {
    let sync = t.power_loss();
    let dir = if sync {
        cfg.disk_dir.clone()
    } else {
        cfg.shm()
    };
    let path = dir.join(crate::bench::file_name("ycsb-rocksdb"));
    let threads = cfg.threads.max(2);
    Ok(Box::new(super::targets::rocksdb::RocksStore::create(
        path,
        sync,
        threads,
        cfg.field_count,
    )?))
}

#[cfg(not(feature = "rocksdb"))]
fn rocksdb_store(_: &YcsbConfig, t: TargetKind) -> Result<Box<dyn Store>> {
    let name = clap::ValueEnum::to_possible_value(&t)
        .map_or_else(|| format!("{t:?}"), |v| v.get_name().to_string());
    Err(BenchError::InvalidParams(format!(
        "target {name} needs embedded RocksDB: rebuild with `--features rocksdb` (and Debian's \
         librocksdb-dev installed), or leave it out of --targets"
    )))
}

/// Loads and runs every workload on every target.
pub fn run(cfg: &YcsbConfig) -> Result<Vec<YcsbRow>> {
    if cfg.targets.is_empty() || cfg.workloads.is_empty() {
        return Err(BenchError::InvalidParams(
            "ycsb needs at least one target and one workload".into(),
        ));
    }
    if !(cfg.zipfian_constant > 0.0 && cfg.zipfian_constant < 1.0) {
        return Err(BenchError::InvalidParams(
            "the zipfian constant must lie strictly between 0 and 1".into(),
        ));
    }
    let created = !cfg.disk_dir.exists();
    std::fs::create_dir_all(&cfg.disk_dir).map_err(io_err("create", &cfg.disk_dir))?;
    let r = run_all(cfg);
    if created {
        let _ = std::fs::remove_dir(&cfg.disk_dir);
    }
    r
}

fn run_all(cfg: &YcsbConfig) -> Result<Vec<YcsbRow>> {
    let mut rows = Vec::new();
    for &t in &cfg.targets {
        let store = open_store(cfg, t)?;
        let (records, ops) = cfg.sizes(t);
        let opts = cfg.run_options(ops);
        let dir = if t.power_loss() {
            cfg.disk_dir.clone()
        } else {
            cfg.shm()
        };
        // Counters before a phase: device bytes written, the store's commits, bytes written
        // to files, PM bytes written.
        let counters = || {
            (
                device_written_bytes(&dir),
                store.commits(),
                process_written_bytes(),
                store.pm_written(),
            )
        };
        type Counters = (Option<u64>, Option<u64>, Option<u64>, Option<u64>);
        let row = |records: u64, result: PhaseResult, before: Counters| {
            let after = counters();
            let delta = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
            YcsbRow {
                target: t,
                label: store.label(),
                backend: store.backend(),
                durability: store.durability(),
                records,
                result,
                disk_bytes: delta(after.0, before.0),
                commits: delta(after.1, before.1),
                file_bytes: delta(after.2, before.2),
                pm_bytes: delta(after.3, before.3),
            }
        };
        let load_w = cfg.workload(WorkloadName::A, records, ops);
        let before = counters();
        let load = runner::load(store.as_ref(), &load_w, &opts)?;
        tracing::info!(target = %store.label(), ops_per_sec = load.ops_per_sec, "ycsb load");
        rows.push(row(0, load, before));
        let mut present = records;
        for &name in &cfg.workloads {
            let w = cfg.workload(name, present, ops);
            let before = counters();
            let (r, now) = runner::run(store.as_ref(), &w, name.letter(), &opts)?;
            tracing::info!(target = %store.label(), workload = name.letter(),
                           ops_per_sec = r.ops_per_sec, "ycsb run");
            check_found(&store.label(), &r)?;
            rows.push(row(present, r, before));
            present = now;
        }
    }
    Ok(rows)
}

/// Every key a workload picks exists (reads are bounded by acknowledged inserts), so a read
/// or update that finds nothing means the store lost a record.
fn check_found(label: &str, r: &PhaseResult) -> Result<()> {
    let lost: u64 = r
        .per_op
        .iter()
        .filter(|o| o.op != "SCAN")
        .map(|o| o.not_found)
        .sum();
    if lost > 0 {
        return Err(BenchError::Process {
            what: label.into(),
            why: format!(
                "workload {}: {lost} reads or updates found no record",
                r.workload
            ),
        });
    }
    Ok(())
}

fn find<'a>(rows: &'a [YcsbRow], t: TargetKind, workload: &str) -> Option<&'a YcsbRow> {
    rows.iter()
        .find(|r| r.target == t && r.result.workload == workload)
}

/// The report printed to stdout: throughput per workload and store with the pairing ratios,
/// then latencies per operation type.
pub fn markdown(cfg: &YcsbConfig, machine: &MachineInfo, rows: &[YcsbRow]) -> String {
    let mut s = String::from("## nacre-bench ycsb\n\n");
    let _ = writeln!(s, "{}", machine_line(machine));
    let _ = writeln!(
        s,
        "YCSB core workloads, {} fields x {} B per record, {} client threads, zipfian \
         constant {}, warm-up {} operations (at most a tenth of a run), pipeline {}. Process-crash pairing: {} records, {} \
         operations per workload, in {}. Power-loss pairing: {} records, {} operations, in \
         {}.\n",
        cfg.field_count,
        cfg.field_length,
        cfg.threads,
        cfg.zipfian_constant,
        cfg.warmup_ops,
        cfg.pipeline,
        cfg.records,
        cfg.operations,
        cfg.shm().display(),
        cfg.sync_records,
        cfg.sync_operations,
        cfg.disk_dir.display()
    );
    if cfg.nacre_pm_mib > 0 {
        let gi = match cfg.nacre_gi_mib {
            0 => cfg.nacre_pm_mib / 2,
            g => g,
        };
        let _ = writeln!(
            s,
            "Nacre: a {} MiB pool with disk levels (lsm-tree tables) beside it, Global Index \
             limit {gi} MiB, memtables of {} MiB, an 8 MiB block cache (RocksDB's default).\n",
            cfg.nacre_pm_mib, cfg.memtable_mib
        );
    }
    s.push_str("| workload | store | survives | records | ops/s | vs anchor |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    let mut names = vec!["load".to_string()];
    names.extend(cfg.workloads.iter().map(|w| w.letter().to_string()));
    for name in &names {
        for &t in &cfg.targets {
            let Some(r) = find(rows, t, name) else {
                continue;
            };
            let anchor = match t {
                TargetKind::NacreEmulated => find(rows, TargetKind::RocksdbSync0, name),
                TargetKind::NacreEmulatedUnverified
                | TargetKind::NacreEmulatedIndexed
                | TargetKind::NacreEmulatedTreeReads => find(rows, TargetKind::NacreEmulated, name),
                TargetKind::NacreMsync => find(rows, TargetKind::RocksdbSync1, name),
                _ => None,
            };
            let ratio = match anchor.map(|a| r.result.ops_per_sec / a.result.ops_per_sec) {
                Some(x) if x.is_finite() => format!("{}x", sig3(x)),
                _ => "-".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {ratio} |",
                name.to_uppercase(),
                r.label,
                r.durability,
                if name == "load" {
                    r.result.ops
                } else {
                    r.records
                },
                sig3(r.result.ops_per_sec)
            );
        }
    }
    let disk: Vec<&YcsbRow> = rows.iter().filter(|r| r.target.power_loss()).collect();
    if !disk.is_empty() {
        s.push_str(
            "\nPower-loss stores, per phase: bytes the disk's block device wrote (the kernel's \
             counters: the whole device, so other writers count too), per write operation, \
             and group commits where the store counts them.\n\n\
             | workload | store | write ops | disk MiB written | disk bytes per write | commits | writes per commit |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for r in disk {
            let w = writes(&r.result);
            let per = |x: Option<u64>| match x {
                Some(b) if w > 0 => sig3(b as f64 / w as f64),
                _ => "-".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {w} | {} | {} | {} | {} |",
                r.result.workload.to_uppercase(),
                r.label,
                r.disk_bytes
                    .map_or_else(|| "-".into(), |b| sig3(b as f64 / (1 << 20) as f64)),
                per(r.disk_bytes),
                r.commits.map_or_else(|| "-".into(), |c| c.to_string()),
                match r.commits {
                    Some(c) if c > 0 => sig3(w as f64 / c as f64),
                    _ => "-".into(),
                },
            );
        }
    }
    s.push_str(
        "\nWrite amplification per phase: bytes written to files (WAL and tables; the process's \
         write(2) bytes) and, for Nacre, into PM, per byte of user data written (key and \
         fields of each insert and update).\n\n\
         | workload | store | write ops | file MiB written | file bytes per user byte | PM bytes per user byte |\n\
         |---|---|---|---|---|---|\n",
    );
    let user = |w: u64| w * (24 + (cfg.field_count * cfg.field_length) as u64);
    for r in rows {
        let w = writes(&r.result);
        if w == 0 {
            continue;
        }
        let per = |x: Option<u64>| match x {
            Some(b) => sig3(b as f64 / user(w) as f64),
            None => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {w} | {} | {} | {} |",
            r.result.workload.to_uppercase(),
            r.label,
            r.file_bytes
                .map_or_else(|| "-".into(), |b| sig3(b as f64 / (1 << 20) as f64)),
            per(r.file_bytes),
            per(r.pm_bytes),
        );
    }
    s.push_str(
        "\n| workload | store | op | count | avg us | p50 us | p99 us | p99.9 us | max us |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        for o in &r.result.per_op {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.result.workload.to_uppercase(),
                r.label,
                o.op,
                o.count,
                sig3(o.avg_us),
                sig3(o.p50_us),
                sig3(o.p99_us),
                sig3(o.p999_us),
                sig3(o.max_us)
            );
        }
    }
    s.push('\n');
    s
}

/// One JSON object per phase.
pub fn json_rows(
    cfg: &YcsbConfig,
    machine: &MachineInfo,
    rows: &[YcsbRow],
) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            let mut params = serde_json::json!(cfg);
            params["shm_dir"] = cfg.shm().display().to_string().into();
            params["target"] = serde_json::json!(r.target);
            params["label"] = r.label.clone().into();
            params["records_present"] = r.records.into();
            let (records, ops) = cfg.sizes(r.target);
            params["run_records"] = records.into();
            params["run_operations"] = ops.into();
            params["disk_bytes"] = serde_json::json!(r.disk_bytes);
            params["commits"] = serde_json::json!(r.commits);
            params["file_bytes"] = serde_json::json!(r.file_bytes);
            params["pm_bytes"] = serde_json::json!(r.pm_bytes);
            let results = serde_json::json!(r.result);
            json_row("ycsb", machine, &r.backend, &r.durability, params, results)
        })
        .collect()
}

/// `nacre-bench ycsb`: runs, prints the tables, writes JSON lines if asked.
pub fn main(cfg: &YcsbConfig) -> Result<()> {
    let rows = run(cfg)?;
    let machine = MachineInfo::collect();
    crate::engine::emit(&markdown(cfg, &machine, &rows), cfg.json.as_deref(), || {
        json_rows(cfg, &machine, &rows)
    })
}
