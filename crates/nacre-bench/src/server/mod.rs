//! `nacre-bench server`: redis-benchmark against nacre-server and redis-server 7 with AOF on
//! (`appendfsync always`, `everysec`, `no`), same machine, same run, fresh data directory
//! each; and the restart time after SIGKILL with a data set of a given size against Redis
//! loading its AOF.
//!
//! Pairings (DESIGN §7): nacre-server on `msync` (a reply means the write is on the device,
//! like `always`) against Redis `always`; on `emulated` (survives a process crash, like
//! `appendfsync no`) against Redis `no`.

pub mod latency;
pub mod parse;
pub mod restart;
pub mod streams;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;

use crate::error::{io_err, BenchError, Result};
use crate::resp::free_port;
pub use parse::{parse_benchmark, TestResult};

/// Options of `nacre-bench server`.
#[derive(Args, Debug, Clone)]
pub struct ServerBenchConfig {
    /// The nacre-server binary.
    #[arg(long, default_value = "target/release/nacre-server")]
    pub nacre_server: PathBuf,
    /// The redis-server binary.
    #[arg(long, default_value = "/usr/bin/redis-server")]
    pub redis_server: PathBuf,
    /// The redis-benchmark binary.
    #[arg(long, default_value = "/usr/bin/redis-benchmark")]
    pub redis_benchmark: PathBuf,
    /// Where data directories are made (on the disk to measure: not tmpfs for msync).
    #[arg(long, default_value = "target/server-bench")]
    pub dir: PathBuf,
    /// redis-benchmark tests (-t), the script tests `eval` (a script of one INCR) and
    /// `evalsha10` (EVALSHA of a script of ten SETs) and `xadd` (XADD to one stream), run
    /// as custom commands, and `xreadgroup` (a consumer group reading and acknowledging a
    /// stream, `streams.rs`).
    #[arg(long, default_value = "set,get,incr,hset,mset")]
    pub tests: String,
    /// Requests per test (-n).
    #[arg(long, default_value_t = 200_000)]
    pub requests: u64,
    /// Requests per test against Redis `always` and Nacre `msync` with `-P 1` (slow: fewer).
    #[arg(long, default_value_t = 50_000)]
    pub requests_sync: u64,
    /// Clients (-c).
    #[arg(long, default_value_t = 50)]
    pub clients: u64,
    /// Value bytes (-d).
    #[arg(long, default_value_t = 128)]
    pub data_size: u64,
    /// Key space (-r).
    #[arg(long, default_value_t = 100_000)]
    pub keyspace: u64,
    /// Pipeline depths (-P), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1u64, 16])]
    pub pipelines: Vec<u64>,
    /// Servers to run, comma-separated: nacre-msync, nacre-emulated, redis-always,
    /// redis-everysec, redis-no.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = ["nacre-msync".to_string(), "nacre-emulated".to_string(), "redis-always".to_string(), "redis-everysec".to_string(), "redis-no".to_string()]
    )]
    pub servers: Vec<String>,
    /// nacre-server pool size.
    #[arg(long, default_value = "2gb")]
    pub pmem_size: String,
    /// Start nacre-server with `persistent-index yes` (its Global Index kept in PM: restart
    /// serves before the volatile index is rebuilt).
    #[arg(long)]
    pub persistent_index: bool,
    /// Also measure restart after SIGKILL with this many GiB of data (0: skip).
    #[arg(long, default_value_t = 0.0)]
    pub restart_gib: f64,
    /// Skip the redis-benchmark runs (measure only the restart).
    #[arg(long)]
    pub only_restart: bool,
    /// Skip the redis-benchmark runs (measure only the latency mix).
    #[arg(long)]
    pub only_latency: bool,
    /// Threads of redis-benchmark (--threads; 0: its default of one).
    #[arg(long, default_value_t = 0)]
    pub bench_threads: u64,
    /// Run the latency-stability mix for this many seconds per server (0: skip).
    #[arg(long, default_value_t = 0)]
    pub latency_secs: u64,
    /// Data preloaded before the latency mix, GiB.
    #[arg(long, default_value_t = 2.0)]
    pub latency_gib: f64,
    /// Servers for the latency mix, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = ["nacre-msync".to_string(), "redis-always".to_string()]
    )]
    pub latency_servers: Vec<String>,
    /// Also take nacre-server checkpoints (BGSAVE) while Redis rewrites its AOF and saves
    /// its RDB (nacre-server needs neither for durability; its checkpoints are backups).
    #[arg(long)]
    pub latency_checkpoints: bool,
    /// Where the latency chart (SVG) goes.
    #[arg(long, default_value = "docs/charts/server-latency.svg")]
    pub latency_chart: PathBuf,
}

/// A running server under test.
pub struct Running {
    child: Child,
    /// Its port.
    pub port: u16,
    /// Its data directory.
    pub dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_port(port: u16, limit: Duration) -> Result<Duration> {
    let t = Instant::now();
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{BufRead, BufReader, Write};
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            if s.write_all(b"PING\r\n").is_ok() {
                let mut l = String::new();
                if BufReader::new(&mut s).read_line(&mut l).is_ok() && l.starts_with("+PONG") {
                    return Ok(t.elapsed());
                }
            }
        }
        if t.elapsed() > limit {
            return Err(BenchError::Process {
                what: "server".into(),
                why: format!("port {port} did not answer PING within {limit:?}"),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts server `kind` on `dir` (emptied first when `fresh`) and waits for PING.
pub fn start(cfg: &ServerBenchConfig, kind: &str, dir: &Path, fresh: bool) -> Result<Running> {
    if fresh {
        let _ = std::fs::remove_dir_all(dir);
    }
    let r = start_nowait(cfg, kind, dir)?;
    wait_port(r.port, Duration::from_secs(60))?;
    Ok(r)
}

/// Starts server `kind` on `dir` as it is, without waiting.
pub fn start_nowait(cfg: &ServerBenchConfig, kind: &str, dir: &Path) -> Result<Running> {
    std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
    let port = free_port().map_err(|e| BenchError::Process {
        what: "port".into(),
        why: e.to_string(),
    })?;
    let mut cmd = if let Some(backend) = kind.strip_prefix("nacre-") {
        let mut c = Command::new(&cfg.nacre_server);
        c.args(["--port", &port.to_string(), "--pmem-backend", backend])
            .args(["--pmem-size", &cfg.pmem_size, "--loglevel", "warning"])
            .arg("--dir")
            .arg(dir);
        if cfg.persistent_index {
            c.args(["--persistent-index", "yes"]);
        }
        c
    } else if let Some(mode) = kind.strip_prefix("redis-") {
        let mut c = Command::new(&cfg.redis_server);
        c.args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "yes",
        ])
        .args([
            "--appendfsync",
            mode,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ])
        .arg("--dir")
        .arg(dir);
        c
    } else {
        return Err(BenchError::Process {
            what: "server".into(),
            why: format!("unknown server {kind:?}"),
        });
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| BenchError::Process {
            what: kind.into(),
            why: e.to_string(),
        })?;
    Ok(Running {
        child,
        port,
        dir: dir.to_path_buf(),
    })
}

/// The script of the `evalsha10` test: ten SETs.
const TEN_SETS: &str =
    "for i = 1, 10 do redis.call('set', KEYS[1] .. ':' .. i, ARGV[1]) end return 10";

/// A script test's name as reported and its command (`None`: a redis-benchmark test).
fn script_test(name: &str, port: u16) -> Result<Option<(&'static str, Vec<String>)>> {
    Ok(match name {
        "eval" => Some((
            "EVAL (one INCR)",
            [
                "eval",
                "return redis.call('incr', KEYS[1])",
                "1",
                "counter:__rand_int__",
            ]
            .map(String::from)
            .to_vec(),
        )),
        "xadd" => Some((
            "XADD (one stream)",
            ["xadd", "bench:stream", "*", "field", "__rand_int__"]
                .map(String::from)
                .to_vec(),
        )),
        "evalsha10" => {
            let mut c = crate::resp::Connection::connect(
                &format!("127.0.0.1:{port}"),
                Duration::from_secs(10),
            )
            .map_err(|e| BenchError::Process {
                what: "SCRIPT LOAD".into(),
                why: e.to_string(),
            })?;
            let sha = c
                .command(&[b"SCRIPT", b"LOAD", TEN_SETS.as_bytes()])
                .ok()
                .and_then(|r| r.as_str().map(str::to_string))
                .ok_or_else(|| BenchError::Process {
                    what: "SCRIPT LOAD".into(),
                    why: "no SHA-1 in the reply".into(),
                })?;
            Some((
                "EVALSHA (ten SETs)",
                vec![
                    "evalsha".into(),
                    sha,
                    "1".into(),
                    "key:__rand_int__".into(),
                    "v".into(),
                ],
            ))
        }
        _ => None,
    })
}

/// Runs redis-benchmark against `port`; its results per test (the script tests after the
/// others).
pub fn bench(
    cfg: &ServerBenchConfig,
    port: u16,
    pipeline: u64,
    requests: u64,
) -> Result<Vec<TestResult>> {
    let mut builtin = Vec::new();
    let mut scripts = Vec::new();
    let mut consumer_loop = false;
    for t in cfg.tests.split(',').filter(|t| !t.is_empty()) {
        if t == "xreadgroup" {
            consumer_loop = true;
            continue;
        }
        match script_test(t, port)? {
            Some(s) => scripts.push(s),
            None => builtin.push(t),
        }
    }
    let mut out = Vec::new();
    if !builtin.is_empty() {
        out.extend(run_benchmark(
            cfg,
            port,
            pipeline,
            requests,
            &["-t".into(), builtin.join(",")],
        )?);
    }
    for (name, cmd) in scripts {
        for mut r in run_benchmark(cfg, port, pipeline, requests, &cmd)? {
            r.test = name.to_string();
            out.push(r);
        }
    }
    if consumer_loop {
        out.push(streams::consumer_loop(
            port,
            requests,
            cfg.clients,
            pipeline,
            cfg.data_size,
        )?);
    }
    Ok(out)
}

/// One redis-benchmark run with `extra` arguments (tests, or a custom command).
fn run_benchmark(
    cfg: &ServerBenchConfig,
    port: u16,
    pipeline: u64,
    requests: u64,
    extra: &[String],
) -> Result<Vec<TestResult>> {
    let mut c = Command::new(&cfg.redis_benchmark);
    c.args(["-p", &port.to_string()])
        .args(["-n", &requests.to_string(), "-c", &cfg.clients.to_string()])
        .args([
            "-d",
            &cfg.data_size.to_string(),
            "-r",
            &cfg.keyspace.to_string(),
        ])
        .args(["-P", &pipeline.to_string()]);
    if cfg.bench_threads > 0 {
        c.args(["--threads", &cfg.bench_threads.to_string()]);
    }
    c.args(extra);
    let out = c.output().map_err(|e| BenchError::Process {
        what: "redis-benchmark".into(),
        why: e.to_string(),
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let r = parse_benchmark(&text);
    if r.is_empty() {
        return Err(BenchError::Process {
            what: "redis-benchmark".into(),
            why: format!("no results: {}", String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(r)
}

/// One measured row.
#[derive(Clone, Debug)]
pub struct Row {
    /// Server and mode.
    pub server: String,
    /// Pipeline depth.
    pub pipeline: u64,
    /// The test's result.
    pub r: TestResult,
}

/// Runs every server and pipeline; prints a table with ratios.
pub fn main(cfg: &ServerBenchConfig) -> Result<()> {
    let mut rows: Vec<Row> = Vec::new();
    let servers: &[String] = if cfg.only_restart || cfg.only_latency {
        &[]
    } else {
        &cfg.servers
    };
    for kind in servers {
        for &p in &cfg.pipelines {
            let dir = cfg.dir.join(kind);
            let s = start(cfg, kind, &dir, true)?;
            let slow = p == 1 && (kind == "redis-always" || kind == "nacre-msync");
            let n = if slow {
                cfg.requests_sync
            } else {
                cfg.requests
            };
            eprintln!("{kind} -P {p}: {n} requests per test");
            for r in bench(cfg, s.port, p, n)? {
                let row = Row {
                    server: kind.clone(),
                    pipeline: p,
                    r,
                };
                // Each row as it is measured, so a cut-short run still reports.
                eprintln!(
                    "{}",
                    table(std::slice::from_ref(&row))
                        .lines()
                        .last()
                        .unwrap_or("")
                );
                rows.push(row);
            }
            drop(s);
        }
    }
    if !rows.is_empty() {
        println!("{}", table(&rows));
    }
    if cfg.restart_gib > 0.0 {
        let r = restart::measure(cfg)?;
        println!("{}", restart::table(&r));
    }
    if cfg.latency_secs > 0 {
        let runs = latency::measure(cfg)?;
        println!("{}", latency::summary(&runs));
        let svg = latency::chart(&runs).map_err(|e| BenchError::Process {
            what: "latency chart".into(),
            why: e.to_string(),
        })?;
        std::fs::write(&cfg.latency_chart, svg).map_err(io_err("write", &cfg.latency_chart))?;
        println!("{}", latency::seconds_table(&runs));
    }
    Ok(())
}

fn anchor_of(server: &str) -> Option<&'static str> {
    match server {
        "nacre-msync" => Some("redis-always"),
        "nacre-emulated" => Some("redis-no"),
        _ => None,
    }
}

/// Markdown rows: one per server, pipeline and test, with the ratio to its anchor.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| server | -P | test | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | vs anchor |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratio = anchor_of(&r.server)
            .and_then(|a| {
                rows.iter()
                    .find(|x| x.server == a && x.pipeline == r.pipeline && x.r.test == r.r.test)
            })
            .map_or(String::new(), |a| {
                format!("{:.2}x {}", r.r.rps / a.r.rps, a.server)
            });
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
            r.server, r.pipeline, r.r.test, r.r.rps, r.r.p50, r.r.p99, r.r.p999, r.r.max, ratio
        ));
    }
    s
}
