//! The command registry against Redis 7.0: `COMMAND INFO` reports every command as
//! redis-server does (arity, flags, key range, ACL categories, subcommands), and no command
//! queued in a transaction stops the server from answering.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{run, RedisServer, Server};
use redis::Value;

/// What `COMMAND INFO` says of one command or subcommand, in comparable form.
#[derive(Debug, PartialEq, Eq)]
struct Info {
    arity: i64,
    flags: BTreeSet<String>,
    keys: (i64, i64, i64),
    acl: BTreeSet<String>,
    subs: BTreeMap<String, Info>,
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) | Value::Set(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

fn parse(v: &Value) -> (String, Info) {
    let f = items(v);
    let names = |v: &Value| items(v).iter().map(text).collect::<BTreeSet<_>>();
    let subs = f
        .get(9)
        .map(|s| items(s).iter().map(parse).collect())
        .unwrap_or_default();
    (
        text(&f[0]),
        Info {
            arity: int(&f[1]),
            flags: names(&f[2]),
            keys: (int(&f[3]), int(&f[4]), int(&f[5])),
            acl: names(&f[6]),
            subs,
        },
    )
}

fn infos(con: &mut redis::Connection, names: &[String]) -> BTreeMap<String, Info> {
    let mut args: Vec<&[u8]> = vec![b"COMMAND", b"INFO"];
    args.extend(names.iter().map(|n| n.as_bytes()));
    let v = run(con, &args);
    items(&v)
        .iter()
        .filter(|v| !matches!(v, Value::Nil))
        .map(parse)
        .collect()
}

/// The top-level commands `COMMAND LIST` names (it lists subcommands too, as
/// `parent|sub`).
fn command_names(con: &mut redis::Connection) -> Vec<String> {
    let v = run(con, &[b"COMMAND", b"LIST"]);
    let all: Vec<String> = items(&v).iter().map(text).collect();
    assert!(all.iter().any(|n| n == "client|list"), "{all:?}");
    let mut names: Vec<String> = all.into_iter().filter(|n| !n.contains('|')).collect();
    names.sort();
    names
}

#[test]
fn command_info_agrees_with_redis_for_every_command() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let mut n = nacre.conn();
    let mut r = redis.conn();
    let names = command_names(&mut n);
    assert!(names.len() > 170, "only {} commands listed", names.len());
    let ours = infos(&mut n, &names);
    let theirs = infos(&mut r, &names);
    assert_eq!(
        ours.len(),
        names.len(),
        "COMMAND INFO misses listed commands"
    );
    let mut wrong = Vec::new();
    for (name, mine) in &ours {
        let Some(real) = theirs.get(name) else {
            wrong.push(format!("{name}: not a Redis 7.0 command"));
            continue;
        };
        let top = |i: &Info| (i.arity, i.flags.clone(), i.keys, i.acl.clone());
        if top(mine) != top(real) {
            wrong.push(format!("{name}: nacre {mine:?}\n  redis {real:?}"));
        }
        for (sub, s) in &mine.subs {
            match real.subs.get(sub) {
                Some(rs) if rs == s => {}
                Some(rs) => wrong.push(format!("{sub}: nacre {s:?}\n  redis {rs:?}")),
                None => wrong.push(format!("{sub}: not a Redis 7.0 subcommand")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // COMMAND COUNT and COMMAND INFO with no names agree with the list.
    assert_eq!(
        int(&run(&mut n, &[b"COMMAND", b"COUNT"])),
        names.len() as i64
    );
    assert_eq!(
        items(&run(&mut n, &[b"COMMAND", b"INFO"])).len(),
        names.len()
    );
}

/// Arguments that fit `name`'s arity, naming keys the test prepared.
fn sample_args(name: &str, arity: i64) -> Vec<Vec<u8>> {
    let explicit: &[&str] = match name {
        "debug" => &["object", "s"],
        "object" => &["encoding", "s"],
        "client" => &["id"],
        "config" => &["get", "maxclients"],
        "command" => &["count"],
        "slowlog" => &["len"],
        "pubsub" => &["numpat"],
        "subscribe" | "psubscribe" => &["ch"],
        "select" => &["0"],
        "swapdb" => &["0", "1"],
        "move" => &["s", "1"],
        "wait" => &["0", "10"],
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => &["none", "0.01"],
        "blmove" => &["none", "dst", "LEFT", "RIGHT", "0.01"],
        "brpoplpush" => &["none", "dst", "0.01"],
        "blmpop" | "bzmpop" => &["0.01", "1", "none", "LEFT"],
        "lmpop" => &["1", "l", "LEFT"],
        "zmpop" => &["1", "z", "MIN"],
        _ => &[],
    };
    if !explicit.is_empty() {
        return explicit.iter().map(|s| s.as_bytes().to_vec()).collect();
    }
    let n = if arity < 0 { -arity } else { arity } as usize;
    (1..n).map(|_| b"s".to_vec()).collect()
}

#[test]
fn no_command_queued_in_a_transaction_stops_the_server() {
    let nacre = Server::start(&["--enable-debug-command", "yes"]);
    let mut con = nacre.conn();
    con.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut other = nacre.conn();
    other.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let names = command_names(&mut con);
    let all = infos(&mut con, &names);
    let skip = ["quit", "reset", "multi", "exec", "discard"];
    let mut refused = 0;
    for (name, info) in &all {
        if skip.contains(&name.as_str()) {
            continue;
        }
        for (k, v) in [("s", "1"), ("l", "a"), ("z", "1")] {
            let _ = match k {
                "l" => run(&mut con, &[b"RPUSH", k.as_bytes(), v.as_bytes()]),
                "z" => run(&mut con, &[b"ZADD", k.as_bytes(), b"1", v.as_bytes()]),
                _ => run(&mut con, &[b"SET", k.as_bytes(), v.as_bytes()]),
            };
        }
        assert_eq!(run(&mut con, &[b"MULTI"]), Value::Okay);
        // A write first: the transaction holds the key's lock when the command runs.
        run(&mut con, &[b"SET", b"s", b"2"]);
        let args = sample_args(name, info.arity);
        let mut full: Vec<&[u8]> = vec![name.as_bytes()];
        full.extend(args.iter().map(|a| a.as_slice()));
        let queued = run(&mut con, &full);
        let exec = run(&mut con, &[b"EXEC"]);
        if info.flags.contains("no_multi") {
            assert_eq!(
                queued,
                Value::SimpleString("ERR:ERR Command not allowed inside a transaction".into()),
                "{name}"
            );
            assert!(
                matches!(&exec, Value::SimpleString(s) if s.starts_with("ERR:EXECABORT")),
                "{name}: {exec:?}"
            );
            refused += 1;
        } else {
            assert!(
                !matches!(&exec, Value::SimpleString(s) if s.contains("timed out") || s.contains("os error")),
                "{name}: {exec:?}"
            );
        }
        // Whatever it did, the server still answers this client and another one.
        run(&mut con, &[b"UNSUBSCRIBE"]);
        run(&mut con, &[b"PUNSUBSCRIBE"]);
        assert_eq!(
            run(&mut con, &[b"PING"]),
            Value::SimpleString("PONG".into()),
            "{name}"
        );
        // Another client reaches the key the transaction wrote (its lock was released).
        let got = run(&mut other, &[b"TYPE", b"s"]);
        assert!(
            matches!(&got, Value::SimpleString(s) if !s.starts_with("ERR:")),
            "after {name}: {got:?}"
        );
        assert_eq!(
            run(&mut other, &[b"PING"]),
            Value::SimpleString("PONG".into())
        );
        run(&mut con, &[b"SELECT", b"0"]);
        run(&mut con, &[b"FLUSHALL"]);
    }
    assert!(refused >= 2, "only {refused} commands are no_multi");
}
