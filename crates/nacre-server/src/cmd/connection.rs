//! Connection commands: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT.

use std::sync::atomic::Ordering;

use nacre_resp::Reply;

use super::args::{int, is, lower};
use super::registry::unknown_subcommand;
use super::registry::{cmd, sub, Command, Keys::None as NK, Run::Conn};
use super::{arity_error, err, ok, syntax, Outcome};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

/// `PING [message]`.
pub fn ping(_: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if client.resp == 2 && client.subscriptions() > 0 && args.len() <= 2 {
        // As Redis: a subscribed RESP2 client gets a pong message.
        return reply(Reply::Array(vec![
            Reply::Bulk(b"pong".to_vec()),
            Reply::Bulk(args.get(1).cloned().unwrap_or_default()),
        ]));
    }
    match args.len() {
        1 => reply(Reply::Simple("PONG".into())),
        2 => reply(Reply::Bulk(args[1].clone())),
        _ => reply(arity_error("ping")),
    }
}

/// `ECHO message`.
pub fn echo(_: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    reply(Reply::Bulk(args[1].clone()))
}

/// The user `pass` authenticates (`default` when `user` is not given).
fn check_password(
    shared: &Shared,
    client: &Client,
    user: Option<&[u8]>,
    pass: &[u8],
) -> Result<Vec<u8>, Reply> {
    let name = user.unwrap_or(b"default");
    if user.is_none() && shared.acl.get(b"default").is_some_and(|u| u.nopass) {
        return Err(err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    match shared.acl.get(name) {
        Some(u) if u.accepts(pass) => Ok(name.to_vec()),
        _ => {
            let context = if client.multi.is_some() {
                "multi"
            } else {
                "toplevel"
            };
            super::acl::log(
                shared,
                client,
                "auth",
                context,
                b"AUTH".to_vec(),
                name.to_vec(),
            );
            Err(Reply::Error(
                "WRONGPASS invalid username-password pair or user is disabled.".into(),
            ))
        }
    }
}

/// `AUTH [username] password`.
pub fn auth(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let r = match args.len() {
        2 => check_password(shared, client, None, &args[1]),
        3 => check_password(shared, client, Some(&args[1]), &args[2]),
        _ => return reply(syntax()),
    };
    match r {
        Ok(name) => {
            super::acl::login(client, &name);
            reply(ok())
        }
        Err(e) => reply(e),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
pub fn hello(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let mut ver = client.resp;
    let mut i = 1;
    if args.len() > 1 {
        match int(&args[1]) {
            Ok(v) if v == 2 || v == 3 => ver = v as u8,
            Ok(_) => return reply(Reply::Error("NOPROTO unsupported protocol version".into())),
            Err(_) => return reply(err("Protocol version is not an integer or out of range")),
        }
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "auth") && more >= 2 {
            match check_password(shared, client, Some(&args[i + 1]), &args[i + 2]) {
                Ok(name) => super::acl::login(client, &name),
                Err(e) => return reply(e),
            }
            i += 3;
        } else if is(&args[i], "setname") && more >= 1 {
            if let Err(e) = valid_name(&args[i + 1]) {
                return reply(e);
            }
            name = Some(String::from_utf8_lossy(&args[i + 1]).into_owned());
            i += 2;
        } else {
            return reply(err(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            )));
        }
    }
    if !client.authed {
        return reply(Reply::Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    if let Some(n) = name {
        *client.info.name.lock() = n;
    }
    client.resp = ver;
    client.info.resp.store(ver as usize, Ordering::Relaxed);
    if ver > 2 {
        // A RESP3 client can be sent pushes (invalidations redirected to it) at any time.
        client.push_queue();
    }
    let s = |x: &str| Reply::Bulk(x.as_bytes().to_vec());
    reply(Reply::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(crate::REDIS_VERSION)),
        (s("proto"), Reply::Integer(ver.into())),
        (s("id"), Reply::Integer(client.info.id as i64)),
        (s("mode"), s("standalone")),
        (s("role"), s("master")),
        (s("modules"), Reply::Array(Vec::new())),
    ]))
}

/// `SELECT index`.
pub fn select(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let Ok(db) = int(&args[1]) else {
        return reply(err("value is not an integer or out of range"));
    };
    if db < 0 || db as usize >= shared.store.databases() {
        return reply(err("DB index is out of range"));
    }
    client.select(db as usize);
    reply(ok())
}

/// `QUIT`.
pub fn quit(_: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    Outcome::Close(ok())
}

/// `RESET`.
pub fn reset(shared: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    client.end_multi(shared);
    client.unsubscribe_all(shared);
    client.select(0);
    client.resp = 2;
    client.info.resp.store(2, Ordering::Relaxed);
    client.info.name.lock().clear();
    client.info.no_evict.store(false, Ordering::Relaxed);
    *client.info.user.lock() = b"default".to_vec();
    client.acl_user = None;
    client.authed = shared.acl.default_open();
    if client.info.monitor.swap(false, Ordering::Relaxed) {
        shared.monitors.fetch_sub(1, Ordering::Relaxed);
    }
    reply(Reply::Simple("RESET".into()))
}

fn valid_name(n: &[u8]) -> Result<(), Reply> {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// `CLIENT ID|SETNAME|GETNAME|LIST|INFO|KILL|NO-EVICT|HELP`.
pub fn client(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let sub = lower(&args[1]);
    let n = args.len();
    let wrong = |s: &str| reply(arity_error(&format!("client|{s}")));
    match sub.as_str() {
        "id" if n == 2 => reply(Reply::Integer(client.info.id as i64)),
        "id" => wrong("id"),
        "setname" if n == 3 => match valid_name(&args[2]) {
            Ok(()) => {
                *client.info.name.lock() = String::from_utf8_lossy(&args[2]).into_owned();
                reply(ok())
            }
            Err(e) => reply(e),
        },
        "setname" => wrong("setname"),
        "getname" if n == 2 => {
            let name = client.info.name.lock().clone();
            reply(if name.is_empty() {
                Reply::Nil
            } else {
                Reply::Bulk(name.into_bytes())
            })
        }
        "getname" => wrong("getname"),
        "info" if n == 2 => reply(Reply::Bulk(
            format!("{}\n", client.info.line()).into_bytes(),
        )),
        "info" => wrong("info"),
        "list" => {
            let mut ids: Option<Vec<u64>> = None;
            let mut kind: Option<&'static str> = None;
            let mut i = 2;
            while i < n {
                if is(&args[i], "type") && i + 1 < n {
                    kind = Some(match lower(&args[i + 1]).as_str() {
                        "normal" => "normal",
                        "master" => "master",
                        "replica" | "slave" => "replica",
                        "pubsub" => "pubsub",
                        t => return reply(err(format!("Unknown client type '{t}'"))),
                    });
                    i += 2;
                } else if is(&args[i], "id") && i + 1 < n {
                    let mut v = Vec::new();
                    for a in &args[i + 1..] {
                        match int(a) {
                            Ok(x) if x > 0 => v.push(x as u64),
                            _ => return reply(err("Invalid client ID")),
                        }
                    }
                    ids = Some(v);
                    i = n;
                } else {
                    return reply(syntax());
                }
            }
            let clients = shared.clients.lock();
            let mut out = String::new();
            for c in clients.values() {
                if ids.as_ref().is_some_and(|v| !v.contains(&c.id))
                    || kind.is_some_and(|k| k != c.kind())
                {
                    continue;
                }
                out.push_str(&c.line());
                out.push('\n');
            }
            reply(Reply::Bulk(out.into_bytes()))
        }
        "kill" => kill(shared, client, args),
        "pause" if n == 3 || n == 4 => {
            let all = match args.get(3) {
                None => true,
                Some(m) if is(m, "all") => true,
                Some(m) if is(m, "write") => false,
                Some(_) => return reply(err("CLIENT PAUSE mode must be WRITE or ALL")),
            };
            let ms = match crate::num::parse_i64_strict(&args[2]) {
                Some(v) if v < 0 => return reply(err("timeout is negative")),
                Some(v) => v as u64,
                None => return reply(err("timeout is not an integer or out of range")),
            };
            let until = crate::shared::now_ms().saturating_add(ms);
            let mut p = shared.pause.lock();
            // As Redis: a pause given during another keeps the later end and the stronger mode.
            *p = Some(match *p {
                Some((u, a)) if u > crate::shared::now_ms() => (u.max(until), a || all),
                _ => (until, all),
            });
            shared.paused.store(true, Ordering::Release);
            reply(ok())
        }
        "unpause" if n == 2 => {
            let mut p = shared.pause.lock();
            *p = None;
            shared.paused.store(false, Ordering::Release);
            drop(p);
            shared.unpaused.notify_waiters();
            reply(ok())
        }
        "tracking" if n >= 3 => reply(super::tracking::tracking(shared, client, args)),
        "caching" if n == 3 => reply(super::tracking::caching(shared, client, args)),
        "getredir" if n == 2 => reply(super::tracking::getredir(shared, client)),
        "trackinginfo" if n == 2 => reply(super::tracking::trackinginfo(shared, client)),
        "unblock" if n > 4 => reply(syntax()),
        "unblock" => {
            let Ok(id) = int(&args[2]) else {
                return reply(err("value is not an integer or out of range"));
            };
            let mode = match args.get(3) {
                None => 1,
                Some(m) if is(m, "timeout") => 1,
                Some(m) if is(m, "error") => 2,
                Some(_) => return reply(err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
            };
            let target = shared.clients.lock().get(&(id as u64)).cloned();
            match target {
                Some(c) if id >= 0 && c.blocked.load(Ordering::Acquire) => {
                    c.unblock_mode.store(mode, Ordering::Release);
                    c.unblock.notify_one();
                    reply(Reply::Integer(1))
                }
                _ => reply(Reply::Integer(0)),
            }
        }
        "reply" if n == 3 => {
            if is(&args[2], "on") {
                client.reply_off = false;
                client.skip_armed = false;
                client.skip_this = false;
                reply(ok())
            } else if is(&args[2], "off") {
                client.reply_off = true;
                Outcome::Nothing
            } else if is(&args[2], "skip") {
                if !client.reply_off {
                    client.skip_armed = true;
                }
                Outcome::Nothing
            } else {
                reply(syntax())
            }
        }
        "no-evict" if n == 3 => {
            let on = if is(&args[2], "on") {
                true
            } else if is(&args[2], "off") {
                false
            } else {
                return reply(syntax());
            };
            client.info.no_evict.store(on, Ordering::Relaxed);
            reply(ok())
        }
        "no-evict" => wrong("no-evict"),
        "help" => reply(Reply::Array(
            [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ID",
                "    Return the ID of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "KILL <ip:port>",
                "    Kill connection made from <ip:port>.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Kill connections. Options are: ID, ADDR, LADDR, TYPE, USER, SKIPME.",
                "LIST [options ...]",
                "    Return information about client connections.",
                "GETNAME",
                "    Return the name of the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "NO-EVICT (ON|OFF)",
                "    Protect current client connection from eviction.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::Simple(s.to_string()))
            .collect(),
        )),
        _ => reply(unknown_subcommand(&args[1], "client")),
    }
}

fn kill(shared: &Shared, me: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let n = args.len();
    if n == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(&args[2]).into_owned();
        let clients = shared.clients.lock();
        return match clients.values().find(|c| c.addr == addr) {
            Some(c) => {
                c.kill();
                reply(ok())
            }
            None => reply(err("No such client")),
        };
    }
    if n < 4 || (n - 2) % 2 != 0 {
        return reply(syntax());
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut skipme = true;
    let mut user = None;
    let mut kind: Option<&str> = None;
    for pair in args[2..].chunks(2) {
        let v = String::from_utf8_lossy(&pair[1]).into_owned();
        match lower(&pair[0]).as_str() {
            "id" => match int(&pair[1]) {
                Ok(x) if x > 0 => id = Some(x as u64),
                _ => return reply(err("client-id should be greater than 0")),
            },
            "addr" => addr = Some(v),
            "laddr" => laddr = Some(v),
            // As Redis: a user that does not exist is an error.
            "user" if shared.acl.get(&pair[1]).is_none() => {
                return reply(super::err_bytes(
                    format!("No such user '{}'", v.replace(['\r', '\n'], " ")).as_bytes(),
                ))
            }
            "user" => user = Some(pair[1].clone()),
            "type" => match v.to_ascii_lowercase().as_str() {
                "normal" => kind = Some("normal"),
                "master" => kind = Some("master"),
                "replica" | "slave" => kind = Some("replica"),
                "pubsub" => kind = Some("pubsub"),
                _ => return reply(err(format!("Unknown client type '{v}'"))),
            },
            "skipme" => {
                skipme = match v.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return reply(syntax()),
                }
            }
            _ => return reply(syntax()),
        }
    }
    let mut killed = 0;
    let clients = shared.clients.lock();
    for c in clients.values() {
        if kind.is_some_and(|k| k != c.kind())
            || id.is_some_and(|i| i != c.id)
            || addr.as_ref().is_some_and(|a| *a != c.addr)
            || laddr.as_ref().is_some_and(|a| *a != c.laddr)
            || user.as_ref().is_some_and(|u| *u != *c.user.lock())
            || (skipme && c.id == me.info.id)
        {
            continue;
        }
        c.kill();
        killed += 1;
    }
    reply(Reply::Integer(killed))
}

/// The connection commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("ping", -1, [FAST], [FAST CONNECTION], [], NK, "connection", "1.0.0", "Returns the server's liveliness response.", Conn(ping)),
    cmd!("echo", 2, [LOADING STALE FAST], [FAST CONNECTION], [], NK, "connection", "1.0.0", "Returns the given string.", Conn(echo)),
    cmd!("hello", -1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], [FAST CONNECTION], [], NK, "connection", "6.0.0", "Handshakes with the Redis server.", Conn(hello)),
    cmd!("auth", -2, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], [FAST CONNECTION], [], NK, "connection", "1.0.0", "Authenticates the connection.", Conn(auth)),
    cmd!("select", 2, [LOADING STALE FAST], [FAST CONNECTION], [], NK, "connection", "1.0.0", "Changes the selected database.", Conn(select)),
    cmd!("quit", -1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], [FAST CONNECTION], [], NK, "connection", "1.0.0", "Closes the connection.", Conn(quit)),
    cmd!("reset", 1, [NOSCRIPT LOADING STALE FAST NO_AUTH ALLOW_BUSY], [FAST CONNECTION], [], NK, "connection", "6.2.0", "Resets the connection.", Conn(reset)),
    cmd!("client", -2, [], [SLOW], [], NK, "connection", "2.4.0", "A container for client connection commands.", Conn(client), &[
        sub!("id", 2, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("setname", 3, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("getname", 2, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("info", 2, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("list", -2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("kill", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("no-evict", 3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("unblock", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("reply", 3, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("pause", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("unpause", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS CONNECTION], (0, 0, 0)),
        sub!("tracking", -3, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("caching", 3, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("getredir", 2, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("trackinginfo", 2, [NOSCRIPT LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
    ]),
];
