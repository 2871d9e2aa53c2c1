//! The Lua interpreter scripts run in: one per thread, built once (sandbox.lua makes its
//! globals read-only), holding each script compiled the first time that thread runs it.
//! Conversions between Redis replies and Lua values follow Redis 7.0 (`script_lua.c`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use nacre_resp::Reply;

use super::libs;

/// Instructions between two looks at the kill flag (as Redis's count hook).
const HOOK_EVERY: u32 = 100_000;
/// How deep a returned table may nest before its conversion stops (Redis: Lua's C stack).
const MAX_DEPTH: usize = 1000;

/// What a script run asks of its caller while it runs: its commands, and its RESP version.
pub trait Host {
    /// Runs a command for `redis.call`/`redis.pcall`: its reply, or an error message (a
    /// reply error's text, or a plain message that gets the `ERR` code).
    /// `resp` is the protocol the script reads replies in (`redis.setresp`).
    fn command(&mut self, args: Vec<Vec<u8>>, resp: u8) -> Result<Reply, String>;

    /// `redis.acl_check_cmd`: whether the script's user may run `args` (an error for an
    /// unknown command).
    fn acl_check(&mut self, args: &[Vec<u8>]) -> Result<bool, String>;
}

/// One thread's interpreter.
pub struct Vm {
    lua: Lua,
    /// The globals behind the read-only `_G` (where KEYS and ARGV are set).
    hidden: Table,
    /// The table behind the read-only `redis`, where a run sets `call` and `pcall`.
    redis: Table,
    /// What the globals read through while FUNCTION LOAD runs a library's code.
    load_globals: Table,
    /// The table behind that `redis`, where a load sets `register_function`.
    lib_redis: Table,
    /// Count hook calls in the current run (a long run reaches the hook).
    hooks: Rc<Cell<u32>>,
    /// When a FUNCTION LOAD's code must have finished (Redis allows 500 ms).
    load_deadline: Rc<Cell<Option<std::time::Instant>>>,
    runner: Function,
    handler: Function,
    /// A function of ours that does nothing, called before each run: a call of ours
    /// returning leaves the interpreter a spare error slot, so a `redis.call` of thousands
    /// of arguments (up to Lua's 8,000 stack slots) needs no stack slot of its own on entry.
    prime: Function,
    /// Compiled scripts by SHA-1, valid while `generation` is the cache's.
    funcs: HashMap<String, Function>,
    generation: u64,
    /// Functions of the libraries this thread loaded, valid while `fn_generation` is the
    /// library set's.
    functions: HashMap<String, Function>,
    libraries: std::collections::HashSet<String>,
    fn_generation: u64,
    /// The RESP version `redis.setresp` chose for this run.
    resp: Rc<Cell<u8>>,
    /// Set by SCRIPT KILL for the running script (checked by the count hook).
    kill: Rc<RefCell<Option<Arc<AtomicBool>>>>,
}

/// Maps an interpreter error to a message.
fn lua_err(e: mlua::Error) -> String {
    let s = e.to_string();
    let s = s.strip_prefix("runtime error: ").unwrap_or(&s);
    let s = s.split("\nstack traceback").next().unwrap_or(s);
    s.strip_prefix("syntax error: ").unwrap_or(s).to_string()
}

impl Vm {
    fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let g = lua.globals();
        let redis = lua.create_table()?;
        register_api(&lua, &redis)?;
        g.set("redis", redis.clone())?;
        libs::register(&lua, &g)?;
        let resp = Rc::new(Cell::new(2u8));
        let setresp = {
            let resp = resp.clone();
            lua.create_function(move |lua, args: MultiValue| {
                if args.len() != 1 {
                    return raise(lua, "redis.setresp() requires one argument.");
                }
                match number(&args[0]) {
                    Some(n) if n as i64 == 2 || n as i64 == 3 => {
                        resp.set(n as u8);
                        Ok(Value::Nil)
                    }
                    _ => raise(lua, "RESP version must be 2 or 3."),
                }
            })?
        };
        redis.set("setresp", setresp)?;
        let rand = Rc::new(Cell::new(rand48_seed(crate::shared::random_u64() as i64)));
        let math: Table = g.get("math")?;
        {
            let rand = rand.clone();
            math.set(
                "random",
                lua.create_function(move |lua, args: MultiValue| random(lua, &rand, args))?,
            )?;
        }
        math.set(
            "randomseed",
            lua.create_function(move |_, seed: f64| {
                rand.set(rand48_seed(seed as i32 as i64));
                Ok(())
            })?,
        )?;
        let imp = lua.create_table()?;
        imp.set(
            "errtext",
            lua.create_function(|_, v: Value| {
                Ok(match v {
                    Value::Error(e) => Some(error_text(&e)),
                    _ => None,
                })
            })?,
        )?;
        let (hidden, load_globals, lib_redis): (Table, Table, Table) = lua
            .load(include_str!("sandbox.lua"))
            .set_name("@nacre")
            .call(imp.clone())?;
        lib_redis.raw_set(
            "register_function",
            lua.create_function(|_, _: MultiValue| -> mlua::Result<()> {
                Err(mlua::Error::external(ScriptError(
                    "ERR redis.register_function can only be called on FUNCTION LOAD command"
                        .into(),
                )))
            })?,
        )?;
        let runner: Function = lua
            .load(
                "local select, xpcall, unpack = select, xpcall, unpack \
                 return function(f, h, ...) \
                   local n, a = select('#', ...), {...} \
                   return xpcall(function() return f(unpack(a, 1, n)) end, h) \
                 end",
            )
            .set_name("@nacre")
            .eval()?;
        let kill: Rc<RefCell<Option<Arc<AtomicBool>>>> = Rc::new(RefCell::new(None));
        let load_deadline: Rc<Cell<Option<std::time::Instant>>> = Rc::new(Cell::new(None));
        let hooks: Rc<Cell<u32>> = Rc::new(Cell::new(0));
        let handler = {
            let kill = kill.clone();
            lua.create_function(move |lua, e: Value| error_table(lua, e, &kill))?
        };
        // The sandbox moved `redis`'s functions behind its metatable.
        let redis = redis
            .metatable()
            .and_then(|m| m.raw_get::<Table>("__index").ok())
            .ok_or_else(|| mlua::Error::RuntimeError("redis table unprotected".into()))?;
        let outside = lua.create_function(|_, _: MultiValue| -> mlua::Result<()> {
            Err(mlua::Error::external(ScriptError(
                "ERR redis.call/pcall can only be called inside a script invocation".into(),
            )))
        })?;
        redis.raw_set("call", outside.clone())?;
        redis.raw_set("pcall", outside)?;
        let prime = lua.create_function(|_, ()| Ok(()))?;
        Ok(Vm {
            prime,
            lua,
            hidden,
            redis,
            load_globals,
            lib_redis,
            hooks,
            load_deadline,
            runner,
            handler,
            funcs: HashMap::new(),
            generation: 0,
            functions: HashMap::new(),
            libraries: Default::default(),
            fn_generation: 0,
            resp,
            kill,
        })
    }

    /// Runs `f` with this thread's interpreter, whose compiled scripts are dropped if the
    /// cache was flushed since (`generation`).
    pub fn with<R>(generation: u64, f: impl FnOnce(&mut Vm) -> R) -> Result<R, String> {
        thread_local! {
            static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
        }
        VM.with(|cell| {
            let mut slot = cell
                .try_borrow_mut()
                .map_err(|_| "a script cannot run a script".to_string())?;
            if slot.is_none() {
                *slot = Some(Vm::new().map_err(lua_err)?);
            }
            let vm = slot.as_mut().ok_or_else(|| "no interpreter".to_string())?;
            if vm.generation != generation {
                vm.funcs.clear();
                vm.generation = generation;
                vm.lua.gc_collect().map_err(lua_err)?;
            }
            Ok(f(vm))
        })
    }

    /// Compiles `body` (its shebang line, if any, left out but its line feed kept) unless
    /// this thread has it; the error reply of a script that does not compile.
    pub fn compile(&mut self, sha: &str, body: &[u8], shebang_len: usize) -> Result<(), Reply> {
        if self.funcs.contains_key(sha) {
            return Ok(());
        }
        let f = self
            .lua
            .load(&body[shebang_len..])
            .set_name("@user_script")
            .into_function()
            .map_err(|e| {
                Reply::Error(format!(
                    "ERR Error compiling script (new function): {}",
                    lua_err(e)
                ))
            })?;
        self.funcs.insert(sha.to_string(), f);
        Ok(())
    }

    /// Runs compiled script `sha` with KEYS and ARGV set (EVAL) or passed (`fcall`: a
    /// function's keys and arguments tables), its commands going to `host`; its reply.
    /// `funcname` names it in error replies.
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        host: &mut dyn Host,
        kill: Arc<AtomicBool>,
        funcname: &str,
    ) -> Reply {
        let Some(f) = self.funcs.get(sha).cloned() else {
            return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
        };
        self.start(kill);
        let r = (|| {
            self.hidden.raw_set("KEYS", array(&self.lua, keys)?)?;
            self.hidden.raw_set("ARGV", array(&self.lua, argv)?)?;
            self.call(f, None, host, funcname)
        })();
        self.finish(r)
    }

    /// Runs function `name` of a library this thread loaded, with its keys and arguments
    /// as its two arguments (`FCALL`).
    pub fn run_function(
        &mut self,
        name: &str,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        host: &mut dyn Host,
        kill: Arc<AtomicBool>,
    ) -> Reply {
        let Some(f) = self.functions.get(name).cloned() else {
            return Reply::Error("ERR Function not found".into());
        };
        self.start(kill);
        let r = (|| {
            let args = (array(&self.lua, keys)?, array(&self.lua, argv)?);
            self.call(f, Some(args), host, name)
        })();
        self.finish(r)
    }

    /// Whether the last run reached the count hook.
    pub fn last_run_was_long(&self) -> bool {
        self.hooks.get() > 0
    }

    /// Sets the count hook afresh (Lua counts instructions across calls until the hook is
    /// set again): it stops a killed run, and a FUNCTION LOAD past its deadline.
    fn arm(&self) -> mlua::Result<()> {
        self.hooks.set(0);
        let hook = Hook {
            kill: self.kill.clone(),
            deadline: self.load_deadline.clone(),
            count: self.hooks.clone(),
        };
        hook.install(
            &self.lua,
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        )
    }

    fn start(&mut self, kill: Arc<AtomicBool>) {
        let _ = self.arm();
        self.resp.set(2);
        *self.kill.borrow_mut() = Some(kill);
    }

    fn finish(&mut self, r: mlua::Result<Reply>) -> Reply {
        *self.kill.borrow_mut() = None;
        r.unwrap_or_else(|e| Reply::Error(format!("ERR {}", lua_err(e))))
    }

    /// Whether this thread has library `name` of library set `generation` loaded (else its
    /// functions of other generations are dropped).
    pub fn has_library(&mut self, generation: u64, name: &str) -> bool {
        if self.fn_generation != generation {
            self.functions.clear();
            self.libraries.clear();
            self.fn_generation = generation;
        }
        self.libraries.contains(name)
    }

    /// Runs a library's code (after its shebang line) so that it registers its functions:
    /// what it registered (name, description, flags), or the error FUNCTION LOAD answers.
    /// With `keep`, this thread keeps the functions under library `lib`.
    pub fn load_library(
        &mut self,
        lib: &str,
        code: &[u8],
        keep: bool,
    ) -> Result<Vec<super::functions::Registered>, String> {
        let chunk = self
            .lua
            .load(code)
            .set_name("@user_function")
            .into_function()
            .map_err(|e| format!("Error compiling function: {}", lua_err(e)))?;
        let found: RefCell<Vec<(super::functions::Registered, Function)>> =
            RefCell::new(Vec::new());
        let r = self.lua.scope(|scope| {
            let register = scope.create_function(|_, args: MultiValue| {
                let (meta, f) = super::functions::registration(args)
                    .map_err(|e| mlua::Error::external(ScriptError(format!("ERR {e}"))))?;
                let mut found = found.borrow_mut();
                if found.iter().any(|(m, _)| m.name == meta.name) {
                    return Err(mlua::Error::external(ScriptError(
                        "ERR Function already exists in the library".into(),
                    )));
                }
                found.push((meta, f));
                Ok(())
            })?;
            // The code runs with only the library API in sight (and a deadline).
            let g = self
                .lua
                .globals()
                .metatable()
                .ok_or_else(|| mlua::Error::RuntimeError("globals unprotected".into()))?;
            let full = g.raw_get::<Value>("__index")?;
            g.raw_set("__index", self.load_globals.clone())?;
            let outside = self.lib_redis.raw_get::<Value>("register_function")?;
            self.lib_redis.raw_set("register_function", register)?;
            self.load_deadline.set(Some(
                std::time::Instant::now() + std::time::Duration::from_millis(500),
            ));
            self.arm()?;
            let r: mlua::Result<(bool, Value)> = self.runner.call((chunk, self.handler.clone()));
            self.load_deadline.set(None);
            self.lib_redis.raw_set("register_function", outside)?;
            g.raw_set("__index", full)?;
            r
        });
        let (ok, v) = r.map_err(|e| format!("Error registering functions: ERR {}", lua_err(e)))?;
        if !ok {
            let msg = error_field(&v).unwrap_or_else(|| "ERR unknown error".into());
            return Err(format!("Error registering functions: {msg}"));
        }
        let found = found.into_inner();
        let metas = found.iter().map(|(m, _)| m.clone()).collect();
        if keep {
            for (m, f) in found {
                self.functions.insert(m.name, f);
            }
            self.libraries.insert(lib.to_string());
        }
        Ok(metas)
    }

    fn call(
        &self,
        f: Function,
        args: Option<(Table, Table)>,
        host: &mut dyn Host,
        funcname: &str,
    ) -> mlua::Result<Reply> {
        let lua = &self.lua;
        let resp = self.resp.clone();
        let host = RefCell::new(host);
        // One command for both: redis.call raises an error reply, redis.pcall returns it.
        let command = |lua: &Lua, args: MultiValue, raise_errors: bool| -> mlua::Result<Value> {
            let vals: Vec<Value> = args.into_iter().collect();
            let out = match command_args(&vals) {
                Err(e) => Err(e),
                Ok(a) => host
                    .try_borrow_mut()
                    .map_err(|_| mlua::Error::RecursiveMutCallback)?
                    .command(a, resp.get()),
            };
            let v = match out {
                Ok(r) => reply_to_lua(lua, &downgrade(r, resp.get()), resp.get(), 0)?,
                Err(e) => error_value(lua, &e)?,
            };
            if raise_errors {
                if let Some(text) = error_field(&v) {
                    return Err(mlua::Error::external(ScriptError(text)));
                }
            }
            Ok(v)
        };
        let check = |lua: &Lua, args: MultiValue| -> mlua::Result<Value> {
            let vals: Vec<Value> = args.into_iter().collect();
            let a = match command_args(&vals) {
                Ok(a) => a,
                Err(e) => return raise(lua, &e),
            };
            let r = host
                .try_borrow_mut()
                .map_err(|_| mlua::Error::RecursiveMutCallback)?
                .acl_check(&a);
            match r {
                Ok(b) => Ok(Value::Boolean(b)),
                Err(e) => raise(lua, &e),
            }
        };
        lua.scope(|scope| {
            let call = scope.create_function(|lua, args: MultiValue| command(lua, args, true))?;
            let pcall = scope.create_function(|lua, args: MultiValue| command(lua, args, false))?;
            let acl = scope.create_function(check)?;
            let outside = self.redis.raw_get::<Value>("call")?;
            let outside_acl = self.redis.raw_get::<Value>("acl_check_cmd")?;
            self.redis.raw_set("call", call)?;
            self.redis.raw_set("pcall", pcall)?;
            self.redis.raw_set("acl_check_cmd", acl)?;
            self.prime.call::<()>(())?;
            let r: mlua::Result<(bool, Value)> = match args {
                Some((k, a)) => self.runner.call((f, self.handler.clone(), k, a)),
                None => self.runner.call((f, self.handler.clone())),
            };
            self.redis.raw_set("call", outside.clone())?;
            self.redis.raw_set("pcall", outside)?;
            self.redis.raw_set("acl_check_cmd", outside_acl)?;
            let (ok, v) = r?;
            if ok {
                return Ok(lua_to_reply(&v, resp.get(), 0));
            }
            Ok(failure_reply(&v, funcname))
        })
    }
}

/// The reply of a script that raised `v` (the error handler made it a table).
fn failure_reply(v: &Value, funcname: &str) -> Reply {
    let Value::Table(t) = v else {
        let msg = match v {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            _ => "execution failure".into(),
        };
        let msg: String = msg.chars().take(100).collect();
        return Reply::Error(format!("ERR Error running script {funcname}, {msg}"));
    };
    let text = |k: &str| lua_text(&t.raw_get::<Value>(k).ok()?);
    let msg = text("err").unwrap_or_else(|| "ERR unknown error".into());
    match (text("source"), text("line")) {
        (Some(src), Some(line)) => {
            Reply::Error(format!("{msg} script: {funcname}, on {src}:{line}."))
        }
        _ => Reply::Error(msg),
    }
}

/// The count hook's state.
#[derive(Clone)]
struct Hook {
    kill: Rc<RefCell<Option<Arc<AtomicBool>>>>,
    deadline: Rc<Cell<Option<std::time::Instant>>>,
    count: Rc<Cell<u32>>,
}

impl Hook {
    /// Sets the hook on `lua`. It stops a killed run — and then fires on every line, so
    /// that a script catching the error with pcall is stopped the next time it runs code
    /// outside the pcall (as Redis does) — and a FUNCTION LOAD past its deadline.
    fn install(self, lua: &Lua, triggers: HookTriggers) -> mlua::Result<()> {
        lua.set_hook(triggers, move |lua, _| {
            self.count.set(self.count.get().saturating_add(1));
            if killed(&self.kill) {
                self.clone().install(lua, HookTriggers::EVERY_LINE)?;
                return Err(mlua::Error::RuntimeError(KILLED.into()));
            }
            if self
                .deadline
                .get()
                .is_some_and(|d| std::time::Instant::now() > d)
            {
                return Err(mlua::Error::external(ScriptError(
                    "ERR FUNCTION LOAD timeout".into(),
                )));
            }
            super::worker::run_went_long(self.count.get());
            Ok(VmState::Continue)
        })
    }
}

/// The text of SCRIPT KILL's error.
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

fn killed(kill: &Rc<RefCell<Option<Arc<AtomicBool>>>>) -> bool {
    kill.borrow()
        .as_ref()
        .is_some_and(|k| k.load(Ordering::Acquire))
}

/// The error handler: an error as the table Redis makes of it (`err`, and the `source` and
/// `line` of the script code that raised it).
fn error_table(
    lua: &Lua,
    e: Value,
    kill: &Rc<RefCell<Option<Arc<AtomicBool>>>>,
) -> mlua::Result<Table> {
    let t = match e {
        Value::Table(t) => t,
        Value::String(s) => {
            let t = lua.create_table()?;
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&s.as_bytes());
            t.raw_set("err", lua.create_string(&m)?)?;
            t
        }
        other => {
            let t = lua.create_table()?;
            let msg = if killed(kill) {
                KILLED.to_string()
            } else {
                match &other {
                    Value::Error(e) => error_text(e),
                    v => format!("ERR {}", v.to_string().unwrap_or_else(|_| "error".into())),
                }
            };
            t.raw_set("err", msg)?;
            t
        }
    };
    // The first frame of script code (not C, not the sandbox's own wrappers).
    for level in 1..64 {
        let info = lua.inspect_stack(level, |d| {
            let s = d.source();
            (s.source.map(|x| x.into_owned()), s.what, d.current_line())
        });
        let Some((source, what, line)) = info else {
            break;
        };
        if what == "C" || source.as_deref() == Some("@nacre") {
            continue;
        }
        if let Some(src) = source {
            t.raw_set("source", src)?;
        }
        if let Some(l) = line {
            t.raw_set("line", l as i64)?;
        }
        break;
    }
    Ok(t)
}

/// Raises `msg` as Redis raises its API's errors (`{err = "ERR msg"}`).
fn raise(_: &Lua, msg: &str) -> mlua::Result<Value> {
    Err(mlua::Error::external(ScriptError(format!("ERR {msg}"))))
}

/// A value as a number, the way Lua coerces one (numbers, and strings holding one).
pub(super) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A value's bytes the way Lua coerces it to a string (strings, and numbers as Lua prints
/// them).
pub(super) fn lua_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(format_number(*n).into_bytes()),
        _ => None,
    }
}

/// [`lua_bytes`] as text (bytes that are not UTF-8 replaced).
pub(super) fn lua_text(v: &Value) -> Option<String> {
    lua_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A number as Lua prints it (`%.14g`).
pub fn format_number(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    fmt_g(n, 14)
}

/// `n` as C's `%.{prec}g`.
pub fn fmt_g(n: f64, prec: usize) -> String {
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    if !n.is_finite() {
        return format_number(n);
    }
    let sci = format!("{:.*e}", prec.saturating_sub(1), n);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= prec as i64 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        trim(&format!(
            "{:.*}",
            (prec as i64 - 1 - exp).max(0) as usize,
            n
        ))
    }
}

/// A Lua table of `items` (KEYS, ARGV).
fn array(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, it) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(it)?)?;
    }
    Ok(t)
}

/// A command's arguments from `redis.call`'s: strings, and numbers as `%.17g`.
fn command_args(vals: &[Value]) -> Result<Vec<Vec<u8>>, String> {
    if vals.is_empty() {
        return Err("Please specify at least one argument for this redis lib call".into());
    }
    vals.iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(i.to_string().into_bytes()),
            Value::Number(n) => Ok(fmt_g(*n, 17).into_bytes()),
            _ => Err("Lua redis lib command arguments must be strings or integers".into()),
        })
        .collect()
}

/// The error table of message `e` (`luaPushErrorBuff`): a reply error's text keeps its code;
/// a plain message gets `ERR`.
fn error_value(lua: &Lua, e: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    let text = match e.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {msg}"),
            None => format!("ERR {rest}"),
        },
        None => format!("ERR {e}"),
    };
    t.raw_set("err", text.trim_end_matches(['\r', '\n']))?;
    Ok(Value::Table(t))
}

/// The `err` text of an error table.
fn error_field(v: &Value) -> Option<String> {
    match v {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// An error reply `redis.call` raises: a Rust error, so that `redis.call` stays a C function
/// (a Lua wrapper would take the caller's stack frame in `return redis.call(...)`), turned
/// back into Redis's error table by the error handler and by `pcall`.
#[derive(Debug)]
struct ScriptError(String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

/// The text of an error raised from Rust: a [`ScriptError`]'s own, else the message with
/// `ERR`.
fn error_text(e: &mlua::Error) -> String {
    let mut cur = e;
    loop {
        match cur {
            mlua::Error::CallbackError { cause, .. } => cur = cause,
            mlua::Error::ExternalError(x) => {
                if let Some(s) = x.downcast_ref::<ScriptError>() {
                    return s.0.clone();
                }
                return format!("ERR {x}");
            }
            other => return format!("ERR {}", lua_err(other.clone())),
        }
    }
}

/// A reply as a RESP2 client would read it, for scripts that did not ask for RESP3.
fn downgrade(r: Reply, resp: u8) -> Reply {
    if resp == 3 {
        return r;
    }
    match r {
        Reply::Map(kv) => Reply::Array(
            kv.into_iter()
                .flat_map(|(k, v)| [downgrade(k, 2), downgrade(v, 2)])
                .collect(),
        ),
        Reply::Set(v) | Reply::Array(v) | Reply::Push(v) => {
            Reply::Array(v.into_iter().map(|x| downgrade(x, 2)).collect())
        }
        Reply::Double(d) => Reply::Bulk(nacre_resp::format_double(d).into_bytes()),
        Reply::Boolean(b) => Reply::Integer(i64::from(b)),
        Reply::BigNumber(n) => Reply::Bulk(n.into_bytes()),
        Reply::Verbatim { text, .. } => Reply::Bulk(text),
        Reply::NilArray => Reply::Nil,
        Reply::BlobError(b) => Reply::Error(String::from_utf8_lossy(&b).into_owned()),
        other => other,
    }
}

/// A command's reply as the script sees it (`redisProtocolToLuaType`).
fn reply_to_lua(lua: &Lua, r: &Reply, resp: u8, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DEPTH {
        return error_value(lua, "reached lua stack limit");
    }
    let single = |k: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    Ok(match r {
        Reply::Integer(i) => Value::Number(*i as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Simple(s) => single("ok", Value::String(lua.create_string(s)?))?,
        Reply::Error(e) => error_value(lua, &format!("-{e}"))?,
        Reply::BlobError(e) => error_value(lua, &format!("-{}", String::from_utf8_lossy(e)))?,
        // RESP2's null bulk and null array read as false; RESP3's null as nil.
        Reply::Nil | Reply::NilArray if resp == 2 => Value::Boolean(false),
        Reply::Nil | Reply::NilArray => Value::Nil,
        Reply::Boolean(b) => Value::Boolean(*b),
        Reply::Double(d) => single("double", Value::Number(*d))?,
        Reply::BigNumber(n) => single("big_number", Value::String(lua.create_string(n)?))?,
        Reply::Verbatim { format, text } => {
            let t = lua.create_table()?;
            t.raw_set("format", format.as_str())?;
            t.raw_set("string", lua.create_string(text)?)?;
            single("verbatim_string", Value::Table(t))?
        }
        Reply::Array(items) | Reply::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, it, resp, depth + 1)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(kv) => {
            let t = lua.create_table()?;
            for (k, v) in kv {
                t.raw_set(
                    reply_to_lua(lua, k, resp, depth + 1)?,
                    reply_to_lua(lua, v, resp, depth + 1)?,
                )?;
            }
            single("map", Value::Table(t))?
        }
        Reply::Set(items) => {
            let t = lua.create_table()?;
            for it in items {
                t.raw_set(reply_to_lua(lua, it, resp, depth + 1)?, true)?;
            }
            single("set", Value::Table(t))?
        }
    })
}

/// A script's return value as a reply (`luaReplyToRedisReply`).
fn lua_to_reply(v: &Value, resp: u8, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    match v {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) if resp == 3 => Reply::Boolean(*b),
        Value::Boolean(true) => Reply::Integer(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(if n.is_nan() { i64::MIN } else { *n as i64 }),
        Value::Table(t) => table_to_reply(t, resp, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, resp: u8, depth: usize) -> Reply {
    let field = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        return Reply::Error(String::from_utf8_lossy(&e.as_bytes()).into_owned());
    }
    if let Value::String(s) = field("ok") {
        let s = String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " ");
        return Reply::Simple(s);
    }
    if let Some(d) = number(&field("double"))
        .filter(|_| matches!(field("double"), Value::Number(_) | Value::Integer(_)))
    {
        return Reply::Double(d);
    }
    if let Value::String(s) = field("big_number") {
        return Reply::BigNumber(String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " "));
    }
    if let Value::Table(v) = field("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            return Reply::Verbatim {
                format: String::from_utf8_lossy(&f.as_bytes()).into_owned(),
                text: s.as_bytes().to_vec(),
            };
        }
    }
    if let Value::Table(m) = field("map") {
        let mut out = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            out.push((
                lua_to_reply(&k, resp, depth + 1),
                lua_to_reply(&v, resp, depth + 1),
            ));
        }
        return Reply::Map(out);
    }
    if let Value::Table(s) = field("set") {
        let out = s
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| lua_to_reply(&k, resp, depth + 1))
            .collect();
        return Reply::Set(out);
    }
    let mut out = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => out.push(lua_to_reply(&v, resp, depth + 1)),
        }
    }
    Reply::Array(out)
}

/// The `redis` table's functions that need no run (the run's are set by `Vm::call`).
fn register_api(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    redis.set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise(lua, "wrong number of arguments");
            }
            let bytes = lua_bytes(&args[0]).unwrap_or_default();
            Ok(Value::String(lua.create_string(super::sha1hex(&bytes))?))
        })?,
    )?;
    redis.set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
            (1, Some(Value::String(s))) => {
                let s = String::from_utf8_lossy(&s.as_bytes()).into_owned();
                let e = if s.starts_with('-') {
                    s
                } else {
                    format!("-{s}")
                };
                error_value(lua, &e)
            }
            _ => error_value(lua, "wrong number or type of arguments"),
        })?,
    )?;
    redis.set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
            (1, Some(Value::String(s))) => {
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(Value::Table(t))
            }
            _ => error_value(lua, "wrong number or type of arguments"),
        })?,
    )?;
    redis.set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return raise(lua, "redis.log() requires two arguments or more.");
            }
            let Some(level) = number(&args[0]).filter(|_| !matches!(args[0], Value::String(_)))
            else {
                return raise(lua, "First argument must be a number (log level).");
            };
            let level = level as i64;
            if !(0..=3).contains(&level) {
                return raise(lua, "Invalid debug level.");
            }
            let parts: Vec<String> = args.iter().skip(1).filter_map(lua_text).collect();
            let line = parts.join(" ");
            match level {
                0 => tracing::debug!(target: "script", "{line}"),
                1 | 2 => tracing::info!(target: "script", "{line}"),
                _ => tracing::warn!(target: "script", "{line}"),
            }
            Ok(Value::Nil)
        })?,
    )?;
    redis.set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise(lua, "redis.set_repl() requires two arguments.");
            }
            match number(&args[0]) {
                Some(f) if (f as i64) & !3 == 0 => Ok(Value::Nil),
                _ => raise(
                    lua,
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                ),
            }
        })?,
    )?;
    redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    // Outside a run (a library's load), nobody's permissions apply: any known command.
    redis.set(
        "acl_check_cmd",
        lua.create_function(|lua, args: MultiValue| {
            let a = match command_args(&args.into_iter().collect::<Vec<_>>()) {
                Ok(a) => a,
                Err(e) => return raise(lua, &e),
            };
            match crate::cmd::registry::lookup_bytes(&a[0]) {
                Some(_) => Ok(Value::Boolean(true)),
                None => raise(lua, "Invalid command passed to redis.acl_check_cmd()"),
            }
        })?,
    )?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.set(k, v)?;
    }
    redis.set("REDIS_VERSION", crate::REDIS_VERSION)?;
    redis.set("REDIS_VERSION_NUM", version_num())?;
    Ok(())
}

/// `REDIS_VERSION` as Redis numbers it (`0x00MMmmpp`).
fn version_num() -> i64 {
    let mut parts = crate::REDIS_VERSION
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    (a << 16) | (b << 8) | c
}

/// The 48-bit state `srand48(seed)` starts from.
fn rand48_seed(seed: i64) -> u64 {
    (((seed as u64) & 0xFFFF_FFFF) << 16) | 0x330E
}

/// `lrand48()`: the next 31-bit number of the 48-bit linear congruential generator.
fn rand48_next(state: &Cell<u64>) -> u32 {
    let x = state.get().wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & ((1 << 48) - 1);
    state.set(x);
    (x >> 17) as u32
}

/// `math.random` as Redis defines it (the same sequence for the same seed everywhere).
fn random(lua: &Lua, state: &Cell<u64>, args: MultiValue) -> mlua::Result<Value> {
    const MAX: u32 = i32::MAX as u32;
    let r = f64::from(rand48_next(state) % MAX) / f64::from(MAX);
    let int = |v: &Value, i: usize| -> mlua::Result<i64> {
        number(v).map(|n| n as i64).ok_or_else(|| {
            mlua::Error::RuntimeError(format!("bad argument #{i} to 'random' (number expected)"))
        })
    };
    match args.len() {
        0 => Ok(Value::Number(r)),
        1 => {
            let u = int(&args[0], 1)?;
            if u < 1 {
                return Err(mlua::Error::RuntimeError(
                    "bad argument #1 to 'random' (interval is empty)".into(),
                ));
            }
            Ok(Value::Number((r * u as f64).floor() + 1.0))
        }
        2 => {
            let (l, u) = (int(&args[0], 1)?, int(&args[1], 2)?);
            if l > u {
                return Err(mlua::Error::RuntimeError(
                    "bad argument #2 to 'random' (interval is empty)".into(),
                ));
            }
            Ok(Value::Number((r * (u - l + 1) as f64).floor() + l as f64))
        }
        _ => {
            let _ = lua;
            Err(mlua::Error::RuntimeError(
                "wrong number of arguments".into(),
            ))
        }
    }
}
