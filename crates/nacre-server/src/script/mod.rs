//! Lua scripting: `EVAL`, `EVALSHA`, their `_RO` forms and `SCRIPT`, on Lua 5.1 as Redis
//! embeds it (vm.rs), each script's commands run through the same registry and handlers as
//! a connection's (run.rs).
//!
//! Invariants:
//! - S1 (atomic): a script's commands run in one transaction holding every key they touch
//!   from the first command to the commit, so nothing else runs on those keys in between,
//!   and all its writes commit as one batch, which its reply waits for.
//! - S2 (try, then hold everything): a run starts holding its declared keys (and the
//!   namespace table shared); a command on another key takes that key's stripe only if it
//!   is free at once (no wait: no lock order is broken). If it is not, or a command needs
//!   the whole keyspace, the run is abandoned — its transaction dropped uncommitted, its
//!   messages unsent — and the script runs again from the start holding the namespace table
//!   exclusively, where stripes are taken in any order (nothing else holds one for long).
//! - S3 (nothing leaves a run early): messages a script publishes and its keyspace events
//!   are kept until its commit; a run that already did something else outside its
//!   transaction is never abandoned (its command gets an error instead).

mod cjson;
mod cmsgpack;
pub mod functions;
mod libs;
mod lstruct;
mod run;
mod vm;
mod worker;

pub use run::release;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use nacre_resp::Reply;
use parking_lot::Mutex;

use crate::client::Client;
use crate::cmd::args::{int, lower};
use crate::cmd::registry::{cmd, sub, Command, Keys, Run};
use crate::cmd::{err, ok, Outcome};
use crate::shared::Shared;
use crate::store::txn::Ticket;

/// The SHA-1 of `b`, in lowercase hex (`redis.sha1hex`, script names).
pub fn sha1hex(b: &[u8]) -> String {
    use sha1::Digest;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let d = sha1::Sha1::digest(b);
    let mut s = String::with_capacity(40);
    for x in d {
        s.push(char::from(HEX[usize::from(x >> 4)]));
        s.push(char::from(HEX[usize::from(x & 15)]));
    }
    s
}

bitflags::bitflags! {
    /// A script's shebang flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ScriptFlags: u8 {
        /// No shebang: Redis 6 rules (every command checked alone).
        const COMPAT = 1 << 0;
        /// `no-writes`.
        const NO_WRITES = 1 << 1;
        /// `allow-oom`.
        const ALLOW_OOM = 1 << 2;
        /// `allow-stale`.
        const ALLOW_STALE = 1 << 3;
        /// `no-cluster`.
        const NO_CLUSTER = 1 << 4;
        /// `allow-cross-slot-keys`.
        const CROSS_SLOT = 1 << 5;
    }
}

/// Whether a script's runs are long, to decide where the next one runs: a run that may be
/// long first moves the connection's other work off its thread (a thread hand-off of tens
/// of microseconds), so that other clients are served, and told BUSY, meanwhile; a script
/// whose every run so far was short runs in place. A run is long when it executes more Lua
/// instructions than the interpreter's count hook allows between two looks (an instruction
/// count, unlike a clock, is not fooled by a thread being descheduled).
#[derive(Debug, Default)]
pub struct Pace {
    /// Runs that finished short.
    short_runs: AtomicU64,
    /// A run was long.
    slow: AtomicBool,
}

impl Pace {
    /// Whether the next run may be long: a script not seen finishing yet, or once long.
    fn may_be_long(&self) -> bool {
        self.slow.load(Ordering::Relaxed) || self.short_runs.load(Ordering::Relaxed) == 0
    }

    /// Notes whether a run was long.
    pub fn record(&self, long: bool) {
        if long {
            self.slow.store(true, Ordering::Relaxed);
        } else if !self.slow.load(Ordering::Relaxed) {
            self.short_runs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs `f` where this script's runs belong (see [`Pace`]).
    fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.may_be_long() {
            worker::off_worker(f)
        } else {
            f()
        }
    }
}

/// A cached script.
pub struct Script {
    /// Its SHA-1.
    pub sha: String,
    /// Its text.
    pub body: Vec<u8>,
    /// Its shebang flags.
    pub flags: ScriptFlags,
    /// Bytes of its shebang line (left out when compiled, its line feed kept).
    pub shebang_len: usize,
    /// How long its runs take.
    pub pace: Pace,
}

/// A script running now, for BUSY replies and SCRIPT KILL.
struct Running {
    since: Instant,
    kill: Arc<AtomicBool>,
    dirty: Arc<AtomicBool>,
    /// EVAL (else a function: FCALL).
    eval: bool,
    /// The function's name and the command that called it (FUNCTION STATS).
    name: String,
    command: Vec<Vec<u8>>,
}

/// The script cache and the scripts running.
#[derive(Default)]
pub struct Scripts {
    cache: Mutex<HashMap<String, Arc<Script>>>,
    /// Bumped by SCRIPT FLUSH: interpreters drop what they compiled.
    generation: AtomicU64,
    running: Mutex<HashMap<u64, Running>>,
    next_run: AtomicU64,
    /// How many scripts run now (read without the lock).
    active: AtomicU64,
}

/// The shebang's flags and its length (`#!lua flags=no-writes,allow-oom`).
fn shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::COMPAT, 0));
    }
    let end = body
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| "Invalid script shebang".to_string())?;
    let parts: Vec<String> = nacre_resp::split_args(&body[..end])
        .ok_or("Invalid engine in script shebang")?
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let Some(engine) = parts.first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if *engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = ScriptFlags::empty();
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            flags |= match f {
                "no-writes" => ScriptFlags::NO_WRITES,
                "allow-oom" => ScriptFlags::ALLOW_OOM,
                "allow-stale" => ScriptFlags::ALLOW_STALE,
                "no-cluster" => ScriptFlags::NO_CLUSTER,
                "allow-cross-slot-keys" => ScriptFlags::CROSS_SLOT,
                _ => return Err(format!("Unexpected flag in script shebang: {f}")),
            };
        }
    }
    Ok((flags, end))
}

impl Scripts {
    /// Caches `body` (checking its shebang); the script.
    pub fn add(&self, body: &[u8]) -> Result<Arc<Script>, Reply> {
        let sha = sha1hex(body);
        if let Some(s) = self.cache.lock().get(&sha) {
            return Ok(s.clone());
        }
        let (flags, shebang_len) = shebang(body).map_err(err)?;
        let s = Arc::new(Script {
            sha: sha.clone(),
            body: body.to_vec(),
            flags,
            shebang_len,
            pace: Pace::default(),
        });
        self.cache.lock().insert(sha, s.clone());
        Ok(s)
    }

    /// Scripts cached, and the bytes of their text (`INFO memory`).
    pub fn cached(&self) -> (usize, usize) {
        let c = self.cache.lock();
        (c.len(), c.values().map(|s| s.body.len()).sum())
    }

    /// The cached script of `sha` (either case).
    pub fn get(&self, sha: &[u8]) -> Option<Arc<Script>> {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.cache.lock().get(&sha).cloned()
    }

    /// The cache generation interpreters compile under.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn flush(&self) {
        self.cache.lock().clear();
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Registers a run; its id, kill flag and write flag.
    fn start(
        &self,
        eval: bool,
        name: &str,
        command: Vec<Vec<u8>>,
    ) -> (u64, Arc<AtomicBool>, Arc<AtomicBool>) {
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        let kill = Arc::new(AtomicBool::new(false));
        let dirty = Arc::new(AtomicBool::new(false));
        self.running.lock().insert(
            id,
            Running {
                since: Instant::now(),
                kill: kill.clone(),
                dirty: dirty.clone(),
                eval,
                name: name.to_string(),
                command,
            },
        );
        self.active.fetch_add(1, Ordering::AcqRel);
        (id, kill, dirty)
    }

    fn end(&self, id: u64) {
        if self.running.lock().remove(&id).is_some() {
            self.active.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The BUSY reply others get while a script has run longer than
    /// `busy-reply-threshold`.
    pub fn busy(&self, shared: &Shared) -> Option<&'static str> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let threshold_ms = shared.config.read().params.uint("busy-reply-threshold");
        let running = self.running.lock();
        let r = running
            .values()
            .find(|r| r.since.elapsed().as_millis() as u64 >= threshold_ms)?;
        Some(if r.eval { BUSY } else { BUSY_FUNCTION })
    }

    /// A run's first write command: marks it written (`dirty`) unless SCRIPT KILL stopped
    /// it first; whether it may write. Taken under the same lock as [`Scripts::kill`], so a
    /// kill either sees the write (UNKILLABLE) or comes before it (and the write is refused).
    pub fn first_write(&self, dirty: &AtomicBool, kill: &AtomicBool) -> bool {
        let _running = self.running.lock();
        if kill.load(Ordering::Acquire) {
            return false;
        }
        dirty.store(true, Ordering::Release);
        true
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: stops the running scripts that have not
    /// written.
    pub fn kill(&self, eval: bool) -> Reply {
        let running = self.running.lock();
        if running.is_empty() {
            return Reply::Error("NOTBUSY No scripts in execution right now.".into());
        }
        if running.values().any(|r| r.dirty.load(Ordering::Acquire)) {
            return Reply::Error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into());
        }
        if let Some(r) = running.values().find(|r| r.eval != eval) {
            return Reply::Error(if r.eval { BUSY } else { BUSY_FUNCTION }.into());
        }
        for r in running.values() {
            r.kill.store(true, Ordering::Release);
        }
        ok()
    }

    /// FUNCTION STATS's `running_script`: the function running now, or nil.
    pub fn running_reply(&self) -> Reply {
        let running = self.running.lock();
        let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        match running.values().find(|r| !r.eval) {
            None => Reply::Nil,
            Some(r) => Reply::Map(vec![
                (bulk("name"), bulk(&r.name)),
                (
                    bulk("command"),
                    Reply::Array(r.command.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                ),
                (
                    bulk("duration_ms"),
                    Reply::Integer(r.since.elapsed().as_millis() as i64),
                ),
            ]),
        }
    }
}

/// Redis's BUSY reply while a script runs past `busy-reply-threshold`.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same while a function runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// The number of keys and the keys of `EVAL script numkeys key... arg...`.
fn split_keys(args: &[Vec<u8>]) -> Result<usize, Reply> {
    let n = int(&args[2])?;
    if n > (args.len() - 3) as i64 {
        return Err(err("Number of keys can't be greater than number of args"));
    }
    if n < 0 {
        return Err(err("Number of keys can't be negative"));
    }
    Ok(n as usize)
}

/// The keys of `EVAL`-shaped commands (registry key positions).
pub fn eval_keys(
    db: usize,
    args: &[Vec<u8>],
    _: usize,
) -> Result<crate::cmd::registry::KeyList, Reply> {
    let n = split_keys(args)?;
    Ok(args[3..3 + n].iter().map(|k| (db, k.clone())).collect())
}

/// What an EVAL- or FCALL-family command runs.
enum Resolved {
    Script(Arc<Script>),
    Function(Arc<functions::Library>, functions::Registered),
}

impl Resolved {
    fn target(&self) -> run::Target<'_> {
        match self {
            Resolved::Script(s) => run::Target::Script(s),
            Resolved::Function(l, f) => run::Target::Function(l, f),
        }
    }
}

/// The script or function an EVAL- or FCALL-family command names (EVAL caches its script),
/// its number of keys, and whether it is a read-only form; errors in Redis's order.
fn resolve(shared: &Shared, args: &[Vec<u8>]) -> Result<(Resolved, usize, bool), Reply> {
    let name = lower(&args[0]);
    let ro = name.ends_with("_ro");
    if name.starts_with("fcall") {
        let (lib, f) = target_function(shared, args)?;
        return Ok((Resolved::Function(lib, f), split_keys(args)?, ro));
    }
    let n = split_keys(args)?;
    let script = if name.starts_with("evalsha") {
        shared
            .scripts
            .get(&args[1])
            .filter(|_| args[1].len() == 40)
            .ok_or_else(|| Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()))?
    } else {
        shared.scripts.add(&args[1])?
    };
    Ok((Resolved::Script(script), n, ro))
}

/// `EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms: `name-or-script numkeys [key ...]
/// [arg ...]`.
fn run_script(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    crate::cmd::feed_monitor(shared, client, args);
    let (what, n, ro) = match resolve(shared, args) {
        Ok(x) => x,
        Err(e) => return Outcome::Reply(e, Ticket(0)),
    };
    let target = what.target();
    let (keys, argv) = (&args[3..3 + n], &args[3 + n..]);
    target
        .pace()
        .run(|| run::eval(shared, client, &target, args, keys, argv, ro))
}

/// The function FCALL names.
fn target_function(
    shared: &Shared,
    args: &[Vec<u8>],
) -> Result<(Arc<functions::Library>, functions::Registered), Reply> {
    let name = String::from_utf8_lossy(&args[1]);
    let found = shared
        .functions
        .find(&name)
        .ok_or_else(|| err("Function not found"))?;
    if crate::cmd::args::int(&args[2]).is_err() {
        return Err(err("Bad number of keys provided"));
    }
    Ok(found)
}

/// `FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|STATS|KILL|HELP`.
fn function(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    Outcome::Reply(functions::function(shared, args), Ticket(0))
}

/// An `EVAL`-family command queued in `MULTI`, run inside EXEC's transaction `txn` (which
/// holds its declared keys): its reply, and what to release once EXEC commits.
pub fn in_exec(
    shared: &Shared,
    client: &mut Client,
    txn: &mut crate::store::Txn<'_>,
    args: &[Vec<u8>],
) -> (Reply, Option<run::Done>) {
    let (what, n, ro) = match resolve(shared, args) {
        Ok(x) => x,
        Err(e) => return (e, None),
    };
    let target = what.target();
    if let Some(r) = run::refuse(shared, target.flags(), ro, client.master) {
        return (r, None);
    }
    let exclusive = txn.is_exclusive();
    let (reply, _, done) = run::run_in(
        shared,
        client,
        txn,
        &target,
        args,
        &args[3..3 + n],
        &args[3 + n..],
        ro,
        exclusive,
        false,
    );
    (reply, Some(done))
}

/// Whether `name` (lowercase) runs a script.
pub fn is_eval(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|DEBUG|HELP`.
fn script(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let sub = lower(&args[1]);
    let r = match sub.as_str() {
        "load" => match shared.scripts.add(&args[2]) {
            Ok(s) => match compile_here(shared, &s) {
                Ok(()) => Reply::Bulk(s.sha.clone().into_bytes()),
                Err(e) => e,
            },
            Err(e) => e,
        },
        "exists" => Reply::Array(
            args[2..]
                .iter()
                .map(|s| Reply::Integer(i64::from(shared.scripts.get(s).is_some())))
                .collect(),
        ),
        "flush" => match args.len() {
            2 => {
                shared.scripts.flush();
                ok()
            }
            3 if matches!(lower(&args[2]).as_str(), "sync" | "async") => {
                shared.scripts.flush();
                ok()
            }
            _ => err("SCRIPT FLUSH only support SYNC|ASYNC option"),
        },
        "kill" => shared.scripts.kill(true),
        "debug" => match lower(&args[2]).as_str() {
            "no" => ok(),
            "yes" | "sync" => err("The script debugger is not supported"),
            _ => err("Use SCRIPT DEBUG YES/SYNC/NO"),
        },
        "help" => crate::cmd::help_lines(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => crate::cmd::registry::unknown_subcommand(&args[1], "SCRIPT"),
    };
    Outcome::Reply(r, Ticket(0))
}

/// Compiles `s` on this thread (SCRIPT LOAD reports a script that does not compile).
fn compile_here(shared: &Shared, s: &Script) -> Result<(), Reply> {
    vm::Vm::with(shared.scripts.generation(), |vm| {
        vm.compile(&s.sha, &s.body, s.shebang_len)
    })
    .map_err(err)?
}

/// The scripting commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("eval", -3, [NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "2.6.0", "Executes a server-side Lua script.", Run::Conn(run_script)),
    cmd!("evalsha", -3, [NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "2.6.0", "Executes a server-side Lua script by SHA1 digest.", Run::Conn(run_script)),
    cmd!("eval_ro", -3, [READONLY NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "7.0.0", "Executes a read-only server-side Lua script.", Run::Conn(run_script)),
    cmd!("evalsha_ro", -3, [READONLY NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.", Run::Conn(run_script)),
    cmd!("script", -2, [], [SLOW], [], Keys::None, "scripting", "2.6.0", "A container for Lua scripts management commands.", Run::Conn(script), &[
        sub!("debug", 3, [NOSCRIPT], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("exists", -3, [NOSCRIPT], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("flush", -2, [NOSCRIPT], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("kill", 2, [NOSCRIPT ALLOW_BUSY], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("load", 3, [NOSCRIPT STALE], [SLOW SCRIPTING], (0, 0, 0)),
    ]),
    cmd!("fcall", -3, [NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "7.0.0", "Invokes a function.", Run::Conn(run_script)),
    cmd!("fcall_ro", -3, [READONLY NOSCRIPT SKIP_MONITOR NO_MANDATORY_KEYS STALE MOVABLEKEYS], [SLOW SCRIPTING], [], Keys::Custom(eval_keys, 0, 0, 0), "scripting", "7.0.0", "Invokes a read-only function.", Run::Conn(run_script)),
    cmd!("function", -2, [], [SLOW], [], Keys::None, "scripting", "7.0.0", "A container for function commands.", Run::Conn(function), &[
        sub!("delete", 3, [WRITE NOSCRIPT], [WRITE SLOW SCRIPTING], (0, 0, 0)),
        sub!("dump", 2, [NOSCRIPT], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("flush", -2, [WRITE NOSCRIPT], [WRITE SLOW SCRIPTING], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("kill", 2, [NOSCRIPT ALLOW_BUSY], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("list", -2, [NOSCRIPT], [SLOW SCRIPTING], (0, 0, 0)),
        sub!("load", -3, [WRITE DENYOOM NOSCRIPT], [WRITE SLOW SCRIPTING], (0, 0, 0)),
        sub!("restore", -3, [WRITE DENYOOM NOSCRIPT], [WRITE SLOW SCRIPTING], (0, 0, 0)),
        sub!("stats", 2, [NOSCRIPT ALLOW_BUSY], [SLOW SCRIPTING], (0, 0, 0)),
    ]),
];
