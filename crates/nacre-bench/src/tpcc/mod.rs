//! `nacre-bench tpcc`: TPC-C (the five transactions over the nine tables and the secondary
//! indexes they need, spec cardinalities) against Nacre's optimistic and pessimistic
//! transactions and RocksDB 7.8.3's TransactionDB and OptimisticTransactionDB, through the
//! same driver, in both durability pairings. After each run, consistency conditions 1-4 are
//! checked and printed one per line.
//!
//! Terminals run back to back (no keying or think time): tpmC here is New-Orders committed
//! per minute of an unthrottled run, a measure of the engines, not an audited TPC-C result.

pub mod check;
pub mod load;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod schema;
pub mod store;
pub mod txns;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nacre_pmem::Backend;
use serde::Serialize;

use crate::engine::{default_shm_dir, BenchDb, EMULATED_SURVIVES, MSYNC_SURVIVES};
use crate::error::{io_err, BenchError, Result};
use crate::features::{self, Feature, Selection};
use load::{Rand, Scale};
use store::{TxFail, TxStore};
use txns::{Done, Kind, Terminal};

/// A store `tpcc` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TpccTarget {
    /// Nacre optimistic transactions, emulated backend on tmpfs (survives a process crash).
    NacreOptimisticEmulated,
    /// Nacre pessimistic transactions, emulated backend.
    NacrePessimisticEmulated,
    /// RocksDB TransactionDB (pessimistic), WAL not synced (survives a process crash).
    RocksdbPessimisticSync0,
    /// RocksDB OptimisticTransactionDB, WAL not synced.
    RocksdbOptimisticSync0,
    /// Nacre optimistic transactions, msync backend on disk (survives power loss).
    NacreOptimisticMsync,
    /// Nacre pessimistic transactions, msync backend.
    NacrePessimisticMsync,
    /// RocksDB TransactionDB, WAL synced on every commit (survives power loss).
    RocksdbPessimisticSync1,
    /// RocksDB OptimisticTransactionDB, WAL synced on every commit.
    RocksdbOptimisticSync1,
}

impl TpccTarget {
    /// Whether its commits survive power loss (else a process crash).
    pub fn power_loss(self) -> bool {
        matches!(
            self,
            TpccTarget::NacreOptimisticMsync
                | TpccTarget::NacrePessimisticMsync
                | TpccTarget::RocksdbPessimisticSync1
                | TpccTarget::RocksdbOptimisticSync1
        )
    }

    fn is_rocksdb(self) -> bool {
        matches!(
            self,
            TpccTarget::RocksdbPessimisticSync0
                | TpccTarget::RocksdbOptimisticSync0
                | TpccTarget::RocksdbPessimisticSync1
                | TpccTarget::RocksdbOptimisticSync1
        )
    }

    /// The optional part of this build the store needs, if any.
    pub fn needs(self) -> Option<Feature> {
        self.is_rocksdb().then_some(Feature::Rocksdb)
    }

    fn pessimistic(self) -> bool {
        matches!(
            self,
            TpccTarget::NacrePessimisticEmulated
                | TpccTarget::NacrePessimisticMsync
                | TpccTarget::RocksdbPessimisticSync0
                | TpccTarget::RocksdbPessimisticSync1
        )
    }
}

/// Parameters of `nacre-bench tpcc`.
#[derive(clap::Args, Clone, Debug, Serialize)]
pub struct TpccConfig {
    /// Warehouses.
    #[arg(long, default_value_t = 1)]
    pub warehouses: u32,
    /// Seconds each store runs the mix after loading.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Terminals (client threads), spread over the warehouses [default: 4].
    #[arg(long, default_value_t = 4)]
    pub terminals: usize,
    /// Stores, comma-separated [default: nacre-optimistic-emulated, nacre-pessimistic-emulated,
    /// rocksdb-pessimistic-sync0, rocksdb-optimistic-sync0; without the `rocksdb` feature the
    /// RocksDB ones are left out, and the run says so]. A named store this build cannot run
    /// stops the command before anything runs.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub targets: Vec<TpccTarget>,
    /// Seconds each store runs the mix, unmeasured, between its load and its measured run, so
    /// that no store is measured cold and a ratio does not depend on the order of the stores.
    #[arg(long, default_value_t = 10.0)]
    pub warmup_seconds: f64,
    /// Directory for the process-crash pairing [default: /dev/shm, else the temp dir].
    #[arg(long)]
    pub shm_dir: Option<PathBuf>,
    /// Directory on disk for the power-loss pairing.
    #[arg(long, default_value = "bench-results")]
    pub disk_dir: PathBuf,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write one JSON object per store to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// The stores run when `--targets` is not given (those this build has).
pub const DEFAULT_TARGETS: [TpccTarget; 4] = [
    TpccTarget::NacreOptimisticEmulated,
    TpccTarget::NacrePessimisticEmulated,
    TpccTarget::RocksdbPessimisticSync0,
    TpccTarget::RocksdbOptimisticSync0,
];

/// The stores to run: checked against this build before anything runs (see
/// [`features::select`]).
pub fn targets(cfg: &TpccConfig) -> Result<Selection<TpccTarget>> {
    let named = (!cfg.targets.is_empty()).then_some(&cfg.targets[..]);
    features::select(
        "--targets",
        named,
        &DEFAULT_TARGETS,
        TpccTarget::needs,
        Feature::enabled,
    )
}

/// Latency and counts of one transaction kind.
#[derive(Clone, Debug, Serialize)]
pub struct KindRow {
    /// The kind's name.
    pub kind: &'static str,
    /// Committed (New-Order: rolled back as the spec asks counts too).
    pub done: u64,
    /// Attempts that ended in a conflict, deadlock or lock timeout and were run again.
    pub retries: u64,
    /// Latency percentiles in microseconds (from the first attempt to the commit).
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
}

/// One store's run.
#[derive(Clone, Debug, Serialize)]
pub struct TpccRow {
    /// The store.
    pub label: String,
    /// What a commit survives.
    pub durability: String,
    /// Warehouses and terminals.
    pub warehouses: u32,
    /// Terminals.
    pub terminals: usize,
    /// Seconds measured.
    pub seconds: f64,
    /// New-Orders committed per minute.
    pub tpmc: f64,
    /// Transactions committed (all kinds) per second.
    pub tps: f64,
    /// Per kind.
    pub kinds: Vec<KindRow>,
    /// Durable commits the engine made during the run, where it counts them: Nacre's group
    /// commits (one `msync`, so one device flush, each on `msync`), RocksDB's WAL syncs (none
    /// with `sync=0`).
    pub flushes: Option<u64>,
    /// Rows loaded and seconds the load took.
    pub loaded_rows: u64,
    /// Load seconds.
    pub load_secs: f64,
    /// Consistency conditions 1-4: `None` holds.
    pub consistency: [Option<String>; 4],
}

impl TpccRow {
    /// Transactions committed per durable commit.
    pub fn per_flush(&self) -> Option<f64> {
        let done: u64 = self.kinds.iter().map(|k| k.done).sum();
        self.flushes
            .filter(|&f| f > 0)
            .map(|f| done as f64 / f as f64)
    }

    /// The 95th percentile of New-Order latency, microseconds.
    pub fn new_order_p95(&self) -> u64 {
        self.kinds.first().map_or(0, |k| k.p95_us)
    }
}

/// What one terminal measured.
struct Tally {
    hist: Vec<Histogram<u64>>,
    retries: Vec<u64>,
}

fn hist() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 600_000_000, 3)
        .map_err(|e| BenchError::InvalidParams(e.to_string()))
}

/// Runs the mix on `store` with `terminals` terminals until `until` passes or `stop` is set;
/// the per-kind rows and seconds measured.
pub fn run_mix(
    store: &dyn TxStore,
    warehouses: u32,
    scale: Scale,
    terminals: usize,
    until: Duration,
    seed: u64,
    stop: &AtomicBool,
) -> Result<(Vec<KindRow>, f64)> {
    let hints = txns::hints(warehouses, scale);
    let (secs, tallies) = crate::engine::run_threads(terminals, |t| {
        let term = Terminal {
            warehouses,
            w: (t as u32 % warehouses) + 1,
            d: (t as u32 / warehouses) % scale.districts + 1,
            id: t as u32 + 1,
            scale,
            hints: hints.clone(),
        };
        let seed = seed ^ ((t as u64 + 1) << 32);
        terminal(store, term, seed, until, stop)
    })?;
    let mut merged: Vec<Histogram<u64>> = (0..Kind::ALL.len())
        .map(|_| hist())
        .collect::<Result<_>>()?;
    let mut retries = vec![0u64; Kind::ALL.len()];
    for t in tallies {
        for (i, h) in t.hist.iter().enumerate() {
            merged[i]
                .add(h)
                .map_err(|e| BenchError::InvalidParams(e.to_string()))?;
            retries[i] += t.retries[i];
        }
    }
    let rows = Kind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| KindRow {
            kind: k.name(),
            done: merged[i].len(),
            retries: retries[i],
            p50_us: merged[i].value_at_quantile(0.50),
            p95_us: merged[i].value_at_quantile(0.95),
            p99_us: merged[i].value_at_quantile(0.99),
        })
        .collect();
    Ok((rows, secs))
}

fn terminal(
    store: &dyn TxStore,
    term: Terminal,
    seed: u64,
    until: Duration,
    stop: &AtomicBool,
) -> Result<Tally> {
    let start = Instant::now();
    let mut r = Rand::new(seed);
    let mut tally = Tally {
        hist: (0..Kind::ALL.len())
            .map(|_| hist())
            .collect::<Result<_>>()?,
        retries: vec![0; Kind::ALL.len()],
    };
    let mut seq = 0u32;
    while start.elapsed() < until && !stop.load(Ordering::Relaxed) {
        let kind = Kind::draw(&mut r);
        let i = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        let input = term.input(kind, &mut r);
        seq += 1;
        let t0 = Instant::now();
        loop {
            match term.run(store.begin(), &input, seq) {
                Ok(Done::Committed | Done::RolledBack) => break,
                Err(TxFail::Retry(_)) => tally.retries[i] += 1,
                Err(TxFail::Fatal(e)) => return Err(e),
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(tally);
            }
        }
        let us = t0.elapsed().as_micros().max(1) as u64;
        tally.hist[i].saturating_record(us);
    }
    Ok(tally)
}

/// Pool bytes a Nacre store needs for `warehouses` warehouses and the versions a run adds
/// before the cleaner reclaims them.
fn nacre_pool(warehouses: u32) -> u64 {
    (768u64 << 20) + u64::from(warehouses) * (384 << 20)
}

fn open_store(cfg: &TpccConfig, t: TpccTarget) -> Result<Box<dyn TxStore>> {
    let pess = t.pessimistic();
    match t {
        TpccTarget::NacreOptimisticEmulated
        | TpccTarget::NacrePessimisticEmulated
        | TpccTarget::NacreOptimisticMsync
        | TpccTarget::NacrePessimisticMsync => {
            let (dir, backend, name, survives) = if t.power_loss() {
                (
                    cfg.disk_dir.clone(),
                    Backend::Msync,
                    "msync",
                    MSYNC_SURVIVES,
                )
            } else {
                (
                    cfg.shm_dir.clone().unwrap_or_else(default_shm_dir),
                    Backend::Emulated,
                    "emulated",
                    EMULATED_SURVIVES,
                )
            };
            let bench = BenchDb::create(&dir, "tpcc", backend, nacre_pool(cfg.warehouses), |_| {})?;
            Ok(Box::new(store::NacreTxStore::bench(
                bench, pess, name, survives,
            )?))
        }
        _ => rocks_store(cfg, t),
    }
}

#[cfg(feature = "rocksdb")]
fn rocks_store(cfg: &TpccConfig, t: TpccTarget) -> Result<Box<dyn TxStore>> {
    let sync = t.power_loss();
    let dir = if sync {
        cfg.disk_dir.clone()
    } else {
        cfg.shm_dir.clone().unwrap_or_else(default_shm_dir)
    };
    let path = dir.join(crate::bench::file_name("tpcc-rocksdb"));
    Ok(Box::new(rocks::RocksTxStore::create(
        path,
        t.pessimistic(),
        sync,
        cfg.terminals.max(2),
    )?))
}

#[cfg(not(feature = "rocksdb"))]
fn rocks_store(_: &TpccConfig, t: TpccTarget) -> Result<Box<dyn TxStore>> {
    Err(BenchError::MissingFeature {
        target: format!("{t:?}"),
        option: "--targets",
        feature: Feature::Rocksdb.name(),
        needs: Feature::Rocksdb.needs(),
    })
}

/// Loads, runs and checks one store.
pub fn run_target(cfg: &TpccConfig, t: TpccTarget) -> Result<TpccRow> {
    let store = open_store(cfg, t)?;
    let scale = Scale::SPEC;
    let t0 = Instant::now();
    eprintln!("{}: loading {} warehouses", store.label(), cfg.warehouses);
    let loaded = load::load(&*store, cfg.warehouses, scale, cfg.seed)?;
    let load_secs = t0.elapsed().as_secs_f64();
    let stop = AtomicBool::new(false);
    if cfg.warmup_seconds > 0.0 {
        eprintln!(
            "{}: loaded {loaded} rows in {load_secs:.1} s; warming up {} terminals for {} s",
            store.label(),
            cfg.terminals,
            cfg.warmup_seconds
        );
        run_mix(
            &*store,
            cfg.warehouses,
            scale,
            cfg.terminals,
            Duration::from_secs_f64(cfg.warmup_seconds),
            cfg.seed ^ 0x5741_524d,
            &stop,
        )?;
    }
    eprintln!(
        "{}: running {} terminals for {} s (measured)",
        store.label(),
        cfg.terminals,
        cfg.seconds
    );
    let before = store.commits();
    let (kinds, secs) = run_mix(
        &*store,
        cfg.warehouses,
        scale,
        cfg.terminals,
        Duration::from_secs_f64(cfg.seconds),
        cfg.seed,
        &stop,
    )?;
    let flushes = match (before, store.commits()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let consistency = check::consistency(&*store, cfg.warehouses, scale)?;
    let done: u64 = kinds.iter().map(|k| k.done).sum();
    Ok(TpccRow {
        label: store.label(),
        durability: store.durability(),
        warehouses: cfg.warehouses,
        terminals: cfg.terminals,
        seconds: secs,
        tpmc: kinds[0].done as f64 * 60.0 / secs,
        tps: done as f64 / secs,
        kinds,
        flushes,
        loaded_rows: loaded,
        load_secs,
        consistency,
    })
}

/// Prints one store's rows.
fn print(row: &TpccRow) {
    println!(
        "## {} ({}), {} warehouses, {} terminals, {:.1} s",
        row.label, row.durability, row.warehouses, row.terminals, row.seconds
    );
    let flush = row
        .per_flush()
        .map_or_else(|| "-".to_string(), |f| format!("{f:.2}"));
    println!(
        "tpmC {:.0} | transactions/s {:.0} | transactions per durable commit {flush}",
        row.tpmc, row.tps
    );
    println!("| transaction | done | retries | p50 µs | p95 µs | p99 µs |");
    println!("|---|---:|---:|---:|---:|---:|");
    for k in &row.kinds {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            k.kind, k.done, k.retries, k.p50_us, k.p95_us, k.p99_us
        );
    }
    for l in check::lines(&row.consistency) {
        println!("{l}");
    }
}

/// `nacre-bench tpcc`.
pub fn main(cfg: &TpccConfig) -> Result<()> {
    if cfg.warehouses == 0
        || cfg.terminals == 0
        || cfg.seconds.is_nan()
        || cfg.seconds <= 0.0
        || cfg.warmup_seconds.is_nan()
        || cfg.warmup_seconds < 0.0
    {
        return Err(BenchError::InvalidParams(
            "tpcc needs at least one warehouse, terminal and second, and a warm-up of zero \
             seconds or more"
                .into(),
        ));
    }
    let sel = targets(cfg)?;
    if let Some(note) = sel.left_out_note() {
        tracing::warn!("{note}");
        println!("{note}");
    }
    if sel.run.is_empty() {
        return Err(BenchError::InvalidParams("tpcc has no store to run".into()));
    }
    let run = sel.run;
    if run.iter().any(|t| t.power_loss()) {
        std::fs::create_dir_all(&cfg.disk_dir).map_err(io_err("create", &cfg.disk_dir))?;
    }
    let mut rows = Vec::new();
    for &t in &run {
        let row = run_target(cfg, t)?;
        print(&row);
        rows.push(row);
    }
    // Each Nacre store against RocksDB's store of the same transaction kind and pairing.
    for (r, t) in rows.iter().zip(&run) {
        let anchor = rows.iter().zip(&run).find(|(_, a)| {
            a.power_loss() == t.power_loss()
                && a.pessimistic() == t.pessimistic()
                && a.is_rocksdb()
                && !t.is_rocksdb()
        });
        if let Some((a, _)) = anchor {
            println!(
                "{} vs {}: tpmC {:.2}x, New-Order p95 {:.2}x",
                r.label,
                a.label,
                r.tpmc / a.tpmc.max(1e-9),
                r.new_order_p95() as f64 / a.new_order_p95().max(1) as f64
            );
        }
    }
    if let Some(path) = &cfg.json {
        let text: String = rows
            .iter()
            .map(|r| serde_json::to_string(r).map(|s| s + "\n"))
            .collect::<std::result::Result<_, _>>()?;
        std::fs::write(path, text).map_err(io_err("write", path))?;
    }
    if rows
        .iter()
        .any(|r| r.consistency.iter().any(Option::is_some))
    {
        return Err(BenchError::Process {
            what: "TPC-C".into(),
            why: "a consistency condition failed (see above)".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tpcc: TpccConfig,
    }

    fn parse(args: &[&str]) -> TpccConfig {
        let argv = std::iter::once("tpcc").chain(args.iter().copied());
        match Cli::try_parse_from(argv) {
            Ok(c) => c.tpcc,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn without_targets_the_defaults_this_build_has_run() {
        let sel = match targets(&parse(&[])) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let rocks = cfg!(feature = "rocksdb");
        let expect: Vec<TpccTarget> = DEFAULT_TARGETS
            .into_iter()
            .filter(|t| rocks || !t.is_rocksdb())
            .collect();
        assert_eq!(sel.run, expect);
        assert_eq!(sel.left_out_note().is_some(), !rocks);
        if let Some(note) = sel.left_out_note() {
            assert!(note.contains("RocksdbPessimisticSync0") && note.contains("`rocksdb`"));
        }
    }

    #[test]
    fn named_rocksdb_targets_need_the_feature() {
        let cfg = parse(&[
            "--targets",
            "nacre-optimistic-msync,rocksdb-optimistic-sync1",
        ]);
        let r = targets(&cfg);
        assert_eq!(r.is_ok(), cfg!(feature = "rocksdb"), "{r:?}");
        match r {
            Ok(sel) => assert_eq!(sel.run, cfg.targets),
            Err(e) => {
                assert!(matches!(
                    e,
                    BenchError::MissingFeature {
                        feature: "rocksdb",
                        ..
                    }
                ));
                assert!(e.to_string().contains("RocksdbOptimisticSync1"), "{e}");
            }
        }
        let cfg = parse(&["--targets", "nacre-pessimistic-emulated"]);
        assert!(targets(&cfg).is_ok_and(|s| s.run == [TpccTarget::NacrePessimisticEmulated]));
    }

    /// Refused before any store is made: nothing is loaded into the directory.
    #[cfg(not(feature = "rocksdb"))]
    #[test]
    fn a_run_with_a_missing_target_stops_before_anything_runs() {
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let shm = dir.path().display().to_string();
        let cfg = parse(&[
            "--targets",
            "nacre-optimistic-emulated,rocksdb-optimistic-sync0",
            "--shm-dir",
            &shm,
        ]);
        let e = main(&cfg).err();
        assert!(
            matches!(e, Some(BenchError::MissingFeature { .. })),
            "{e:?}"
        );
        assert!(std::fs::read_dir(dir.path()).is_ok_and(|mut d| d.next().is_none()));
    }

    #[test]
    fn a_negative_warm_up_is_refused() {
        let cfg = parse(&["--warmup-seconds=-1"]);
        assert!(matches!(main(&cfg), Err(BenchError::InvalidParams(_))));
    }
}
