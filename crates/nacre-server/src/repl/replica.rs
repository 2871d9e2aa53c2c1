//! This server as a replica of a Redis 7.0 (or Nacre) master: `REPLICAOF`, the link (a
//! tokio task: handshake, `PSYNC`, the full synchronization's payload, the stream), and
//! what a replica refuses (`READONLY`, `MASTERDOWN`, `LOADING`).
//!
//! Invariants:
//! - L1: at most one link task runs: `REPLICAOF` stops the one before and waits for its end
//!   before it starts another or promotes this server.
//! - L2: a link stops only where it reads (never between applying commands and recording
//!   their offset), so the data set, the offset (`store.repl.end()`) and the durable mark
//!   (`store::repl_mark`) agree (P1).
//! - L3: the stream is applied in batches (what one read brought); a batch's bytes join
//!   this server's stream and count as acknowledged only once its last commit is durable
//!   (P2, and R1/R4 in store/repl_log.rs): commits become durable in ticket order.
//! - L4: a full synchronization validates the whole payload before it touches the data set;
//!   from the flush (which deletes the mark, M3) until the load ends, and after a failed
//!   load until a good one, clients get `-LOADING`: a partial data set is never served.
//!   Across a crash the loading record (M4 in store/repl_mark.rs) keeps that promise: a
//!   server that starts with it empties the data set before it serves.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nacre_resp::request::{RequestLimits, RequestParser};
use nacre_resp::Reply;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::client::Client;
use crate::cmd::{Command, Flags, Outcome};
use crate::shared::{now_ms, ClientInfo, Shared};
use crate::store::repl_log::encode_command;
use crate::store::repl_mark::{self, Armed, Mark};

/// Why a link ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// `REPLICAOF` stopped it.
    #[error("stopped")]
    Stopped,
    /// The socket failed or closed.
    #[error("I/O error with the master: {0}")]
    Io(#[from] std::io::Error),
    /// Nothing came from the master for `repl-timeout` seconds.
    #[error("timeout: nothing from the master for {0} s")]
    Timeout(u64),
    /// The master answered a handshake step with an error.
    #[error("the master refused {step}: {reply}")]
    Refused {
        /// The step.
        step: &'static str,
        /// Its error line.
        reply: String,
    },
    /// The master sent what the protocol does not allow.
    #[error("protocol error from the master: {0}")]
    Protocol(String),
    /// The full synchronization's payload was truncated or is not a valid RDB file.
    #[error("bad synchronization payload: {0}")]
    Payload(String),
    /// Loading the payload failed (the data set is partial: clients get LOADING).
    #[error("loading the master's data failed: {0}")]
    Load(#[from] crate::transfer::TransferError),
    /// A command of the stream could not commit here.
    #[error("a write of the master's stream failed to commit: {0}")]
    Commit(String),
    /// A local file or thread failed.
    #[error("{0}")]
    Local(String),
}

/// The link's state, as `ROLE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum State {
    Connect = 0,
    Connecting = 1,
    Handshake = 2,
    Sync = 3,
    Connected = 4,
}

impl State {
    fn name(v: u8) -> &'static str {
        match v {
            1 => "connecting",
            2 => "handshake",
            3 => "sync",
            4 => "connected",
            _ => "connect",
        }
    }
}

/// The running link task.
struct Task {
    stop: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<()>,
}

/// This server's side as a replica (in `Replication`, shared).
#[derive(Default)]
pub struct Link {
    /// The master (`REPLICAOF host port`); `None`: this server is a master.
    master: Mutex<Option<(String, u16)>>,
    task: Mutex<Option<Task>>,
    /// A `State`.
    state: AtomicU8,
    /// Clients get `-LOADING` (L4).
    loading: AtomicBool,
    /// Bytes of the stream read, and applied (`slave_read_repl_offset`, `slave_repl_offset`).
    read_off: AtomicU64,
    applied: AtomicU64,
    /// Unix seconds of the last byte from the master (0: none yet).
    last_io: AtomicU64,
    /// Unix seconds the link went down (0: never up).
    down_since: AtomicU64,
    /// Payload bytes expected (-1: unknown, EOF-marked) and read.
    sync_total: AtomicI64,
    sync_read: AtomicU64,
    /// The database the stream had selected (kept across reconnects: a partial
    /// resynchronization continues the stream where it was).
    db: AtomicU64,
    /// Synchronizations: full, partial (for tests and logs).
    full_syncs: AtomicU64,
    partial_syncs: AtomicU64,
}

impl Link {
    /// Full synchronizations this server did as a replica.
    pub fn full_syncs(&self) -> u64 {
        self.full_syncs.load(Ordering::Relaxed)
    }

    /// Partial resynchronizations this server did as a replica.
    pub fn partial_syncs(&self) -> u64 {
        self.partial_syncs.load(Ordering::Relaxed)
    }

    /// Whether a full synchronization's payload is loading (`INFO persistence`'s `loading`).
    pub fn loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Release);
    }

    fn up(&self) -> bool {
        self.state.load(Ordering::Acquire) == State::Connected as u8
    }
}

fn unix_secs() -> u64 {
    now_ms() / 1000
}

fn param(shared: &Shared, name: &str) -> String {
    crate::params::find(name).map_or_else(String::new, |p| shared.config.read().params.get(p))
}

fn param_int(shared: &Shared, name: &str) -> i64 {
    shared.config.read().params.int(name)
}

/// A read-only replica's refusal of a write.
pub(crate) const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Whether `replica-read-only` is on.
pub(crate) fn read_only(shared: &Shared) -> bool {
    param(shared, "replica-read-only") == "yes"
}

/// The error a replica answers `cmd` with instead of running it (client not the master),
/// as Redis's processCommand: `READONLY`, `MASTERDOWN`, `LOADING`; `None`: it runs.
pub(crate) fn refusal(
    shared: &Shared,
    client: &Client,
    cmd: &Command,
    flags: Flags,
) -> Option<String> {
    let link = &shared.repl.replica;
    if shared.repl.replica.master.lock().is_none() {
        return None;
    }
    let queued = crate::cmd::multi::queued_flags_each(client, cmd);
    let denies = |f: Flags| !flags.contains(f) || queued.iter().any(|q| !q.contains(f));
    let write = flags.contains(Flags::WRITE) || queued.iter().any(|q| q.contains(Flags::WRITE));
    if write && read_only(shared) {
        return Some(READONLY.into());
    }
    if !link.up() && denies(Flags::STALE) && param(shared, "replica-serve-stale-data") == "no" {
        return Some(
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                .into(),
        );
    }
    if link.loading.load(Ordering::Acquire) && denies(Flags::LOADING) {
        return Some("LOADING Redis is loading the dataset in memory".into());
    }
    None
}

/// `INFO replication`'s replica fields, from `master_host` to `replica_announced` (as Redis
/// 7.0 prints them between `role:slave` and `connected_slaves`); `None` on a master.
pub fn info_fields(shared: &Shared) -> Option<String> {
    let (host, port) = shared.repl.replica.master.lock().clone()?;
    let l = &shared.repl.replica;
    let now = unix_secs();
    let state = l.state.load(Ordering::Acquire);
    let last_io = l.last_io.load(Ordering::Relaxed);
    let mut out = format!(
        "master_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
        if l.up() { "up" } else { "down" },
        if last_io == 0 || state < State::Sync as u8 {
            -1
        } else {
            now.saturating_sub(last_io) as i64
        },
        u8::from(state == State::Sync as u8),
        l.read_off.load(Ordering::Relaxed),
        l.applied.load(Ordering::Relaxed),
    );
    if state == State::Sync as u8 {
        let total = l.sync_total.load(Ordering::Relaxed);
        let read = l.sync_read.load(Ordering::Relaxed) as i64;
        let perc = if total > 0 {
            read as f64 / total as f64 * 100.0
        } else {
            0.0
        };
        out.push_str(&format!(
            "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{read}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
            total - read,
            now.saturating_sub(last_io),
        ));
    }
    if !l.up() {
        let since = l.down_since.load(Ordering::Relaxed);
        out.push_str(&format!(
            "master_link_down_since_seconds:{}\r\n",
            if since == 0 {
                -1
            } else {
                now.saturating_sub(since) as i64
            }
        ));
    }
    out.push_str(&format!(
        "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
        param_int(shared, "replica-priority"),
        u8::from(param(shared, "replica-read-only") == "yes"),
        u8::from(param(shared, "replica-announced") == "yes"),
    ));
    Some(out)
}

/// `ROLE`'s answer on a replica: `slave host port state offset`; `None` on a master.
pub fn role_reply(shared: &Shared) -> Option<Reply> {
    let (host, port) = shared.repl.replica.master.lock().clone()?;
    let l = &shared.repl.replica;
    let state = l.state.load(Ordering::Acquire);
    let offset = if state == State::Connected as u8 {
        l.applied.load(Ordering::Relaxed) as i64
    } else {
        -1
    };
    Some(Reply::Array(vec![
        Reply::Bulk(b"slave".to_vec()),
        Reply::Bulk(host.into_bytes()),
        Reply::Integer(i64::from(port)),
        Reply::Bulk(State::name(state).as_bytes().to_vec()),
        Reply::Integer(offset),
    ]))
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (checked arguments: `target` `None` is NO ONE).
/// Blocks until the link before has stopped (L1): run it off the runtime's workers.
pub(crate) fn replicaof(shared: &Arc<Shared>, target: Option<(String, u16)>) -> Reply {
    let l = &shared.repl.replica;
    match target {
        None => {
            if l.master.lock().is_none() {
                return crate::cmd::ok();
            }
            stop_link(shared);
            promote(shared);
            tracing::info!("MASTER MODE enabled (REPLICAOF NO ONE)");
            crate::cmd::ok()
        }
        Some((host, port)) => {
            if l.master
                .lock()
                .as_ref()
                .is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && *p == port)
            {
                tracing::info!("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
                return Reply::Simple("OK Already connected to specified master".into());
            }
            stop_link(shared);
            start_link(shared, host.clone(), port);
            tracing::info!("REPLICAOF {host}:{port} enabled");
            crate::cmd::ok()
        }
    }
}

/// At start: adopts the recorded position (a restarted replica continues its master's
/// stream, as Redis adopts the replication id of the RDB file it loads), and connects to the
/// `replicaof` of the configuration, if any. A server that starts as a master forgets the
/// record (M3): its own writes would make it false.
pub fn resume(shared: &Arc<Shared>) {
    let store = &shared.store;
    match repl_mark::interrupted_load(store) {
        Ok(Some(replid)) => {
            tracing::warn!(
                master_replid = %replid,
                "a full synchronization's load was cut short: emptying the partial data set"
            );
            if let Err(e) = drop_partial(shared) {
                tracing::error!(error = %e, "the partial data set could not be emptied");
                std::process::exit(1);
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::error!(error = %e, "the replication loading record could not be read");
            std::process::exit(1);
        }
    }
    match repl_mark::read(store) {
        Ok(Some(m)) => {
            tracing::info!(
                replid = %m.replid,
                offset = m.offset,
                "replication position recorded: continuing the master's stream from there"
            );
            {
                let mut ids = shared.repl.ids.lock();
                ids.replid = m.replid.clone();
                ids.replid2 = super::NO_REPLID.to_string();
                ids.second_offset = -1;
            }
            store.repl.reset_to(m.offset);
            shared.repl.replica.db.store(m.db as u64, Ordering::Relaxed);
        }
        Ok(None) => {}
        Err(e) => tracing::error!(error = %e, "the replication position could not be read"),
    }
    let target = param(shared, "replicaof");
    let mut words = target.split_whitespace();
    if let (Some(host), Some(Ok(port))) = (words.next(), words.next().map(str::parse::<u16>)) {
        start_link(shared, host.to_string(), port);
    } else if let Err(e) = forget_mark(shared) {
        tracing::error!(error = %e, "the replication position could not be deleted");
    }
}

/// Empties a data set a crash left half loaded (M4): functions first, then the keys in the
/// batch that deletes the loading record, so a crash in between empties it again at the
/// next start.
fn drop_partial(shared: &Shared) -> Result<(), LinkError> {
    let mut client = master_client(shared, "start".into());
    run_durably(shared, &mut client, &["FUNCTION", "FLUSH"], None)?;
    run_durably(shared, &mut client, &["FLUSHALL"], Some(Armed::Forget))?;
    // FLUSHALL of a data set with no key commits nothing: the record goes on its own.
    if repl_mark::interrupted_load(&shared.store)
        .map_err(|e| LinkError::Commit(e.to_string()))?
        .is_some()
    {
        forget_mark(shared)?;
    }
    Ok(())
}

/// Runs `args` as `client` (with `armed` on its commit, if any) and waits until it is
/// durable. Blocks.
fn run_durably(
    shared: &Shared,
    client: &mut Client,
    args: &[&str],
    armed: Option<Armed>,
) -> Result<(), LinkError> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let out = match armed {
        Some(a) => repl_mark::with_armed(a, || crate::cmd::execute(shared, client, args)),
        None => crate::cmd::execute(shared, client, args),
    };
    let Outcome::Reply(r, t) = out else {
        return Err(LinkError::Commit("the command did not run".into()));
    };
    if let Some(e) = r.error_message() {
        return Err(LinkError::Commit(e.into_owned()));
    }
    wait_durable(shared, t.0)
}

/// Waits until commit `ticket` is durable. Blocks.
fn wait_durable(shared: &Shared, ticket: u64) -> Result<(), LinkError> {
    shared
        .store
        .commits
        .wait_blocking(&shared.store, ticket)
        .map_err(|e| LinkError::Commit(e.to_string()))
}

/// Deletes the durable mark (M3) and the loading record (M4), and waits for it.
fn forget_mark(shared: &Shared) -> Result<(), LinkError> {
    let store = &shared.store;
    if matches!(repl_mark::read(store), Ok(None))
        && matches!(repl_mark::interrupted_load(store), Ok(None))
    {
        return Ok(());
    }
    wait_durable(shared, write_mark(shared, Armed::Forget))
}

/// Queues a commit that writes or deletes the mark alone; its ticket.
fn write_mark(shared: &Shared, armed: Armed) -> u64 {
    let store = &shared.store;
    let _writing = loop {
        match store.enter_write() {
            Some(g) => break g,
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    let mut txn = crate::store::Txn::exclusive(store, &[], now_ms());
    armed.add_to(txn.raw_batch(), &store.subs.sys);
    txn.commit().0
}

/// Stops the link task, if any, and waits for its end (L1). Blocks.
fn stop_link(shared: &Shared) {
    let task = shared.repl.replica.task.lock().take();
    if let Some(t) = task {
        let _ = t.stop.send(true);
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            let _ = h.block_on(t.handle);
        }
    }
}

/// A failover's step 2 (repl/failover.rs): this master becomes a replica of the target,
/// whose link will ask with `PSYNC ... FAILOVER`; its own replicas are disconnected so they
/// ask again and follow the stream's new id, as Redis's replicationSetMaster does. Blocks.
pub(crate) fn become_replica_for_failover(shared: &Arc<Shared>, host: String, port: u16) {
    stop_link(shared);
    start_link(shared, host.clone(), port);
    let ids: Vec<u64> = shared.repl.attached.lock().keys().copied().collect();
    let clients = shared.clients.lock();
    for id in ids {
        if let Some(c) = clients.get(&id) {
            c.kill();
        }
    }
    tracing::info!("connecting to the failover target {host}:{port}");
}

/// Makes this server a replica of `host:port` and starts its link.
fn start_link(shared: &Arc<Shared>, host: String, port: u16) {
    let l = &shared.repl.replica;
    *l.master.lock() = Some((host.clone(), port));
    let store = &shared.store;
    let cap = shared.config.read().params.uint("repl-backlog-size") as usize;
    if !store.repl.on() {
        store.repl.start(cap);
    }
    store.repl.set_proxy(true);
    store.replica.store(true, Ordering::Release);
    l.applied.store(store.repl.end(), Ordering::Relaxed);
    l.read_off.store(store.repl.end(), Ordering::Relaxed);
    l.set_state(State::Connect);
    if l.down_since.load(Ordering::Relaxed) == 0 {
        l.down_since.store(unix_secs(), Ordering::Relaxed);
    }
    let (stop, rx) = watch::channel(false);
    let handle = tokio::spawn(run_link(shared.clone(), host, port, rx));
    *l.task.lock() = Some(Task { stop, handle });
}

/// `REPLICAOF NO ONE` once the link stopped: Redis's `shiftReplicationId`, writes allowed.
fn promote(shared: &Shared) {
    let store = &shared.store;
    let end = store.repl.end();
    {
        let mut ids = shared.repl.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, super::new_replid());
        ids.second_offset = end as i64 + 1;
    }
    let l = &shared.repl.replica;
    *l.master.lock() = None;
    l.set_state(State::Connect);
    l.loading.store(false, Ordering::Release);
    store.repl.set_proxy(false);
    store.replica.store(false, Ordering::Release);
    if let Err(e) = forget_mark(shared) {
        tracing::error!(error = %e, "the replication position could not be deleted");
    }
}

/// The link: sessions, one second apart after a failure, until stopped.
async fn run_link(shared: Arc<Shared>, host: String, port: u16, mut stop: watch::Receiver<bool>) {
    let l = &shared.repl.replica;
    loop {
        let r = session(&shared, &host, port, &mut stop).await;
        if l.up() {
            l.down_since.store(unix_secs(), Ordering::Relaxed);
        }
        l.set_state(State::Connect);
        match r {
            Err(LinkError::Stopped) => return,
            Err(e) => {
                tracing::warn!(master = %format!("{host}:{port}"), error = %e, "replication link down; retrying in 1 s")
            }
            Ok(()) => {}
        }
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One connection to the master: the socket and what was read but not used yet.
struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Conn {
    /// Reads more into `buf`; fails at the end of the stream, a timeout or a stop.
    async fn fill(&mut self, stop: &mut watch::Receiver<bool>) -> Result<usize, LinkError> {
        if self.buf.capacity() - self.buf.len() < 16 << 10 {
            self.buf.reserve(64 << 10);
        }
        tokio::select! {
            r = self.sock.read_buf(&mut self.buf) => match r? {
                0 => Err(LinkError::Io(std::io::ErrorKind::UnexpectedEof.into())),
                n => Ok(n),
            },
            _ = tokio::time::sleep(self.timeout) => Err(LinkError::Timeout(self.timeout.as_secs())),
            _ = stop.changed() => Err(LinkError::Stopped),
        }
    }

    /// The next line (without its end), skipping the bare newlines a master sends to keep
    /// a waiting replica's link alive.
    async fn line(&mut self, stop: &mut watch::Receiver<bool>) -> Result<String, LinkError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.is_empty() {
                    continue;
                }
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if self.buf.len() > 64 << 10 {
                return Err(LinkError::Protocol("a reply line over 64 KiB".into()));
            }
            self.fill(stop).await?;
        }
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), LinkError> {
        let mut out = Vec::new();
        encode_command(&mut out, args);
        self.sock.write_all(&out).await?;
        Ok(())
    }

    /// Sends `args` and reads the reply line.
    async fn ask(
        &mut self,
        args: &[&[u8]],
        stop: &mut watch::Receiver<bool>,
    ) -> Result<String, LinkError> {
        self.send(args).await?;
        self.line(stop).await
    }
}

/// Connects, shakes hands, synchronizes, then applies the stream until the link fails.
async fn session(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), LinkError> {
    let l = &shared.repl.replica;
    l.set_state(State::Connecting);
    let timeout = Duration::from_secs(param_int(shared, "repl-timeout").max(1) as u64);
    let sock = tokio::select! {
        r = tokio::time::timeout(timeout, TcpStream::connect((host, port))) => match r {
            Ok(s) => s?,
            Err(_) => return Err(LinkError::Timeout(timeout.as_secs())),
        },
        _ = stop.changed() => return Err(LinkError::Stopped),
    };
    let _ = sock.set_nodelay(true);
    let peer = sock
        .peer_addr()
        .map_or_else(|_| format!("{host}:{port}"), |a| a.to_string());
    let local = sock
        .local_addr()
        .map_or_else(|_| String::new(), |a| a.to_string());
    let mut c = Conn {
        sock,
        buf: Vec::with_capacity(64 << 10),
        timeout,
    };
    l.set_state(State::Handshake);
    // As Redis's syncWithMaster: an authentication error to PING is fine (AUTH follows).
    let pong = c.ask(&[b"PING"], stop).await?;
    if pong.starts_with('-')
        && !["-NOAUTH", "-NOPERM", "-ERR operation not permitted"]
            .iter()
            .any(|p| pong.starts_with(p))
    {
        return Err(LinkError::Refused {
            step: "PING",
            reply: pong,
        });
    }
    let auth = param(shared, "masterauth");
    if !auth.is_empty() {
        let user = param(shared, "masteruser");
        let r = if user.is_empty() {
            c.ask(&[b"AUTH", auth.as_bytes()], stop).await?
        } else {
            c.ask(&[b"AUTH", user.as_bytes(), auth.as_bytes()], stop)
                .await?
        };
        if r.starts_with('-') {
            return Err(LinkError::Refused {
                step: "AUTH",
                reply: r,
            });
        }
    }
    // As Redis: `replica-announce-port` (when set) instead of the port it listens on, and
    // `replica-announce-ip` when set.
    let announced = param_int(shared, "replica-announce-port");
    let port_arg = if announced > 0 {
        announced.to_string()
    } else {
        shared.config.read().port.to_string()
    };
    let r = c
        .ask(&[b"REPLCONF", b"listening-port", port_arg.as_bytes()], stop)
        .await?;
    if r.starts_with('-') {
        tracing::warn!(reply = %r, "the master refused REPLCONF listening-port (going on)");
    }
    let ip = param(shared, "replica-announce-ip");
    if !ip.is_empty() {
        let r = c
            .ask(&[b"REPLCONF", b"ip-address", ip.as_bytes()], stop)
            .await?;
        if r.starts_with('-') {
            tracing::warn!(reply = %r, "the master refused REPLCONF ip-address (going on)");
        }
    }
    let r = c
        .ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"], stop)
        .await?;
    if r.starts_with('-') {
        tracing::warn!(reply = %r, "the master refused REPLCONF capa (going on)");
    }
    // As a Redis replica (PSYNC2): ask to continue whatever stream this data set is.
    let (replid, from) = {
        let ids = shared.repl.ids.lock();
        (ids.replid.clone(), shared.store.repl.end() + 1)
    };
    let from_arg = from.to_string();
    // A master handing over (repl/failover.rs) asks the target to take its role.
    let failing_over = shared.repl.failover.phase() == super::failover::Phase::InProgress;
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), from_arg.as_bytes()];
    if failing_over {
        psync.push(b"FAILOVER");
    }
    let r = c.ask(&psync, stop).await?;
    let words: Vec<&str> = r.split_whitespace().collect();
    if failing_over {
        let accepted = matches!(words.first(), Some(&"+FULLRESYNC") | Some(&"+CONTINUE"));
        super::failover::target_answered(shared, accepted);
    }
    match words.as_slice() {
        ["+FULLRESYNC", id, offset] => {
            let offset: u64 = offset
                .parse()
                .map_err(|_| LinkError::Protocol(format!("bad FULLRESYNC reply: {r}")))?;
            tracing::info!(replid = %id, offset, "full resynchronization from {peer}");
            full_sync(shared, &mut c, id, offset, stop).await?;
        }
        ["+CONTINUE", rest @ ..] => {
            if let Some(new) = rest.first().filter(|n| **n != replid) {
                // The master's stream got a new id (it was promoted): the old id stays
                // valid up to here, as Redis's replica does.
                let mut ids = shared.repl.ids.lock();
                ids.replid2 = std::mem::replace(&mut ids.replid, (*new).to_string());
                ids.second_offset = from as i64;
            }
            l.partial_syncs.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                offset = from,
                "partial resynchronization accepted by {peer}"
            );
        }
        _ => {
            return Err(LinkError::Refused {
                step: "PSYNC",
                reply: r,
            })
        }
    }
    stream(shared, &mut c, &peer, &local, stop).await
}

/// Receives the payload into a file under `dir`, checks it is a whole RDB file, then
/// replaces the data set with it (L4).
async fn full_sync(
    shared: &Arc<Shared>,
    c: &mut Conn,
    replid: &str,
    offset: u64,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), LinkError> {
    let l = &shared.repl.replica;
    l.set_state(State::Sync);
    l.sync_read.store(0, Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    let header = c.line(stop).await?;
    let dir = shared.config.read().dir.clone();
    let path = dir.join(format!(
        "temp-{}-{}.rdb",
        unix_secs(),
        crate::shared::random_u64() % 1_000_000
    ));
    let r = receive(l, c, &header, &path, stop).await;
    let bytes = match r {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
    };
    let received = t0.elapsed();
    let shared2 = shared.clone();
    let path2 = path.clone();
    let mark = Mark {
        replid: replid.to_string(),
        offset,
        db: 0,
    };
    let r = tokio::task::spawn_blocking(move || replace_data(&shared2, &path2, mark))
        .await
        .map_err(|e| LinkError::Local(e.to_string()))
        .and_then(|r| r);
    let _ = std::fs::remove_file(&path);
    let loaded = r?;
    {
        let mut ids = shared.repl.ids.lock();
        ids.replid = replid.to_string();
        ids.replid2 = super::NO_REPLID.to_string();
        ids.second_offset = -1;
    }
    shared.store.repl.reset_to(offset);
    l.db.store(0, Ordering::Relaxed);
    l.applied.store(offset, Ordering::Relaxed);
    l.read_off.store(offset, Ordering::Relaxed);
    l.loading.store(false, Ordering::Release);
    l.full_syncs.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        bytes,
        keys = loaded.keys,
        functions = loaded.functions,
        receive_ms = received.as_millis() as u64,
        load_ms = loaded.millis as u64,
        "MASTER <-> REPLICA sync: finished with success"
    );
    Ok(())
}

/// Receives the payload after `header` (`$<len>` or `$EOF:<mark>`) into `path`; its size.
async fn receive(
    l: &Link,
    c: &mut Conn,
    header: &str,
    path: &PathBuf,
    stop: &mut watch::Receiver<bool>,
) -> Result<u64, LinkError> {
    use std::io::Write;
    let Some(spec) = header.strip_prefix('$') else {
        return Err(LinkError::Payload(format!(
            "expected the payload's length, got '{}'",
            header.chars().take(64).collect::<String>()
        )));
    };
    let eof_mark = spec.strip_prefix("EOF:").map(|m| m.as_bytes().to_vec());
    let len: Option<u64> = match &eof_mark {
        Some(m) if m.len() == 40 => None,
        Some(_) => return Err(LinkError::Payload("an EOF mark not 40 bytes long".into())),
        None => Some(
            spec.parse()
                .map_err(|_| LinkError::Payload(format!("bad payload length '{spec}'")))?,
        ),
    };
    l.sync_total
        .store(len.map_or(-1, |n| n as i64), Ordering::Relaxed);
    let io = |source| LinkError::Local(format!("{}: {source}", path.display()));
    let mut f =
        std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(io)?);
    let mut written = 0u64;
    // The last 40 bytes written (for the EOF mark).
    let mut tail: Vec<u8> = Vec::with_capacity(80);
    loop {
        if c.buf.is_empty() {
            c.fill(stop).await?;
            l.last_io.store(unix_secs(), Ordering::Relaxed);
        }
        let take = match len {
            Some(n) => ((n - written) as usize).min(c.buf.len()),
            None => c.buf.len(),
        };
        f.write_all(&c.buf[..take]).map_err(io)?;
        if eof_mark.is_some() {
            tail.extend_from_slice(&c.buf[take.saturating_sub(40)..take]);
            if tail.len() > 40 {
                tail.drain(..tail.len() - 40);
            }
        }
        c.buf.drain(..take);
        written += take as u64;
        l.sync_read.store(written, Ordering::Relaxed);
        match (&len, &eof_mark) {
            (Some(n), _) if written == *n => break,
            (None, Some(m)) if tail == *m => {
                // The mark is not part of the file.
                written -= 40;
                f.flush().map_err(io)?;
                f.get_ref().set_len(written).map_err(io)?;
                break;
            }
            _ => {}
        }
    }
    f.flush().map_err(io)?;
    f.get_ref().sync_all().map_err(io)?;
    Ok(written)
}

/// Checks `path` is a whole RDB file (every item decodes, the checksum matches), then
/// replaces the data set with it and records the mark (L4, M3). Blocks.
fn replace_data(
    shared: &Shared,
    path: &std::path::Path,
    mark: Mark,
) -> Result<crate::transfer::load::Loaded, LinkError> {
    validate(path)?;
    let l = &shared.repl.replica;
    l.loading.store(true, Ordering::Release);
    let mut client = master_client(shared, "sync".into());
    // The loading record is durable before the data set changes (M4), whether or not the
    // flush below has anything to delete; the flush deletes the mark in its commit (M3).
    // Functions go too (FLUSHALL keeps them).
    wait_durable(
        shared,
        write_mark(shared, Armed::Loading(mark.replid.clone())),
    )?;
    for args in [&["FLUSHALL"][..], &["FUNCTION", "FLUSH"][..]] {
        let armed = Armed::Loading(mark.replid.clone());
        run_durably(shared, &mut client, args, Some(armed))?;
    }
    let loaded = crate::transfer::load::load(shared, path)?;
    wait_durable(shared, write_mark(shared, Armed::Loaded(mark)))?;
    Ok(loaded)
}

/// Reads every item of `path`: an error for a truncated or damaged file.
fn validate(path: &std::path::Path) -> Result<(), LinkError> {
    use crate::rdb::file::{Item, RdbReader};
    let f = std::fs::File::open(path).map_err(|e| LinkError::Local(e.to_string()))?;
    let mut r = RdbReader::new(std::io::BufReader::with_capacity(1 << 20, f))
        .map_err(|e| LinkError::Payload(e.to_string()))?;
    loop {
        match r.next_item() {
            Ok(Item::Eof { .. }) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(LinkError::Payload(e.to_string())),
        }
    }
}

/// The client the master's commands run as.
fn master_client(shared: &Shared, addr: String) -> Client {
    let id = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let mut info = ClientInfo::detached(id);
    info.addr = addr;
    info.role = std::sync::atomic::AtomicU8::new(crate::shared::ROLE_MASTER);
    let mut c = Client::new(Arc::new(info), true);
    c.master = true;
    c.select(shared.repl.replica.db.load(Ordering::Relaxed) as usize);
    c
}

/// Applies the master's stream until the link fails or is stopped (L2, L3); acknowledges
/// every second and when asked.
async fn stream(
    shared: &Arc<Shared>,
    c: &mut Conn,
    peer: &str,
    local: &str,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), LinkError> {
    let l = &shared.repl.replica;
    let mut client = master_client(shared, peer.to_string());
    let info = client.info.clone();
    let _ = local;
    shared.clients.lock().insert(info.id, info.clone());
    l.set_state(State::Connected);
    l.last_io.store(unix_secs(), Ordering::Relaxed);
    l.read_off.store(
        shared.store.repl.end() + c.buf.len() as u64,
        Ordering::Relaxed,
    );
    tracing::info!("MASTER <-> REPLICA sync: the link with {peer} is up");
    let r = apply_loop(shared, c, &mut client, stop).await;
    shared.clients.lock().remove(&info.id);
    l.db.store(client.db as u64, Ordering::Relaxed);
    r
}

async fn apply_loop(
    shared: &Arc<Shared>,
    c: &mut Conn,
    client: &mut Client,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), LinkError> {
    let l = &shared.repl.replica;
    let mut parser = RequestParser::default();
    let limits = RequestLimits::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let killed = client.info.clone();
    loop {
        if !c.buf.is_empty() {
            apply_batch(shared, c, client, &mut parser, &limits).await?;
        }
        if killed.killed.load(Ordering::Acquire) {
            return Err(LinkError::Local("the master's client was killed".into()));
        }
        let need_more = c.buf.capacity() - c.buf.len() < 16 << 10;
        if need_more {
            c.buf.reserve(64 << 10);
        }
        tokio::select! {
            r = c.sock.read_buf(&mut c.buf) => {
                let n = r?;
                if n == 0 {
                    return Err(LinkError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                }
                l.read_off.fetch_add(n as u64, Ordering::Relaxed);
                l.last_io.store(unix_secs(), Ordering::Relaxed);
            }
            _ = tick.tick() => {
                let idle = unix_secs().saturating_sub(l.last_io.load(Ordering::Relaxed));
                if idle > c.timeout.as_secs() {
                    return Err(LinkError::Timeout(c.timeout.as_secs()));
                }
                send_ack(c, shared.store.repl.end()).await?;
            }
            _ = killed.kill.notified() => {
                return Err(LinkError::Local("the master's client was killed".into()));
            }
            _ = stop.changed() => return Err(LinkError::Stopped),
        }
    }
}

async fn send_ack(c: &mut Conn, offset: u64) -> Result<(), LinkError> {
    let o = offset.to_string();
    c.send(&[b"REPLCONF", b"ACK", o.as_bytes()]).await
}

/// Applies the whole commands in `c.buf`, waits until their commits are durable, then
/// counts them into the offset and this server's stream (L3).
async fn apply_batch(
    shared: &Arc<Shared>,
    c: &mut Conn,
    client: &mut Client,
    parser: &mut RequestParser,
    limits: &RequestLimits,
) -> Result<(), LinkError> {
    let l = &shared.repl.replica;
    let store = &shared.store;
    let base = store.repl.end();
    let mut at = 0usize;
    let mut done = 0usize;
    let mut last = 0u64;
    client.clock.round();
    let replid = shared.repl.ids.lock().replid.clone();
    loop {
        let (args, used) = match parser.parse(&c.buf[at..], limits) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(LinkError::Protocol(e.to_string())),
        };
        at += used;
        if args.is_empty() {
            continue;
        }
        if args.len() >= 2
            && args[0].eq_ignore_ascii_case(b"REPLCONF")
            && args[1].eq_ignore_ascii_case(b"GETACK")
        {
            // Everything before it, durable, is acknowledged (P2); it counts after.
            settle(shared, last).await?;
            publish(shared, &c.buf[done..at - used]);
            done = at - used;
            send_ack(c, store.repl.end()).await?;
            l.applied.store(base + at as u64, Ordering::Relaxed);
            continue;
        }
        let mark = Mark {
            replid: replid.clone(),
            offset: base + at as u64,
            db: db_after(client, &args),
        };
        last = last.max(run(shared, client, args, mark).await?);
        l.applied.store(base + at as u64, Ordering::Relaxed);
    }
    settle(shared, last).await?;
    publish(shared, &c.buf[done..at]);
    c.buf.drain(..at);
    Ok(())
}

/// The database selected once `args` ran (EXEC: the last SELECT it queued).
fn db_after(client: &Client, args: &[Vec<u8>]) -> usize {
    let select = |a: &[Vec<u8>]| {
        (a.len() == 2 && a[0].eq_ignore_ascii_case(b"SELECT"))
            .then(|| std::str::from_utf8(&a[1]).ok()?.parse::<usize>().ok())
            .flatten()
    };
    if let Some(db) = select(args) {
        return db;
    }
    if args[0].eq_ignore_ascii_case(b"EXEC") {
        if let Some(db) = client.multi.iter().flatten().rev().find_map(|a| select(a)) {
            return db;
        }
    }
    client.db
}

/// Adds applied, durable bytes to this server's stream (R4).
fn publish(shared: &Shared, bytes: &[u8]) {
    let store = &shared.store;
    if store.repl.on() {
        store.repl.append_raw(bytes);
    } else {
        let end = store.repl.end() + bytes.len() as u64;
        store.repl.reset_to(end);
    }
}

/// Waits until commit `ticket` is durable; a failure drops the link and makes the next
/// synchronization a full one (the data set lacks a write of the stream).
async fn settle(shared: &Shared, ticket: u64) -> Result<(), LinkError> {
    match shared.store.commits.wait(&shared.store, ticket).await {
        Ok(()) => Ok(()),
        Err(e) => {
            shared.repl.ids.lock().replid = super::new_replid();
            Err(LinkError::Commit(e.to_string()))
        }
    }
}

/// Runs one command of the stream (its commits carry `mark`, M1); the ticket to wait for.
async fn run(
    shared: &Arc<Shared>,
    client: &mut Client,
    args: Vec<Vec<u8>>,
    mark: Mark,
) -> Result<u64, LinkError> {
    let store = &shared.store;
    let mut req = args;
    loop {
        let out = repl_mark::with_armed(Armed::Put(mark.clone()), || {
            crate::cmd::execute(shared, client, req)
        });
        match out {
            Outcome::Reply(r, t) => {
                if let Some(e) = r.error_message() {
                    tracing::debug!(error = %e, "a command of the master's stream failed here");
                }
                return Ok(t.0);
            }
            Outcome::Paused(until, a) => {
                let wait = until.saturating_sub(now_ms()).clamp(1, 100);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                req = a;
            }
            Outcome::After(t, a) => {
                let _ = store.commits.wait(store, t.0).await;
                req = a;
            }
            Outcome::AfterCount(a) => {
                store.wait_counted().await;
                req = a;
            }
            Outcome::AfterRebuild(a) => {
                store.wait_rebuilt().await;
                req = a;
            }
            Outcome::Blocking(f) => {
                tokio::task::spawn_blocking(f)
                    .await
                    .map_err(|e| LinkError::Local(e.to_string()))?;
                return Ok(0);
            }
            _ => return Ok(0),
        }
    }
}
