//! This server as a master: a connection that sends `PSYNC` (or `SYNC`) becomes an attached
//! replica. A full synchronization sends an RDB payload of a consistent cut of the keyspace,
//! then the stream from that cut; a partial one continues the stream from the backlog.
//!
//! Invariants:
//! - M1: the payload and the stream meet exactly: the cut is taken while writes are frozen
//!   (`Store::freeze`), so the snapshot holds every write whose commands are in the stream up
//!   to the offset announced in `+FULLRESYNC`, and none after it.
//! - M2: what the stream adds while the payload is written is kept for the replica (up to
//!   its output limit) and sent after it; a replica whose place in the stream is lost is
//!   disconnected (it then asks again), never sent a stream with a hole.
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

/// Most bytes of stream kept for a replica that has yet to read them (Redis's replica
/// output buffer hard limit).
const PENDING_MAX: usize = crate::store::repl_log::PIN_MAX;
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
    let mut pending: Vec<u8> = Vec::new();
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
        None => {
            full_sync(
                shared,
                info.id,
                stream,
                &mut rx,
                &mut pending,
                start.old_sync,
            )
            .await?
        }
    };
    set_state(shared, info.id, "online");
    // What the replica has yet to get: the stream kept during the payload, then whatever the
    // stream adds, kept here as Redis keeps a replica's output buffer (M2, up to
    // PENDING_MAX): a replica that stops reading for a while (loading its payload) keeps its
    // place when the shared backlog moves on.
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
        keep(log, info.id, &mut next, &mut pending)?;
        read_acks(shared, info.id, &mut parser, &mut inbuf);
        if at > 0 && (at == pending.len() || (at > CHUNK * 16 && at * 2 > pending.len())) {
            pending.drain(..at);
            at = 0;
        }
        let end = pending.len().min(at + CHUNK);
        tokio::select! {
            r = wr.write(&pending[at..end]), if at < end => {
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
    rx: &mut tokio::sync::watch::Receiver<u64>,
    pending: &mut Vec<u8>,
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
    let log = &shared.store.repl;
    let mut next = offset + 1;
    let mut keepalive = tokio::time::interval(Duration::from_secs(1));
    keepalive.tick().await;
    let written = loop {
        tokio::select! {
            r = &mut writer => break r,
            _ = rx.changed() => keep(log, id, &mut next, pending)?,
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
    let r = send_payload(
        stream,
        &path,
        |pending_now: &mut Vec<u8>| keep(log, id, &mut next, pending_now),
        pending,
    )
    .await;
    let _ = std::fs::remove_file(&path);
    r?;
    shared
        .counters
        .net_repl_out
        .fetch_add(size, Ordering::Relaxed);
    keep(log, id, &mut next, pending)?;
    tracing::info!(
        keys = sum.keys(),
        bytes = sum.bytes,
        ms = t0.elapsed().as_millis() as u64,
        "full synchronization sent"
    );
    Ok(next)
}

/// Moves the stream past `next` into `pending` (M2), and pins the backlog there for replica
/// `id` (R5 in store/repl_log.rs).
fn keep(
    log: &crate::store::repl_log::ReplLog,
    id: u64,
    next: &mut u64,
    pending: &mut Vec<u8>,
) -> std::io::Result<()> {
    loop {
        match log.read_from(*next, CHUNK) {
            Some(b) if b.is_empty() => {
                log.pin(id, *next);
                return Ok(());
            }
            Some(b) => {
                *next += b.len() as u64;
                pending.extend_from_slice(&b);
                if pending.len() > PENDING_MAX {
                    return Err(std::io::Error::other(
                        "the replica has more than 256 MiB of stream it did not read",
                    ));
                }
            }
            None => {
                return Err(std::io::Error::other(
                    "the backlog lost the replica's place in the stream",
                ))
            }
        }
    }
}

/// Sends the payload file as `$<len>\r\n<bytes>`, keeping the stream that grows meanwhile
/// (`keep`, between chunks: M2).
async fn send_payload(
    stream: &mut TcpStream,
    path: &std::path::Path,
    mut keep: impl FnMut(&mut Vec<u8>) -> std::io::Result<()>,
    pending: &mut Vec<u8>,
) -> std::io::Result<()> {
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
        keep(pending)?;
        // A socket that always has room would keep this task on its thread for the whole
        // payload: let the clients served there run between chunks (M3).
        tokio::task::yield_now().await;
    }
}
