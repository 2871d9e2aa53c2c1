//! A script's run: its transaction (S1, S2), the checks Redis makes before a script runs
//! and before each command it calls, and what is released after its commit (S3).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nacre_resp::Reply;

use super::functions::{Library, Registered};
use super::vm::{Host, Vm};
use super::{Script, ScriptFlags};
use crate::client::Client;
use crate::cmd::registry::{self, Flags, Local, Run};
use crate::cmd::{arity_ok, err, ok, run_key, Outcome};
use crate::shared::Shared;
use crate::store::txn::{Ticket, Txn};

/// The message of a command refused because the run is abandoned (S2); the script's reply
/// is discarded, so no client sees it.
const ABANDONED: &str = "the script is run again holding the whole keyspace";

/// Redis's refusal of a command that adds data while the pool is full.
const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.";
/// A run's error once SCRIPT KILL stopped it.
const KILLED: &str = "-ERR Script killed by user with SCRIPT KILL...";

/// The state of one run, which the interpreter calls back into.
struct Ctx<'a, 's> {
    shared: &'a Shared,
    client: &'a mut Client,
    txn: &'a mut Txn<'s>,
    /// Holds the whole keyspace: any stripe may be taken (S2).
    exclusive: bool,
    /// Whether the run may be abandoned (not inside EXEC's transaction).
    can_abandon: bool,
    abandoned: bool,
    /// Something left the run (a command outside the keyspace ran): it is not abandoned.
    effects: bool,
    read_only: bool,
    compat: bool,
    allow_oom: bool,
    full_at_start: bool,
    dirty: Arc<AtomicBool>,
    /// The run's SCRIPT KILL flag.
    kill: Arc<AtomicBool>,
    adds: bool,
    events: Vec<crate::notify::Raised>,
    written: Vec<(usize, Vec<u8>)>,
    publishes: Vec<(Vec<u8>, Vec<u8>)>,
    notifying: bool,
    /// A read-only command ran (client-side caching then tracks the declared keys).
    read_any: bool,
}

impl Ctx<'_, '_> {
    fn abandon(&mut self) -> Result<Reply, String> {
        if !self.can_abandon || self.effects {
            return Err(
                "the script touched a key another client holds (declare the keys a script uses)"
                    .into(),
            );
        }
        self.abandoned = true;
        Err(ABANDONED.into())
    }

    fn keyspace(
        &mut self,
        cmd: &'static registry::Command,
        args: &[Vec<u8>],
    ) -> Result<Reply, String> {
        let ndb = self.shared.store.databases();
        let keys = registry::keys_of(cmd, self.client.db, args, ndb).map_err(reply_text)?;
        let whole = cmd.local.contains(Local::EXCLUSIVE)
            || (cmd.local.contains(Local::PATTERNS) && crate::cmd::sort::uses_patterns(args));
        if whole && !self.exclusive {
            return self.abandon();
        }
        for (db, k) in &keys {
            match self.txn.try_add_key(*db, k) {
                Ok(true) => {}
                Ok(false) => return self.abandon(),
                Err(e) => return Err(e.to_string()),
            }
        }
        // As Redis: a script may not ask a stream read to block.
        if matches!(cmd.name, "xread" | "xreadgroup")
            && crate::cmd::streams::parse_read(args).is_ok_and(|r| r.block.is_some())
        {
            return Err(format!(
                "-ERR {} command is not allowed with BLOCK option from scripts",
                String::from_utf8_lossy(&args[0])
            ));
        }
        let mark = self.txn.mark();
        let r = run_key(cmd, self.txn, self.client, self.shared, args, true);
        // A blocking command does not block in a script: it answers as its timeout would.
        let r = match r {
            Reply::Nil if cmd.flags.contains(Flags::BLOCKING) => Reply::NilArray,
            r => r,
        };
        if self.notifying {
            self.events.push(self.txn.take_raised(mark));
        }
        if cmd.flags.contains(Flags::WRITE) {
            self.written.extend(keys);
        }
        match r {
            Reply::Error(e) => Err(format!("-{e}")),
            r => Ok(r),
        }
    }

    fn connection(
        &mut self,
        cmd: &'static registry::Command,
        f: fn(&Shared, &mut Client, &[Vec<u8>]) -> Outcome,
        args: &[Vec<u8>],
    ) -> Result<Reply, String> {
        match cmd.name {
            // Delivered after the commit (S3); the count is who would receive it now.
            "publish" => {
                let n = self.shared.pubsub.receivers(&args[1]);
                self.publishes.push((args[1].clone(), args[2].clone()));
                return Ok(Reply::Integer(n));
            }
            // The script's own database (the caller's is put back after the run).
            "select" => {
                return match crate::cmd::args::int(&args[1]) {
                    Ok(d) if d >= 0 && (d as usize) < self.shared.store.databases() => {
                        self.client.db = d as usize;
                        Ok(ok())
                    }
                    Ok(_) => Err("-ERR DB index is out of range".into()),
                    Err(e) => Err(reply_text(e)),
                };
            }
            "ping" | "echo" | "time" | "lastsave" | "dbsize" | "info" | "command" => {}
            _ => self.effects = true,
        }
        let r = match f(self.shared, self.client, args) {
            Outcome::Reply(r, _) | Outcome::Close(r) | Outcome::Delay(_, r) => r,
            Outcome::Many(mut rs) if rs.len() == 1 => rs.remove(0),
            Outcome::Many(rs) => Reply::Array(rs),
            Outcome::After(..) | Outcome::AfterCount(..) | Outcome::AfterRebuild(..) => {
                err("the server is still counting keys or rebuilding its index after a restart; try again")
            }
            _ => err("This Redis command is not allowed from script"),
        };
        match r {
            Reply::Error(e) => Err(format!("-{e}")),
            r => Ok(r),
        }
    }
}

/// A refusal's text for the interpreter (a reply error keeps its code).
fn reply_text(r: Reply) -> String {
    match r {
        Reply::Error(e) => format!("-{e}"),
        other => format!("{other:?}"),
    }
}

impl Host for Ctx<'_, '_> {
    fn acl_check(&mut self, args: &[Vec<u8>]) -> Result<bool, String> {
        if registry::lookup_bytes(&args[0]).is_none() {
            return Err("Invalid command passed to redis.acl_check_cmd()".into());
        }
        let Some(user) = crate::cmd::acl::user_of(self.shared, self.client) else {
            return Ok(false);
        };
        match crate::cmd::acl::dry_run(self.shared, &user, self.client.db, args) {
            Ok(None) => Ok(true),
            Ok(Some(_)) => Ok(false),
            Err(e) => Err(e
                .error_message()
                .map(|m| m.into_owned())
                .unwrap_or_default()),
        }
    }

    fn command(&mut self, args: Vec<Vec<u8>>, resp: u8) -> Result<Reply, String> {
        self.client.resp = resp;
        if self.abandoned {
            return Err(ABANDONED.into());
        }
        let Some(cmd) = registry::lookup_bytes(&args[0]) else {
            return Err("Unknown Redis command called from script".into());
        };
        let sub = cmd.sub(&args);
        let (arity, flags) = sub.map_or((cmd.arity, cmd.flags), |s| (s.arity, s.flags));
        if !arity_ok(arity, args.len()) {
            return Err("Wrong number of args calling Redis command from script".into());
        }
        if flags.contains(Flags::NOSCRIPT) {
            return Err("This Redis command is not allowed from script".into());
        }
        if let Err(d) = crate::cmd::acl::permit(self.shared, self.client, cmd, sub, &args, "lua") {
            return Err(crate::cmd::acl::denied_in_script(d));
        }
        if flags.contains(Flags::WRITE) && self.read_only {
            return Err("Write commands are not allowed from read-only scripts.".into());
        }
        // As Redis's scriptVerifyWriteCommandAllow: a replica's own clients write nothing,
        // and a master without enough good replicas lets a script's first write fail.
        if flags.contains(Flags::WRITE) && !self.client.master {
            if self.shared.store.replica.load(Ordering::Relaxed) {
                if crate::repl::replica::read_only(self.shared) {
                    return Err(format!("-{}", crate::repl::replica::READONLY));
                }
            } else if !self.dirty.load(Ordering::Acquire)
                && !self.shared.repl.enough_good_replicas()
            {
                return Err(format!("-{}", crate::repl::NOREPLICAS));
            }
        }
        if flags.contains(Flags::DENYOOM) {
            let refuse = if self.compat {
                self.shared.store.commits.full() && !self.dirty.load(Ordering::Acquire)
            } else {
                !self.allow_oom && self.full_at_start && !self.dirty.load(Ordering::Acquire)
            };
            if refuse {
                return Err(OOM.into());
            }
            self.adds = true;
        }
        if flags.contains(Flags::WRITE)
            && !self.dirty.load(Ordering::Acquire)
            && !self.shared.scripts.first_write(&self.dirty, &self.kill)
        {
            // A SCRIPT KILL answered OK before this first write: it saw none, so none
            // happens (as in Redis, where the kill lands between two commands).
            return Err(KILLED.into());
        }
        if flags.contains(Flags::READONLY) {
            self.read_any = true;
        }
        crate::cmd::monitor_line(self.shared, self.client.db, "lua", &args);
        match cmd.run {
            Run::Key(_) => self.keyspace(cmd, &args),
            Run::Conn(f) => self.connection(cmd, f, &args),
        }
    }
}

/// What a run runs: a cached script (EVAL) or a library's function (FCALL).
pub enum Target<'a> {
    /// A script.
    Script(&'a Arc<Script>),
    /// A function and its library.
    Function(&'a Arc<Library>, &'a Registered),
}

impl Target<'_> {
    /// How long its runs take.
    pub fn pace(&self) -> &super::Pace {
        match self {
            Target::Script(s) => &s.pace,
            Target::Function(_, f) => &f.pace,
        }
    }

    /// Its flags.
    pub fn flags(&self) -> ScriptFlags {
        match self {
            Target::Script(s) => s.flags,
            Target::Function(_, f) => f.flags,
        }
    }

    /// Runs it on `vm` (compiling or loading it first).
    fn run(
        &self,
        shared: &Shared,
        vm: &mut Vm,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        host: &mut dyn Host,
        kill: Arc<AtomicBool>,
    ) -> Reply {
        match self {
            Target::Script(s) => match vm.compile(&s.sha, &s.body, s.shebang_len) {
                Ok(()) => {
                    let r = vm.run(&s.sha, keys, argv, host, kill, &s.sha);
                    self.pace().record(vm.last_run_was_long());
                    r
                }
                Err(e) => e,
            },
            Target::Function(lib, f) => {
                let generation = shared.functions.generation();
                if !vm.has_library(generation, &lib.name) {
                    if let Err(e) = vm.load_library(&lib.name, &lib.code[lib.body_at..], true) {
                        return err(e);
                    }
                }
                let r = vm.run_function(&f.name, keys, argv, host, kill);
                self.pace().record(vm.last_run_was_long());
                r
            }
        }
    }
}

/// Checks made before a script runs (`scriptPrepareForRun`): a refusal's reply. `obey`:
/// the caller is this replica's master.
pub fn refuse(shared: &Shared, flags: ScriptFlags, ro: bool, obey: bool) -> Option<Reply> {
    if flags.contains(ScriptFlags::COMPAT) {
        return None;
    }
    if !flags.contains(ScriptFlags::NO_WRITES) {
        let replica = shared.store.replica.load(Ordering::Relaxed);
        if replica && !obey && crate::repl::replica::read_only(shared) {
            return Some(Reply::Error(
                "READONLY Can not run script with write flag on readonly replica".into(),
            ));
        }
        if ro {
            return Some(err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
        if !replica && !shared.repl.enough_good_replicas() {
            return Some(Reply::Error(crate::repl::NOREPLICAS.into()));
        }
    }
    if !flags.intersects(ScriptFlags::NO_WRITES | ScriptFlags::ALLOW_OOM)
        && shared.store.commits.full()
    {
        return Some(Reply::Error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into()));
    }
    None
}

/// Runs `s` for `client`: in a transaction of its own, or in `outer` (EXEC's), where it is
/// never abandoned. The reply and the ticket it waits for.
pub fn eval(
    shared: &Shared,
    client: &mut Client,
    t: &Target<'_>,
    args: &[Vec<u8>],
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
    ro: bool,
) -> Outcome {
    if let Some(r) = refuse(shared, t.flags(), ro, client.master) {
        return Outcome::Reply(r, Ticket(0));
    }
    let declared: Vec<(usize, &[u8])> = keys.iter().map(|k| (client.db, k.as_slice())).collect();
    let mut exclusive = false;
    loop {
        let now = client.clock.now_ms();
        let mut txn = if exclusive {
            Txn::exclusive(&shared.store, &declared, now)
        } else {
            shared.store.txn(&declared, now)
        };
        let (reply, abandoned, done) = run_in(
            shared, client, &mut txn, t, args, keys, argv, ro, exclusive, true,
        );
        if abandoned && !exclusive {
            drop(txn);
            exclusive = true;
            continue;
        }
        if !done.adds {
            txn.mark_frees_space();
        }
        let changed = crate::cmd::tracking::changed(shared, &txn);
        let read_any = done.read_any;
        let ticket = txn.commit();
        release(shared, done, ticket, exclusive);
        crate::cmd::tracking::invalidate(shared, &changed, client.info.id, ticket.0);
        // As Redis: a script that read anything tracks the keys it declared.
        if read_any {
            crate::cmd::tracking::after_script(shared, client, keys);
        }
        return Outcome::Reply(reply, ticket);
    }
}

/// What a finished run leaves to do after its commit.
pub struct Done {
    read_any: bool,
    adds: bool,
    events: Vec<crate::notify::Raised>,
    written: Vec<(usize, Vec<u8>)>,
    publishes: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Publishes a run's messages and events once its commit is queued (S3), and serves
/// clients parked on the keys it wrote.
pub fn release(shared: &Shared, done: Done, ticket: Ticket, exclusive: bool) {
    for raised in done.events {
        crate::notify::publish(shared, raised, ticket.0);
    }
    for (ch, msg) in done.publishes {
        shared.pubsub.publish(&ch, &msg, ticket.0);
    }
    if !done.written.is_empty() {
        shared.waiters.serve(shared, &done.written);
        if exclusive {
            shared.waiters.serve_all(shared);
        }
    }
}

/// Runs `s` inside `txn`; its reply, whether it was abandoned (S2), and what is left to do.
#[allow(clippy::too_many_arguments)]
pub fn run_in(
    shared: &Shared,
    client: &mut Client,
    txn: &mut Txn<'_>,
    t: &Target<'_>,
    args: &[Vec<u8>],
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
    ro: bool,
    exclusive: bool,
    can_abandon: bool,
) -> (Reply, bool, Done) {
    let (eval, name) = match t {
        Target::Script(s) => (true, s.sha.as_str()),
        Target::Function(_, f) => (false, f.name.as_str()),
    };
    // FUNCTION STATS shows a running function's command; a script's is not kept.
    let command = if eval { Vec::new() } else { args.to_vec() };
    let (id, kill, dirty) = shared.scripts.start(eval, name, command);
    let flags = t.flags();
    let saved = (client.db, client.resp);
    let full = shared.store.commits.full();
    let mut ctx = Ctx {
        shared,
        client,
        txn,
        exclusive,
        can_abandon,
        abandoned: false,
        effects: false,
        read_only: ro || flags.contains(ScriptFlags::NO_WRITES),
        compat: flags.contains(ScriptFlags::COMPAT),
        allow_oom: flags.contains(ScriptFlags::ALLOW_OOM),
        full_at_start: full,
        dirty,
        kill: kill.clone(),
        adds: false,
        events: Vec::new(),
        written: Vec::new(),
        publishes: Vec::new(),
        notifying: shared.notify_flags() != 0 && shared.pubsub.anyone(),
        read_any: false,
    };
    if ctx.notifying {
        ctx.txn.record_events();
    }
    let generation = shared.scripts.generation();
    let reply = Vm::with(generation, |vm| {
        t.run(shared, vm, keys, argv, &mut ctx, kill)
    })
    .unwrap_or_else(err);
    shared.scripts.end(id);
    let abandoned = ctx.abandoned;
    let done = Done {
        read_any: ctx.read_any,
        adds: ctx.adds,
        events: ctx.events,
        written: ctx.written,
        publishes: ctx.publishes,
    };
    (client.db, client.resp) = saved;
    (reply, abandoned, done)
}
