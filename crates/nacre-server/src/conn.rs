//! One client connection, served by one task: it parses what the client sent, runs each
//! request in order, and sends each reply once the commit it depends on is durable (K4),
//! keeping the replies in order.
//!
//! Invariants:
//! - (N1) The socket is always read while the query buffer is under
//!   `client-query-buffer-limit`, whatever the state of the replies: a client that sends its
//!   whole pipeline before reading (redis-py's `pipeline.execute()`) is never left waiting
//!   for the server to read while the server waits for it to read.
//! - (N2) Requests run while fewer than [`MAX_QUEUED`] replies and [`MAX_QUEUED_BYTES`] are
//!   unsent: a client that does not read stops having its requests run, so its output stays
//!   bounded (Redis instead grows it without bound for normal clients).
//! - (N3) Whenever room for replies opens, the whole requests already buffered run at once,
//!   without waiting for more bytes from the socket.
//! - (N4) Replies are written without blocking the task; output over the client class's
//!   `client-output-buffer-limit` disconnects the client, as Redis does.
//! - (N5) A connection runs one round (the requests it has buffered) per turn: after a
//!   round that ran requests, its task queues itself again behind the tasks already ready
//!   before it reads again, so every other ready client, and the runtime's I/O driver that
//!   finds them ready, get their turn first (as Redis serves each ready client once per
//!   pass of its event loop). Without it, a client whose next pipeline is already in the
//!   socket when its replies go out kept its task running round after round, while the
//!   runtime, which looks for ready sockets only every few dozen task polls when it is
//!   never idle, left the other clients' requests unread: at `-P 16` on one key, requests
//!   waited 100-470 ms.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use nacre_resp::{encode_reply, encode_reply_resp2, Reply, RequestLimits, RequestParser};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::client::Client;
use crate::cmd::{execute, Outcome};
use crate::config::OutputLimit;
use crate::shared::{ClientInfo, Shared};

/// Gives the thread back for one turn (N5): the task is queued again at once, behind the
/// tasks already ready. (`tokio::task::yield_now` instead waits until the runtime has looked
/// for ready sockets, which puts clients whose requests arrived after this one's ahead of
/// it: an `EXEC` sent before another client's `LPUSH` would run after it.)
struct Requeue(bool);

impl std::future::Future for Requeue {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        // A task that wakes itself while it runs goes to the back of its thread's queue.
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Replies held (unsent, or waiting for their commit) before requests stop running.
const MAX_QUEUED: usize = 1024;
/// Reply bytes held before requests stop running.
const MAX_QUEUED_BYTES: usize = 16 << 20;

fn encode(out: &mut Vec<u8>, r: &Reply, resp: u8) {
    if resp >= 3 {
        encode_reply(out, r);
    } else {
        encode_reply_resp2(out, r);
    }
}

/// Replies not yet sent: each waiting one's end in `bytes` and the ticket it waits for.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    /// (end offset in `bytes`, ticket, protocol) per reply still waiting for its commit, in
    /// order.
    marks: VecDeque<(usize, u64, u8)>,
    /// Offset where the first unsent byte is.
    sent: usize,
    /// End of the replies whose commits are durable (`sent..ready` may go now).
    ready: usize,
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

    /// Moves `ready` past the replies whose commits are durable; a failed commit turns its
    /// reply into an error.
    fn settle(&mut self, shared: &Shared) {
        let commits = &shared.store.commits;
        while let Some(&(e, t, resp)) = self.marks.front() {
            if !commits.is_done(t) {
                break;
            }
            if let Some(why) = commits.failed(t) {
                // Replace this reply's bytes with the error.
                let start = self.ready;
                let mut err = Vec::new();
                encode(&mut err, &Reply::Error(why.reply()), resp);
                let tail = self.bytes.split_off(e);
                self.bytes.truncate(start);
                self.bytes.extend_from_slice(&err);
                let shift = self.bytes.len() as isize - e as isize;
                self.bytes.extend_from_slice(&tail);
                self.marks.pop_front();
                for m in self.marks.iter_mut() {
                    m.0 = (m.0 as isize + shift) as usize;
                }
                self.ready = start + err.len();
                continue;
            }
            self.ready = e;
            self.marks.pop_front();
        }
    }

    /// The ticket the first held reply waits for.
    fn waiting(&self) -> Option<u64> {
        self.marks.front().map(|m| m.1)
    }

    /// Bytes not yet written to the socket.
    fn unsent(&self) -> usize {
        self.bytes.len() - self.sent
    }

    /// Whether bytes wait only for the socket.
    fn writable(&self) -> bool {
        self.ready > self.sent
    }

    fn full(&self) -> bool {
        self.marks.len() >= MAX_QUEUED || self.unsent() >= MAX_QUEUED_BYTES
    }

    /// Forgets `n` more bytes, written.
    fn advance(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
            self.ready = 0;
            if self.bytes.capacity() > 1 << 20 {
                self.bytes.shrink_to(64 << 10);
            }
        } else if self.sent > 1 << 20 {
            self.bytes.drain(..self.sent);
            for m in self.marks.iter_mut() {
                m.0 -= self.sent;
            }
            self.ready -= self.sent;
            self.sent = 0;
        }
    }
}

/// Writes what the socket takes now of the replies whose commits are durable; false when
/// the client is gone.
fn send_ready(shared: &Shared, stream: &TcpStream, q: &mut Queue) -> bool {
    q.settle(shared);
    while q.writable() {
        match stream.try_write(&q.bytes[q.sent..q.ready]) {
            Ok(0) => return false,
            Ok(n) => {
                shared
                    .counters
                    .net_out
                    .fetch_add(n as u64, Ordering::Relaxed);
                q.advance(n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Reads what the socket has now into `buf`; false when the client is gone.
fn receive(shared: &Shared, stream: &TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        buf.reserve(16 << 10);
        match stream.try_read_buf(buf) {
            Ok(0) => return false,
            Ok(n) => {
                shared
                    .counters
                    .net_in
                    .fetch_add(n as u64, Ordering::Relaxed);
                if n < 16 << 10 {
                    return true;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Output over a class's limits: the hard one at once, the soft one once it has lasted its
/// seconds (Redis's `client-output-buffer-limit`; 0 turns a limit off).
#[derive(Default)]
struct OutputWatch {
    soft_since: Option<Instant>,
}

impl OutputWatch {
    fn over(&mut self, unsent: usize, limit: OutputLimit) -> bool {
        let unsent = unsent as u64;
        if limit.hard > 0 && unsent > limit.hard {
            return true;
        }
        if limit.soft > 0 && unsent > limit.soft {
            let since = *self.soft_since.get_or_insert_with(Instant::now);
            return since.elapsed().as_secs() >= limit.soft_seconds;
        }
        self.soft_since = None;
        false
    }
}

/// The socket's state and what waits in it, shared by the main loop and [`park`].
struct Io {
    stream: TcpStream,
    buf: Vec<u8>,
    q: Queue,
}

impl Io {
    /// Waits until the socket has something to read or room to write what is ready, and
    /// does that; false when the client is gone. Reading stops at `qlimit` (N1).
    async fn pump(&mut self, shared: &Shared, read: bool) -> bool {
        let write = self.q.writable();
        if !read && !write {
            return std::future::pending().await;
        }
        tokio::select! {
            r = self.stream.readable(), if read => r.is_ok() && receive(shared, &self.stream, &mut self.buf),
            r = self.stream.writable(), if write => r.is_ok() && send_ready(shared, &self.stream, &mut self.q),
        }
    }
}

/// Parks the client on a blocking command until a writer serves it or its timeout passes
/// (nil), sending earlier replies meanwhile. `None` when the client disconnects or is
/// killed while parked (what it sends meanwhile waits in `io.buf`).
async fn park(
    shared: &Shared,
    client: &mut Client,
    io: &mut Io,
    qlimit: usize,
    req: crate::cmd::blocking::Request,
) -> Option<crate::waiters::Served> {
    let keys: Vec<(usize, Vec<u8>)> = req.keys.iter().map(|k| (client.db, k.clone())).collect();
    let deadline = req.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut parked = shared.waiters.park(client.db, client.resp, req);
    // W3: a write that landed before the client parked is served now.
    shared.waiters.serve(shared, &keys);
    let info = client.info.clone();
    info.unblock_mode.store(0, Ordering::Release);
    info.blocked.store(true, Ordering::Release);
    let out = park_loop(shared, io, qlimit, deadline, &mut parked, &info).await;
    info.blocked.store(false, Ordering::Release);
    out
}

async fn park_loop(
    shared: &Shared,
    io: &mut Io,
    qlimit: usize,
    deadline: Option<tokio::time::Instant>,
    parked: &mut crate::waiters::Parked,
    info: &ClientInfo,
) -> Option<crate::waiters::Served> {
    loop {
        if !send_ready(shared, &io.stream, &mut io.q) || io.buf.len() > qlimit {
            shared.waiters.unpark(parked.id);
            return None;
        }
        let waiting = io.q.waiting();
        tokio::select! {
            r = &mut parked.rx => return r.ok(),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                if shared.waiters.unpark(parked.id) {
                    return Some((Reply::NilArray, crate::store::txn::Ticket(0)));
                }
                return (&mut parked.rx).await.ok();
            }
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            alive = io.pump(shared, true) => {
                if !alive {
                    shared.waiters.unpark(parked.id);
                    return None;
                }
            }
            _ = info.kill.notified() => {
                shared.waiters.unpark(parked.id);
                return None;
            }
            _ = info.unblock.notified() => {
                let mode = info.unblock_mode.swap(0, Ordering::AcqRel);
                if mode != 0 && shared.waiters.unpark(parked.id) {
                    let r = if mode == 2 {
                        Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
                    } else {
                        Reply::NilArray
                    };
                    return Some((r, crate::store::txn::Ticket(0)));
                }
            }
        }
    }
}

/// Waits `d` (`None`: until the client goes) while reading what the client sends and
/// sending the replies before it; false when the client is gone or killed.
async fn delay(
    shared: &Shared,
    info: &ClientInfo,
    io: &mut Io,
    qlimit: usize,
    d: Option<std::time::Duration>,
) -> bool {
    let deadline = d.map(|d| tokio::time::Instant::now() + d);
    loop {
        if !send_ready(shared, &io.stream, &mut io.q)
            || info.killed.load(Ordering::Acquire)
            || io.buf.len() > qlimit
        {
            return false;
        }
        let waiting = io.q.waiting();
        tokio::select! {
            _ = async {
                match deadline {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => return true,
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            alive = io.pump(shared, true) => {
                if !alive {
                    return false;
                }
            }
            _ = info.kill.notified() => return false,
        }
    }
}

/// Sends every reply queued, each once its commit is durable; false when the client is
/// gone.
async fn flush_all(shared: &Shared, io: &mut Io) -> bool {
    loop {
        if !send_ready(shared, &io.stream, &mut io.q) {
            return false;
        }
        if io.q.unsent() == 0 {
            return true;
        }
        let waiting = io.q.waiting();
        tokio::select! {
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            r = io.stream.writable() => {
                if r.is_err() {
                    return false;
                }
            }
        }
    }
}

/// `WAIT n timeout`: once every commit queued so far is durable (this client's writes are
/// then in the replication stream), the replicas that acknowledged the stream's end, asking
/// them (`REPLCONF GETACK *`) and waiting up to `timeout` for `n` of them.
async fn wait_replicas(
    shared: &Shared,
    info: &ClientInfo,
    n: i64,
    timeout: Option<std::time::Duration>,
) -> Reply {
    let store = &shared.store;
    let _ = store.commits.wait(store, store.commits.last()).await;
    let target = store.repl.end();
    let count = || shared.repl.acked_at_least(target) as i64;
    if n <= 0 || count() >= n {
        return Reply::Integer(count());
    }
    let mut acked = shared.repl.acked.subscribe();
    store.repl.append_command(&[b"REPLCONF", b"GETACK", b"*"]);
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        tokio::select! {
            r = acked.changed() => {
                if r.is_err() || count() >= n {
                    break;
                }
            }
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => break,
            _ = info.kill.notified() => break,
        }
    }
    Reply::Integer(count())
}

/// A client idle this long gives its query buffer's free room back.
const TRIM_IDLE: std::time::Duration = std::time::Duration::from_secs(2);
/// A query buffer larger than this shrinks once twice its recent peak is below it.
const TRIM_ABOVE: usize = 32 << 10;
/// Free room below this is not worth a resize.
const TRIM_ROOM: usize = 4 << 10;
/// How often [`trim_cron`] looks at the clients.
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Resizes a query buffer as Redis's `clientsCronResizeQueryBuffer` does: an idle client's
/// free room goes; a buffer over [`TRIM_ABOVE`] that is more than twice its recent `peak`
/// shrinks to what it holds or that peak, whichever is more. The peak starts again from
/// what the buffer holds.
fn resize_query_buffer(buf: &mut Vec<u8>, peak: &mut usize, idle: bool) {
    if idle && worth_trimming_idle(buf.len(), buf.capacity()) {
        buf.shrink_to_fit();
    } else if buf.capacity() - buf.len() > TRIM_ROOM
        && buf.capacity() > TRIM_ABOVE
        && buf.capacity() / 2 > *peak
    {
        buf.shrink_to(buf.len().max(*peak));
    }
    *peak = buf.len();
}

/// Whether an idle client's buffer of `cap` bytes holding `len` gives room back: when the
/// room is worth a resize, or when it holds nothing at all (a buffer shrunk to a small peak
/// would otherwise keep that room for as long as the client stays idle).
fn worth_trimming_idle(len: usize, cap: usize) -> bool {
    cap - len > TRIM_ROOM || (len == 0 && cap > 0)
}

/// Asks connections to resize their query buffers (see [`resize_query_buffer`]): those idle
/// for [`TRIM_IDLE`] that still hold room, and those whose buffer is over [`TRIM_ABOVE`].
/// Runs until the server stops.
pub async fn trim_cron(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let clients: Vec<Arc<ClientInfo>> = shared.clients.lock().values().cloned().collect();
        for c in clients {
            let cap = c.qbuf_cap.load(Ordering::Relaxed);
            let room = cap.saturating_sub(c.qbuf.load(Ordering::Relaxed));
            let len = cap - room;
            if (room > TRIM_ROOM && cap > TRIM_ABOVE)
                || (worth_trimming_idle(len, cap) && c.idle(Instant::now()) > TRIM_IDLE)
            {
                c.trim.notify_one();
            }
        }
    }
}

/// Serves one connection until it closes, is killed or the server stops.
pub async fn serve(shared: Arc<Shared>, stream: TcpStream, info: Arc<ClientInfo>) {
    let _ = stream.set_nodelay(true);
    let authed = shared.acl.default_open();
    let mut client = Client::new(info.clone(), authed);
    let mut io = Io {
        stream,
        buf: Vec::with_capacity(16 << 10),
        q: Queue::default(),
    };
    let mut parser = RequestParser::default();
    let mut watch = OutputWatch::default();
    let mut monitor: Option<tokio::sync::broadcast::Receiver<Arc<Vec<u8>>>> = None;
    let mut closing = false;
    // The most the query buffer held since the last resize check (Redis's querybuf_peak).
    let mut peak = 0usize;
    'conn: loop {
        // Run every whole request buffered, while there is room for replies (N2).
        let mut start = 0;
        let mut stalled = false;
        client.clock.round();
        let (max_bulk, qlimit, out_limits) = {
            let c = shared.config.read();
            (
                c.proto_max_bulk_len as i64,
                usize::try_from(c.client_query_buffer_limit).unwrap_or(usize::MAX),
                c.client_output_buffer_limit,
            )
        };
        while !closing {
            if io.q.full() {
                stalled = true;
                break;
            }
            let limits = RequestLimits {
                max_bulk,
                authenticated: client.authed,
            };
            let at = start;
            let args = match parser.parse(&io.buf[start..], &limits) {
                Ok(Some((args, used))) => {
                    start += used;
                    args
                }
                Ok(None) => break,
                Err(e) => {
                    io.q.push(&Reply::Error(format!("ERR {e}")), 0, client.resp);
                    closing = true;
                    break;
                }
            };
            client.skip_this = std::mem::take(&mut client.skip_armed);
            // What CLIENT LIST shows as `qbuf`: this request and those behind it.
            info.qbuf.store(io.buf.len() - at, Ordering::Relaxed);
            let mut outcome = execute(&shared, &mut client, args);
            let outcome = loop {
                outcome = match outcome {
                    Outcome::After(t, args) => {
                        let _ = shared.store.commits.wait(&shared.store, t.0).await;
                        client.clock.round();
                        execute(&shared, &mut client, args)
                    }
                    Outcome::AfterCount(args) => {
                        shared.store.wait_counted().await;
                        client.clock.round();
                        execute(&shared, &mut client, args)
                    }
                    Outcome::AfterRebuild(args) => {
                        // I1: this connection waits; the others on its thread go on.
                        shared.store.wait_rebuilt().await;
                        client.clock.round();
                        execute(&shared, &mut client, args)
                    }
                    Outcome::Paused(until, args) => {
                        let left = until.saturating_sub(crate::shared::now_ms());
                        tokio::select! {
                            _ = tokio::time::sleep(std::time::Duration::from_millis(left)) => {}
                            _ = shared.unpaused.notified() => {}
                            _ = info.kill.notified() => break 'conn,
                        }
                        client.clock.round();
                        execute(&shared, &mut client, args)
                    }
                    o => break o,
                };
            };
            let awaits = !matches!(
                outcome,
                Outcome::Reply(..) | Outcome::Many(_) | Outcome::Close(_) | Outcome::Nothing
            );
            // CLIENT REPLY OFF / SKIP: command replies are dropped; subscription
            // confirmations (`Many`) and pub/sub messages still go.
            let silent = client.reply_off || client.skip_this;
            match outcome {
                Outcome::Reply(_, _) if silent => {}
                Outcome::Reply(r, t) => io.q.push(&r, t.0, client.resp),
                Outcome::Many(rs) => {
                    for r in &rs {
                        io.q.push(r, 0, client.resp);
                    }
                }
                Outcome::Close(r) => {
                    if !silent {
                        io.q.push(&r, 0, client.resp);
                    }
                    closing = true;
                }
                Outcome::Delay(d, r) => {
                    // What the client sends meanwhile waits in `io.buf`.
                    if !delay(&shared, &info, &mut io, qlimit, d).await {
                        break 'conn;
                    }
                    if !silent {
                        io.q.push(&r, 0, client.resp);
                    }
                }
                Outcome::Blocking(f) => {
                    let r = tokio::task::spawn_blocking(f)
                        .await
                        .unwrap_or_else(|_| crate::cmd::err("the command panicked"));
                    if !silent {
                        io.q.push(&r, 0, client.resp);
                    }
                }
                Outcome::Block(req) => {
                    let args = req.args.clone();
                    let Some((r, t)) = park(&shared, &mut client, &mut io, qlimit, req).await
                    else {
                        break 'conn;
                    };
                    shared.slowlog_add(0, &args, &client.info);
                    if let Some(msg) = r.error_message() {
                        client.count(3);
                        shared.error_seen(&msg);
                        let (name, sub) = *client.info.last_cmd.lock();
                        client.cmdstats.failed_later(name, sub);
                    }
                    if !silent {
                        io.q.push(&r, t.0, client.resp);
                    }
                }
                Outcome::Replicate(sync) => {
                    // The replies before it go first; then the socket carries the stream.
                    if !flush_all(&shared, &mut io).await {
                        break 'conn;
                    }
                    let leftover = io.buf[start..].to_vec();
                    let Io { stream, .. } = io;
                    crate::repl::master::serve(
                        shared.clone(),
                        stream,
                        info.clone(),
                        leftover,
                        *sync,
                    )
                    .await;
                    client.flush_counters(&shared);
                    client.unwatch_all(&shared);
                    client.unsubscribe_all(&shared);
                    shared.tracking.disable(info.id);
                    shared.clients.lock().remove(&info.id);
                    return;
                }
                Outcome::WaitReplicas(n, timeout) => {
                    let r = wait_replicas(&shared, &info, n, timeout).await;
                    if !silent {
                        io.q.push(&r, 0, client.resp);
                    }
                }
                Outcome::Monitor => {
                    io.q.push(&crate::cmd::ok(), 0, client.resp);
                    if monitor.is_none() {
                        monitor = Some(shared.monitor.subscribe());
                    }
                }
                Outcome::Shutdown => {
                    shared.shutting_down.store(true, Ordering::Release);
                    shared.shutdown.notify_one();
                    break 'conn;
                }
                Outcome::Nothing
                | Outcome::After(..)
                | Outcome::AfterCount(..)
                | Outcome::AfterRebuild(..)
                | Outcome::Paused(..) => {}
            }
            if awaits {
                client.clock.round();
            }
        }
        let ran = start > 0;
        peak = peak.max(io.buf.len());
        io.buf.drain(..start);
        info.qbuf.store(io.buf.len(), Ordering::Relaxed);
        info.qbuf_cap.store(io.buf.capacity(), Ordering::Relaxed);
        client.flush_counters(&shared);
        // This round's writes reach the engine together (K2: in ticket order). Under a
        // crowd, other connections ready on this thread run their rounds first, so one
        // commit carries theirs too.
        if shared.store.commits.crowded() && shared.store.commits.staged() {
            tokio::task::yield_now().await;
        }
        shared.store.commits.flush(&shared.store);
        if !send_ready(&shared, &io.stream, &mut io.q) {
            break;
        }
        if info.killed.load(Ordering::Acquire) {
            break;
        }
        if closing && io.q.unsent() == 0 {
            break;
        }
        if io.buf.len() > qlimit {
            tracing::warn!(client = %info.addr, "closing a client whose query buffer passed client-query-buffer-limit");
            break;
        }
        let class = if client.subscriptions() > 0 {
            out_limits.pubsub
        } else {
            out_limits.normal
        };
        if watch.over(io.q.unsent(), class) {
            tracing::warn!(client = %info.addr, unsent = io.q.unsent(), "closing a client over client-output-buffer-limit");
            break;
        }
        // N3: replies went out and made room; run what is buffered before waiting.
        if stalled && !io.q.full() {
            continue;
        }
        // N5: a round ran; the other ready clients go before this one reads again.
        if ran {
            Requeue(false).await;
        }
        // What CLIENT LIST shows of its replies while it waits.
        info.omem.store(io.q.unsent(), Ordering::Relaxed);
        info.oll.store(io.q.marks.len(), Ordering::Relaxed);
        info.out_cap.store(io.q.bytes.capacity(), Ordering::Relaxed);
        info.wants_write.store(io.q.writable(), Ordering::Relaxed);
        // Wait for input, room in the socket, the next commit, a monitor line or a kill.
        let waiting = io.q.waiting();
        tokio::select! {
            alive = io.pump(&shared, !closing) => {
                if !alive {
                    break;
                }
            }
            _ = shared.store.commits.wait(&shared.store, waiting.unwrap_or(0)), if waiting.is_some() => {}
            line = async {
                match monitor.as_mut() {
                    Some(m) => m.recv().await.ok(),
                    None => std::future::pending().await,
                }
            }, if monitor.is_some() => {
                if let Some(l) = line {
                    io.q.push_raw(&l);
                }
            }
            msg = async {
                match client.inbox.as_mut() {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            }, if client.inbox.is_some() && !io.q.full() => {
                if let Some(m) = msg {
                    info.pubsub_bytes.fetch_sub(m.size(), Ordering::Relaxed);
                    io.q.push(&crate::cmd::pubsub::message_reply(&m), m.ticket, client.resp);
                }
            }
            _ = info.kill.notified() => break,
            _ = info.trim.notified() => {
                let idle = info.idle(Instant::now()) > TRIM_IDLE;
                resize_query_buffer(&mut io.buf, &mut peak, idle);
                info.qbuf_cap.store(io.buf.capacity(), Ordering::Relaxed);
            }
        }
    }
    let _ = io.stream.shutdown().await;
    client.flush_counters(&shared);
    client.unwatch_all(&shared);
    client.unsubscribe_all(&shared);
    shared.tracking.disable(info.id);
    if client.info.monitor.load(Ordering::Relaxed) {
        shared.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    shared.clients.lock().remove(&info.id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_buffer_shrunk_to_a_small_peak_still_goes() {
        // A busy client's big buffer shrinks to its recent peak ...
        let mut buf = Vec::with_capacity(400_000);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let mut peak = 30;
        buf.clear();
        resize_query_buffer(&mut buf, &mut peak, false);
        assert!(
            buf.capacity() >= 30 && buf.capacity() < TRIM_ROOM,
            "{}",
            buf.capacity()
        );
        // ... and once it is idle, the little room left goes too.
        resize_query_buffer(&mut buf, &mut peak, true);
        assert_eq!(buf.capacity(), 0);
    }

    #[test]
    fn an_idle_buffer_keeps_what_it_holds() {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(b"*1\r\n$4\r\nPI");
        let mut peak = 0;
        resize_query_buffer(&mut buf, &mut peak, true);
        assert_eq!(buf, b"*1\r\n$4\r\nPI");
        assert!(buf.capacity() >= buf.len());
        assert_eq!(peak, buf.len());
    }
}
