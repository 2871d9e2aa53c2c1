//! Functions (Redis 7.0): libraries of Lua functions loaded with `FUNCTION LOAD`, called with
//! `FCALL`, durable in the pool (the `functions` record of `sys`, rewritten whole by every
//! change and read at start), moved between servers with `FUNCTION DUMP` / `RESTORE` in
//! Redis's payload format.
//!
//! Invariant F1: the library set in memory is the one the last acknowledged change wrote;
//! a change is answered only once its record is durable, and the set changes in memory only
//! after that write succeeded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mlua::{Function, MultiValue, Value};
use nacre_resp::Reply;
use parking_lot::Mutex;

use super::{vm::Vm, ScriptFlags};
use crate::cmd::args::lower;
use crate::cmd::{err, ok};
use crate::shared::Shared;

/// The `sys` key of the libraries.
pub const RECORD: &[u8] = b"functions";
/// The RDB opcode of a function library in a payload.
const OPCODE_FUNCTION2: u8 = 245;
/// The RDB version a payload is written with (Redis 7.0).
const RDB_VERSION: u16 = 10;

/// A function as its library registered it.
#[derive(Clone, Debug)]
pub struct Registered {
    /// Its name.
    pub name: String,
    /// Its description, if given.
    pub description: Option<String>,
    /// Its flags.
    pub flags: ScriptFlags,
    /// Whether its runs may take long (see `super::Pace`).
    pub pace: Arc<super::Pace>,
}

/// A loaded library.
pub struct Library {
    /// Its name.
    pub name: String,
    /// Its whole code, shebang line included.
    pub code: Vec<u8>,
    /// Bytes of its shebang line.
    pub body_at: usize,
    /// Its functions.
    pub functions: Vec<Registered>,
}

/// Libraries by name (FCALL finds a function whatever its case, as Redis does; library
/// names are exact).
#[derive(Default)]
struct State {
    libs: BTreeMap<String, Arc<Library>>,
}

impl State {
    fn function(&self, name: &str) -> Option<(Arc<Library>, Registered)> {
        self.libs.values().find_map(|l| {
            l.functions
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))
                .map(|f| (l.clone(), f.clone()))
        })
    }
}

/// The libraries.
#[derive(Default)]
pub struct Functions {
    state: Mutex<State>,
    /// Bumped by every change: interpreters drop the functions they loaded.
    generation: AtomicU64,
}

/// Whether `name` is a valid library or function name.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A library's name and where its code starts after its shebang (`#!lua name=mylib`).
fn metadata(code: &[u8]) -> Result<(String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let end = code
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("Invalid library metadata")?;
    // Split as Redis splits arguments (quotes allowed).
    let parts: Vec<String> = nacre_resp::split_args(&code[..end])
        .ok_or("Invalid library metadata")?
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let Some(first) = parts.first() else {
        return Err("Invalid library metadata".into());
    };
    let engine = first.get(2..).unwrap_or("");
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(p[5..].to_string());
            continue;
        }
        return Err(format!("Invalid metadata value given: {p}"));
    }
    let name = name.ok_or("Library name was not given")?;
    if !valid_name(&name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok((name, end))
}

/// The arguments of one `redis.register_function` call.
pub fn registration(args: MultiValue) -> Result<(Registered, Function), String> {
    let args: Vec<Value> = args.into_iter().collect();
    let text = super::vm::lua_text;
    let (name, description, callback, flags) = match args.as_slice() {
        [Value::Table(t)] => {
            let (mut name, mut desc, mut cb, mut flags) = (None, None, None, ScriptFlags::empty());
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Some(k) = text(&k) else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                match k.to_ascii_lowercase().as_str() {
                    "function_name" => {
                        name = Some(text(&v).ok_or("function_name argument given to redis.register_function must be a string")?)
                    }
                    "description" => {
                        desc = Some(text(&v).ok_or("description argument given to redis.register_function must be a string")?)
                    }
                    "callback" => match v {
                        Value::Function(f) => cb = Some(f),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => {
                        let Value::Table(list) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags".into());
                        };
                        for f in list.sequence_values::<Value>() {
                            let f = f.map_err(|e| e.to_string())?;
                            let flag = text(&f).and_then(|s| flag_of(&s.to_ascii_lowercase()));
                            flags |= flag.ok_or("unknown flag given")?;
                        }
                    }
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let cb = cb.ok_or("redis.register_function must get a callback argument")?;
            (name, desc, cb, flags)
        }
        [_] => return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into()),
        [n, f] => {
            let name = text(n).ok_or("first argument to redis.register_function must be a string")?;
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (name, None, f.clone(), ScriptFlags::empty())
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok((
        Registered {
            name,
            description,
            flags,
            pace: Default::default(),
        },
        callback,
    ))
}

fn flag_of(s: &str) -> Option<ScriptFlags> {
    Some(match s {
        "no-writes" => ScriptFlags::NO_WRITES,
        "allow-oom" => ScriptFlags::ALLOW_OOM,
        "allow-stale" => ScriptFlags::ALLOW_STALE,
        "no-cluster" => ScriptFlags::NO_CLUSTER,
        "allow-cross-slot-keys" => ScriptFlags::CROSS_SLOT,
        _ => return None,
    })
}

fn flag_names(f: ScriptFlags) -> Vec<&'static str> {
    [
        (ScriptFlags::NO_WRITES, "no-writes"),
        (ScriptFlags::ALLOW_OOM, "allow-oom"),
        (ScriptFlags::ALLOW_STALE, "allow-stale"),
        (ScriptFlags::NO_CLUSTER, "no-cluster"),
        (ScriptFlags::CROSS_SLOT, "allow-cross-slot-keys"),
    ]
    .into_iter()
    .filter(|(b, _)| f.contains(*b))
    .map(|(_, n)| n)
    .collect()
}

/// Builds library `code` on this thread's interpreter (its functions checked, not kept).
fn build(shared: &Shared, code: &[u8]) -> Result<Library, String> {
    let (name, body_at) = metadata(code)?;
    let gen = shared.scripts.generation();
    let functions = Vm::with(gen, |vm| vm.load_library(&name, &code[body_at..], false))??;
    if functions.is_empty() {
        return Err("No functions registered".into());
    }
    Ok(Library {
        name,
        code: code.to_vec(),
        body_at,
        functions,
    })
}

impl Functions {
    /// The set's generation (interpreters reload libraries when it changes).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Libraries, functions, and the bytes of the libraries' code (`INFO memory`).
    pub fn counts(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        let functions = st.libs.values().map(|l| l.functions.len()).sum();
        let bytes = st.libs.values().map(|l| l.code.len()).sum();
        (st.libs.len(), functions, bytes)
    }

    /// The library and registration of function `name`.
    pub fn find(&self, name: &str) -> Option<(Arc<Library>, Registered)> {
        self.state.lock().function(name)
    }

    /// Makes `libs` the library set: durable first, then in memory (F1).
    fn commit(
        &self,
        shared: &Shared,
        st: &mut State,
        libs: BTreeMap<String, Arc<Library>>,
    ) -> Result<(), String> {
        let mut rec = Vec::new();
        for l in libs.values() {
            rec.extend_from_slice(&(l.code.len() as u32).to_le_bytes());
            rec.extend_from_slice(&l.code);
        }
        let store = &shared.store;
        store
            .db
            .put(&store.subs.sys, RECORD, rec)
            .map_err(|e| format!("the libraries could not be written: {e}"))?;
        st.libs = libs;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Adds `lib` to `libs` (replacing one of its name if `replace`); `restoring` words a
    /// name collision as RESTORE does.
    fn insert(
        libs: &mut BTreeMap<String, Arc<Library>>,
        lib: Library,
        replace: bool,
        restoring: bool,
    ) -> Result<(), String> {
        let key = lib.name.clone();
        if libs.contains_key(&key) && !replace {
            return Err(if restoring {
                format!("Library {} already exists", lib.name)
            } else {
                format!("Library '{}' already exists", lib.name)
            });
        }
        for f in &lib.functions {
            let taken = libs.iter().any(|(k, l)| {
                *k != key
                    && l.functions
                        .iter()
                        .any(|g| g.name.eq_ignore_ascii_case(&f.name))
            });
            if taken {
                return Err(format!("Function {} already exists", f.name));
            }
        }
        libs.insert(key, Arc::new(lib));
        Ok(())
    }

    /// Loads the libraries recorded in the pool (at start).
    pub fn restore(&self, shared: &Shared) -> Result<usize, String> {
        let store = &shared.store;
        let Some(rec) = store
            .db
            .get(&store.subs.sys, RECORD)
            .map_err(|e| e.to_string())?
        else {
            return Ok(0);
        };
        let mut libs = BTreeMap::new();
        for code in record_codes(&rec)? {
            let lib = build(shared, code)?;
            Self::insert(&mut libs, lib, false, false)?;
        }
        let count = libs.len();
        self.state.lock().libs = libs;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(count)
    }

    /// Adds libraries `codes` (from an RDB file) to the set, each replacing the library of
    /// its name, as `FUNCTION RESTORE ... REPLACE` does; all or none.
    pub fn import(&self, shared: &Shared, codes: &[Vec<u8>]) -> Result<usize, String> {
        let mut st = self.state.lock();
        let mut libs = st.libs.clone();
        for code in codes {
            let lib = build(shared, code)?;
            Self::insert(&mut libs, lib, true, true)?;
        }
        self.commit(shared, &mut st, libs)?;
        Ok(codes.len())
    }
}

/// The code of each library in the `functions` record `rec`.
pub fn record_codes(rec: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < rec.len() {
        let n = rec
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or("the libraries record is damaged")? as usize;
        let code = rec
            .get(at + 4..at + 4 + n)
            .ok_or("the libraries record is damaged")?;
        at += 4 + n;
        out.push(code);
    }
    Ok(out)
}

/// `FUNCTION LOAD [REPLACE] code`.
fn load(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let mut replace = false;
    for a in &args[2..args.len() - 1] {
        if lower(a) == "replace" {
            replace = true;
        } else {
            return err(format!(
                "Unknown option given: {}",
                String::from_utf8_lossy(a)
            ));
        }
    }
    let code = &args[args.len() - 1];
    let f = &shared.functions;
    let mut st = f.state.lock();
    let lib = match build(shared, code) {
        Ok(l) => l,
        Err(e) => return err(e),
    };
    let name = lib.name.clone();
    let mut libs = st.libs.clone();
    if let Err(e) = Functions::insert(&mut libs, lib, replace, false) {
        return err(e);
    }
    match f.commit(shared, &mut st, libs) {
        Ok(()) => Reply::Bulk(name.into_bytes()),
        Err(e) => err(e),
    }
}

/// `FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]`.
fn list(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let (mut code, mut pattern) = (false, None);
    let mut i = 2;
    while i < args.len() {
        match lower(&args[i]).as_str() {
            "withcode" if !code => code = true,
            "libraryname" if pattern.is_none() => {
                let Some(p) = args.get(i + 1) else {
                    return err("library name argument was not given");
                };
                pattern = Some(p.clone());
                i += 1;
            }
            _ => {
                return err(format!(
                    "Unknown argument {}",
                    String::from_utf8_lossy(&args[i])
                ))
            }
        }
        i += 1;
    }
    let st = shared.functions.state.lock();
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let out = st
        .libs
        .values()
        .filter(|l| {
            pattern
                .as_ref()
                .is_none_or(|p| crate::glob::glob_match(p, l.name.as_bytes(), true))
        })
        .map(|l| {
            let fns = l
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (bulk("name"), bulk(&f.name)),
                        (
                            bulk("description"),
                            f.description.as_deref().map_or(Reply::Nil, bulk),
                        ),
                        (
                            bulk("flags"),
                            Reply::Set(
                                flag_names(f.flags)
                                    .into_iter()
                                    .map(|n| Reply::Simple(n.into()))
                                    .collect(),
                            ),
                        ),
                    ])
                })
                .collect();
            let mut m = vec![
                (bulk("library_name"), bulk(&l.name)),
                (bulk("engine"), bulk("LUA")),
                (bulk("functions"), Reply::Array(fns)),
            ];
            if code {
                m.push((bulk("library_code"), Reply::Bulk(l.code.clone())));
            }
            Reply::Map(m)
        })
        .collect();
    Reply::Array(out)
}

/// `FUNCTION DUMP`: Redis's payload (each library's code as an RDB string after opcode
/// 245, then the RDB version and a CRC-64 of everything before it).
fn dump(shared: &Shared) -> Reply {
    let st = shared.functions.state.lock();
    let mut out = Vec::new();
    for l in st.libs.values() {
        out.push(OPCODE_FUNCTION2);
        crate::rdb::put_string(&mut out, &l.code);
    }
    crate::rdb::put_footer(&mut out, RDB_VERSION);
    Reply::Bulk(out)
}

/// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`.
fn restore(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let policy = match args.get(3).map(|a| lower(a)) {
        None => "append".to_string(),
        Some(p) if matches!(p.as_str(), "flush" | "append" | "replace") => p,
        Some(_) => {
            return err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )
        }
    };
    let Some(body) = crate::rdb::check_footer(&args[2], RDB_VERSION) else {
        return err("DUMP payload version or checksum are wrong");
    };
    let mut codes = Vec::new();
    let mut at = 0;
    while at < body.len() {
        if body[at] != OPCODE_FUNCTION2 {
            return err("given type is not a function");
        }
        match crate::rdb::get_string(body, at + 1) {
            Some((s, next)) => {
                codes.push(s);
                at = next;
            }
            None => return err("failed loading the given functions payload"),
        }
    }
    let f = &shared.functions;
    let mut st = f.state.lock();
    let mut libs = if policy == "flush" {
        BTreeMap::new()
    } else {
        st.libs.clone()
    };
    for code in codes {
        let lib = match build(shared, &code) {
            Ok(l) => l,
            Err(e) => return err(e),
        };
        if let Err(e) = Functions::insert(&mut libs, lib, policy == "replace", true) {
            return err(e);
        }
    }
    match f.commit(shared, &mut st, libs) {
        Ok(()) => ok(),
        Err(e) => err(e),
    }
}

/// `FUNCTION STATS`.
fn stats(shared: &Shared) -> Reply {
    let (nlibs, nfns, _) = shared.functions.counts();
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    Reply::Map(vec![
        (bulk("running_script"), shared.scripts.running_reply()),
        (
            bulk("engines"),
            Reply::Map(vec![(
                bulk("LUA"),
                Reply::Map(vec![
                    (bulk("libraries_count"), Reply::Integer(nlibs as i64)),
                    (bulk("functions_count"), Reply::Integer(nfns as i64)),
                ]),
            )]),
        ),
    ])
}

/// Redis's reply to a subcommand given the wrong arguments.
fn syntax(sub: &[u8]) -> Reply {
    err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// `FUNCTION <subcommand>`.
pub fn function(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let r = function_run(shared, args);
    // As Redis: a change to the libraries reaches replicas as the command that made it.
    if matches!(
        lower(&args[1]).as_str(),
        "load" | "delete" | "flush" | "restore"
    ) && !r.is_error()
    {
        let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        shared.store.repl.append_command(&a);
    }
    r
}

fn function_run(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let sub = lower(&args[1]);
    match sub.as_str() {
        "restore" if args.len() > 4 => syntax(&args[1]),
        "flush" if args.len() > 3 => syntax(&args[1]),
        "load" => load(shared, args),
        "list" => list(shared, args),
        "delete" => {
            let f = &shared.functions;
            let mut st = f.state.lock();
            let name = String::from_utf8_lossy(&args[2]).into_owned();
            let mut libs = st.libs.clone();
            if libs.remove(&name).is_none() {
                return err("Library not found");
            }
            match f.commit(shared, &mut st, libs) {
                Ok(()) => ok(),
                Err(e) => err(e),
            }
        }
        "flush" => {
            if args.len() == 3 && !matches!(lower(&args[2]).as_str(), "sync" | "async") {
                return err("FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            let f = &shared.functions;
            let mut st = f.state.lock();
            match f.commit(shared, &mut st, BTreeMap::new()) {
                Ok(()) => ok(),
                Err(e) => err(e),
            }
        }
        "dump" => dump(shared),
        "restore" => restore(shared, args),
        "stats" => stats(shared),
        "kill" => shared.scripts.kill(false),
        "help" => crate::cmd::help_lines(&[
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "    Create a new library with the given library name and code.",
                "DELETE <LIBRARY NAME>",
                "    Delete the given library.",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "    Return general information on all the libraries:",
                "    * Library name",
                "    * The engine used to run the Library",
                "    * Library description",
                "    * Functions list",
                "    * Library code (if WITHCODE is given)",
                "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
                "STATS",
                "    Return information about the current function running:",
                "    * Function name",
                "    * Command used to run the function",
                "    * Duration in MS that the function is running",
                "    If no function is running, return nil",
                "    In addition, returns a list of available engines.",
                "KILL",
                "    Kill the current running function.",
                "FLUSH [ASYNC|SYNC]",
                "    Delete all the libraries.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the libraries.",
                "    * SYNC: Synchronously flush the libraries.",
                "DUMP",
                "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
                "    control how to handle existing libraries (default APPEND):",
                "    * FLUSH: delete all existing libraries.",
                "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
                "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
                "      libraries with the new libraries (notice that even on this option there is a chance of failure",
                "      in case of functions name collision with another library).",
                "HELP",
                "    Prints this help.",
        ]),
        _ => crate::cmd::registry::unknown_subcommand(&args[1], "FUNCTION"),
    }
}
