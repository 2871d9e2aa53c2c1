//! Differential tests: the same scripts of commands go to nacre-server and to redis-server
//! 7.0, and every reply must be identical. Without an installed redis-server each test prints
//! a note and passes.
//!
//! A script line is one command split on spaces, where `''` stands for an empty argument,
//! `@AT` for a fixed absolute time in seconds about a day ahead and `@ATMS` for a fixed
//! absolute time in milliseconds about a day ahead. A line may start with a marker (and a
//! space) that says how both replies are normalized before they are compared, for replies
//! whose order or content legitimately differs:
//!
//! * `~` an array compared as a sorted list (KEYS, HKEYS, HVALS);
//! * `%` a flat array of field/value pairs compared as a sorted list of pairs (HGETALL);
//! * `$` a SCAN reply: the cursor as is, the elements sorted;
//! * `&` an HSCAN reply: the cursor as is, the field/value pairs sorted;
//! * `+` any positive integer counts as 1 (a remaining time to live that ticks);
//! * `^` a HELLO reply without its server, version and id fields.
//!
//! Every mismatch is printed with the command and both replies; a test fails at its end
//! with the number of mismatches.

#![allow(dead_code)] // Each test file uses part of the harness.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::{run, RedisServer, Server};
use redis::{Connection, ConnectionLike, Value};

/// How both replies are normalized before comparison.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Norm {
    Exact,
    Sorted,
    Pairs,
    Scan,
    ScanPairs,
    Positive,
    Hello,
}

impl Norm {
    /// The normalization a script line's marker asks for, and the rest of the line.
    fn of(line: &str) -> (Norm, &str) {
        let norm = match line.split_once(' ') {
            Some(("~", _)) => Norm::Sorted,
            Some(("%", _)) => Norm::Pairs,
            Some(("$", _)) => Norm::Scan,
            Some(("&", _)) => Norm::ScanPairs,
            Some(("+", _)) => Norm::Positive,
            Some(("^", _)) => Norm::Hello,
            _ => return (Norm::Exact, line),
        };
        (norm, &line[2..])
    }
}

fn sorted(items: &[Value]) -> Vec<Value> {
    let mut v = items.to_vec();
    v.sort_by_key(|x| format!("{x:?}"));
    v
}

fn sorted_pairs(items: &[Value]) -> Vec<Value> {
    let mut pairs: Vec<&[Value]> = items.chunks(2).collect();
    pairs.sort_by_key(|p| format!("{p:?}"));
    pairs.concat()
}

fn normalize(v: Value, norm: Norm) -> Value {
    match (norm, v) {
        (Norm::Sorted, Value::Array(a)) => Value::Array(sorted(&a)),
        (Norm::Pairs, Value::Array(a)) => Value::Array(sorted_pairs(&a)),
        (Norm::Scan | Norm::ScanPairs, Value::Array(mut a)) if a.len() == 2 => {
            if let Value::Array(items) = &a[1] {
                a[1] = Value::Array(if norm == Norm::Scan {
                    sorted(items)
                } else {
                    sorted_pairs(items)
                });
            }
            Value::Array(a)
        }
        (Norm::Positive, Value::Int(n)) if n > 0 => Value::Int(1),
        (Norm::Hello, Value::Array(a)) => Value::Array(
            a.chunks(2)
                .filter(|p| {
                    !matches!(&p[0], Value::BulkString(k)
                        if [&b"server"[..], b"version", b"id"].contains(&k.as_slice()))
                })
                .flatten()
                .cloned()
                .collect(),
        ),
        (Norm::Hello, Value::Map(pairs)) => Value::Map(
            pairs
                .into_iter()
                .filter(|(k, _)| {
                    !matches!(k, Value::BulkString(k)
                        if [&b"server"[..], b"version", b"id"].contains(&k.as_slice()))
                })
                .collect(),
        ),
        (_, v) => v,
    }
}

/// A reply as redis-cli would roughly show it, on one line.
fn show(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(n) => format!("(integer) {n}"),
        Value::BulkString(b) => format!("\"{}\"", b.escape_ascii()),
        Value::Okay => "OK".into(),
        Value::SimpleString(s) => match s.strip_prefix("ERR:") {
            Some(e) => format!("(error) {e}"),
            None => s.clone(),
        },
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(show).collect();
            format!("[{}]", items.join(", "))
        }
        Value::ServerError(e) => {
            format!("(error) {} {}", e.code(), e.details().unwrap_or(""))
        }
        other => format!("{other:?}"),
    }
}

fn show_cmd(args: &[&[u8]]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            if a.is_empty() {
                "''".to_string()
            } else {
                a.escape_ascii().to_string()
            }
        })
        .collect();
    words.join(" ")
}

/// Both servers, connections to each, and the tally of commands and mismatches.
pub struct Diff {
    name: &'static str,
    nacre: Server,
    redis: RedisServer,
    /// Pairs of connections: `[nacre, redis]`.
    conns: Vec<[Connection; 2]>,
    /// Seconds since the epoch about a day ahead (`@AT`).
    at: u64,
    sent: usize,
    mismatches: usize,
}

fn open(conn: Connection) -> Connection {
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    conn
}

impl Diff {
    /// Starts both servers and flushes them, or `None` when redis-server is not installed.
    pub fn start(name: &'static str) -> Option<Diff> {
        let Some(redis) = RedisServer::start() else {
            eprintln!("{name}: redis-server is not installed; nothing compared");
            return None;
        };
        let nacre = Server::start(&[]);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let mut d = Diff {
            name,
            conns: vec![[open(nacre.conn()), open(redis.conn())]],
            nacre,
            redis,
            at: now + 86_400,
            sent: 0,
            mismatches: 0,
        };
        d.script(&["FLUSHALL"]);
        Some(d)
    }

    /// Replies that differed so far.
    pub fn mismatches(&self) -> usize {
        self.mismatches
    }

    /// Opens one more connection to each server; its index.
    pub fn connect(&mut self) -> usize {
        self.conns
            .push([open(self.nacre.conn()), open(self.redis.conn())]);
        self.conns.len() - 1
    }

    fn ask(&mut self, conn: usize, side: usize, args: &[&[u8]]) -> Value {
        let con = &mut self.conns[conn][side];
        let reply = run(con, args);
        let broken = !con.is_open()
            || matches!(&reply, Value::SimpleString(s)
                if s.starts_with("ERR:") && s.contains("os error"));
        if broken {
            eprintln!(
                "[{}] connection {conn} to {} broke on `{}`; reconnected",
                self.name,
                ["nacre-server", "redis-server"][side],
                show_cmd(args)
            );
            self.conns[conn][side] = if side == 0 {
                open(self.nacre.conn())
            } else {
                open(self.redis.conn())
            };
        }
        reply
    }

    /// Sends one command over connection `conn` of both servers and compares the replies.
    pub fn check_on(&mut self, conn: usize, norm: Norm, args: &[&[u8]]) {
        self.sent += 1;
        let n = normalize(self.ask(conn, 0, args), norm);
        let r = normalize(self.ask(conn, 1, args), norm);
        if n != r {
            self.mismatches += 1;
            eprintln!(
                "[{}] MISMATCH #{} `{}`\n    nacre: {}\n    redis: {}",
                self.name,
                self.sent,
                show_cmd(args),
                show(&n),
                show(&r)
            );
        }
    }

    /// Sends one command given as raw arguments over the first connection.
    pub fn check(&mut self, args: &[&[u8]]) {
        self.check_on(0, Norm::Exact, args);
    }

    /// Runs script lines over connection `conn`.
    pub fn script_on(&mut self, conn: usize, lines: &[&str]) {
        for line in lines {
            let (norm, cmd) = Norm::of(line);
            let words: Vec<Vec<u8>> = cmd
                .split_whitespace()
                .map(|w| match w {
                    "''" => Vec::new(),
                    "@AT" => self.at.to_string().into_bytes(),
                    "@ATMS" => (self.at * 1000 + 123).to_string().into_bytes(),
                    w => w.as_bytes().to_vec(),
                })
                .collect();
            let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            self.check_on(conn, norm, &args);
        }
    }

    /// Runs script lines over the first connection.
    pub fn script(&mut self, lines: &[&str]) {
        self.script_on(0, lines);
    }

    /// Reports the tally and fails when any reply differed.
    pub fn finish(self) {
        eprintln!(
            "[{}] {} commands sent to each server, {} mismatches",
            self.name, self.sent, self.mismatches
        );
        assert_eq!(
            self.mismatches, 0,
            "{}: {} replies differ from redis-server",
            self.name, self.mismatches
        );
    }
}
