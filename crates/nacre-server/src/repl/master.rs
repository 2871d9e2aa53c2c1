//! This server as a master: a connection that sends `PSYNC` (or `SYNC`) becomes an attached
//! replica. A full synchronization sends an RDB payload of a consistent cut of the keyspace,
//! then the stream from that cut; a partial one continues the stream from the backlog.
//!
//! Invariants:
//! - M1: the payload and the stream meet exactly: the cut is taken while writes are frozen
//!   (`Store::freeze`), so the snapshot holds every write whose commands are in the stream up
//!   to the offset announced in `+FULLRESYNC`, and none after it.
//! - M2: from the cut on, the backlog keeps whatever the replica has yet to read (its pin,
//!   R5 in store/repl_log.rs, up to its output limit): the stream written during the payload
//!   and while the replica loads it is sent after it; a replica whose place in the stream is
//!   lost is disconnected (it then asks again), never sent a stream with a hole.
//! - M3: no write stalls for the payload: the freeze lasts as long as the writes already
//!   running take to commit; the payload is written from the snapshot while writes go on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre_resp::{RequestLimits, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Attached;
use crate::shared::{ClientInfo, Shared};

/// How an attached replica starts.
#[derive(Debug)]
pub struct SyncStart {
    /// The first stream offset it gets (partial), or `None` for a full synchronization.
    pub from: Option<u64>,
    /// It came with the old `SYNC` (no `+FULLRESYNC` line).
    pub old_sync: bool,
    /// The port it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// The address it announced (`REPLCONF ip-address`), else its connection's.
    pub ip: Option<String>,
    /// `PSYNC replid offset FAILOVER`: this replica promotes itself, then answers
    /// `PSYNC replid offset` as a master.
    pub promote_first: Option<(Vec<u8>, i64)>,
}

/// Stream bytes sent at once.
const CHUNK: usize = 256 << 10;

/// The answer to `PSYNC replid offset`: a partial resynchronization from `offset` when the
/// id is this data set's (or its previous one, up to where that was valid) and the backlog
/// still holds `offset`; otherwise a full one.
pub fn decide(shared: &Shared, replid: &[u8], offset: i64) -> Option<u64> {
    let log = &shared.store.repl;
    if !log.on() || offset < 1 {
        return None;
    }
    let ids = shared.repl.ids.lock().clone();
    let ours = replid == ids.replid.as_bytes();
    let previous = replid == ids.replid2.as_bytes() && offset <= ids.second_offset;
    if !ours && !previous {
        return None;
    }
    let from = offset as u64;
    log.read_from(from, 0).map(|_| from)
}

/// Serves an attached replica on `stream` until it goes: `leftover` holds what it sent after
/// its `PSYNC`.
pub async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    info: Arc<ClientInfo>,
    leftover: Vec<u8>,
    mut start: SyncStart,
) {
    if let Some((replid, offset)) = start.promote_first.take() {
        let sh = shared.clone();
        let _ = tokio::task::spawn_blocking(move || super::replica::replicaof(&sh, None)).await;
        tracing::info!(
            "MASTER MODE enabled (failover request from '{}')",
            info.addr
        );
        start.from = decide(&shared, &replid, offset);
    }
    info.role
        .store(crate::shared::ROLE_REPLICA, Ordering::Relaxed);
    let log = &shared.store.repl;
    if !log.on() {
        let cap = shared.config.read().params.uint("repl-backlog-size") as usize;
        log.start(cap);
    }
    let ip = start.ip.clone().unwrap_or_else(|| {
        info.addr
            .rsplit_once(':')
            .map_or(info.addr.clone(), |(h, _)| h.to_string())
    });
    *shared.repl.alone_since.lock() = None;
    shared.repl.attached.lock().insert(
        info.id,
        Attached {
            ip,
            port: start.port,
            state: "wait_bgsave",
            ack: 0,
            ack_at: Instant::now(),
        },
    );
    let r = run(&shared, &mut stream, &info, leftover, start).await;
    shared.store.repl.unpin(info.id);
    if let Err(e) = r {
        tracing::info!(replica = %info.addr, reason = %e, "replica link closed");
    }
    shared.repl.attached.lock().remove(&info.id);
    shared.repl.acked.send_modify(|n| *n += 1);
    let _ = stream.shutdown().await;
}

fn set_state(shared: &Shared, id: u64, state: &'static str) {
    if let Some(a) = shared.repl.attached.lock().get_mut(&id) {
        a.state = state;
    }
}

async fn run(
    shared: &Arc<Shared>,
    stream: &mut TcpStream,
    info: &Arc<ClientInfo>,
    leftover: Vec<u8>,
    start: SyncStart,
) -> std::io::Result<()> {
    let log = &shared.store.repl;
    let mut rx = log.subscribe();
    let mut next = match start.from {
        Some(from) => {
            let replid = shared.repl.ids.lock().replid.clone();
            stream
                .write_all(format!("+CONTINUE {replid}\r\n").as_bytes())
                .await?;
            shared.repl.partial_ok.fetch_add(1, Ordering::Relaxed);
            log.pin(info.id, from);
            from
        }
        None => full_sync(shared, info.id, stream, start.old_sync).await?,
    };
    set_state(shared, info.id, "online");
    // The stream goes from the backlog, which keeps what this replica has yet to read (its
    // pin, R5 in store/repl_log.rs): one that stops reading for a while (loading its
    // payload) keeps its place when the backlog's size is passed (M2).
    let mut chunk: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut inbuf = leftover;
    let mut parser = RequestParser::default();
    let period = shared
        .config
        .read()
        .params
        .uint("repl-ping-replica-period")
        .max(1);
    let mut ping = tokio::time::interval(Duration::from_secs(period));
    ping.tick().await;
    let (mut rd, mut wr) = stream.split();
    loop {
        if at == chunk.len() {
            // Everything before `next` is written: the backlog may let it go.
            log.pin(info.id, next);
            chunk = log
                .read_from(next, CHUNK)
                .ok_or_else(|| std::io::Error::other("the backlog lost the replica's place"))?;
            next += chunk.len() as u64;
            at = 0;
        }
        read_acks(shared, info.id, &mut parser, &mut inbuf);
        tokio::select! {
            r = wr.write(&chunk[at..]), if at < chunk.len() => {
                let n = r?;
                if n == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                shared
                    .counters
                    .net_repl_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                at += n;
            }
            _ = rx.changed() => {}
            r = rd.read_buf(&mut inbuf) => {
                if r? == 0 {
                    return Ok(());
                }
            }
            _ = ping.tick() => log.append_command(&[b"PING"]),
            _ = info.kill.notified() => return Ok(()),
        }
    }
}

/// Applies the `REPLCONF ACK offset` lines a replica sent.
fn read_acks(shared: &Shared, id: u64, parser: &mut RequestParser, inbuf: &mut Vec<u8>) {
    let limits = RequestLimits {
        max_bulk: 1 << 20,
        authenticated: true,
    };
    let mut at = 0;
    while let Ok(Some((args, used))) = parser.parse(&inbuf[at..], &limits) {
        at += used;
        let is = |i: usize, w: &str| {
            args.get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
        };
        if is(0, "replconf") && is(1, "ack") {
            if let Some(off) = args
                .get(2)
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|a| a.parse::<u64>().ok())
            {
                shared.repl.ack(id, off);
            }
        }
    }
    inbuf.drain(..at);
}

/// A full synchronization: the cut (M1), `+FULLRESYNC`, the payload written from the
/// snapshot while the stream past the cut is kept (M2, M3), then the payload sent. Returns
/// the offset the stream continues from.
async fn full_sync(
    shared: &Arc<Shared>,
    id: u64,
    stream: &mut TcpStream,
    old_sync: bool,
) -> std::io::Result<u64> {
    let t0 = Instant::now();
    let sh = shared.clone();
    let (snap, offset, frozen_for) = tokio::task::spawn_blocking(move || {
        let t = Instant::now();
        let freeze = sh.store.freeze();
        let snap = sh.store.db.snapshot();
        let offset = sh.store.repl.end();
        // The stream past the cut stays until this replica has it (R5).
        sh.store.repl.pin(id, offset + 1);
        drop(freeze);
        (snap, offset, t.elapsed())
    })
    .await
    .map_err(std::io::Error::other)?;
    let replid = shared.repl.ids.lock().replid.clone();
    tracing::info!(
        offset,
        frozen_us = frozen_for.as_micros() as u64,
        "full synchronization of a replica: the cut is taken"
    );
    if !old_sync {
        stream
            .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
            .await?;
    }
    shared.repl.full_syncs.fetch_add(1, Ordering::Relaxed);
    let dir = shared.config.read().dir.clone();
    let path = dir.join(format!(
        "temp-repl-{}-{}.rdb",
        std::process::id(),
        crate::shared::random_u64()
    ));
    let sh = shared.clone();
    let p = path.clone();
    let aux = vec![
        ("repl-id", replid.clone()),
        ("repl-offset", offset.to_string()),
        ("repl-stream-db", "0".to_string()),
    ];
    let mut writer = tokio::task::spawn_blocking(move || {
        let f = std::fs::File::create(&p)?;
        let out = std::io::BufWriter::with_capacity(1 << 20, f);
        crate::transfer::export::write_snapshot(&sh.store, snap, out, &aux, &p, &mut |_, _| {})
            .map(|(_, sum)| sum)
            .map_err(std::io::Error::other)
    });
    let mut keepalive = tokio::time::interval(Duration::from_secs(1));
    keepalive.tick().await;
    let written = loop {
        tokio::select! {
            r = &mut writer => break r,
            _ = keepalive.tick() => stream.write_all(b"\n").await?,
        }
    };
    let sum = match written {
        Ok(Ok(sum)) => sum,
        Ok(Err(e)) => {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(std::io::Error::other(e));
        }
    };
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    let r = send_payload(stream, &path).await;
    let _ = std::fs::remove_file(&path);
    r?;
    shared
        .counters
        .net_repl_out
        .fetch_add(size, Ordering::Relaxed);
    tracing::info!(
        keys = sum.keys(),
        bytes = sum.bytes,
        ms = t0.elapsed().as_millis() as u64,
        "full synchronization sent"
    );
    Ok(offset + 1)
}

/// Sends the payload file as `$<len>\r\n<bytes>` (the stream past the cut waits in the
/// backlog, pinned: M2).
async fn send_payload(stream: &mut TcpStream, path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Read;
    // The file was just written: its pages are cached, and each read of a chunk is short.
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    stream.write_all(format!("${len}\r\n").as_bytes()).await?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).await?;
        // A socket that always has room would keep this task on its thread for the whole
        // payload: let the clients served there run between chunks (M3).
        tokio::task::yield_now().await;
    }
}
