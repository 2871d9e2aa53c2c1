//! The redis-server anchor of `nacre-bench recovery`: the same keys and values loaded through
//! pipelined `SET`s into a redis-server with AOF on and `appendfsync no` (each write reaches
//! the OS before its reply: survives a process crash, as Nacre on `emulated` does), SIGKILL,
//! then each restart a fresh redis-server process on the same directory, timed from spawn:
//! listening (first accepted connection), first read (`GET` of a key acknowledged before the
//! crash answers its value; Redis answers `-LOADING` until the AOF is replayed), full service
//! (a sample of loaded keys all found).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::dbbench::TempDir;
use super::recovery::{RecoveryConfig, RecoveryRow};
use super::recovery_child::{key, sample_keys, value_at, value_buffer, Engine, Killed};
use crate::bench::file_name;
use crate::error::{io_err, BenchError, Result};
use crate::resp::{free_port, Connection, RedisServer, Reply};

/// How long a restart may take before it counts as failed.
const RESTART_LIMIT: Duration = Duration::from_secs(600);

fn fail(why: String) -> BenchError {
    BenchError::Process {
        what: "redis-server recovery".into(),
        why,
    }
}

fn server_args(dir: &Path, port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &dir.display().to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// Loads `records` keys (as `writers` writers of `per` each) into the server, pipelined.
fn load(conn: &mut Connection, cfg: &RecoveryConfig, per: u64) -> Result<()> {
    let klen = cfg.key_size.max(16);
    let values = value_buffer(cfg.value_size);
    for t in 0..cfg.writers {
        for first in (0..per).step_by(1000) {
            for i in first..per.min(first + 1000) {
                let at = value_at(i, t);
                conn.queue(&[b"SET", &key(klen, t, i), &values[at..at + cfg.value_size]]);
            }
            for r in conn.flush_replies().map_err(|e| fail(e.to_string()))? {
                if r.is_error() {
                    return Err(fail(format!("SET answered {r:?}")));
                }
            }
        }
    }
    Ok(())
}

/// One restart: (listening ns, first read ns, full service ns) from spawn.
fn restart(binary: &Path, dir: &Path, probe: &[u8], sample: &[Vec<u8>]) -> Result<(u64, u64, u64)> {
    let port = free_port().map_err(|e| fail(e.to_string()))?;
    let addr = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    let child = Command::new(binary)
        .args(server_args(dir, port))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io_err("spawn", binary))?;
    let mut child = Killed(child);
    let ns = |t: Instant| t.duration_since(t0).as_nanos() as u64;
    let (mut conn, listening) = loop {
        if let Ok(Some(status)) = child.0.try_wait() {
            return Err(fail(format!(
                "redis-server exited ({status}) while restarting"
            )));
        }
        if let Ok(c) = Connection::connect(&addr, Duration::from_secs(30)) {
            break (c, ns(Instant::now()));
        }
        if t0.elapsed() > RESTART_LIMIT {
            return Err(fail("redis-server never listened".into()));
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    let first = loop {
        match conn.command(&[b"GET", probe]) {
            Ok(Reply::Bulk(_)) => break ns(Instant::now()),
            Ok(r) if r.is_error() => {} // -LOADING: still replaying the AOF
            Ok(r) => return Err(fail(format!("the probe key read back as {r:?}"))),
            Err(e) => return Err(fail(e.to_string())),
        }
        if t0.elapsed() > RESTART_LIMIT {
            return Err(fail("redis-server never finished loading".into()));
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    for k in sample {
        conn.queue(&[b"EXISTS", k]);
    }
    let replies = conn.flush_replies().map_err(|e| fail(e.to_string()))?;
    let found = replies.iter().filter(|r| r.as_int() == Some(1)).count();
    if found != sample.len() {
        return Err(fail(format!(
            "{} of {} sampled keys missing after the restart",
            sample.len() - found,
            sample.len()
        )));
    }
    Ok((listening, first, ns(Instant::now())))
}

/// The redis-server anchor for one data size.
pub fn redis_size(cfg: &RecoveryConfig, mib: u64) -> Result<RecoveryRow> {
    let binary = cfg.redis_server.clone();
    let dir = cfg
        .dir
        .clone()
        .unwrap_or_else(super::default_shm_dir)
        .join(file_name(&format!("recovery-redis-{mib}")));
    let _guard = TempDir::fresh(dir.clone())?;
    std::fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
    let klen = cfg.key_size.max(16);
    let per = (mib << 20).div_ceil((klen + cfg.value_size) as u64 * cfg.writers as u64);
    let t0 = Instant::now();
    {
        let server = RedisServer::start(
            &binary,
            &[
                "--appendonly",
                "yes",
                "--appendfsync",
                "no",
                "--dir",
                &dir.display().to_string(),
            ],
        )
        .map_err(|e| fail(e.to_string()))?;
        let mut conn = server
            .connect(Duration::from_secs(30))
            .map_err(|e| fail(e.to_string()))?;
        tracing::info!(mib, dir = %dir.display(), "loading redis-server, then SIGKILL");
        load(&mut conn, cfg, per)?;
        // Dropping the server SIGKILLs it.
    }
    let load_secs = t0.elapsed().as_secs_f64();
    let probe = key(klen, 0, 0);
    let sample = sample_keys(klen, cfg.writers, per, cfg.sample);
    let mut row = RecoveryRow {
        engine: Engine::Redis,
        unavailable: None,
        size_mib: mib,
        loaded_records: per * cfg.writers as u64,
        pool_size: 0,
        load_secs,
        first_open: serde_json::Value::Null,
        threads: 0,
        opens: Vec::new(),
        restart_secs: Vec::new(),
    };
    for rep in 0..cfg.repeats {
        let (listening, first, full) = restart(&binary, &dir, &probe, &sample)?;
        let v = serde_json::json!({
            "clean": false, "open_ns": listening, "first_get_ns": first,
            "full_service_ns": full, "sample": cfg.sample,
        });
        tracing::info!(mib, rep, report = %v, "redis-server recovered");
        row.opens.push(v);
        row.restart_secs.push(first as f64 / 1e9);
    }
    Ok(row)
}
