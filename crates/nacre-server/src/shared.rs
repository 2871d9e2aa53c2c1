//! What every connection shares: the keyspace, the configuration, the client registry and
//! the server's counters.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use tokio::sync::{broadcast, Notify};

use crate::config::Config;
use crate::store::open::StartReport;
use crate::store::Store;

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A small fast random source (xorshift), for sampling keys and members.
pub fn random_u64() -> u64 {
    use std::cell::Cell;
    static SEEDS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            (SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
                ^ SEEDS.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed))
                | 1,
        );
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

/// One connected client, as `CLIENT LIST` and `CLIENT KILL` see it.
pub struct ClientInfo {
    /// `CLIENT ID`.
    pub id: u64,
    /// The user it is authenticated as.
    pub user: Mutex<Vec<u8>>,
    /// Its queue of pushed messages, once it has one (pub/sub, client-side caching).
    pub push_tx: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Arc<crate::pubsub::Message>>>>,
    /// Peer address.
    pub addr: String,
    /// Local address.
    pub laddr: String,
    /// `CLIENT SETNAME`.
    pub name: Mutex<String>,
    /// Selected database.
    pub db: AtomicUsize,
    /// When it connected.
    pub since: Instant,
    /// When it last ran a command: nanoseconds after `since` (see [`ClientInfo::idle`]).
    pub last: AtomicU64,
    /// The last command's name.
    pub last_cmd: Mutex<(&'static str, Option<&'static str>)>,
    /// Bytes in its query buffer when its current request started, or left after its last
    /// round (`qbuf`).
    pub qbuf: AtomicUsize,
    /// Its query buffer's capacity (`qbuf` + `qbuf-free`), as its last round left it.
    pub qbuf_cap: AtomicUsize,
    /// Reply bytes not yet written to its socket, as its last round left them (`omem`).
    pub omem: AtomicUsize,
    /// Replies held until their commits are durable (`oll`).
    pub oll: AtomicUsize,
    /// Its reply buffer's capacity (with the query buffer's, `tot-mem`).
    pub out_cap: AtomicUsize,
    /// Whether it waits for room in its socket (`events=rw`).
    pub wants_write: AtomicBool,
    /// Asks the connection to resize its query buffer (see [`crate::conn::trim_cron`]).
    pub trim: Notify,
    /// Set by `CLIENT KILL`; the connection closes.
    pub killed: AtomicBool,
    /// Wakes the connection when killed.
    pub kill: Notify,
    /// RESP version.
    pub resp: AtomicUsize,
    /// `MONITOR` mode.
    pub monitor: AtomicBool,
    /// In `MULTI`.
    pub multi: AtomicBool,
    /// Keys watched.
    pub watching: AtomicUsize,
    /// `CLIENT NO-EVICT`.
    pub no_evict: AtomicBool,
    /// Channels subscribed to.
    pub subs: AtomicUsize,
    /// Patterns subscribed to.
    pub psubs: AtomicUsize,
    /// Bytes of pub/sub messages queued for it, not yet taken by its connection.
    pub pubsub_bytes: AtomicUsize,
    /// Whether it is parked on a blocking command.
    pub blocked: AtomicBool,
    /// How `CLIENT UNBLOCK` asked it to leave its blocking command (0: not asked, 1: as if
    /// timed out, 2: with an error); `unblock` wakes it.
    pub unblock_mode: std::sync::atomic::AtomicU8,
    /// Wakes a parked client for `CLIENT UNBLOCK`.
    pub unblock: Notify,
    /// What it is to replication: [`ROLE_NORMAL`], [`ROLE_MASTER`] (the link this replica
    /// applies its master's stream through) or [`ROLE_REPLICA`] (an attached replica).
    pub role: std::sync::atomic::AtomicU8,
}

/// A client that is neither of the below.
pub const ROLE_NORMAL: u8 = 0;
/// The client a replica applies its master's stream as.
pub const ROLE_MASTER: u8 = 1;
/// A replica attached to this server.
pub const ROLE_REPLICA: u8 = 2;

impl ClientInfo {
    /// Notes that it ran commands at `at`.
    pub fn ran_at(&self, at: Instant) {
        let ns = at.saturating_duration_since(self.since).as_nanos();
        self.last
            .store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// How long it has been since it last ran a command, at `now`.
    pub fn idle(&self, now: Instant) -> std::time::Duration {
        let last = std::time::Duration::from_nanos(self.last.load(Ordering::Relaxed));
        now.saturating_duration_since(self.since)
            .saturating_sub(last)
    }

    /// A client with no connection (commands run in-process, as in tests).
    pub fn detached(id: u64) -> ClientInfo {
        let now = Instant::now();
        ClientInfo {
            id,
            user: Mutex::new(b"default".to_vec()),
            push_tx: Mutex::new(None),
            addr: "in-process".into(),
            laddr: String::new(),
            name: Mutex::new(String::new()),
            db: AtomicUsize::new(0),
            since: now,
            last: AtomicU64::new(0),
            last_cmd: Mutex::new(("NULL", None)),
            qbuf: AtomicUsize::new(0),
            qbuf_cap: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            oll: AtomicUsize::new(0),
            out_cap: AtomicUsize::new(0),
            wants_write: AtomicBool::new(false),
            trim: Notify::new(),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            resp: AtomicUsize::new(2),
            monitor: AtomicBool::new(false),
            multi: AtomicBool::new(false),
            watching: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            subs: AtomicUsize::new(0),
            psubs: AtomicUsize::new(0),
            pubsub_bytes: AtomicUsize::new(0),
            blocked: AtomicBool::new(false),
            unblock_mode: std::sync::atomic::AtomicU8::new(0),
            unblock: Notify::new(),
            role: std::sync::atomic::AtomicU8::new(ROLE_NORMAL),
        }
    }

    /// Closes the connection (`CLIENT KILL`, shutdown, a lagging subscriber).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill.notify_one();
    }

    /// Redis's client type (`CLIENT KILL TYPE`, `CLIENT LIST TYPE`): `master`, `replica`,
    /// `pubsub` or `normal`.
    pub fn kind(&self) -> &'static str {
        match self.role.load(Ordering::Relaxed) {
            ROLE_MASTER => "master",
            ROLE_REPLICA if !self.monitor.load(Ordering::Relaxed) => "replica",
            _ if self.subs.load(Ordering::Relaxed) + self.psubs.load(Ordering::Relaxed) > 0 => {
                "pubsub"
            }
            _ => "normal",
        }
    }

    /// The `CLIENT LIST` / `CLIENT INFO` line.
    pub fn line(&self) -> String {
        let now = Instant::now();
        let mut flags = String::new();
        match self.role.load(Ordering::Relaxed) {
            ROLE_MASTER => flags.push('M'),
            ROLE_REPLICA => flags.push('S'),
            _ => {}
        }
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if self.multi.load(Ordering::Relaxed) {
            flags.push('x');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        let (subs, psubs) = (
            self.subs.load(Ordering::Relaxed),
            self.psubs.load(Ordering::Relaxed),
        );
        if subs + psubs > 0 {
            flags.push('P');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub=0 multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll={} omem={} tot-mem={} events={} cmd={} user={} redir=-1 resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.name.lock(),
            now.duration_since(self.since).as_secs(),
            self.idle(now).as_secs(),
            flags,
            self.db.load(Ordering::Relaxed),
            subs,
            psubs,
            if self.multi.load(Ordering::Relaxed) { 0 } else { -1 },
            self.qbuf.load(Ordering::Relaxed),
            self.qbuf_cap
                .load(Ordering::Relaxed)
                .saturating_sub(self.qbuf.load(Ordering::Relaxed)),
            self.oll.load(Ordering::Relaxed),
            self.omem.load(Ordering::Relaxed),
            self.qbuf_cap.load(Ordering::Relaxed) + self.out_cap.load(Ordering::Relaxed),
            if self.wants_write.load(Ordering::Relaxed) {
                "rw"
            } else {
                "r"
            },
            {
                let (name, sub) = *self.last_cmd.lock();
                crate::cmd::registry::full_name(name, sub)
            },
            String::from_utf8_lossy(&self.user.lock()),
            self.resp.load(Ordering::Relaxed),
        )
    }
}

/// A `SLOWLOG` entry.
pub struct SlowEntry {
    /// Entry id.
    pub id: u64,
    /// Unix seconds.
    pub at: u64,
    /// Duration in microseconds.
    pub micros: u64,
    /// The command (arguments shortened as Redis does).
    pub args: Vec<Vec<u8>>,
    /// Client address.
    pub addr: String,
    /// Client name.
    pub name: String,
}

/// Counters for `INFO stats`.
#[derive(Default)]
pub struct Counters {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Keyspace hits and misses.
    pub hits: AtomicU64,
    /// Keyspace misses.
    pub misses: AtomicU64,
    /// Bytes read from clients.
    pub net_in: AtomicU64,
    /// Bytes written to clients.
    pub net_out: AtomicU64,
    /// Bytes of replication stream sent to replicas (`total_net_repl_output_bytes`).
    pub net_repl_out: AtomicU64,
    /// Error replies.
    pub errors: AtomicU64,
}

/// The server's shared state.
pub struct Shared {
    /// Per-command counts (`INFO commandstats`).
    pub cmdstats: crate::cmdstats::Stats,
    /// The latency monitor.
    pub latency: crate::latency::Monitor,
    /// Replication: ids, attached replicas, the link to a master.
    pub repl: crate::repl::Replication,
    /// `run_id`: 40 hex digits, new at every start.
    pub run_id: String,
    /// The keyspace.
    pub store: Arc<Store>,
    /// Configuration (CONFIG SET changes it).
    pub config: RwLock<Config>,
    /// What the start found.
    pub start: StartReport,
    /// When the server started.
    pub started: Instant,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
    /// Users and permissions.
    pub acl: crate::acl::Users,
    /// Error replies by code (`INFO errorstats`).
    pub errorstats: Mutex<BTreeMap<String, u64>>,
    /// Client-side caching.
    pub tracking: crate::tracking::Tracking,
    /// `CLIENT PAUSE`: until when (ms), and whether every command waits (else writes).
    pub pause: Mutex<Option<(u64, bool)>>,
    /// Whether `pause` holds a pause: set and cleared under its lock, read without it, so
    /// that commands take no shared lock while nothing is paused.
    pub paused: AtomicBool,
    /// Wakes paused clients (`CLIENT UNPAUSE`).
    pub unpaused: Notify,
    /// Next client id.
    pub next_client: AtomicU64,
    /// Counters.
    pub counters: Counters,
    /// `SLOWLOG`.
    pub slowlog: Mutex<VecDeque<SlowEntry>>,
    /// Next slowlog id.
    pub slowlog_next: AtomicU64,
    /// `MONITOR` feed.
    pub monitor: broadcast::Sender<Arc<Vec<u8>>>,
    /// Monitors connected.
    pub monitors: AtomicUsize,
    /// Set by `SHUTDOWN`.
    pub shutdown: Notify,
    /// Whether `SHUTDOWN` was asked for (and how: true to save a checkpoint).
    pub shutting_down: AtomicBool,
    /// Unix seconds of the last successful checkpoint.
    pub lastsave: AtomicU64,
    /// A checkpoint is being written.
    pub saving: AtomicBool,
    /// Outcome of the last checkpoint.
    pub last_save_ok: AtomicBool,
    /// `slowlog-log-slower-than` (µs; negative disables).
    pub slowlog_slower_than: std::sync::atomic::AtomicI64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: AtomicUsize,
    /// Clients parked by blocking commands.
    pub waiters: crate::waiters::Waiters,
    /// Pub/sub subscriptions.
    pub pubsub: crate::pubsub::PubSub,
    /// `notify-keyspace-events`, read without the config lock.
    pub notify: std::sync::atomic::AtomicU32,
    /// Itself, for work handed to other threads.
    pub me: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// Lua scripts: the cache and the runs in progress.
    pub scripts: crate::script::Scripts,
    /// Function libraries.
    pub functions: crate::script::functions::Functions,
    /// The accept loops of the listeners in use (`listen.rs`, L1).
    pub accepters: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Every client's task (`listen.rs`, L2).
    pub client_tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The sockets listened on, by the address asked for (`listen.rs`, L1).
    pub listening: Mutex<Vec<(String, std::net::TcpListener)>>,
}

impl Shared {
    /// Builds the shared state.
    pub fn new(store: Arc<Store>, config: Config, start: StartReport) -> Shared {
        let notify = config.notify_keyspace_events;
        let latency = crate::latency::Monitor::default();
        latency
            .threshold
            .store(config.latency_threshold_ms(), Ordering::Relaxed);
        let (monitor, _) = broadcast::channel(4096);
        Shared {
            store,
            config: RwLock::new(config),
            start,
            started: Instant::now(),
            clients: Mutex::new(BTreeMap::new()),
            next_client: AtomicU64::new(1),
            counters: Counters::default(),
            cmdstats: Default::default(),
            latency,
            repl: Default::default(),
            run_id: crate::repl::new_replid(),
            slowlog: Mutex::new(VecDeque::new()),
            slowlog_next: AtomicU64::new(0),
            monitor,
            monitors: AtomicUsize::new(0),
            shutdown: Notify::new(),
            shutting_down: AtomicBool::new(false),
            lastsave: AtomicU64::new(now_ms() / 1000),
            saving: AtomicBool::new(false),
            last_save_ok: AtomicBool::new(true),
            slowlog_slower_than: std::sync::atomic::AtomicI64::new(10_000),
            slowlog_max_len: AtomicUsize::new(128),
            waiters: Default::default(),
            pubsub: Default::default(),
            notify: std::sync::atomic::AtomicU32::new(notify),
            me: std::sync::OnceLock::new(),
            scripts: Default::default(),
            functions: Default::default(),
            acl: Default::default(),
            errorstats: Mutex::new(BTreeMap::new()),
            tracking: Default::default(),
            pause: Mutex::new(None),
            paused: AtomicBool::new(false),
            unpaused: Notify::new(),
            accepters: Mutex::new(Vec::new()),
            client_tasks: Mutex::new(Vec::new()),
            listening: Mutex::new(Vec::new()),
        }
        .with_password()
    }

    /// The default user takes `requirepass` as its password.
    fn with_password(self) -> Shared {
        let p = self.config.read().requirepass.clone();
        if p.is_some() {
            self.acl.set_default_password(p.as_deref());
        }
        self
    }

    /// Whether a command with `flags` waits for a `CLIENT PAUSE` or a failover's pause (F1 in
    /// repl/failover.rs) now: when to look again (ms; a failover's pause has no set end).
    pub fn paused_for(&self, flags: crate::cmd::Flags) -> Option<u64> {
        let writes = crate::cmd::Flags::WRITE | crate::cmd::Flags::MAY_REPLICATE;
        if self.repl.failover.pauses_writes() && flags.intersects(writes) {
            return Some(now_ms() + 50);
        }
        if !self.paused.load(Ordering::Acquire) {
            return None;
        }
        let mut g = self.pause.lock();
        let (until, all) = (*g)?;
        if now_ms() >= until {
            *g = None;
            self.paused.store(false, Ordering::Release);
            return None;
        }
        (all || flags.intersects(writes)).then_some(until)
    }

    /// The push queue of client `info`, if it has one.
    pub fn pubsub_queue(&self, info: &Arc<ClientInfo>) -> Option<crate::pubsub::Subscriber> {
        let tx = info.push_tx.lock().clone()?;
        Some(crate::pubsub::Subscriber {
            tx,
            info: info.clone(),
        })
    }

    /// Counts an error reply by its code (the first word within 31 bytes; `ERR` when it has
    /// none), as Redis's `INFO errorstats` does, for up to 128 codes.
    pub fn error_seen(&self, msg: &str) {
        let code = error_code(msg);
        let mut m = self.errorstats.lock();
        if let Some(n) = m.get_mut(code) {
            *n += 1;
        } else if m.len() < 128 {
            m.insert(code.to_string(), 1);
        }
    }

    /// The keyspace notification flags now.
    pub fn notify_flags(&self) -> u32 {
        self.notify.load(Ordering::Relaxed)
    }

    /// Shared state in an `Arc`, knowing itself.
    pub fn into_arc(self) -> Arc<Shared> {
        let a = Arc::new(self);
        let _ = a.me.set(Arc::downgrade(&a));
        a
    }

    /// An owning handle (the server holds the last one until it stops).
    pub fn handle(&self) -> Arc<Shared> {
        self.me
            .get()
            .and_then(std::sync::Weak::upgrade)
            .unwrap_or_else(|| unreachable!("Shared is built with into_arc"))
    }

    /// Records a command in the slow log if it took long enough.
    pub fn slowlog_add(&self, micros: u64, args: &[Vec<u8>], client: &ClientInfo) {
        let limit = self.slowlog_slower_than.load(Ordering::Relaxed);
        if limit < 0 || (micros as i64) < limit {
            return;
        }
        // As Redis: at most 32 arguments, each at most 128 bytes.
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i == 31 && args.len() > 32 {
                kept.push(format!("... ({} more arguments)", args.len() - 31).into_bytes());
                break;
            }
            if a.len() > 128 {
                let mut s = a[..128].to_vec();
                s.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                kept.push(s);
            } else {
                kept.push(a.clone());
            }
        }
        let mut log = self.slowlog.lock();
        log.push_front(SlowEntry {
            id: self.slowlog_next.fetch_add(1, Ordering::Relaxed),
            at: now_ms() / 1000,
            micros,
            args: kept,
            addr: client.addr.clone(),
            name: client.name.lock().clone(),
        });
        let max = self.slowlog_max_len.load(Ordering::Relaxed);
        log.truncate(max);
    }
}

/// An error reply's code: its first word if one ends within 31 bytes, else `ERR`. Cut on
/// bytes: a message may echo client bytes, and a space is always a character boundary.
fn error_code(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(i) if i > 0 => &msg[..i],
        _ => "ERR",
    }
}

#[cfg(test)]
mod tests {
    /// A message echoing multi-byte or invalid client bytes before its first space never
    /// splits a character.
    #[test]
    fn error_codes_of_any_bytes() {
        use super::error_code;
        assert_eq!(error_code("NOGROUP no such group"), "NOGROUP");
        assert_eq!(
            error_code("ERR unknown command 'EXEC\u{fffd}\u{fffd}'"),
            "ERR"
        );
        assert_eq!(error_code(&"\u{e9}".repeat(40)), "ERR");
        let e14 = "\u{e9}".repeat(14);
        assert_eq!(error_code(&format!("{e14} x")), e14);
        assert_eq!(error_code(""), "ERR");
    }
}
