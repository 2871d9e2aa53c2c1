//! Commands: the registry ([`registry`]), how one runs ([`execute`]) and the helpers their
//! handlers share. Each family lives in a file of its own.

pub mod acl;
pub mod args;
pub mod blocking;
pub mod cluster;
pub mod coll;
pub mod connection;
pub mod flags;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod keys;
pub mod keyspecs;
pub mod latency;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod multi;
pub mod pubsub;
pub mod registry;
pub mod replicaof;
pub mod replication;
pub mod server;
pub mod sets;
pub mod sort;
pub mod stream_groups;
pub mod streams;
pub mod strings;
pub mod tracking;
pub mod zsetops;
pub mod zsets;

use std::sync::atomic::Ordering;

use nacre_resp::Reply;

use crate::client::Client;
use crate::shared::Shared;
use crate::store::commits::OOM;
use crate::store::txn::{Ticket, Txn};
use crate::store::StoreError;
pub use registry::{lookup, lookup_bytes, Command, Flags, Local, Run};

/// A handler's outcome: a reply, or an error reply.
pub type CmdResult = Result<Reply, Reply>;

/// A keyspace command's context: its transaction and the client's database.
pub struct Ctx<'a, 's> {
    /// The transaction holding the command's keys.
    pub txn: &'a mut Txn<'s>,
    /// Selected database.
    pub db: usize,
    /// The server.
    pub shared: &'a Shared,
    /// The client's protocol version.
    pub resp: u8,
    /// Whether the client's user may read every key (SORT's `BY` and `GET` patterns): false
    /// only for commands that may use patterns, run by a user who may not.
    pub every_key: bool,
    /// Whether a script runs the command (`redis.call`): SORT then orders what it would
    /// leave in a set's arbitrary order, as Redis does.
    pub script: bool,
}

impl Ctx<'_, '_> {
    /// Says what replicas run for this command instead of the command as it came (in the
    /// client's database): what makes it deterministic (Redis's `rewriteClientCommandVector`).
    pub fn propagate(&mut self, args: &[&[u8]]) {
        if !self.txn.propagating() {
            return;
        }
        let args = args.iter().map(|a| a.to_vec()).collect();
        self.txn.propagate(self.db, args);
    }

    /// Raises keyspace event `name` on `key` of the client's database (as Redis's
    /// `notifyKeyspaceEvent`, where the change happens).
    pub fn notify(&mut self, key: &[u8], name: &'static str) {
        self.txn.event(self.db, key, name);
    }

    /// Deletes `key` if it exists, raising `del`; whether it existed (a store whose result
    /// is empty, as Redis's `dbDelete`).
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, Reply> {
        if self.txn.get(self.db, key)?.is_none() {
            return Ok(false);
        }
        self.txn.set(self.db, key, None)?;
        self.notify(key, "del");
        Ok(true)
    }
}

/// What the connection does after a command.
pub enum Outcome {
    /// Send this once `Ticket` is durable.
    Reply(Reply, Ticket),
    /// Send these, in order (subscription confirmations).
    Many(Vec<Reply>),
    /// Send this, then close the connection.
    Close(Reply),
    /// Reply after a while (`None`: only when the client goes; `WAIT` without replicas,
    /// `DEBUG SLEEP`), reading what the client sends meanwhile.
    Delay(Option<std::time::Duration>, Reply),
    /// Run on a blocking thread, then reply (`SAVE`, `DEBUG RELOAD`).
    Blocking(Box<dyn FnOnce() -> Reply + Send>),
    /// Wait until this ticket is durable, then run the request again (commands that read
    /// whole databases from the engine, which shows only durable writes).
    After(Ticket, Vec<Vec<u8>>),
    /// Wait until key counts are whole (after a crash, while they are counted in the
    /// background), then run the request again.
    AfterCount(Vec<Vec<u8>>),
    /// Wait until the engine has rebuilt its Global Index after a start, then run the
    /// request again (I1 in store/txn.rs: it walks records, and walks wait for that).
    AfterRebuild(Vec<Vec<u8>>),
    /// Wait for `CLIENT PAUSE` to end (its end, ms), then run the request again.
    Paused(u64, Vec<Vec<u8>>),
    /// Park until a write gives one of the request's keys something, or its timeout.
    Block(blocking::Request),
    /// Enter monitor mode.
    Monitor,
    /// Become an attached replica (`PSYNC`, `SYNC`): the connection serves the replication
    /// stream from now on.
    Replicate(Box<crate::repl::master::SyncStart>),
    /// `WAIT`: once the client's writes are in the replication stream, the number of replicas
    /// that acknowledged them, waiting for this many up to this long (`None`: forever).
    WaitReplicas(i64, Option<std::time::Duration>),
    /// Shut the server down (reply only on failure).
    Shutdown,
    /// Nothing (an empty request).
    Nothing,
}

impl From<StoreError> for Reply {
    fn from(e: StoreError) -> Reply {
        Reply::Error(format!("ERR {e}"))
    }
}

/// An error reply with Redis's `ERR ` prefix.
pub fn err(msg: impl AsRef<str>) -> Reply {
    Reply::Error(format!("ERR {}", msg.as_ref()))
}

/// Redis's wrong-type error.
pub fn wrongtype() -> Reply {
    Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

/// Redis's syntax error.
pub fn syntax() -> Reply {
    err("syntax error")
}

/// `+OK`.
pub fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// The wrong-arity error for `name`.
pub fn arity_error(name: &str) -> Reply {
    Reply::Error(arity_text(name))
}

fn arity_text(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// An error reply `ERR <msg>` whose message echoes client bytes: as text when they are
/// UTF-8, otherwise as a blob error, which carries them unchanged (RESP2 clients read it as
/// the same error line Redis sends).
pub fn err_bytes(msg: &[u8]) -> Reply {
    let mut line = b"ERR ".to_vec();
    line.extend_from_slice(msg);
    match String::from_utf8(line) {
        Ok(text) => Reply::Error(text),
        Err(e) => Reply::BlobError(e.into_bytes()),
    }
}

fn unknown_command(args: &[Vec<u8>]) -> Reply {
    // As Redis: the name cut to 128 bytes; arguments quoted while the list is under 128
    // bytes, each cut to what is left of them.
    let mut msg = b"unknown command '".to_vec();
    msg.extend(args[0].iter().take(128));
    msg.extend_from_slice(b"', with args beginning with: ");
    let mut list: Vec<u8> = Vec::new();
    for a in args[1..].iter() {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend(a.iter().take(room));
        list.extend_from_slice(b"' ");
    }
    msg.extend_from_slice(&list);
    err_bytes(&msg)
}

/// Checks a command's arity (positive: exact; negative: at least).
pub fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= arity.unsigned_abs() as usize
    }
}

/// Runs one request of `client`.
pub fn execute(shared: &Shared, client: &mut Client, args: Vec<Vec<u8>>) -> Outcome {
    if args.is_empty() {
        return Outcome::Nothing;
    }
    client.count(0);
    client.running = None;
    let out = dispatch(shared, client, &args);
    let micros = client.clock.lap();
    // Scripts feed MONITOR themselves, before the commands they run; as Redis, commands
    // refused before they run (unknown, wrong arity, not allowed) are not shown.
    let skip_monitor = client
        .running
        .is_none_or(|(c, _, rejected)| rejected || c.flags.contains(Flags::SKIP_MONITOR));
    if let Some((cmd, sub, rejected)) = client.running.take() {
        let failed = matches!(&out, Outcome::Reply(r, _) if r.is_error());
        client
            .cmdstats
            .record(cmd.name, sub, micros, rejected, failed);
        if micros >= 1000 {
            let event = if cmd.flags.contains(Flags::FAST) {
                "fast-command"
            } else {
                "command"
            };
            shared.latency.add(event, micros / 1000);
        }
    }
    // As Redis: a command that blocks is logged when it is served, not when it parks.
    if !matches!(out, Outcome::Block(_)) {
        shared.slowlog_add(micros, &args, &client.info);
    }
    if !skip_monitor {
        feed_monitor(shared, client, &args);
    }
    if let Outcome::Reply(r, _) = &out {
        if let Some(msg) = r.error_message() {
            client.count(3);
            shared.error_seen(&msg);
        }
    }
    out
}

/// A HELP subcommand's reply: its lines as status strings.
pub fn help_lines(lines: &[&str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Simple((*l).into())).collect())
}

/// Shows `client`'s command to MONITOR clients (unless it is one).
pub(crate) fn feed_monitor(shared: &Shared, client: &Client, args: &[Vec<u8>]) {
    if shared.monitors.load(Ordering::Relaxed) > 0 && !client.info.monitor.load(Ordering::Relaxed) {
        monitor_line(shared, client.db, &client.info.addr, args);
    }
}

/// Shows a command run in database `db` by `who` (an address, or `lua`) to MONITOR clients.
pub(crate) fn monitor_line(shared: &Shared, db: usize, who: &str, args: &[Vec<u8>]) {
    if shared.monitors.load(Ordering::Relaxed) == 0 {
        return;
    }
    let now = crate::shared::now_ms();
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        now / 1000,
        (now % 1000) * 1000,
        db,
        who
    );
    for a in args {
        line.push_str(" \"");
        for &b in a {
            match b {
                b'"' => line.push_str("\\\""),
                b'\\' => line.push_str("\\\\"),
                b'\n' => line.push_str("\\n"),
                b'\r' => line.push_str("\\r"),
                b'\t' => line.push_str("\\t"),
                0x20..=0x7e => line.push(b as char),
                _ => line.push_str(&format!("\\x{b:02x}")),
            }
        }
        line.push('"');
    }
    line.push_str("\r\n");
    let _ = shared.monitor.send(std::sync::Arc::new(line.into_bytes()));
}

/// A command refused before it runs, as Redis's `rejectCommand`: a transaction being queued
/// is marked failed, and a refused `EXEC` discards it, answering `EXECABORT`.
fn reject(shared: &Shared, client: &mut Client, cmd: &Command, error: String) -> Outcome {
    if let Some(r) = client.running.as_mut() {
        r.2 = true;
    }
    let reply = if cmd.name == "exec" {
        client.end_multi(shared);
        exec_abort(&error)
    } else {
        if client.multi.is_some() {
            client.multi_failed = true;
        }
        Reply::Error(error)
    };
    Outcome::Reply(reply, Ticket(0))
}

/// The reply of an `EXEC` refused for `error` (its transaction is discarded).
pub fn exec_abort(error: &str) -> Reply {
    let why = error.strip_prefix("ERR ").unwrap_or(error);
    Reply::Error(format!("EXECABORT Transaction discarded because of: {why}"))
}

fn dispatch(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let Some(cmd) = lookup_bytes(&args[0]) else {
        if client.multi.is_some() {
            client.multi_failed = true;
        }
        return Outcome::Reply(unknown_command(args), Ticket(0));
    };
    // A container's subcommand brings its own arity and flags (its handler answers a
    // subcommand it does not have).
    let sub = cmd.sub(args);
    *client.info.last_cmd.lock() = (cmd.name, sub.map(|s| s.name));
    client.running = Some((cmd, sub.map(|s| s.name), false));
    let flags = sub.map_or(cmd.flags, |s| s.flags);
    if !client.authed && !flags.contains(Flags::NO_AUTH) {
        return reject(
            shared,
            client,
            cmd,
            "NOAUTH Authentication required.".into(),
        );
    }
    match sub {
        Some(s) if !arity_ok(s.arity, args.len()) => {
            let name = registry::full_name(cmd.name, Some(s.name));
            return reject(shared, client, cmd, arity_text(&name));
        }
        None if !arity_ok(cmd.arity, args.len()) => {
            return reject(shared, client, cmd, arity_text(cmd.name));
        }
        _ => {}
    }
    let context = if client.multi.is_some() {
        "multi"
    } else {
        "toplevel"
    };
    // The master's stream runs unchecked, as Redis's master client does.
    if !client.master {
        if let Err(d) = acl::permit(shared, client, cmd, sub, args, context) {
            return reject(shared, client, cmd, acl::denied_reply(d, cmd, sub));
        }
        // A replica refuses writes (READONLY), commands while its link is down (MASTERDOWN)
        // and while it loads its master's data (LOADING), as Redis's processCommand.
        if shared.store.replica.load(Ordering::Relaxed) {
            if let Some(e) = crate::repl::replica::refusal(shared, client, cmd, flags) {
                return reject(shared, client, cmd, e);
            }
        } else if !shared.repl.enough_good_replicas()
            && (flags.contains(Flags::WRITE)
                || (cmd.name == "exec" && multi::queued_flags(client).contains(Flags::WRITE)))
        {
            // A master without enough good replicas runs no write (P3 in repl/mod.rs).
            return reject(shared, client, cmd, crate::repl::NOREPLICAS.into());
        }
    }
    if !flags.contains(Flags::ALLOW_BUSY) {
        if let Some(busy) = shared.scripts.busy(shared) {
            return reject(shared, client, cmd, busy.into());
        }
    }
    if client.resp == 2 && client.subscriptions() > 0 && !pubsub::allowed_when_subscribed(cmd.name)
    {
        return Outcome::Reply(
            err(format!(
                "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                cmd.name
            )),
            Ticket(0),
        );
    }
    // A full pool refuses what adds data, as Redis over `maxmemory` does (queued in MULTI
    // too); what removes data always runs (and may use the engine's reserve to commit).
    if flags.contains(Flags::DENYOOM) && shared.store.commits.full() {
        return reject(shared, client, cmd, OOM.into());
    }
    // CLIENT PAUSE: commands (writes only, in WRITE mode) wait; queued ones wait for EXEC,
    // which waits when it would write.
    if client.multi.is_none() || cmd.name == "exec" {
        let f = if cmd.name == "exec" {
            multi::queued_flags(client)
        } else {
            flags
        };
        if !matches!(cmd.name, "client" | "quit" | "reset") {
            if let Some(until) = shared.paused_for(f) {
                return Outcome::Paused(until, args.to_vec());
            }
        }
    }
    // A write waits while a full synchronization takes its cut (F1 in store/mod.rs): a
    // millisecond at a time.
    let _writing = if (client.multi.is_none() || cmd.name == "exec")
        && (if cmd.name == "exec" {
            multi::queued_flags(client)
        } else {
            flags
        })
        .intersects(Flags::WRITE | Flags::MAY_REPLICATE)
    {
        match shared.store.enter_write() {
            Some(g) => Some(g),
            None => return Outcome::Paused(crate::shared::now_ms() + 1, args.to_vec()),
        }
    } else {
        None
    };
    if client.multi.is_some()
        && !matches!(
            cmd.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
    {
        if flags.contains(Flags::NO_MULTI) {
            client.multi_failed = true;
            return Outcome::Reply(err("Command not allowed inside a transaction"), Ticket(0));
        }
        if let Some(q) = client.multi.as_mut() {
            q.push(args.to_vec());
        }
        return Outcome::Reply(Reply::Simple("QUEUED".into()), Ticket(0));
    }
    if cmd.local.contains(Local::COUNTS) && !shared.store.is_counted() {
        return Outcome::AfterCount(args.to_vec());
    }
    // I1: a transaction or a script runs whole once the rebuild is done (its commands
    // cannot each run again).
    if matches!(
        cmd.name,
        "exec" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    ) && shared.store.db.rebuilding()
    {
        return Outcome::AfterRebuild(args.to_vec());
    }
    match cmd.run {
        Run::Conn(f) => f(shared, client, args),
        Run::Key(_) => {
            if cmd.local.contains(Local::WHOLE) {
                let last = shared.store.commits.last();
                if !shared.store.commits.is_done(last) {
                    return Outcome::After(Ticket(last), args.to_vec());
                }
            }
            let mut computed = Vec::new();
            let dbs = shared.store.databases();
            let refs = match registry::key_refs(cmd, client.db, args, dbs, &mut computed) {
                Ok(k) => k,
                Err(e) => return Outcome::Reply(e, Ticket(0)),
            };
            let exclusive = cmd.local.contains(Local::EXCLUSIVE)
                || (cmd.local.contains(Local::PATTERNS) && sort::uses_patterns(args));
            let mut txn = if exclusive {
                Txn::exclusive(&shared.store, &refs, client.clock.now_ms())
            } else {
                shared.store.txn(&refs, client.clock.now_ms())
            };
            if !flags.contains(Flags::DENYOOM) {
                txn.mark_frees_space();
            }
            // Events are recorded only when someone could receive them.
            if shared.notify_flags() != 0 && shared.pubsub.anyone() {
                txn.record_events();
            }
            let reply = run_key(cmd, &mut txn, client, shared, args, false);
            if txn.refused_iteration() {
                // I1: nothing it did is kept; it runs again after the rebuild.
                drop(txn);
                return Outcome::AfterRebuild(args.to_vec());
            }
            let raised = txn.take_raised(0);
            if cmd.flags.contains(Flags::BLOCKING) && matches!(reply, Reply::Nil) {
                // Nothing to pop: park (outside MULTI; EXEC answers nil instead).
                let req = blocking::request(&mut txn, client.db, args);
                drop(txn);
                return match req {
                    Ok(req) => Outcome::Block(req),
                    Err(e) => Outcome::Reply(e, Ticket(0)),
                };
            }
            let changed = if exclusive {
                Vec::new()
            } else {
                tracking::changed(shared, &txn)
            };
            let ticket = txn.commit();
            crate::notify::publish(shared, raised, ticket.0);
            tracking::after_read(shared, client, cmd, &refs);
            if flags.contains(Flags::WRITE) {
                shared.waiters.serve(shared, &refs);
                if exclusive {
                    // SWAPDB gives whole databases new contents: every parked key may be
                    // ready.
                    shared.waiters.serve_all(shared);
                    tracking::flushed(shared, ticket.0);
                }
            }
            tracking::invalidate(shared, &changed, client.info.id, ticket.0);
            Outcome::Reply(reply, ticket)
        }
    }
}

/// Runs a keyspace command inside `txn`.
pub fn run_key(
    cmd: &Command,
    txn: &mut Txn<'_>,
    client: &Client,
    shared: &Shared,
    args: &[Vec<u8>],
    script: bool,
) -> Reply {
    let Run::Key(f) = cmd.run else {
        return err("not a keyspace command");
    };
    txn.set_touch(!cmd.local.contains(Local::NO_TOUCH));
    let every_key =
        !cmd.local.contains(Local::PATTERNS) || acl::reads_every_key(shared, client, cmd, args);
    let mut ctx = Ctx {
        txn,
        db: client.db,
        shared,
        resp: client.resp,
        every_key,
        script,
    };
    let (changes, propagated) = (ctx.txn.changes(), ctx.txn.propagated());
    let r = f(&mut ctx, args).unwrap_or_else(|e| e);
    // Replicas run a write command as it came, unless it said what to run instead (a
    // relative expiry made absolute, a random pop made a removal...), and only if it changed
    // something.
    if ctx.txn.propagating()
        && cmd
            .sub(args)
            .map_or(cmd.flags, |s| s.flags)
            .contains(Flags::WRITE)
        && ctx.txn.propagated() == propagated
        && ctx.txn.changes() != changes
    {
        ctx.txn.propagate(ctx.db, args.to_vec());
    }
    // Hit and miss counts follow the reply of read commands.
    if cmd.flags.contains(Flags::READONLY) {
        client.count(if matches!(r, Reply::Nil) { 2 } else { 1 });
    }
    r
}
