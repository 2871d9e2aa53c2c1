//! Latency stability: a write-heavy mix (SET, HSET, LPUSH, ZADD; a quarter each) from many
//! clients for minutes over a data set of gigabytes, with the background work a server
//! does under such load made to happen (Redis: AOF rewrites and an RDB save, forked;
//! nacre-server: its own merges and cleaning, and checkpoints at the same moments when
//! asked), recording each second's latency percentiles and maximum per server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nacre_pmem::SplitMix64;

use super::{start, ServerBenchConfig};
use crate::chart::{LineChart, Scale, Series, TickFormat};
use crate::error::{BenchError, Result};
use crate::resp::Connection;

/// Value bytes of the preloaded keys.
const PRELOAD_VALUE: usize = 1000;
/// Value bytes written by the mix.
const VALUE: usize = 128;
/// Collections the mix's HSET, LPUSH and ZADD spread over.
const COLLECTIONS: u64 = 10_000;

fn fail(why: String) -> BenchError {
    BenchError::Process {
        what: "latency run".into(),
        why,
    }
}

/// One second of one server.
#[derive(Clone, Debug)]
pub struct Second {
    /// Seconds since the mix started.
    pub at: u64,
    /// Commands answered in it.
    pub ops: u64,
    /// Median latency, µs.
    pub p50: u64,
    /// 99th percentile, µs.
    pub p99: u64,
    /// Slowest command, µs.
    pub max: u64,
}

/// One server's run.
#[derive(Clone, Debug)]
pub struct Run {
    /// Server and mode.
    pub server: String,
    /// Keys preloaded and their bytes.
    pub preload: (u64, u64),
    /// Per second.
    pub seconds: Vec<Second>,
    /// What was started when (seconds since the mix started).
    pub events: Vec<(f64, String)>,
}

impl Run {
    fn median_p99(&self) -> u64 {
        let mut v: Vec<u64> = self.seconds.iter().map(|s| s.p99).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }

    fn max(&self) -> u64 {
        self.seconds.iter().map(|s| s.max).max().unwrap_or(0)
    }

    fn worst_p99(&self) -> u64 {
        self.seconds.iter().map(|s| s.p99).max().unwrap_or(0)
    }

    fn ops(&self) -> f64 {
        let total: u64 = self.seconds.iter().map(|s| s.ops).sum();
        total as f64 / self.seconds.len().max(1) as f64
    }
}

fn connect(port: u16) -> Result<Connection> {
    Connection::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(60))
        .map_err(|e| fail(e.to_string()))
}

/// Loads `keys` keys of [`PRELOAD_VALUE`] bytes over four pipelined connections.
fn preload(port: u16, keys: u64) -> Result<()> {
    let threads = 4u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || -> Result<()> {
                let mut c = connect(port)?;
                let v = vec![b'p'; PRELOAD_VALUE];
                let mut i = t;
                while i < keys {
                    for _ in 0..256 {
                        if i >= keys {
                            break;
                        }
                        c.queue(&[b"SET", format!("key:{i:012}").as_bytes(), &v]);
                        i += threads;
                    }
                    for r in c.flush_replies().map_err(|e| fail(e.to_string()))? {
                        if r.is_error() {
                            return Err(fail(format!("preload SET answered {r:?}")));
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join()
            .map_err(|_| fail("a preload thread panicked".into()))??;
    }
    Ok(())
}

/// One client's loop: its per-second histograms (µs).
fn client(
    port: u16,
    id: u64,
    keys: u64,
    t0: Instant,
    secs: u64,
    stop: Arc<AtomicBool>,
) -> Result<Vec<Histogram<u64>>> {
    let mut c = connect(port)?;
    let mut r = SplitMix64::new(id);
    let mut hists: Vec<Histogram<u64>> = (0..secs)
        .map(|_| Histogram::new_with_bounds(1, 120_000_000, 3))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| fail(e.to_string()))?;
    let mut v = vec![b'v'; VALUE];
    while !stop.load(Ordering::Relaxed) {
        let x = r.next_u64();
        v[..8].copy_from_slice(&x.to_le_bytes());
        let coll = format!("{}", (x >> 8) % COLLECTIONS);
        let start = Instant::now();
        let reply = match x % 4 {
            0 => c.command(&[
                b"SET",
                format!("key:{:012}", (x >> 20) % keys.max(1)).as_bytes(),
                &v,
            ]),
            1 => c.command(&[
                b"HSET",
                format!("h:{coll}").as_bytes(),
                format!("f{}", (x >> 24) % 1000).as_bytes(),
                &v,
            ]),
            2 => c.command(&[b"LPUSH", format!("l:{coll}").as_bytes(), &v]),
            _ => c.command(&[
                b"ZADD",
                format!("z:{coll}").as_bytes(),
                format!("{}", (x >> 30) % 1_000_000).as_bytes(),
                format!("m{}", (x >> 12) % 100_000).as_bytes(),
            ]),
        };
        let us = start.elapsed().as_micros() as u64;
        match reply {
            Ok(rep) if rep.is_error() => return Err(fail(format!("the mix got {rep:?}"))),
            Ok(_) => {}
            Err(e) => return Err(fail(e.to_string())),
        }
        let sec = start.duration_since(t0).as_secs();
        if let Some(h) = hists.get_mut(sec as usize) {
            let _ = h.record(us.max(1));
        }
    }
    Ok(hists)
}

/// Runs the mix against one server for `secs`, starting the background work on schedule.
fn run_one(cfg: &ServerBenchConfig, kind: &str) -> Result<Run> {
    let secs = cfg.latency_secs;
    let keys = (cfg.latency_gib * (1u64 << 30) as f64 / PRELOAD_VALUE as f64) as u64;
    let dir = cfg.dir.join(format!("latency-{kind}"));
    let s = start(cfg, kind, &dir, true)?;
    let t = Instant::now();
    eprintln!("{kind}: preloading {keys} keys of {PRELOAD_VALUE} bytes");
    preload(s.port, keys)?;
    eprintln!(
        "{kind}: preloaded in {:.1} s; mix for {secs} s with {} clients",
        t.elapsed().as_secs_f64(),
        cfg.clients
    );
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..cfg.clients)
        .map(|id| {
            let (st, port) = (stop.clone(), s.port);
            std::thread::spawn(move || client(port, id, keys, t0, secs, st))
        })
        .collect();
    // Background work at fixed moments: what Redis does on its own under such load (AOF
    // rewrites, an RDB save); nacre-server needs neither, and takes checkpoints at the same
    // moments only when asked to.
    let redis = kind.starts_with("redis");
    let plan: Vec<(f64, &[&[u8]])> = if redis {
        vec![
            (0.2, &[b"BGREWRITEAOF"]),
            (0.5, &[b"BGSAVE"]),
            (0.8, &[b"BGREWRITEAOF"]),
        ]
    } else if cfg.latency_checkpoints {
        vec![
            (0.2, &[b"BGSAVE"]),
            (0.5, &[b"BGSAVE"]),
            (0.8, &[b"BGSAVE"]),
        ]
    } else {
        Vec::new()
    };
    let mut admin = connect(s.port)?;
    let mut events = Vec::new();
    for (frac, cmd) in plan {
        let at = Duration::from_secs_f64(secs as f64 * frac);
        if let Some(wait) = at.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        let r = admin.command(cmd).map_err(|e| fail(e.to_string()))?;
        let name = String::from_utf8_lossy(cmd[0]).into_owned();
        eprintln!(
            "{kind}: {name} at {:.0} s: {r:?}",
            t0.elapsed().as_secs_f64()
        );
        events.push((t0.elapsed().as_secs_f64(), name));
    }
    if let Some(wait) = Duration::from_secs(secs).checked_sub(t0.elapsed()) {
        std::thread::sleep(wait);
    }
    stop.store(true, Ordering::Relaxed);
    let mut merged: Vec<Histogram<u64>> = Vec::new();
    for h in handles {
        let hs = h
            .join()
            .map_err(|_| fail("a client thread panicked".into()))??;
        if merged.is_empty() {
            merged = hs;
        } else {
            for (m, x) in merged.iter_mut().zip(&hs) {
                m.add(x).map_err(|e| fail(e.to_string()))?;
            }
        }
    }
    drop(s);
    let seconds = merged
        .iter()
        .enumerate()
        .filter(|(_, h)| !h.is_empty())
        .map(|(i, h)| Second {
            at: i as u64,
            ops: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        })
        .collect();
    Ok(Run {
        server: kind.into(),
        preload: (keys, keys * PRELOAD_VALUE as u64),
        seconds,
        events,
    })
}

/// Runs every latency server in turn.
pub fn measure(cfg: &ServerBenchConfig) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    for kind in &cfg.latency_servers {
        let r = run_one(cfg, kind)?;
        eprintln!(
            "{}",
            summary(std::slice::from_ref(&r))
                .lines()
                .last()
                .unwrap_or("")
        );
        out.push(r);
    }
    Ok(out)
}

/// The summary table: throughput, the median second's p99, the worst second's p99 and its
/// ratio to the median, and the maximum latency (with the ratio to the first Redis run's).
pub fn summary(runs: &[Run]) -> String {
    let mut s = String::from(
        "| server | data | ops/s | median p99 ms | worst second p99 ms | worst / median p99 | max ms | Redis max / this max |\n|---|---|---|---|---|---|---|---|\n",
    );
    let redis_max = runs
        .iter()
        .find(|r| r.server.starts_with("redis"))
        .map(Run::max);
    for r in runs {
        let med = r.median_p99();
        s.push_str(&format!(
            "| {} | {:.2} GiB | {:.0} | {:.3} | {:.3} | {:.1}x | {:.3} | {} |\n",
            r.server,
            r.preload.1 as f64 / (1u64 << 30) as f64,
            r.ops(),
            med as f64 / 1000.0,
            r.worst_p99() as f64 / 1000.0,
            r.worst_p99() as f64 / med.max(1) as f64,
            r.max() as f64 / 1000.0,
            redis_max.map_or(String::new(), |m| format!(
                "{:.1}x",
                m as f64 / r.max().max(1) as f64
            )),
        ));
    }
    s
}

/// Every second of every run (for the record).
pub fn seconds_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "| server | second | ops | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|\n",
    );
    for r in runs {
        for x in &r.seconds {
            s.push_str(&format!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} |\n",
                r.server,
                x.at,
                x.ops,
                x.p50 as f64 / 1000.0,
                x.p99 as f64 / 1000.0,
                x.max as f64 / 1000.0
            ));
        }
    }
    s
}

/// Per-second p99 and maximum of every run, on a log latency axis.
pub fn chart(runs: &[Run]) -> std::result::Result<String, crate::chart::ChartError> {
    let mut series = Vec::new();
    for r in runs {
        series.push(Series::new(
            format!("{} p99", r.server),
            r.seconds
                .iter()
                .map(|s| (s.at as f64, s.p99 as f64))
                .collect(),
        ));
        series.push(Series::new(
            format!("{} max", r.server),
            r.seconds
                .iter()
                .map(|s| (s.at as f64, s.max as f64))
                .collect(),
        ));
    }
    LineChart {
        title: "Per-second p99 and maximum latency, write-heavy mix".into(),
        x_label: "seconds".into(),
        y_label: "latency".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log10,
        series,
        y_from_zero: false,
        x_format: TickFormat::Number,
        y_format: TickFormat::Micros,
    }
    .render()
}
