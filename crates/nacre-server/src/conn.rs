//! One client connection: a reader that parses requests and runs them in order, and a
//! writer that sends each reply once the commit it depends on is durable (K4), in order.
//! The channel between them is bounded, so a client that does not read its replies stops
//! being read: its output does not grow without bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nacre_resp::{encode_reply, encode_reply_resp2, parse_request, Reply, RequestLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::client::Client;
use crate::cmd::{execute, Outcome};
use crate::shared::{ClientInfo, Shared};

/// Replies queued per connection before its reader waits.
const QUEUE: usize = 1024;
/// Bytes gathered before a write.
const FLUSH_AT: usize = 64 << 10;

enum Out {
    /// An encoded reply, sent once `ticket` is durable.
    Reply {
        bytes: Vec<u8>,
        ticket: u64,
        resp: u8,
    },
    /// Bytes to send as they are (monitor lines).
    Raw(Arc<Vec<u8>>),
    /// Send what is queued, then close.
    Close,
}

fn encode(r: &Reply, resp: u8) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    if resp >= 3 {
        encode_reply(&mut b, r);
    } else {
        encode_reply_resp2(&mut b, r);
    }
    b
}

/// Serves one connection until it closes, is killed or the server stops.
pub async fn serve(shared: Arc<Shared>, stream: TcpStream, info: Arc<ClientInfo>) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Out>(QUEUE);
    let writer = tokio::spawn(write_loop(shared.clone(), wr, rx));
    let authed = shared.config.read().requirepass.is_none();
    let mut client = Client::new(info.clone(), authed);
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut monitor_task: Option<tokio::task::JoinHandle<()>> = None;
    'conn: loop {
        let mut start = 0;
        loop {
            let (max_bulk, qlimit) = {
                let c = shared.config.read();
                (c.proto_max_bulk_len as i64, c.client_query_buffer_limit)
            };
            let limits = RequestLimits {
                max_bulk,
                authenticated: client.authed,
            };
            let args = match parse_request(&buf[start..], &limits) {
                Ok(Some((args, used))) => {
                    start += used;
                    args
                }
                Ok(None) => {
                    if (buf.len() - start) as u64 > qlimit {
                        tracing::warn!(client = %info.addr, "closing a client whose query buffer passed client-query-buffer-limit");
                        break 'conn;
                    }
                    break;
                }
                Err(e) => {
                    let _ = tx
                        .send(Out::Reply {
                            bytes: encode(&Reply::Error(format!("ERR {e}")), client.resp),
                            ticket: 0,
                            resp: client.resp,
                        })
                        .await;
                    break 'conn;
                }
            };
            let resp = client.resp;
            let send = |r: Reply, ticket: u64| Out::Reply {
                bytes: encode(&r, resp),
                ticket,
                resp,
            };
            let mut outcome = execute(&shared, &mut client, args);
            while let Outcome::After(t, args) = outcome {
                let _ = shared.store.commits.wait(t.0).await;
                outcome = execute(&shared, &mut client, args);
            }
            match outcome {
                Outcome::Reply(r, t) => {
                    // HELLO changes the protocol of its own reply.
                    let r = send_as(&r, client.resp, t.0);
                    if tx.send(r).await.is_err() {
                        break 'conn;
                    }
                }
                Outcome::Close(r) => {
                    let _ = tx.send(send(r, 0)).await;
                    break 'conn;
                }
                Outcome::Sleep(d) => {
                    tokio::time::sleep(d).await;
                    if tx.send(send(crate::cmd::ok(), 0)).await.is_err() {
                        break 'conn;
                    }
                }
                Outcome::Blocking(f) => {
                    let r = tokio::task::spawn_blocking(f)
                        .await
                        .unwrap_or_else(|_| crate::cmd::err("the command panicked"));
                    if tx.send(send(r, 0)).await.is_err() {
                        break 'conn;
                    }
                }
                Outcome::Monitor => {
                    if tx.send(send(crate::cmd::ok(), 0)).await.is_err() {
                        break 'conn;
                    }
                    if monitor_task.is_none() {
                        let mut feed = shared.monitor.subscribe();
                        let tx2 = tx.clone();
                        monitor_task = Some(tokio::spawn(async move {
                            while let Ok(line) = feed.recv().await {
                                if tx2.send(Out::Raw(line)).await.is_err() {
                                    break;
                                }
                            }
                        }));
                    }
                }
                Outcome::Shutdown => {
                    shared.shutting_down.store(true, Ordering::Release);
                    shared.shutdown.notify_one();
                    break 'conn;
                }
                Outcome::Nothing | Outcome::After(..) => {}
            }
        }
        buf.drain(..start);
        if info.killed.load(Ordering::Acquire) {
            break;
        }
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    shared.counters.net_in.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            _ = info.kill.notified() => break,
        }
        if buf.capacity() > 1 << 20 && buf.len() < 16 << 10 {
            buf.shrink_to(64 << 10);
        }
    }
    if let Some(m) = monitor_task {
        m.abort();
    }
    let _ = tx.send(Out::Close).await;
    drop(tx);
    let _ = writer.await;
    client.unwatch_all(&shared);
    if client.info.monitor.load(Ordering::Relaxed) {
        shared.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    shared.clients.lock().remove(&info.id);
}

fn send_as(r: &Reply, resp: u8, ticket: u64) -> Out {
    Out::Reply {
        bytes: encode(r, resp),
        ticket,
        resp,
    }
}

async fn write_loop(shared: Arc<Shared>, mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Out>) {
    let commits = &shared.store.commits;
    let mut out: Vec<u8> = Vec::with_capacity(FLUSH_AT);
    'outer: while let Some(first) = rx.recv().await {
        let mut item = Some(first);
        while let Some(o) = item.take() {
            match o {
                Out::Reply {
                    mut bytes,
                    ticket,
                    resp,
                } => {
                    if !commits.is_done(ticket) {
                        // Send what is ready before waiting on a commit.
                        if flush(&shared, &mut wr, &mut out).await.is_err() {
                            break 'outer;
                        }
                    }
                    if let Err(why) = commits.wait(ticket).await {
                        bytes = encode(
                            &Reply::Error(format!("ERR the write was not committed: {why}")),
                            resp,
                        );
                    }
                    out.extend_from_slice(&bytes);
                }
                Out::Raw(b) => out.extend_from_slice(&b),
                Out::Close => {
                    let _ = flush(&shared, &mut wr, &mut out).await;
                    let _ = wr.shutdown().await;
                    return;
                }
            }
            if out.len() >= FLUSH_AT && flush(&shared, &mut wr, &mut out).await.is_err() {
                break 'outer;
            }
            item = rx.try_recv().ok();
        }
        if flush(&shared, &mut wr, &mut out).await.is_err() {
            break;
        }
    }
    // The client is gone: drain so the reader is not stuck on a full queue.
    rx.close();
    while rx.recv().await.is_some() {}
}

async fn flush(shared: &Shared, wr: &mut OwnedWriteHalf, out: &mut Vec<u8>) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    wr.write_all(out).await?;
    shared
        .counters
        .net_out
        .fetch_add(out.len() as u64, Ordering::Relaxed);
    out.clear();
    if out.capacity() > 4 * FLUSH_AT {
        out.shrink_to(FLUSH_AT);
    }
    Ok(())
}
