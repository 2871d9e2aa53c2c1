//! One client connection, served by one task: it parses what the client sent, runs each
//! request in order, and sends each reply once the commit it depends on is durable (K4),
//! keeping the replies in order. While replies wait for a commit the task goes on reading
//! and running the client's pipelined requests (so they share the group commit), up to
//! [`MAX_QUEUED`] replies: a client that does not read its replies stops being read, and
//! its output does not grow without bound.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nacre_resp::{encode_reply, encode_reply_resp2, parse_request, Reply, RequestLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::Client;
use crate::cmd::{execute, Outcome};
use crate::shared::{ClientInfo, Shared};

/// Replies held (waiting for their commit) before the connection stops reading.
const MAX_QUEUED: usize = 1024;
/// Reply bytes held before the connection stops reading.
const MAX_QUEUED_BYTES: usize = 16 << 20;

fn encode(out: &mut Vec<u8>, r: &Reply, resp: u8) {
    if resp >= 3 {
        encode_reply(out, r);
    } else {
        encode_reply_resp2(out, r);
    }
}

/// Replies not yet sent: each one's end in `bytes` and the ticket it waits for.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    /// (end offset in `bytes`, ticket, protocol) per reply, in order.
    marks: VecDeque<(usize, u64, u8)>,
    /// Offset where the first unsent reply starts.
    sent: usize,
}

impl Queue {
    fn push(&mut self, r: &Reply, ticket: u64, resp: u8) {
        encode(&mut self.bytes, r, resp);
        self.marks.push_back((self.bytes.len(), ticket, resp));
    }

    fn push_raw(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        self.marks.push_back((self.bytes.len(), 0, 2));
    }

    /// The end of the replies that may go now (their commits are durable); a failed commit
    /// turns its reply into an error.
    fn ready(&mut self, shared: &Shared) -> usize {
        let commits = &shared.store.commits;
        let mut end = self.sent;
        while let Some(&(e, t, resp)) = self.marks.front() {
            if !commits.is_done(t) {
                break;
            }
            if let Some(why) = commits.failed(t) {
                // Replace this reply's bytes with the error.
                let start = end;
                let mut err = Vec::new();
                encode(
                    &mut err,
                    &Reply::Error(format!("ERR the write was not committed: {why}")),
                    resp,
                );
                let tail = self.bytes.split_off(e);
                self.bytes.truncate(start);
                self.bytes.extend_from_slice(&err);
                let shift = self.bytes.len() as isize - e as isize;
                self.bytes.extend_from_slice(&tail);
                self.marks.pop_front();
                for m in self.marks.iter_mut() {
                    m.0 = (m.0 as isize + shift) as usize;
                }
                end = start + err.len();
                continue;
            }
            end = e;
            self.marks.pop_front();
        }
        end
    }

    /// The ticket the first held reply waits for.
    fn waiting(&self) -> Option<u64> {
        self.marks.front().map(|m| m.1)
    }

    fn full(&self) -> bool {
        self.marks.len() >= MAX_QUEUED || self.bytes.len() - self.sent >= MAX_QUEUED_BYTES
    }

    /// Forgets the first `end` bytes once written.
    fn consume(&mut self, end: usize) {
        self.sent = end;
        if self.marks.is_empty() {
            self.bytes.clear();
            self.sent = 0;
            if self.bytes.capacity() > 1 << 20 {
                self.bytes.shrink_to(64 << 10);
            }
        } else if self.sent > 1 << 20 {
            self.bytes.drain(..self.sent);
            for m in self.marks.iter_mut() {
                m.0 -= self.sent;
            }
            self.sent = 0;
        }
    }
}

/// Writes the replies whose commits are durable; false when the client is gone.
async fn send_ready(shared: &Shared, stream: &mut TcpStream, q: &mut Queue) -> bool {
    let end = q.ready(shared);
    if end > q.sent {
        if stream.write_all(&q.bytes[q.sent..end]).await.is_err() {
            return false;
        }
        shared
            .counters
            .net_out
            .fetch_add((end - q.sent) as u64, Ordering::Relaxed);
        q.consume(end);
    }
    true
}

/// Parks the client on a blocking command until a writer serves it or its timeout passes
/// (nil), sending earlier replies meanwhile. `None` when the client disconnects or is
/// killed while parked (what it sends meanwhile waits in `buf`).
async fn park(
    shared: &Shared,
    client: &mut Client,
    stream: &mut TcpStream,
    q: &mut Queue,
    buf: &mut Vec<u8>,
    req: crate::cmd::blocking::Request,
) -> Option<crate::waiters::Served> {
    let keys: Vec<(usize, Vec<u8>)> = req.keys.iter().map(|k| (client.db, k.clone())).collect();
    let deadline = req.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut parked = shared.waiters.park(client.db, client.resp, req);
    // W3: a write that landed before the client parked is served now.
    shared.waiters.serve(shared, &keys);
    let info = client.info.clone();
    loop {
        if !send_ready(shared, stream, q).await {
            shared.waiters.unpark(parked.id);
            return None;
        }
        let waiting = q.waiting();
        tokio::select! {
            r = &mut parked.rx => return r.ok(),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                if shared.waiters.unpark(parked.id) {
                    return Some((Reply::Nil, crate::store::txn::Ticket(0)));
                }
                return (&mut parked.rx).await.ok();
            }
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            r = stream.read_buf(buf) => {
                if matches!(r, Ok(0) | Err(_)) {
                    shared.waiters.unpark(parked.id);
                    return None;
                }
            }
            _ = info.kill.notified() => {
                shared.waiters.unpark(parked.id);
                return None;
            }
        }
    }
}

/// Serves one connection until it closes, is killed or the server stops.
pub async fn serve(shared: Arc<Shared>, mut stream: TcpStream, info: Arc<ClientInfo>) {
    let _ = stream.set_nodelay(true);
    let authed = shared.config.read().requirepass.is_none();
    let mut client = Client::new(info.clone(), authed);
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut q = Queue::default();
    let mut monitor: Option<tokio::sync::broadcast::Receiver<Arc<Vec<u8>>>> = None;
    let mut closing = false;
    'conn: loop {
        // Run every whole request buffered, while there is room for replies.
        let mut start = 0;
        let (max_bulk, qlimit) = {
            let c = shared.config.read();
            (c.proto_max_bulk_len as i64, c.client_query_buffer_limit)
        };
        while !closing && !q.full() {
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
                    q.push(&Reply::Error(format!("ERR {e}")), 0, client.resp);
                    closing = true;
                    break;
                }
            };
            let mut outcome = execute(&shared, &mut client, args);
            let outcome = loop {
                outcome = match outcome {
                    Outcome::After(t, args) => {
                        let _ = shared.store.commits.wait(&shared.store, t.0).await;
                        execute(&shared, &mut client, args)
                    }
                    Outcome::AfterCount(args) => {
                        shared.store.wait_counted().await;
                        execute(&shared, &mut client, args)
                    }
                    o => break o,
                };
            };
            match outcome {
                Outcome::Reply(r, t) => q.push(&r, t.0, client.resp),
                Outcome::Many(rs) => {
                    for r in &rs {
                        q.push(r, 0, client.resp);
                    }
                }
                Outcome::Close(r) => {
                    q.push(&r, 0, client.resp);
                    closing = true;
                }
                Outcome::Delay(d, r) => {
                    let deadline = d.map(|d| tokio::time::Instant::now() + d);
                    loop {
                        // What the client sends meanwhile waits in `buf`.
                        tokio::select! {
                            _ = async {
                                match deadline {
                                    Some(t) => tokio::time::sleep_until(t).await,
                                    None => std::future::pending().await,
                                }
                            } => break,
                            r = stream.read_buf(&mut buf) => {
                                if matches!(r, Ok(0) | Err(_)) {
                                    break 'conn;
                                }
                            }
                            _ = info.kill.notified() => break 'conn,
                        }
                    }
                    q.push(&r, 0, client.resp);
                }
                Outcome::Sleep(d) => {
                    tokio::time::sleep(d).await;
                    q.push(&crate::cmd::ok(), 0, client.resp);
                }
                Outcome::Blocking(f) => {
                    let r = tokio::task::spawn_blocking(f)
                        .await
                        .unwrap_or_else(|_| crate::cmd::err("the command panicked"));
                    q.push(&r, 0, client.resp);
                }
                Outcome::Block(req) => {
                    match park(&shared, &mut client, &mut stream, &mut q, &mut buf, req).await {
                        Some((r, t)) => q.push(&r, t.0, client.resp),
                        None => break 'conn,
                    }
                }
                Outcome::Monitor => {
                    q.push(&crate::cmd::ok(), 0, client.resp);
                    if monitor.is_none() {
                        monitor = Some(shared.monitor.subscribe());
                    }
                }
                Outcome::Shutdown => {
                    shared.shutting_down.store(true, Ordering::Release);
                    shared.shutdown.notify_one();
                    break 'conn;
                }
                Outcome::Nothing | Outcome::After(..) | Outcome::AfterCount(..) => {}
            }
        }
        buf.drain(..start);
        client.flush_counters(&shared);
        // This round's writes reach the engine together (K2: in ticket order).
        shared.store.commits.flush(&shared.store);
        if !send_ready(&shared, &mut stream, &mut q).await {
            break;
        }
        if closing && q.waiting().is_none() {
            break;
        }
        if info.killed.load(Ordering::Acquire) {
            break;
        }
        // Wait for more input, the next commit, a monitor line or a kill.
        let waiting = q.waiting();
        let can_read = !closing && !q.full();
        tokio::select! {
            r = stream.read_buf(&mut buf), if can_read => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    shared.counters.net_in.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            line = async {
                match monitor.as_mut() {
                    Some(m) => m.recv().await.ok(),
                    None => std::future::pending().await,
                }
            }, if monitor.is_some() => {
                if let Some(l) = line {
                    q.push_raw(&l);
                }
            }
            msg = async {
                match client.inbox.as_mut() {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            }, if client.inbox.is_some() && !q.full() => {
                if let Some(m) = msg {
                    info.pubsub_bytes.fetch_sub(m.size(), Ordering::Relaxed);
                    q.push(&crate::cmd::pubsub::message_reply(&m), m.ticket, client.resp);
                }
            }
            _ = info.kill.notified() => break,
        }
        if buf.capacity() > 1 << 20 && buf.len() < 16 << 10 {
            buf.shrink_to(64 << 10);
        }
    }
    let _ = stream.shutdown().await;
    client.flush_counters(&shared);
    client.unwatch_all(&shared);
    client.unsubscribe_all(&shared);
    if client.info.monitor.load(Ordering::Relaxed) {
        shared.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    shared.clients.lock().remove(&info.id);
}
