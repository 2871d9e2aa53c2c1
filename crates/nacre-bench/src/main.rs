//! `nacre-bench` command line. Tables go to stdout, logs (`RUST_LOG`, default `info`) to
//! stderr.

use std::error::Error;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
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

fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Pmem(args) => {
            let json = args.json.clone();
            let run = nacre_bench::run(&args.config())?;
            print!("{}", report::markdown(&run));
            if let Some(path) = json {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, json::json_lines(&run)?)?;
                tracing::info!(path = %path.display(), rows = run.rows.len(), "wrote JSON lines");
            }
        }
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
        let Command::Pmem(args) = cli.command;
        let c = args.config();
        let d = PmemConfig::default();
        assert_eq!(c, d);
    }

    #[test]
    fn targets_parse_comma_separated() {
        let cli = Cli::parse_from(["nacre-bench", "pmem", "--targets", "emulated,raw-shm,sim"]);
        let Command::Pmem(args) = cli.command;
        assert_eq!(
            args.config().targets,
            [Target::Emulated, Target::RawShm, Target::Sim]
        );
    }
}
