//! The command registry: every supported command with its arity, flags, key positions,
//! subcommands and documentation, built from the list each family file exports (its
//! `COMMANDS`). Dispatch, `COMMAND INFO/DOCS/LIST` and EXEC read it; nothing else names
//! commands.

use std::collections::HashMap;
use std::sync::OnceLock;

use nacre_resp::Reply;
use smallvec::SmallVec;

pub use super::flags::{Acl, Flags, Local};
use super::{CmdResult, Ctx, Outcome};
use crate::client::Client;
use crate::shared::Shared;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Inside a transaction holding its keys.
    Key(fn(&mut Ctx<'_, '_>, &[Vec<u8>]) -> CmdResult),
    /// On the connection, outside any transaction.
    Conn(fn(&Shared, &mut Client, &[Vec<u8>]) -> Outcome),
}

/// Keys with their databases.
pub type KeyList = Vec<(usize, Vec<u8>)>;

/// Finds a command's keys from its database, arguments and the number of databases.
pub type KeysFn = fn(usize, &[Vec<u8>], usize) -> Result<KeyList, Reply>;

/// Where a command's keys are.
#[derive(Clone, Copy)]
pub enum Keys {
    /// None.
    None,
    /// `first`, `last` (negative: from the end), `step`.
    Range(i32, i32, i32),
    /// Computed from the arguments (keys in other databases, a key count), with the
    /// (first, last, step) Redis reports for it.
    Custom(KeysFn, i32, i32, i32),
}

/// A subcommand of a container command (`CONFIG GET`): what Redis reports for it, and the
/// flags dispatch checks when it runs. Its container's handler runs it.
pub struct Sub {
    /// Lowercase name, without the container's.
    pub name: &'static str,
    /// Redis arity (counting the container's name).
    pub arity: i32,
    /// Redis's flags.
    pub flags: Flags,
    /// Redis's ACL categories.
    pub acl: Acl,
    /// (first, last, step) of its keys.
    pub keys: (i32, i32, i32),
}

/// One command.
pub struct Command {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis arity.
    pub arity: i32,
    /// Redis's command flags.
    pub flags: Flags,
    /// Redis's ACL categories.
    pub acl: Acl,
    /// Nacre's flags.
    pub local: Local,
    /// Key positions.
    pub keys: Keys,
    /// Command group for `COMMAND DOCS`.
    pub group: &'static str,
    /// First version with it.
    pub since: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Subcommands (a container command's; empty otherwise).
    pub subs: &'static [Sub],
    /// The handler.
    pub run: Run,
}

impl Command {
    /// (first, last, step) as `COMMAND INFO` reports them.
    pub fn key_spec(&self) -> (i64, i64, i64) {
        match self.keys {
            Keys::None => (0, 0, 0),
            Keys::Range(f, l, s) | Keys::Custom(_, f, l, s) => (f.into(), l.into(), s.into()),
        }
    }

    /// The subcommand `args` names, if this is a container and it names one it has.
    pub fn sub(&self, args: &[Vec<u8>]) -> Option<&'static Sub> {
        let name = args.get(1)?;
        self.subs
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }
}

/// A command's name as Redis reports it, with its subcommand's (`config|get`).
pub fn full_name(name: &str, sub: Option<&str>) -> String {
    match sub {
        Some(sub) => format!("{name}|{sub}"),
        None => name.to_string(),
    }
}

/// Builds a [`Command`]: name, arity, `[Redis flags]`, `[ACL categories]`, `[Nacre flags]`,
/// keys, group, since, summary, handler, and for a container its subcommands.
macro_rules! cmd {
    ($name:literal, $arity:expr, [$($f:ident)*], [$($a:ident)*], [$($l:ident)*], $keys:expr,
     $group:literal, $since:literal, $summary:literal, $run:expr $(, $subs:expr)?) => {
        $crate::cmd::registry::Command {
            name: $name,
            arity: $arity,
            flags: $crate::cmd::registry::Flags::empty()$(.union($crate::cmd::registry::Flags::$f))*,
            acl: $crate::cmd::registry::Acl::empty()$(.union($crate::cmd::registry::Acl::$a))*,
            local: $crate::cmd::registry::Local::empty()$(.union($crate::cmd::registry::Local::$l))*,
            keys: $keys,
            group: $group,
            since: $since,
            summary: $summary,
            subs: $crate::cmd::registry::subs_or_none!($($subs)?),
            run: $run,
        }
    };
}

/// The subcommand list of [`cmd!`], empty when none is given.
macro_rules! subs_or_none {
    () => {
        &[]
    };
    ($subs:expr) => {
        $subs
    };
}

/// Builds a [`Sub`]: name, arity, `[Redis flags]`, `[ACL categories]`, (first, last, step).
macro_rules! sub {
    ($name:literal, $arity:expr, [$($f:ident)*], [$($a:ident)*], ($first:expr, $last:expr, $step:expr)) => {
        $crate::cmd::registry::Sub {
            name: $name,
            arity: $arity,
            flags: $crate::cmd::registry::Flags::empty()$(.union($crate::cmd::registry::Flags::$f))*,
            acl: $crate::cmd::registry::Acl::empty()$(.union($crate::cmd::registry::Acl::$a))*,
            keys: ($first, $last, $step),
        }
    };
}

pub(crate) use {cmd, sub, subs_or_none};

/// Every family's command list.
fn families() -> [&'static [Command]; 25] {
    use super::*;
    [
        connection::COMMANDS,
        cluster::COMMANDS,
        replication::COMMANDS,
        acl::COMMANDS,
        crate::script::COMMANDS,
        pubsub::COMMANDS,
        server::COMMANDS,
        multi::COMMANDS,
        keys::COMMANDS,
        migrate::COMMANDS,
        memory::COMMANDS,
        latency::COMMANDS,
        sort::COMMANDS,
        strings::COMMANDS,
        hashes::COMMANDS,
        lists::COMMANDS,
        blocking::COMMANDS,
        hll::COMMANDS,
        geo::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        zsetops::COMMANDS,
        streams::COMMANDS,
        stream_groups::COMMANDS,
        replicaof::COMMANDS,
    ]
}

/// Every supported command, in family order.
pub fn all() -> &'static [&'static Command] {
    static ALL: OnceLock<Vec<&'static Command>> = OnceLock::new();
    ALL.get_or_init(|| families().into_iter().flatten().collect())
}

/// The command named `name` (lowercase).
pub fn lookup(name: &str) -> Option<&'static Command> {
    static MAP: OnceLock<HashMap<&'static str, &'static Command>> = OnceLock::new();
    MAP.get_or_init(|| all().iter().map(|c| (c.name, *c)).collect())
        .get(name)
        .copied()
}

/// The command named `name` in any case, without allocating.
pub fn lookup_bytes(name: &[u8]) -> Option<&'static Command> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    lookup(std::str::from_utf8(&buf[..name.len()]).ok()?)
}

/// The keys `cmd` names in `args`, with their databases.
pub fn keys_of(
    cmd: &Command,
    db: usize,
    args: &[Vec<u8>],
    databases: usize,
) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    match cmd.keys {
        Keys::None => Ok(Vec::new()),
        Keys::Custom(f, ..) => f(db, args, databases),
        Keys::Range(first, last, step) => Ok(range_keys(cmd, db, args, (first, last, step))?
            .into_iter()
            .map(|(d, k)| (d, k.to_vec()))
            .collect()),
    }
}

/// A command's keys, as [`keys_of`] finds them, borrowed: from `args` where they are
/// arguments (no copy), from `owned` where a command computes them.
pub type KeyRefs<'a> = SmallVec<[(usize, &'a [u8]); 4]>;

/// [`keys_of`] without copying keys that are arguments; computed keys go into `owned`.
pub fn key_refs<'a>(
    cmd: &Command,
    db: usize,
    args: &'a [Vec<u8>],
    databases: usize,
    owned: &'a mut Vec<(usize, Vec<u8>)>,
) -> Result<KeyRefs<'a>, Reply> {
    match cmd.keys {
        Keys::Range(first, last, step) => range_keys(cmd, db, args, (first, last, step)),
        _ => {
            *owned = keys_of(cmd, db, args, databases)?;
            Ok(owned.iter().map(|(d, k)| (*d, k.as_slice())).collect())
        }
    }
}

/// The arguments at positions `first..=last` by `step` (`last` negative: from the end); a
/// command of key-value pairs (`step` 2) with an odd tail is an arity error.
fn range_keys<'a>(
    cmd: &Command,
    db: usize,
    args: &'a [Vec<u8>],
    (first, last, step): (i32, i32, i32),
) -> Result<KeyRefs<'a>, Reply> {
    let n = args.len() as i32;
    if step == 2 && (n - first) % 2 != 0 {
        return Err(super::arity_error(cmd.name));
    }
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    let mut out = KeyRefs::new();
    let mut i = first;
    while i <= last && i < n {
        out.push((db, args[i as usize].as_slice()));
        i += step;
    }
    Ok(out)
}

/// `ERR` for a subcommand that does not exist.
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    let mut msg = b"unknown subcommand '".to_vec();
    msg.extend(sub.iter().take(128));
    msg.extend_from_slice(format!("'. Try {} HELP.", cmd.to_ascii_uppercase()).as_bytes());
    super::err_bytes(&msg)
}
