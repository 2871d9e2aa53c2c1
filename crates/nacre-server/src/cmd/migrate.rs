//! MIGRATE: moves keys to another server (nacre-server or Redis 7.0) as Redis's
//! `migrateCommand` does: `AUTH` and `SELECT` first, then one `RESTORE` per key with its
//! remaining TTL and its `DUMP` payload, all pipelined; the keys the target acknowledged are
//! deleted here unless `COPY`; a key whose `RESTORE` failed stays.
//!
//! The difference from Redis, which blocks the whole server while it talks to the target:
//! no transaction is held across network I/O. The keys are read (and watched, as `WATCH`
//! does) in one short transaction, the exchange runs on a blocking thread, and a second
//! transaction deletes an acknowledged key only if its watch saw no write since it was read.
//! A key another client wrote meanwhile keeps its new value here (the target has the value
//! that was sent). For the same reason MIGRATE does not move keys from inside `MULTI`/`EXEC`
//! or a script (see [`in_exec`]).
//!
//! Connections to targets are cached per `host:port` for 10 seconds, at most 64, as Redis
//! caches them (`INFO` `migrate_cached_sockets`); one in use is out of the cache meanwhile.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nacre_resp::Reply;
use parking_lot::Mutex;

use super::args::{int, is};
use super::registry::{cmd, Command, KeyList, Keys, Run::Conn};
use super::{err, ok, syntax, Outcome};
use crate::client::Client;
use crate::shared::{now_ms, Shared};
use crate::store::txn::{Ticket, Txn};
use crate::store::Store;
use crate::types::whole;

/// How long an idle cached connection is kept (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Cached connections at most (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
const CACHE_ITEMS: usize = 64;
/// Bytes written per timed write, as Redis writes the pipeline.
const CHUNK: usize = 64 * 1024;
/// The longest reply line read from a target.
const MAX_LINE: usize = 64 * 1024;
/// A cached connection's database before a `SELECT` succeeds on it.
const UNKNOWN_DB: i64 = -1;
/// The longest timeout honoured (Redis's is a C `long` of milliseconds).
const MAX_TIMEOUT_MS: i64 = u32::MAX as i64;

/// Why a migration failed, as its reply says it.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The target's address does not resolve (Redis's only failure to connect: a refused
    /// or slow connection shows as a failed write).
    #[error("IOERR error or timeout connecting to the client")]
    Connect,
    /// Sending the pipeline failed or timed out.
    #[error("IOERR error or timeout writing to target instance")]
    Write,
    /// Reading the target's replies failed or timed out.
    #[error("IOERR error or timeout reading to target instance")]
    Read,
    /// The target answered `AUTH`, `SELECT` or a `RESTORE` with this error line.
    #[error("ERR Target instance replied with error: {0}")]
    Target(String),
}

impl From<MigrateError> for Reply {
    fn from(e: MigrateError) -> Reply {
        // A target's line may carry a lone CR: errors are one line.
        Reply::Error(e.to_string().replace(['\r', '\n'], " "))
    }
}

/// A parsed `MIGRATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Target host, as given.
    pub host: Vec<u8>,
    /// Target port, as given (read as C's `atoi` reads it).
    pub port: Vec<u8>,
    /// The target's database.
    pub db: i64,
    /// Timeout of each step (connect, each written chunk, each reply line).
    pub timeout: Duration,
    /// `COPY`: keep the local keys.
    pub copy: bool,
    /// `REPLACE`: `RESTORE ... REPLACE` on the target.
    pub replace: bool,
    /// `AUTH2`'s user name.
    pub user: Option<Vec<u8>>,
    /// `AUTH`/`AUTH2`'s password: `AUTH` is sent first when there is one.
    pub password: Option<Vec<u8>>,
    /// The keys to move, in order (a key named twice is sent twice, as Redis sends it).
    pub keys: Vec<Vec<u8>>,
}

/// Parses `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key...]` with Redis's checks in Redis's order: the
/// options, then the timeout, then the database.
pub fn parse(args: &[Vec<u8>]) -> Result<Request, Reply> {
    let mut req = Request {
        host: args[1].clone(),
        port: args[2].clone(),
        db: 0,
        timeout: Duration::ZERO,
        copy: false,
        replace: false,
        user: None,
        password: None,
        keys: vec![args[3].clone()],
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = &args[j];
        if is(a, "copy") {
            req.copy = true;
        } else if is(a, "replace") {
            req.replace = true;
        } else if is(a, "auth") {
            if more == 0 {
                return Err(syntax());
            }
            req.password = Some(args[j + 1].clone());
            j += 1;
        } else if is(a, "auth2") {
            if more < 2 {
                return Err(syntax());
            }
            req.user = Some(args[j + 1].clone());
            req.password = Some(args[j + 2].clone());
            j += 2;
        } else if is(a, "keys") {
            if !args[3].is_empty() {
                return Err(err("When using MIGRATE KEYS option, the key argument must be set to the empty string"));
            }
            req.keys = args[j + 1..].to_vec();
            break;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let timeout = int(&args[5])?;
    req.db = int(&args[4])?;
    let ms = if timeout <= 0 { 1000 } else { timeout };
    req.timeout = Duration::from_millis(ms.min(MAX_TIMEOUT_MS) as u64);
    Ok(req)
}

/// Keys of `MIGRATE`, as Redis finds them: the key argument, unless the word `KEYS` stands
/// where its key spec searches for it (from the second-to-last argument back), in which case
/// Redis's `migrateGetKeys` walks the options (none when the key argument is not empty).
pub fn migrate_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<KeyList, Reply> {
    let keyword = (2..args.len().saturating_sub(1)).any(|i| is(&args[i], "keys"));
    if !keyword {
        return Ok(vec![(db, args[3].clone())]);
    }
    let mut i = 6;
    while i < args.len() {
        let a = &args[i];
        if is(a, "keys") {
            if !args[3].is_empty() {
                return Ok(Vec::new());
            }
            return Ok(args[i + 1..].iter().map(|k| (db, k.clone())).collect());
        }
        if is(a, "auth") {
            i += 1;
        } else if is(a, "auth2") {
            i += 2;
        }
        i += 1;
    }
    Ok(vec![(db, args[3].clone())])
}

/// `MIGRATE`: parsed here; read, sent and deleted on a blocking thread ([`run`]).
pub fn migrate(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let req = match parse(args) {
        Ok(r) => r,
        Err(e) => return Outcome::Reply(e, Ticket(0)),
    };
    let shared = shared.handle();
    let (db, id) = (client.db, client.info.id);
    Outcome::Blocking(Box::new(move || run(&shared, db, id, &req)))
}

/// `MIGRATE` queued in `MULTI`, run by `EXEC` inside its transaction (which holds the keys):
/// Redis's argument errors and `NOKEY`; with keys to move, an error, since moving them would
/// hold the transaction's locks while waiting for the target.
pub fn in_exec(txn: &mut Txn<'_>, db: usize, args: &[Vec<u8>]) -> Reply {
    let req = match parse(args) {
        Ok(r) => r,
        Err(e) => return e,
    };
    for key in &req.keys {
        match txn.get(db, key) {
            Ok(Some(_)) => {
                return err("MIGRATE can't move keys inside MULTI/EXEC: the transaction's keys would stay locked while it waits for the target")
            }
            Ok(None) => {}
            Err(e) => return e.into(),
        }
    }
    Reply::Simple("NOKEY".into())
}

/// One key read for migration: its name, `DUMP` payload and expiry (0: none).
struct Item {
    key: Vec<u8>,
    payload: Vec<u8>,
    expire_at: u64,
}

/// The watches MIGRATE holds on the keys it read, released when dropped.
struct Watches<'s> {
    store: &'s Store,
    db: usize,
    /// Per key read (in the order of the items): its watch epoch when read.
    epochs: Vec<u64>,
    keys: Vec<Vec<u8>>,
}

impl Drop for Watches<'_> {
    fn drop(&mut self) {
        for k in &self.keys {
            self.store.unwatch(self.db, k);
        }
    }
}

/// Reads the keys that exist in one transaction, watching each; the items, their watches,
/// and the ticket the values wait for before they may leave the server (nothing not yet
/// durable is sent).
fn read<'s>(
    store: &'s Store,
    db: usize,
    keys: &[Vec<u8>],
) -> Result<(Vec<Item>, Watches<'s>, Ticket), Reply> {
    let refs: Vec<(usize, &[u8])> = keys.iter().map(|k| (db, k.as_slice())).collect();
    let mut txn = store.txn(&refs, now_ms());
    let mut items = Vec::new();
    let mut watches = Watches {
        store,
        db,
        epochs: Vec::new(),
        keys: Vec::new(),
    };
    for key in keys {
        let Some((value, expire_at)) = whole::read(&mut txn, db, key)? else {
            continue;
        };
        watches.epochs.push(txn.watch(db, key));
        watches.keys.push(key.clone());
        items.push(Item {
            key: key.clone(),
            payload: crate::rdb::value::encode(&value),
            expire_at,
        });
    }
    let ticket = txn.read_ticket();
    drop(txn);
    Ok((items, watches, ticket))
}

/// Runs a parsed `MIGRATE` of client `client`'s database `db` to its end: its reply, sent
/// once what it deleted is durable.
fn run(shared: &Shared, db: usize, client: u64, req: &Request) -> Reply {
    let store = &shared.store;
    let (items, watches, ticket) = match read(store, db, &req.keys) {
        Ok(r) => r,
        Err(e) => return e,
    };
    if items.is_empty() {
        return Reply::Simple("NOKEY".into());
    }
    if ticket.0 != 0 {
        if let Err(e) = store.commits.wait_blocking(store, ticket.0) {
            return Reply::Error(e.reply());
        }
    }
    let (acked, failure) = exchange(req, &items);
    if !req.copy && !acked.is_empty() {
        if let Err(e) = delete(shared, client, &watches, &acked) {
            return e;
        }
    }
    drop(watches);
    match failure {
        Some(e) => e.into(),
        None => ok(),
    }
}

/// Deletes the acknowledged items (indices into the watched keys) that nobody wrote since
/// they were read, raising `del` and invalidating them for tracking clients (as written by
/// `client`); waits until the deletion is durable.
fn delete(
    shared: &Shared,
    client: u64,
    watches: &Watches<'_>,
    acked: &[usize],
) -> Result<(), Reply> {
    let store = &shared.store;
    let db = watches.db;
    let refs: Vec<(usize, &[u8])> = acked
        .iter()
        .map(|&i| (db, watches.keys[i].as_slice()))
        .collect();
    let mut txn = store.txn(&refs, now_ms());
    txn.mark_frees_space();
    if shared.notify_flags() != 0 && shared.pubsub.anyone() {
        txn.record_events();
    }
    for &i in acked {
        let key = &watches.keys[i];
        if txn.watch_epoch(db, key) != Some(watches.epochs[i]) || txn.get(db, key)?.is_none() {
            continue;
        }
        txn.set(db, key, None)?;
        txn.event(db, key, "del");
        // As Redis: replicas delete the keys that moved.
        txn.propagate(db, vec![b"DEL".to_vec(), key.clone()]);
    }
    let raised = txn.take_raised(0);
    let changed = super::tracking::changed(shared, &txn);
    let ticket = txn.commit();
    crate::notify::publish(shared, raised, ticket.0);
    super::tracking::invalidate(shared, &changed, client, ticket.0);
    store
        .commits
        .wait_blocking(store, ticket.0)
        .map_err(|e| Reply::Error(e.reply()))
}

/// A cached connection to a target.
struct Link {
    conn: BufReader<TcpStream>,
    /// The database last selected on it; -1: unknown. As in Redis, -1 is also a database
    /// number that needs no `SELECT` (`MIGRATE` to database -1 on a new connection restores
    /// into the target's current database).
    db: i64,
    last_use: Instant,
}

/// Cached connections by `host:port` (Redis's `server.migrate_cached_sockets`: one per
/// process, as the server is).
static CACHE: Mutex<BTreeMap<Vec<u8>, Link>> = parking_lot::const_mutex(BTreeMap::new());
/// Whether the thread that closes idle cached connections runs (changed under `CACHE`'s
/// lock, so a connection cached while it stops is seen by the next one).
static PRUNING: AtomicBool = AtomicBool::new(false);

/// Connections cached now (`INFO` `migrate_cached_sockets`).
pub fn cached_sockets() -> usize {
    CACHE.lock().len()
}

/// Caches `link` under `name`, closing a random one when the cache is full, and makes sure
/// idle ones are closed after [`CACHE_TTL`].
fn put_back(name: Vec<u8>, mut link: Link) {
    link.last_use = Instant::now();
    let mut cache = CACHE.lock();
    if !cache.contains_key(&name) && cache.len() >= CACHE_ITEMS {
        let skip = (crate::shared::random_u64() % cache.len() as u64) as usize;
        if let Some(victim) = cache.keys().nth(skip).cloned() {
            cache.remove(&victim);
        }
    }
    cache.insert(name, link);
    if !PRUNING.swap(true, Ordering::AcqRel) {
        let spawned = std::thread::Builder::new()
            .name("migrate-cache".into())
            .spawn(prune);
        if spawned.is_err() {
            PRUNING.store(false, Ordering::Release);
        }
    }
}

/// Closes cached connections idle for longer than [`CACHE_TTL`], once a second, until none
/// is left.
fn prune() {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let mut cache = CACHE.lock();
        cache.retain(|_, l| l.last_use.elapsed() <= CACHE_TTL);
        if cache.is_empty() {
            PRUNING.store(false, Ordering::Release);
            return;
        }
    }
}

/// The port Redis connects to for a port argument: C's `atoi` of it (leading blanks, a sign,
/// digits), as the service `getaddrinfo` is given, which takes a number past 65535 modulo
/// 65536; `None` for a negative one, which it does not resolve.
fn port_of(arg: &[u8]) -> Option<u16> {
    let s = arg.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: u64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        n = (n * 10 + u64::from(d - b'0')).min(u64::from(u32::MAX));
    }
    if neg && n != 0 {
        return None;
    }
    Some((n % 65536) as u16)
}

/// Why no connection was made.
enum NoLink {
    /// The target does not resolve.
    Unresolved,
    /// Connecting failed: Redis finds it when it writes the pipeline, and reports a failed
    /// write.
    Failed(io::Error),
}

/// A cached connection to the target, or a new one.
fn connect(name: &[u8], req: &Request) -> Result<Link, NoLink> {
    if let Some(link) = CACHE.lock().remove(name) {
        return Ok(link);
    }
    let Ok(host) = std::str::from_utf8(&req.host) else {
        return Err(NoLink::Unresolved);
    };
    let port = port_of(&req.port).ok_or(NoLink::Unresolved)?;
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return Err(NoLink::Unresolved);
    };
    let deadline = Instant::now() + req.timeout;
    let mut last = None;
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            last = Some(io::ErrorKind::TimedOut.into());
            break;
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(Link {
                    conn: BufReader::new(s),
                    db: UNKNOWN_DB,
                    last_use: Instant::now(),
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(NoLink::Unresolved, NoLink::Failed))
}

/// Whether a failed socket operation ran out of time (Redis does not retry those).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Writes `buf` in chunks, each within `timeout`.
fn write_all(s: &mut TcpStream, buf: &[u8], timeout: Duration) -> io::Result<()> {
    for chunk in buf.chunks(CHUNK) {
        let deadline = Instant::now() + timeout;
        let mut at = 0;
        while at < chunk.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            s.set_write_timeout(Some(left))?;
            match s.write(&chunk[at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Reads one reply line (without its CRLF) within `timeout`.
fn read_line(r: &mut BufReader<TcpStream>, timeout: Duration) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        r.get_ref().set_read_timeout(Some(left))?;
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let (n, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..n]);
        r.consume(n);
        if done {
            break;
        }
        if line.len() > MAX_LINE {
            return Err(io::ErrorKind::InvalidData.into());
        }
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(line)
}

/// The pipeline for one try: `AUTH`, `SELECT` (when `select`), then a `RESTORE` per item
/// not expired by now; the pipeline and the indices of the items it restores.
fn pipeline(req: &Request, items: &[Item], select: bool) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    if let Some(password) = &req.password {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = &req.user {
            auth.push(user);
        }
        auth.push(password);
        nacre_resp::encode_command(&mut buf, &auth);
    }
    if select {
        let db = req.db.to_string();
        nacre_resp::encode_command(&mut buf, &[b"SELECT", db.as_bytes()]);
    }
    let now = now_ms() as i64;
    let mut sent = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut ttl = 0;
        if item.expire_at != 0 {
            ttl = item.expire_at as i64 - now;
            if ttl < 0 {
                continue;
            }
            ttl = ttl.max(1);
        }
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", &item.key, ttl.as_bytes(), &item.payload];
        if req.replace {
            restore.push(b"REPLACE");
        }
        nacre_resp::encode_command(&mut buf, &restore);
        sent.push(i);
    }
    (buf, sent)
}

/// Sends the items to the target and reads its answers, trying once more on a fresh
/// connection when a cached one turns out closed (a socket error, not a timeout, before any
/// key was acknowledged), as Redis does. The items the target restored (indices), and what
/// went wrong, if anything.
fn exchange(req: &Request, items: &[Item]) -> (Vec<usize>, Option<MigrateError>) {
    let mut name = req.host.clone();
    name.push(b':');
    name.extend_from_slice(&req.port);
    let mut may_retry = true;
    loop {
        let mut link = match connect(&name, req) {
            Ok(l) => l,
            Err(NoLink::Unresolved) => return (Vec::new(), Some(MigrateError::Connect)),
            Err(NoLink::Failed(e)) => {
                if may_retry && !timed_out(&e) {
                    may_retry = false;
                    continue;
                }
                return (Vec::new(), Some(MigrateError::Write));
            }
        };
        let select = link.db != req.db;
        let (buf, sent) = pipeline(req, items, select);
        if let Err(e) = write_all(link.conn.get_mut(), &buf, req.timeout) {
            if may_retry && !timed_out(&e) {
                may_retry = false;
                continue;
            }
            return (Vec::new(), Some(MigrateError::Write));
        }
        // A failed AUTH or SELECT fails every key; each RESTORE's answer is read anyway.
        let mut first_error: Option<Vec<u8>> = None;
        let mut preamble_ok = true;
        let mut preamble = |link: &mut Link| -> io::Result<()> {
            let line = read_line(&mut link.conn, req.timeout)?;
            if line.first() == Some(&b'-') {
                preamble_ok = false;
                first_error.get_or_insert(line);
            }
            Ok(())
        };
        let mut read = Ok(());
        if req.password.is_some() {
            read = preamble(&mut link);
        }
        if select && read.is_ok() {
            read = preamble(&mut link);
        }
        if let Err(e) = read {
            if may_retry && !timed_out(&e) {
                may_retry = false;
                continue;
            }
            return (Vec::new(), Some(MigrateError::Read));
        }
        let mut acked = Vec::new();
        let mut socket_error = None;
        for (j, &i) in sent.iter().enumerate() {
            match read_line(&mut link.conn, req.timeout) {
                Err(e) => {
                    socket_error = Some((j, e));
                    break;
                }
                Ok(line) if line.first() == Some(&b'-') || !preamble_ok => {
                    first_error.get_or_insert(line);
                }
                Ok(_) => acked.push(i),
            }
        }
        let target = first_error.map(|l| {
            MigrateError::Target(
                String::from_utf8_lossy(l.get(1..).unwrap_or_default()).into_owned(),
            )
        });
        if let Some((j, e)) = socket_error {
            // The connection is dropped, not cached again.
            if target.is_none() && j == 0 && may_retry && !timed_out(&e) {
                may_retry = false;
                continue;
            }
            return (acked, Some(target.unwrap_or(MigrateError::Read)));
        }
        // After a target's error the selected database is not known.
        link.db = if target.is_none() { req.db } else { UNKNOWN_DB };
        put_back(name, link);
        return (acked, target);
    }
}

/// The MIGRATE command.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("migrate", -6, [WRITE MOVABLEKEYS], [KEYSPACE WRITE SLOW DANGEROUS], [], Keys::Custom(migrate_keys, 3, 3, 1), "generic", "2.6.0", "Atomically transfer a key from a Redis instance to another one.", Conn(migrate)),
];
