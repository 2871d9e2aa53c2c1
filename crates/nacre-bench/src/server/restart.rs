//! Restart after SIGKILL with a data set loaded through the protocol: nacre-server against
//! redis-server replaying its AOF. Timed from spawn to the first `GET` of a key written
//! before the kill answering its value (Redis answers `-LOADING` until its AOF is replayed),
//! then a sample of keys checked.

use std::time::{Duration, Instant};

use super::{start, ServerBenchConfig};
use crate::error::{BenchError, Result};
use crate::resp::{Connection, Reply};

/// Value bytes of the loaded keys.
const VALUE: usize = 1000;

fn fail(why: String) -> BenchError {
    BenchError::Process {
        what: "server restart".into(),
        why,
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:012}").into_bytes()
}

/// One server's restart.
#[derive(Clone, Debug)]
pub struct RestartRow {
    /// Server.
    pub server: String,
    /// Keys loaded.
    pub keys: u64,
    /// Bytes of values loaded.
    pub bytes: u64,
    /// Load time.
    pub load: Duration,
    /// Spawn to the first read answered.
    pub serving: Duration,
}

fn load(port: u16, keys: u64) -> Result<()> {
    let mut c = Connection::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(30))
        .map_err(|e| fail(e.to_string()))?;
    let mut v = vec![b'v'; VALUE];
    for first in (0..keys).step_by(256) {
        for i in first..keys.min(first + 256) {
            v[..8].copy_from_slice(&i.to_le_bytes());
            c.queue(&[b"SET", &key(i), &v]);
        }
        for r in c.flush_replies().map_err(|e| fail(e.to_string()))? {
            if r.is_error() {
                return Err(fail(format!("SET answered {r:?}")));
            }
        }
    }
    Ok(())
}

fn serving(port: u16, probe: &[u8], t0: Instant) -> Result<Duration> {
    let limit = Duration::from_secs(900);
    let mut c = loop {
        if let Ok(c) = Connection::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(30)) {
            break c;
        }
        if t0.elapsed() > limit {
            return Err(fail("never listened".into()));
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    loop {
        match c.command(&[b"GET", probe]) {
            Ok(Reply::Bulk(_)) => return Ok(t0.elapsed()),
            Ok(r) if r.is_error() => {}
            Ok(r) => return Err(fail(format!("the probe key read back as {r:?}"))),
            Err(e) => return Err(fail(e.to_string())),
        }
        if t0.elapsed() > limit {
            return Err(fail("never served".into()));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Loads, kills and restarts nacre-server (emulated, msync) and redis-server (AOF).
pub fn measure(cfg: &ServerBenchConfig) -> Result<Vec<RestartRow>> {
    let keys = (cfg.restart_gib * (1u64 << 30) as f64 / VALUE as f64) as u64;
    let mut rows = Vec::new();
    for kind in ["nacre-emulated", "nacre-msync", "redis-everysec"] {
        let dir = cfg.dir.join(format!("restart-{kind}"));
        let s = start(cfg, kind, &dir, true)?;
        let t = Instant::now();
        eprintln!("{kind}: loading {keys} keys of {VALUE} bytes");
        load(s.port, keys)?;
        let load_time = t.elapsed();
        if kind.starts_with("redis") {
            // everysec: let the last second reach the file before the kill.
            std::thread::sleep(Duration::from_millis(1500));
        }
        drop(s); // SIGKILL
        let t0 = Instant::now();
        let s = start_same(cfg, kind, &dir)?;
        let probe = key(keys / 2);
        let up = serving(s.port, &probe, t0)?;
        let mut c = Connection::connect(&format!("127.0.0.1:{}", s.port), Duration::from_secs(30))
            .map_err(|e| fail(e.to_string()))?;
        for i in (0..keys).step_by((keys / 1000).max(1) as usize) {
            c.queue(&[b"EXISTS", &key(i)]);
        }
        let replies = c.flush_replies().map_err(|e| fail(e.to_string()))?;
        if let Some(r) = replies.iter().find(|r| r.as_int() != Some(1)) {
            return Err(fail(format!(
                "{kind}: a loaded key is missing after the restart ({r:?})"
            )));
        }
        rows.push(RestartRow {
            server: kind.into(),
            keys,
            bytes: keys * VALUE as u64,
            load: load_time,
            serving: up,
        });
    }
    Ok(rows)
}

/// Starts `kind` again on its directory without waiting for PING (Redis answers PING only
/// once loaded): the caller times the first read.
fn start_same(
    cfg: &ServerBenchConfig,
    kind: &str,
    dir: &std::path::Path,
) -> Result<super::Running> {
    super::start_nowait(cfg, kind, dir)
}

/// Markdown rows.
pub fn table(rows: &[RestartRow]) -> String {
    let mut s = String::from("| server | keys | data | load s | SIGKILL to serving | vs redis |\n|---|---|---|---|---|---|\n");
    let redis = rows
        .iter()
        .find(|r| r.server.starts_with("redis"))
        .map(|r| r.serving);
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} GiB | {:.1} | {:.3} s | {} |\n",
            r.server,
            r.keys,
            r.bytes as f64 / (1u64 << 30) as f64,
            r.load.as_secs_f64(),
            r.serving.as_secs_f64(),
            redis.map_or(String::new(), |d| format!(
                "{:.1}x faster",
                d.as_secs_f64() / r.serving.as_secs_f64()
            ))
        ));
    }
    s
}
