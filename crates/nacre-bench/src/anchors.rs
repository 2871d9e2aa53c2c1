//! `nacre-bench anchors`: every anchor Nacre's claims are ratios against, in one command
//! (DESIGN.md §7): the physical limits (raw clwb+sfence loops on tmpfs, write+fdatasync on
//! disk, as in `nacre-bench pmem`), RocksDB's `db_bench fillrandom` with `--sync=0` and
//! `--sync=1` (as in `nacre-bench fillrandom`), and `redis-benchmark` SET/GET against a
//! redis-server this run starts with AOF on and `appendfsync` always, everysec and no.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::config::{PmemConfig, Target};
use crate::engine::dbbench::{self, FillArgs};
use crate::engine::{json_row, machine_line, EMULATED_SURVIVES, MSYNC_SURVIVES};
use crate::error::{io_err, BenchError, Result};
use crate::report::{sig3, MachineInfo};
use crate::resp::{RedisServer, DEFAULT_REDIS_SERVER};

/// Parameters of `nacre-bench anchors`.
#[derive(clap::Args, Clone, Debug, PartialEq, Serialize)]
pub struct AnchorsConfig {
    /// Seconds per raw-loop measurement.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Repeats of each raw loop and db_bench run; medians reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// db_bench puts with --sync=0 (all threads).
    #[arg(long, default_value_t = 200_000)]
    pub num: u64,
    /// db_bench puts with --sync=1 (all threads).
    #[arg(long, default_value_t = 5_000)]
    pub sync_num: u64,
    /// db_bench threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// redis-benchmark requests per test (-n).
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// redis-benchmark requests with appendfsync always (-n).
    #[arg(long, default_value_t = 5_000)]
    pub sync_requests: u64,
    /// redis-benchmark connections (-c).
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// redis-benchmark value bytes (-d).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Directory on disk for the fdatasync file and the RocksDB databases.
    #[arg(long, default_value = "bench-results")]
    pub disk_dir: PathBuf,
    /// The db_bench binary.
    #[arg(long, default_value = "/usr/bin/db_bench")]
    pub db_bench: PathBuf,
    /// The redis-server binary.
    #[arg(long, default_value = DEFAULT_REDIS_SERVER)]
    pub redis_server: PathBuf,
    /// The redis-benchmark binary.
    #[arg(long, default_value = "/usr/bin/redis-benchmark")]
    pub redis_benchmark: PathBuf,
    /// Write one JSON object per row to this file (replaced if it exists).
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

/// One anchor measurement, or why it could not be made.
#[derive(Clone, Debug, Serialize)]
pub struct AnchorRow {
    /// `raw`, `db_bench` or `redis-benchmark`.
    pub tool: String,
    /// What was measured, e.g. `fillrandom --sync=1`, `SET appendfsync always`.
    pub what: String,
    /// What an acknowledged write survives.
    pub durability: String,
    /// The command or loop, for rerunning it.
    pub command: String,
    /// The measured figure (median of the repeats).
    pub value: f64,
    /// Its unit: `ops/s`, `GB/s`, `Mops/s` or `ns` (mean latency).
    pub unit: String,
    /// Mean latency in microseconds, where the tool reports it.
    pub avg_us: f64,
    /// 99th percentile latency in microseconds, where the tool reports it.
    pub p99_us: f64,
    /// Why the anchor is missing, if it is.
    pub unavailable: Option<String>,
}

impl AnchorRow {
    fn missing(tool: &str, what: &str, durability: &str, why: String) -> AnchorRow {
        AnchorRow {
            tool: tool.into(),
            what: what.into(),
            durability: durability.into(),
            command: String::new(),
            value: f64::NAN,
            unit: String::new(),
            avg_us: f64::NAN,
            p99_us: f64::NAN,
            unavailable: Some(why),
        }
    }
}

/// One line of `redis-benchmark --csv`: test name, requests per second, average and p99
/// latency in milliseconds.
pub fn parse_redis_csv(out: &str) -> Vec<(String, f64, f64, f64)> {
    let mut rows = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for line in out.lines() {
        let cells: Vec<String> = line
            .split(',')
            .map(|c| c.trim().trim_matches('"').to_string())
            .collect();
        if cells.first().is_some_and(|c| c == "test") {
            header = cells;
            continue;
        }
        let col = |name: &str| -> Option<f64> {
            let i = header.iter().position(|h| h == name)?;
            cells.get(i)?.parse().ok()
        };
        if let (Some(rps), Some(avg), Some(p99)) =
            (col("rps"), col("avg_latency_ms"), col("p99_latency_ms"))
        {
            rows.push((cells[0].clone(), rps, avg, p99));
        }
    }
    rows
}

fn raw_rows(cfg: &AnchorsConfig) -> Result<Vec<AnchorRow>> {
    let pm = PmemConfig {
        seconds: cfg.seconds,
        repeats: cfg.repeats,
        disk_dir: cfg.disk_dir.clone(),
        dax_dir: cfg.disk_dir.clone(),
        targets: vec![Target::RawShm, Target::RawFdatasync],
        ..PmemConfig::default()
    };
    let run = crate::run(&pm)?;
    let mut out = Vec::new();
    for r in &run.rows {
        let durability = if r.target == Target::RawShm {
            EMULATED_SURVIVES
        } else {
            MSYNC_SURVIVES
        };
        let row = |what: &str, value: f64, unit: &str, p99_us: f64| AnchorRow {
            tool: "raw".into(),
            what: format!("{}: {what}", r.loop_label),
            durability: durability.into(),
            command: "nacre-bench pmem --targets raw-shm,raw-fdatasync".into(),
            value,
            unit: unit.into(),
            avg_us: if unit == "ns" {
                value / 1000.0
            } else {
                f64::NAN
            },
            p99_us,
            unavailable: r.unavailable.clone(),
        };
        if !r.seq_gbps.is_empty() {
            out.push(row(
                "4 KiB sequential",
                crate::bench::median(&r.seq_gbps),
                "GB/s",
                f64::NAN,
            ));
        }
        if !r.append_mops.is_empty() {
            out.push(row(
                "128 B appends",
                crate::bench::median(&r.append_mops),
                "Mops/s",
                f64::NAN,
            ));
        }
        if !r.latency.is_empty() {
            let mean: Vec<f64> = r.latency.iter().map(|l| l.mean_ns).collect();
            let p99: Vec<f64> = r.latency.iter().map(|l| l.p99_ns).collect();
            out.push(row(
                "8 B random persist",
                crate::bench::median(&mean),
                "ns",
                crate::bench::median(&p99) / 1000.0,
            ));
        }
    }
    Ok(out)
}

fn db_bench_rows(cfg: &AnchorsConfig) -> Vec<AnchorRow> {
    let mut out = Vec::new();
    for (sync, n) in [(false, cfg.num), (true, cfg.sync_num)] {
        let what = format!("fillrandom --sync={}", u8::from(sync));
        let survives = if sync {
            MSYNC_SURVIVES
        } else {
            EMULATED_SURVIVES
        };
        if let Some(why) = dbbench::unavailable(&cfg.db_bench) {
            out.push(AnchorRow::missing("db_bench", &what, survives, why));
            continue;
        }
        let args = FillArgs {
            exe: &cfg.db_bench,
            dir: &cfg.disk_dir,
            sync,
            threads: cfg.threads,
            num_per_thread: n / cfg.threads.max(1) as u64,
            key_size: 16,
            value_size: 500,
        };
        let mut ops = Vec::new();
        let mut failed = None;
        for _ in 0..cfg.repeats {
            match args.run("anchors") {
                Ok(r) => ops.push(r.ops_per_sec),
                Err(e) => failed = Some(e.to_string()),
            }
        }
        match failed {
            Some(why) if ops.is_empty() => {
                out.push(AnchorRow::missing("db_bench", &what, survives, why))
            }
            _ => out.push(AnchorRow {
                tool: "db_bench".into(),
                what,
                durability: survives.into(),
                command: args.command_line("DIR"),
                value: crate::bench::median(&ops),
                unit: "ops/s".into(),
                avg_us: f64::NAN,
                p99_us: f64::NAN,
                unavailable: None,
            }),
        }
    }
    out
}

fn redis_rows(cfg: &AnchorsConfig) -> Vec<AnchorRow> {
    let mut out = Vec::new();
    for mode in ["always", "everysec", "no"] {
        let survives = match mode {
            "always" => MSYNC_SURVIVES,
            "everysec" => "process crash; power loss up to 1 s of writes",
            _ => EMULATED_SURVIVES,
        };
        let label = |t: &str| format!("{t} appendfsync {mode}");
        match redis_mode(cfg, mode) {
            Ok(rows) => {
                for (test, command, rps, avg_ms, p99_ms) in rows {
                    out.push(AnchorRow {
                        tool: "redis-benchmark".into(),
                        what: label(&test),
                        durability: survives.into(),
                        command,
                        value: rps,
                        unit: "ops/s".into(),
                        avg_us: avg_ms * 1000.0,
                        p99_us: p99_ms * 1000.0,
                        unavailable: None,
                    });
                }
            }
            Err(e) => out.push(AnchorRow::missing(
                "redis-benchmark",
                &label("SET,GET"),
                survives,
                e.to_string(),
            )),
        }
    }
    out
}

type RedisResult = (String, String, f64, f64, f64);

fn redis_mode(cfg: &AnchorsConfig, mode: &str) -> Result<Vec<RedisResult>> {
    if !Path::new(&cfg.redis_benchmark).exists() {
        return Err(BenchError::Process {
            what: cfg.redis_benchmark.display().to_string(),
            why: "not installed (Debian's redis-tools)".into(),
        });
    }
    let server = RedisServer::start(
        &cfg.redis_server,
        &["--appendonly", "yes", "--appendfsync", mode],
    )
    .map_err(|e| BenchError::Process {
        what: "redis-server".into(),
        why: e.to_string(),
    })?;
    let n = if mode == "always" {
        cfg.sync_requests
    } else {
        cfg.requests
    };
    let args: Vec<String> = [
        "-h",
        "127.0.0.1",
        "-p",
        &server.port().to_string(),
        "-t",
        "set,get",
        "-n",
        &n.to_string(),
        "-c",
        &cfg.clients.to_string(),
        "-d",
        &cfg.value_size.to_string(),
        "--csv",
    ]
    .map(String::from)
    .to_vec();
    let shown: Vec<&str> = args
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 3 { "PORT" } else { a.as_str() })
        .collect();
    let command = format!(
        "redis-benchmark {} (redis-server --appendonly yes --appendfsync {mode})",
        shown.join(" ")
    );
    let out = Command::new(&cfg.redis_benchmark)
        .args(&args)
        .output()
        .map_err(io_err("run", &cfg.redis_benchmark))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rows = parse_redis_csv(&text);
    if let Some((t, ..)) = rows.iter().find(|r| !r.1.is_finite()) {
        return Err(BenchError::InvalidParams(format!(
            "redis-benchmark timed {t} as infinitely fast: {n} requests are too few to measure"
        )));
    }
    if !out.status.success() || rows.is_empty() {
        return Err(BenchError::Process {
            what: "redis-benchmark".into(),
            why: format!(
                "{}: {} {}",
                out.status,
                text.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(rows
        .into_iter()
        .map(|(t, rps, avg, p99)| (t, command.clone(), rps, avg, p99))
        .collect())
}

/// Measures every anchor.
pub fn run(cfg: &AnchorsConfig) -> Result<Vec<AnchorRow>> {
    if cfg.threads == 0 || cfg.repeats == 0 || cfg.clients == 0 {
        return Err(BenchError::InvalidParams(
            "anchors need threads, repeats and clients above zero".into(),
        ));
    }
    let created = !cfg.disk_dir.exists();
    std::fs::create_dir_all(&cfg.disk_dir).map_err(io_err("create", &cfg.disk_dir))?;
    let r = raw_rows(cfg).map(|mut rows| {
        rows.extend(db_bench_rows(cfg));
        rows.extend(redis_rows(cfg));
        rows
    });
    if created {
        let _ = std::fs::remove_dir(&cfg.disk_dir);
    }
    r
}

/// The report printed to stdout.
pub fn markdown(machine: &MachineInfo, rows: &[AnchorRow]) -> String {
    let mut s = String::from("## nacre-bench anchors\n\n");
    let _ = writeln!(s, "{}\n", machine_line(machine));
    s.push_str("| tool | measurement | survives | value | avg us | p99 us | command |\n");
    s.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        match &r.unavailable {
            Some(why) => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | unavailable: {} | | | |",
                    r.tool,
                    r.what,
                    r.durability,
                    why.replace('|', "/")
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} {} | {} | {} | `{}` |",
                    r.tool,
                    r.what,
                    r.durability,
                    sig3(r.value),
                    r.unit,
                    sig3(r.avg_us),
                    sig3(r.p99_us),
                    r.command
                );
            }
        }
    }
    s.push('\n');
    s
}

/// `nacre-bench anchors`: runs, prints the table, writes JSON lines if asked.
pub fn main(cfg: &AnchorsConfig) -> Result<()> {
    let rows = run(cfg)?;
    let machine = MachineInfo::collect();
    crate::engine::emit(&markdown(&machine, &rows), cfg.json.as_deref(), || {
        rows.iter()
            .map(|r| {
                let params = serde_json::json!({"config": cfg, "tool": r.tool, "what": r.what,
                                                "command": r.command});
                json_row(
                    "anchors",
                    &machine,
                    &r.tool,
                    &r.durability,
                    params,
                    serde_json::json!(r),
                )
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_benchmark_csv() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"90909.09\",\"0.065\",\"0.016\",\"0.063\",\"0.103\",\"0.135\",\"0.447\"\n\
                   \"GET\",\"117647.05\",\"0.053\",\"0.016\",\"0.055\",\"0.087\",\"0.119\",\"0.167\"\n";
        let rows = parse_redis_csv(out);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], ("SET".to_string(), 90909.09, 0.065, 0.135));
        assert_eq!(rows[1].0, "GET");
        assert!(parse_redis_csv("garbage\n\"SET\",\"1\"\n").is_empty());
    }
}
