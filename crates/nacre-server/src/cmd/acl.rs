//! `ACL` and the permission check every command passes (`crate::acl` holds the users).

use std::sync::Arc;

use nacre_resp::Reply;

use super::args::{is, lower};
use super::registry::{self, cmd, sub, unknown_subcommand, Command, Keys, Run::Conn, Sub};
use super::{err, err_bytes, help_lines, ok, Outcome};
use crate::acl::selector::{self, READ, WRITE};
use crate::acl::{Denied, LogEntry, Request, User};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

/// The user `client` runs as, read again when users changed (A2).
pub fn user_of(shared: &Shared, client: &mut Client) -> Option<Arc<User>> {
    let generation = shared.acl.generation();
    if let Some((g, u)) = &client.acl_user {
        if *g == generation {
            return Some(u.clone());
        }
    }
    let name = client.info.user.lock().clone();
    let u = shared.acl.get(&name)?;
    client.acl_user = Some((generation, u.clone()));
    Some(u)
}

/// What `cmd` (with `sub`) asks of the permissions with `args`.
fn request<'a>(
    shared: &Shared,
    db: usize,
    cmd: &Command,
    sub: Option<&Sub>,
    args: &'a [Vec<u8>],
) -> Option<Request<'a>> {
    let id = selector::id_running(cmd, sub)?;
    let mut keys = Vec::new();
    if !matches!(cmd.keys, Keys::None) {
        let name = registry::full_name(cmd.name, sub.map(|s| s.name));
        let found = registry::keys_of(cmd, db, args, shared.store.databases()).unwrap_or_default();
        // Where each key is: by the range for commands that have one; otherwise the next
        // argument equal to it, searched from the end (keys follow the other arguments, as
        // MIGRATE's KEYS and XREAD's STREAMS do).
        let positions: Vec<usize> = match cmd.keys {
            Keys::Range(first, _, step) => (0..found.len())
                .map(|i| first as usize + i * step.max(1) as usize)
                .collect(),
            _ => {
                let mut out = Vec::with_capacity(found.len());
                let mut from = args.len();
                for (_, k) in found.iter().rev() {
                    from = (1..from).rev().find(|&i| args[i] == *k).unwrap_or(from);
                    out.push(from);
                }
                out.reverse();
                out
            }
        };
        for at in positions {
            if at >= args.len() {
                continue;
            }
            let mut need = 0;
            for f in super::keyspecs::flags_of(&name, args, at) {
                match *f {
                    "access" => need |= READ,
                    "insert" | "delete" | "update" => need |= WRITE,
                    _ => {}
                }
            }
            keys.push((at, need));
        }
    }
    let channels = match cmd.name {
        "publish" => vec![(1, false)],
        "subscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    };
    Some(Request {
        id,
        keys,
        channels,
        args,
    })
}

/// Whether `client`'s user may read every key with `cmd` (SORT's `BY` and `GET` patterns).
pub fn reads_every_key(shared: &Shared, client: &Client, cmd: &Command, args: &[Vec<u8>]) -> bool {
    let user = match &client.acl_user {
        Some((g, u)) if *g == shared.acl.generation() => Some(u.clone()),
        _ => shared.acl.get(&client.info.user.lock()),
    };
    let Some(user) = user else {
        return false;
    };
    if user.unrestricted() {
        return true;
    }
    request(shared, client.db, cmd, cmd.sub(args), args)
        .is_some_and(|req| user.every_key(&req, READ))
}

/// Where a command was refused, for the log: `toplevel`, `multi` or `lua`.
pub type Context = &'static str;

/// Checks that `client` may run `cmd` with `args`; on refusal logs it and says why.
pub fn permit(
    shared: &Shared,
    client: &mut Client,
    cmd: &Command,
    sub: Option<&Sub>,
    args: &[Vec<u8>],
    context: Context,
) -> Result<(), Denied> {
    let Some(user) = user_of(shared, client) else {
        return Err(Denied::Command);
    };
    if user.unrestricted() {
        return Ok(());
    }
    let Some(req) = request(shared, client.db, cmd, sub, args) else {
        return Ok(());
    };
    user.check(&req).inspect_err(|d| {
        let full = registry::full_name(cmd.name, sub.map(|s| s.name));
        let (reason, object) = match *d {
            Denied::Command => ("command", full.into_bytes()),
            Denied::Key(i) => ("key", args[i].clone()),
            Denied::Channel(i) => ("channel", args[i].clone()),
        };
        log(shared, client, reason, context, object, user.name.clone());
    })
}

/// Adds an `ACL LOG` entry.
pub fn log(
    shared: &Shared,
    client: &Client,
    reason: &'static str,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
) {
    let max = shared.config.read().params.uint("acllog-max-len") as usize;
    shared.acl.log(
        LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            at_ms: crate::shared::now_ms(),
            client: client.info.line(),
        },
        max,
    );
}

/// The reply to a command refused at the top level or in MULTI.
pub fn denied_reply(d: Denied, cmd: &Command, sub: Option<&Sub>) -> String {
    match d {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            registry::full_name(cmd.name, sub.map(|s| s.name))
        ),
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    }
}

/// The error a script's command gets when refused.
pub fn denied_in_script(d: Denied) -> String {
    let why = match d {
        Denied::Command => "can't run this command or subcommand",
        Denied::Key(_) => {
            "can't access at least one of the keys mentioned in the command arguments"
        }
        Denied::Channel(_) => "can't publish to the channel mentioned in the command",
    };
    format!("The user executing the script {why}")
}

/// Whether user `name` may run `args` (DRYRUN, `redis.acl_check_cmd`): `None` when allowed,
/// else why not, as DRYRUN says it.
pub fn dry_run(
    shared: &Shared,
    user: &User,
    db: usize,
    args: &[Vec<u8>],
) -> Result<Option<String>, Reply> {
    let Some(cmd) = registry::lookup_bytes(&args[0]) else {
        return Err(err_bytes(
            &[b"Command '", args[0].as_slice(), b"' not found"].concat(),
        ));
    };
    let sub = cmd.sub(args);
    let arity = sub.map_or(cmd.arity, |s| s.arity);
    let full = registry::full_name(cmd.name, sub.map(|s| s.name));
    if !super::arity_ok(arity, args.len()) {
        return Err(err(format!(
            "wrong number of arguments for '{full}' command"
        )));
    }
    let Some(req) = request(shared, db, cmd, sub, args) else {
        return Ok(None);
    };
    Ok(match user.check(&req) {
        Ok(()) => None,
        Err(Denied::Command) => Some(format!(
            "This user has no permissions to run the '{full}' command"
        )),
        Err(Denied::Key(i)) => Some(format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(&args[i])
        )),
        Err(Denied::Channel(i)) => Some(format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&args[i])
        )),
    })
}

/// Joins selector words split over arguments (`(~x` `+get)`) as Redis does.
fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, Reply> {
    crate::acl::file::merge_selectors(args).map_err(|start| {
        let mut m = b"Unmatched parenthesis in acl selector starting at '".to_vec();
        m.extend_from_slice(&start);
        m.extend_from_slice(b"'.");
        err_bytes(&m)
    })
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn getuser(u: &User) -> Reply {
    let root = &u.selectors[0];
    let channels = |s: &crate::acl::Selector| {
        if s.all_channels {
            "&*".to_string()
        } else {
            s.channels
                .iter()
                .map(|c| format!("&{}", String::from_utf8_lossy(c)))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let selectors = u.selectors[1..]
        .iter()
        .map(|s| {
            Reply::Map(vec![
                (bulk("commands"), bulk(&s.describe_commands())),
                (bulk("keys"), bulk(&s.describe_keys())),
                (bulk("channels"), bulk(&channels(s))),
            ])
        })
        .collect();
    Reply::Map(vec![
        (
            bulk("flags"),
            Reply::Array(u.flags().into_iter().map(bulk).collect()),
        ),
        (
            bulk("passwords"),
            Reply::Array(u.passwords.iter().map(|p| bulk(p)).collect()),
        ),
        (bulk("commands"), bulk(&root.describe_commands())),
        (bulk("keys"), bulk(&root.describe_keys())),
        (bulk("channels"), bulk(&channels(root))),
        (bulk("selectors"), Reply::Array(selectors)),
    ])
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

/// `ACL CAT|DELUSER|DRYRUN|GENPASS|GETUSER|HELP|LIST|LOAD|LOG|SAVE|SETUSER|USERS|WHOAMI`.
fn acl(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let op = lower(&args[1]);
    let n = args.len();
    let r = match op.as_str() {
        "help" if n == 2 => help_lines(HELP),
        "setuser" if n >= 3 => setuser(shared, &args[2], &args[3..]),
        "getuser" if n == 3 => shared.acl.get(&args[2]).map_or(Reply::Nil, |u| getuser(&u)),
        "deluser" if n >= 3 => {
            let mut gone = 0;
            for name in &args[2..] {
                if name.as_slice() == b"default" {
                    return reply(err("The 'default' user cannot be removed"));
                }
            }
            for name in &args[2..] {
                if shared.acl.delete(name) {
                    gone += 1;
                    for c in shared.clients.lock().values() {
                        if c.user.lock().as_slice() == name.as_slice() {
                            c.kill();
                        }
                    }
                }
            }
            if gone > 0 {
                if let Err(e) = save(shared) {
                    return reply(e);
                }
            }
            Reply::Integer(gone)
        }
        "users" if n == 2 => Reply::Array(
            shared
                .acl
                .all()
                .iter()
                .map(|u| Reply::Bulk(u.name.clone()))
                .collect(),
        ),
        "list" if n == 2 => Reply::Array(
            shared
                .acl
                .all()
                .iter()
                .map(|u| {
                    let mut l = b"user ".to_vec();
                    l.extend_from_slice(&u.name);
                    l.push(b' ');
                    l.extend_from_slice(u.describe().as_bytes());
                    Reply::Bulk(l)
                })
                .collect(),
        ),
        "whoami" if n == 2 => Reply::Bulk(client.info.user.lock().clone()),
        "cat" if n <= 3 => match args.get(2) {
            None => Reply::Array(
                crate::cmd::flags::ACL_NAMES
                    .iter()
                    .map(|(_, name)| bulk(name))
                    .collect(),
            ),
            Some(c) => match selector::category(&String::from_utf8_lossy(c)) {
                Some(cat) => Reply::Array(
                    selector::table()
                        .iter()
                        .filter(|e| e.acl.contains(cat))
                        .map(|e| bulk(&e.name))
                        .collect(),
                ),
                None => {
                    let mut m = b"Unknown category '".to_vec();
                    m.extend_from_slice(c);
                    m.push(b'\'');
                    err_bytes(&m)
                }
            },
        },
        "genpass" if n <= 3 => {
            let bits = match args.get(2) {
                None => 256,
                Some(b) => match crate::num::parse_i64_strict(b) {
                    Some(v) if (1..=4096).contains(&v) => v as usize,
                    _ => return reply(err("ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")),
                },
            };
            let chars = bits.div_ceil(4);
            let mut s = String::new();
            while s.len() < chars {
                s.push_str(&format!("{:016x}", crate::shared::random_u64()));
            }
            s.truncate(chars);
            bulk(&s)
        }
        "log" if n <= 3 => {
            let count = match args.get(2) {
                Some(a) if is(a, "reset") => {
                    shared.acl.log_reset();
                    return reply(ok());
                }
                Some(a) => match crate::num::parse_i64_strict(a) {
                    Some(v) if v >= 0 => v as usize,
                    _ => return reply(err("value is out of range, must be positive")),
                },
                None => 10,
            };
            let now = crate::shared::now_ms();
            Reply::Array(
                shared
                    .acl
                    .log_entries(count)
                    .into_iter()
                    .map(|e| {
                        Reply::Map(vec![
                            (bulk("count"), Reply::Integer(e.count as i64)),
                            (bulk("reason"), bulk(e.reason)),
                            (bulk("context"), bulk(e.context)),
                            (bulk("object"), Reply::Bulk(e.object)),
                            (bulk("username"), Reply::Bulk(e.username)),
                            (
                                bulk("age-seconds"),
                                Reply::Double(now.saturating_sub(e.at_ms) as f64 / 1000.0),
                            ),
                            (bulk("client-info"), bulk(&e.client)),
                        ])
                    })
                    .collect(),
            )
        }
        "dryrun" if n >= 4 => {
            let Some(u) = shared.acl.get(&args[2]) else {
                let mut m = b"User '".to_vec();
                m.extend_from_slice(&args[2]);
                m.extend_from_slice(b"' not found");
                return reply(err_bytes(&m));
            };
            match dry_run(shared, &u, client.db, &args[3..]) {
                Ok(None) => ok(),
                Ok(Some(why)) => bulk(&why),
                Err(e) => e,
            }
        }
        "save" | "load" if n == 2 => match aclfile(shared) {
            None => err("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."),
            Some(path) if op == "load" => match load_file(shared, &path) {
                Ok(_) => ok(),
                Err(e) => err(e),
            },
            Some(path) => {
                let text = crate::acl::file::render(&shared.acl.all());
                match crate::acl::file::write_atomically(&path, &text) {
                    Ok(()) => ok(),
                    Err(e) => {
                        tracing::error!(file = %path.display(), error = %e, "ACL SAVE failed");
                        err("There was an error trying to save the ACLs. Please check the server logs for more information")
                    }
                }
            }
        },
        _ => unknown_subcommand(&args[1], "acl"),
    };
    reply(r)
}

/// `ACL SETUSER name rule...`: the rules are applied to a copy, which replaces the user only
/// when every rule took.
fn setuser(shared: &Shared, name: &[u8], rules: &[Vec<u8>]) -> Reply {
    if name.iter().any(|&b| b == b' ' || b == 0) {
        return err("Usernames can't contain spaces or null characters");
    }
    let rules = match merge_selectors(rules) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let before = shared.acl.get(name);
    let mut u = before
        .as_ref()
        .map_or_else(|| User::new(name), |u| (**u).clone());
    for r in &rules {
        if let Err(why) = u.apply(r) {
            let mut m = b"Error in ACL SETUSER modifier '".to_vec();
            m.extend_from_slice(r);
            m.extend_from_slice(b"': ");
            m.extend_from_slice(why.as_bytes());
            return err_bytes(&m);
        }
    }
    shared.acl.put(u);
    if let Err(e) = save(shared) {
        // Not durable: the change is undone.
        match before {
            Some(b) => shared.acl.put((*b).clone()),
            None => {
                shared.acl.delete(name);
            }
        }
        return e;
    }
    ok()
}

/// Makes the users durable (they live in the pool, as function libraries do).
pub fn save(shared: &Shared) -> Result<(), Reply> {
    let store = &shared.store;
    store
        .db
        .put(
            &store.subs.sys,
            crate::store::open::ACL,
            shared.acl.encode(),
        )
        .map_err(|e| err(format!("the users could not be written: {e}")))
}

/// The configured `aclfile`, if any.
pub fn aclfile(shared: &Shared) -> Option<std::path::PathBuf> {
    let p = shared.config.read().get("aclfile").unwrap_or_default();
    (!p.is_empty()).then(|| std::path::PathBuf::from(p))
}

/// Replaces every user with those of the ACL file at `path` (`ACL LOAD`, and the start of a
/// server with an `aclfile`), and makes them durable; with any error in the file nothing
/// changes and the error says where, as Redis words it.
pub fn load_file(shared: &Shared, path: &std::path::Path) -> Result<usize, String> {
    let name = path.display().to_string();
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{name}': {}",
            crate::acl::file::os_error_text(&e)
        )
    })?;
    let users = crate::acl::file::parse(&String::from_utf8_lossy(&text), &name)?;
    let before: Vec<User> = shared.acl.all().iter().map(|u| (**u).clone()).collect();
    let n = shared.acl.replace_all(users);
    if let Err(e) = save(shared) {
        shared.acl.replace_all(before);
        return Err(e.error_message().unwrap_or_default().into_owned());
    }
    Ok(n)
}

/// Applies the configuration file's `user` lines (each defines its user anew, as Redis's
/// `ACLLoadConfiguredUsers`) and makes them durable.
pub fn apply_configured(shared: &Shared, lines: &[Vec<Vec<u8>>]) -> Result<usize, String> {
    let mut users = Vec::new();
    for words in lines {
        let u = crate::acl::file::user_of_words(words).map_err(|why| {
            format!(
                "Error in user declaration '{}': {why}",
                String::from_utf8_lossy(&words[0])
            )
        })?;
        users.push(u);
    }
    for u in &users {
        shared.acl.put(u.clone());
    }
    save(shared).map_err(|e| e.error_message().unwrap_or_default().into_owned())?;
    Ok(users.len())
}

/// Loads the users the pool holds (at start); the configured `requirepass` then sets the
/// default user's password, as the configuration file would.
pub fn restore(shared: &Shared) -> Result<usize, String> {
    let store = &shared.store;
    let Some(rec) = store
        .db
        .get(&store.subs.sys, crate::store::open::ACL)
        .map_err(|e| e.to_string())?
    else {
        return Ok(0);
    };
    let n = shared.acl.load(&rec)?;
    let pass = shared.config.read().requirepass.clone();
    if pass.is_some() {
        shared.acl.set_default_password(pass.as_deref());
    }
    Ok(n)
}

/// Marks `client` authenticated as `name`.
pub fn login(client: &mut Client, name: &[u8]) {
    client.authed = true;
    *client.info.user.lock() = name.to_vec();
    client.acl_user = None;
}

/// Whether a client with no user yet is let in (a default user without password).
pub fn open_by_default(shared: &Shared) -> bool {
    shared.acl.default_open()
}

/// The ACL command.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("acl", -2, [], [SLOW], [], Keys::None, "server", "6.0.0", "A container for Access List Control commands ", Conn(acl), &[
        sub!("cat", -2, [NOSCRIPT LOADING STALE], [SLOW], (0, 0, 0)),
        sub!("deluser", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("dryrun", -4, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("genpass", -2, [NOSCRIPT LOADING STALE], [SLOW], (0, 0, 0)),
        sub!("getuser", 3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
        sub!("list", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("load", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("log", -2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("save", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("setuser", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("users", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("whoami", 2, [NOSCRIPT LOADING STALE], [SLOW], (0, 0, 0)),
    ]),
];
