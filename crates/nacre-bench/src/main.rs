//! `nacre-bench` command line. Tables go to stdout, logs (`RUST_LOG`, default `info`) to
//! stderr.

use std::error::Error;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use nacre_bench::alloc::{self, AllocConfig};
use nacre_bench::engine::{
    async_writes, fill, forever, memtable, piled, recovery, recovery_child, ror, verify,
};
use nacre_bench::{json, report, PmemConfig, Target};
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(
    name = "nacre-bench",
    version,
    about = "Nacre benchmarks, each against an anchor in the same run"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Persisted 4 KiB sequential writes, 128 B appends and random 8 B stores through every
    /// nacre-pmem backend, beside raw clwb+sfence and write+fdatasync loops.
    Pmem(PmemArgs),
    /// Allocation latency of Halloc (object pool, zone) against PMDK's pmemobj_alloc, same
    /// sizes and file system, same run.
    Alloc(AllocArgs),
    /// Reorder Ring throughput and put latency of the engine, swept over the group batch size
    /// and the writer threads (emulated backend).
    Ror(ror::RorConfig),
    /// Engine memtable inserts (Db::put) and lookups (Db::get) against a DRAM skip-list
    /// memtable (the paper's SLM), sequential and random keys.
    Memtable(memtable::MemtableConfig),
    /// Durable random puts against RocksDB's db_bench fillrandom: emulated vs --sync=0 and
    /// msync vs --sync=1.
    Fillrandom(fill::FillConfig),
    /// The Global Index against a piled-up L0: random writes, reads and scans at a data size
    /// that fits the Global Index, against db_bench with compactions off (seed 000 Fig. 15).
    PiledL0(piled::PiledConfig),
    /// YCSB A on a pool half full of live data until many pools are written: throughput per
    /// tenth, update tail latency, PM write amplification, the cleaner's work.
    Forever(forever::ForeverConfig),
    /// Restart time after SIGKILL against PM data size and recovery threads.
    Recovery(recovery::RecoveryConfig),
    /// Db::verify() throughput (a full scrub) against a crc32c loop over DRAM.
    Verify(verify::VerifyConfig),
    /// Db::write_async with batches queued per client thread, against Db::put.
    Async(async_writes::AsyncConfig),
    /// YCSB workloads A-F against embedded Nacre and RocksDB, in both durability pairings.
    Ycsb(nacre_bench::ycsb::bench::YcsbConfig),
    /// Every anchor in one command: raw clwb+sfence and fdatasync loops, db_bench
    /// fillrandom --sync=0/1, redis-benchmark SET/GET with appendfsync always/everysec/no.
    Anchors(nacre_bench::anchors::AnchorsConfig),
    /// redis-benchmark against nacre-server and redis-server with AOF (always, everysec,
    /// no), and restart after SIGKILL against Redis loading its AOF.
    Server(nacre_bench::server::ServerBenchConfig),
    /// TPC-C (New-Order, Payment, Order-Status, Delivery, Stock-Level) on Nacre's optimistic
    /// and pessimistic transactions against RocksDB's TransactionDB and
    /// OptimisticTransactionDB, with consistency checks 1-4 after each run.
    Tpcc(nacre_bench::tpcc::TpccConfig),
    /// Markdown tables and SVG charts from the JSON lines of `ycsb` and `recovery` runs.
    Report(nacre_bench::publish::ReportConfig),
    /// (internal) One measurement of `memtable`, printed as `MEMTABLE <insert> <lookup>`.
    #[command(hide = true)]
    MemtableOne(memtable::OneArgs),
    /// (internal) Loads a database for `recovery`, prints READY, waits for SIGKILL.
    #[command(hide = true)]
    RecoveryChild(recovery_child::LoadArgs),
    /// (internal) Opens a crashed database for `recovery`, prints OPENED, waits for SIGKILL.
    #[command(hide = true)]
    RecoveryOpen(recovery_child::OpenArgs),
}

#[derive(Args, Debug)]
struct AllocArgs {
    /// Object sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [128u64, 256, 1024, 4096, 16384])]
    sizes: Vec<u64>,
    /// Allocations per size and allocator.
    #[arg(long, default_value_t = 1_000_000)]
    allocs: u64,
    /// Most bytes live at once, in MiB (allocations run in rounds; frees are not timed).
    #[arg(long, default_value_t = 1024)]
    live_mib: u64,
    /// Directory for the pool files [default: /dev/shm, else the temp dir].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Repeats; the report shows the median.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct PmemArgs {
    /// Region written by the cache-flush backends (emulated, dax, raw mmap) and sim, in MiB.
    #[arg(long, default_value_t = 64)]
    region_mib: usize,
    /// Region written by the syscall-bound loops (msync, fdatasync), in MiB.
    #[arg(long, default_value_t = 8)]
    sync_region_mib: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// At most this many operations per measurement of the msync and fdatasync loops.
    #[arg(long, default_value_t = 4000)]
    sync_ops: u64,
    /// Repeats of each measurement; the report shows the median.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Directory for the emulated pool and raw mapping [default: /dev/shm, else the temp dir].
    #[arg(long)]
    shm_dir: Option<PathBuf>,
    /// Directory on disk for the msync pool and the fdatasync file.
    #[arg(long, default_value = "bench-results")]
    disk_dir: PathBuf,
    /// Directory where the dax backend is attempted [default: --disk-dir].
    #[arg(long)]
    dax_dir: Option<PathBuf>,
    /// Subjects to measure, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    targets: Vec<Target>,
    /// Seed of the random offsets.
    #[arg(long)]
    seed: Option<u64>,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    json: Option<PathBuf>,
}

impl PmemArgs {
    fn config(self) -> PmemConfig {
        let d = PmemConfig::default();
        PmemConfig {
            region_bytes: self.region_mib << 20,
            sync_region_bytes: self.sync_region_mib << 20,
            seconds: self.seconds,
            sync_ops: self.sync_ops,
            repeats: self.repeats,
            shm_dir: self.shm_dir.unwrap_or(d.shm_dir),
            dax_dir: self.dax_dir.unwrap_or_else(|| self.disk_dir.clone()),
            disk_dir: self.disk_dir,
            targets: if self.targets.is_empty() {
                d.targets
            } else {
                self.targets
            },
            seed: self.seed.unwrap_or(d.seed),
        }
    }
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nacre-bench: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn Error>> {
    // The engine benchmarks open a database per measurement: keep the engine's own open and
    // create lines out of their progress unless RUST_LOG asks for them.
    let default = match cli.command {
        Command::Pmem(_) | Command::Alloc(_) => "info",
        _ => "info,nacre=warn,nacre_pmem=warn,nacre_halloc=warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Pmem(args) => {
            let json = args.json.clone();
            let run = nacre_bench::run(&args.config())?;
            print!("{}", report::markdown(&run));
            if let Some(path) = json {
                nacre_bench::engine::write_json_text(
                    &path,
                    &json::json_lines(&run)?,
                    run.rows.len(),
                )?;
            }
        }
        Command::Alloc(a) => {
            let d = AllocConfig::default();
            let cfg = AllocConfig {
                sizes: a.sizes,
                allocs: a.allocs,
                live_bytes: a.live_mib << 20,
                zone_size: d.zone_size,
                dir: a.dir.unwrap_or(d.dir),
                repeats: a.repeats,
            };
            let rows = alloc::run(&cfg)?;
            print!("{}", alloc::markdown(&cfg, &rows));
            if let Some(path) = a.json {
                let machine = report::MachineInfo::collect();
                let params =
                    serde_json::json!({"allocs": cfg.allocs, "live_bytes": cfg.live_bytes});
                let values: Vec<_> = rows
                    .iter()
                    .map(|r| {
                        let results = serde_json::json!({"row": r, "median_ns": r.median_ns()});
                        nacre_bench::engine::json_row(
                            "alloc",
                            &machine,
                            "emulated",
                            "process crash only",
                            params.clone(),
                            results,
                        )
                    })
                    .collect();
                nacre_bench::engine::write_json(&path, &values)?;
            }
        }
        Command::Ror(c) => ror::main(&c)?,
        Command::Memtable(c) => memtable::main(&c)?,
        Command::MemtableOne(a) => memtable::one_main(&a)?,
        Command::Fillrandom(c) => fill::main(&c)?,
        Command::PiledL0(c) => piled::main(&c)?,
        Command::Forever(c) => forever::main(&c)?,
        Command::Recovery(c) => recovery::main(&c)?,
        Command::Verify(c) => verify::main(&c)?,
        Command::Async(c) => async_writes::main(&c)?,
        Command::Server(c) => nacre_bench::server::main(&c)?,
        Command::Ycsb(c) => nacre_bench::ycsb::bench::main(&c)?,
        Command::Anchors(c) => nacre_bench::anchors::main(&c)?,
        Command::Report(c) => nacre_bench::publish::main(&c)?,
        Command::Tpcc(c) => nacre_bench::tpcc::main(&c)?,
        Command::RecoveryChild(a) => recovery_child::load(&a)?,
        Command::RecoveryOpen(a) => recovery_child::open(&a)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent_and_defaults_match_config() {
        Cli::command().debug_assert();
        let cli = Cli::parse_from(["nacre-bench", "pmem"]);
        let Command::Pmem(args) = cli.command else {
            panic!("pmem")
        };
        let c = args.config();
        let d = PmemConfig::default();
        assert_eq!(c, d);
    }

    #[test]
    fn targets_parse_comma_separated() {
        let cli = Cli::parse_from(["nacre-bench", "pmem", "--targets", "emulated,raw-shm,sim"]);
        let Command::Pmem(args) = cli.command else {
            panic!("pmem")
        };
        assert_eq!(
            args.config().targets,
            [Target::Emulated, Target::RawShm, Target::Sim]
        );
    }

    #[test]
    fn engine_defaults_match_the_documented_runs() {
        let Command::Ror(r) = Cli::parse_from(["nacre-bench", "ror"]).command else {
            panic!("ror")
        };
        assert_eq!(r.batch_sizes, [1, 5, 10, 25, 50, 100]);
        assert_eq!((r.batch_threads, r.thread_batch), (4, 50));
        assert_eq!(r.threads, [1, 2, 4, 8]);
        let Command::Fillrandom(f) = Cli::parse_from(["nacre-bench", "fillrandom"]).command else {
            panic!("fillrandom")
        };
        assert_eq!(
            (f.num, f.threads, f.key_size, f.value_size),
            (200_000, 2, 16, 500)
        );
        let cli = Cli::parse_from(["nacre-bench", "recovery", "--sizes-mib", "64,2048"]);
        let Command::Recovery(c) = cli.command else {
            panic!("recovery")
        };
        assert_eq!((c.sizes_mib, c.threads), (vec![64, 2048], vec![1, 2, 4]));
    }
}
