//! The stream consumer loop: a stream of entries is read by a consumer group, each client a
//! consumer reading with `XREADGROUP ... COUNT 10 ... >` and acknowledging what it got with
//! `XACK`, as a work queue runs. redis-benchmark cannot chain a read to an acknowledgement
//! of what the read returned, so the loop is run by threads of its own, over the same
//! number of clients and pipeline depth as the redis-benchmark tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacre_resp::Reply;

use super::parse::TestResult;
use crate::error::{BenchError, Result};
use crate::resp::Connection;

/// The test's name in the tables.
pub const NAME: &str = "XREADGROUP+XACK (COUNT 10)";

const STREAM: &[u8] = b"bench:queue";
const GROUP: &[u8] = b"workers";
const BATCH: usize = 10;

fn fail(why: impl ToString) -> BenchError {
    BenchError::Process {
        what: "stream consumer loop".into(),
        why: why.to_string(),
    }
}

fn connect(port: u16) -> Result<Connection> {
    Connection::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(30)).map_err(fail)
}

/// Fills the stream with `entries` entries (pipelined) and creates the group.
fn prepare(port: u16, entries: u64, value: &[u8]) -> Result<()> {
    let mut c = connect(port)?;
    c.command(&[b"DEL", STREAM]).map_err(fail)?;
    let mut left = entries;
    while left > 0 {
        let n = left.min(1000);
        for _ in 0..n {
            c.queue(&[b"XADD", STREAM, b"*", b"payload", value]);
        }
        for r in c.flush_replies().map_err(fail)? {
            if r.is_error() {
                return Err(fail(format!("XADD: {r:?}")));
            }
        }
        left -= n;
    }
    c.command_ok(&[b"XGROUP", b"CREATE", STREAM, GROUP, b"0"])
        .map_err(fail)?;
    Ok(())
}

/// The ids in an XREADGROUP reply (empty when the stream is drained).
fn ids_of(r: &Reply) -> Result<Vec<Vec<u8>>> {
    let Some(streams) = r.as_array() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for s in streams {
        let entries = s
            .as_array()
            .and_then(|kv| kv.get(1))
            .and_then(Reply::as_array)
            .ok_or_else(|| fail(format!("XREADGROUP reply {r:?}")))?;
        for e in entries {
            match e.as_array().and_then(|e| e.first()) {
                Some(Reply::Bulk(id)) => out.push(id.clone()),
                _ => return Err(fail(format!("XREADGROUP entry {e:?}"))),
            }
        }
    }
    Ok(out)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the loop against `port` with `clients` consumers and `pipeline` reads in flight per
/// consumer, over `entries` entries of `value_bytes` bytes: entries consumed and
/// acknowledged per second, and the latency of each read-and-acknowledge round.
pub fn consumer_loop(
    port: u16,
    entries: u64,
    clients: u64,
    pipeline: u64,
    value_bytes: u64,
) -> Result<TestResult> {
    let value = vec![b'x'; value_bytes as usize];
    prepare(port, entries, &value)?;
    let consumed = Arc::new(AtomicU64::new(0));
    let rounds = Arc::new(Mutex::new(Vec::<f64>::new()));
    let start = Instant::now();
    let mut threads = Vec::new();
    for i in 0..clients {
        let mut c = connect(port)?;
        let (consumed, rounds) = (consumed.clone(), rounds.clone());
        threads.push(std::thread::spawn(move || -> Result<()> {
            let name = format!("c{i}").into_bytes();
            let count = BATCH.to_string().into_bytes();
            let mut mine = Vec::new();
            loop {
                let t = Instant::now();
                for _ in 0..pipeline {
                    c.queue(&[
                        b"XREADGROUP",
                        b"GROUP",
                        GROUP,
                        &name,
                        b"COUNT",
                        &count,
                        b"STREAMS",
                        STREAM,
                        b">",
                    ]);
                }
                let mut ids = Vec::new();
                for r in c.flush_replies().map_err(fail)? {
                    ids.extend(ids_of(&r)?);
                }
                if ids.is_empty() {
                    break;
                }
                let mut ack: Vec<&[u8]> = vec![b"XACK", STREAM, GROUP];
                ack.extend(ids.iter().map(Vec::as_slice));
                match c.command(&ack).map_err(fail)? {
                    Reply::Integer(n) if n as usize == ids.len() => {}
                    r => return Err(fail(format!("XACK: {r:?}"))),
                }
                consumed.fetch_add(ids.len() as u64, Ordering::Relaxed);
                mine.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            rounds.lock().map_err(|_| fail("poisoned"))?.extend(mine);
            Ok(())
        }));
    }
    for t in threads {
        t.join().map_err(|_| fail("a consumer panicked"))??;
    }
    let secs = start.elapsed().as_secs_f64();
    let n = consumed.load(Ordering::Relaxed);
    if n != entries {
        return Err(fail(format!("consumed {n} of {entries} entries")));
    }
    let mut lat = rounds.lock().map_err(|_| fail("poisoned"))?.clone();
    lat.sort_by(f64::total_cmp);
    Ok(TestResult {
        test: NAME.into(),
        rps: n as f64 / secs,
        p50: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        p999: percentile(&lat, 0.999),
        max: lat.last().copied().unwrap_or(0.0),
    })
}
