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

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{run, RedisServer, Server};
use redis::{Connection, ConnectionLike, Value};

/// How both replies are normalized before comparison.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Norm {
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
struct Diff {
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
    fn start(name: &'static str) -> Option<Diff> {
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

    /// Opens one more connection to each server; its index.
    fn connect(&mut self) -> usize {
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
    fn check_on(&mut self, conn: usize, norm: Norm, args: &[&[u8]]) {
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
    fn check(&mut self, args: &[&[u8]]) {
        self.check_on(0, Norm::Exact, args);
    }

    /// Runs script lines over connection `conn`.
    fn script_on(&mut self, conn: usize, lines: &[&str]) {
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
    fn script(&mut self, lines: &[&str]) {
        self.script_on(0, lines);
    }

    /// Reports the tally and fails when any reply differed.
    fn finish(self) {
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

#[test]
fn strings() {
    let Some(mut d) = Diff::start("strings") else {
        return;
    };
    // GET and SET with every option combination and their errors.
    d.script(&[
        "GET missing",
        "SET k v",
        "GET k",
        "SET k v2 NX",
        "GET k",
        "SET k v3 XX",
        "GET k",
        "SET nx v XX",
        "EXISTS nx",
        "SET nx v NX",
        "GET nx",
        "SET k v4 GET",
        "SET newk v GET",
        "SET k v5 NX GET",
        "GET k",
        "SET k v6 XX GET",
        "SET absent v XX GET",
        "EXISTS absent",
        "SET k v EX 100",
        "+ TTL k",
        "+ PTTL k",
        "SET k v PX 100000",
        "+ PTTL k",
        "SET k v2 KEEPTTL",
        "+ TTL k",
        "GET k",
        "SET k v",
        "TTL k",
        "SET k v EXAT @AT",
        "EXPIRETIME k",
        "SET k v PXAT @ATMS",
        "PEXPIRETIME k",
        "SET k v7 KEEPTTL GET",
        "PEXPIRETIME k",
        "SET k v8 XX KEEPTTL",
        "PEXPIRETIME k",
        "SET k v EX 100 GET",
        "+ TTL k",
        "SET k v EX 0",
        "SET k v EX -1",
        "SET k v PX 0",
        "SET k v PX -5",
        "SET k v EXAT 0",
        "SET k v PXAT -1",
        "SET k v EX abc",
        "SET k v PX 1.5",
        "SET k v EX 10 PX 100",
        "SET k v EX 10 EX 10",
        "SET k v NX XX",
        "SET k v KEEPTTL EX 10",
        "SET k v PXAT 100 KEEPTTL",
        "SET k v EX",
        "SET k v FOO",
        "SET k v EX 9223372036854775807",
        "SET k v PX 9223372036854775807",
        "SET k v EXAT 9223372036854775807",
        "SET k v EX 9223372036854775",
        "SET k",
        "SET",
        "GET k",
        "TTL k",
        "SET past v EXAT 1",
        "EXISTS past",
        "SET past v PXAT 1 GET",
        "EXISTS past",
        "GET",
        "GET a b",
    ]);
    // SETNX, SETEX, PSETEX.
    d.script(&[
        "SETNX k other",
        "SETNX fresh v",
        "GET fresh",
        "SETNX fresh",
        "SETEX se 100 v",
        "+ TTL se",
        "GET se",
        "SETEX se 0 v",
        "SETEX se -10 v",
        "SETEX se abc v",
        "SETEX se 100",
        "PSETEX pse 100000 v",
        "+ PTTL pse",
        "PSETEX pse 0 v",
        "PSETEX pse -5 v",
        "PSETEX pse 1.5 v",
        "SETEX se 9223372036854775807 v",
    ]);
    // MGET, MSET, MSETNX, GETSET, GETDEL.
    d.script(&[
        "MSET a 1 b 2 c 3",
        "MGET a b c missing",
        "MGET missing",
        "MGET",
        "MSET a",
        "MSET a 1 b",
        "MSET a 10 a 11",
        "GET a",
        "MSETNX a 1 d 4",
        "EXISTS d",
        "MSETNX d 4 e 5",
        "MGET d e",
        "MSETNX f 1 f 2",
        "GET f",
        "MSETNX g",
        "GETSET a 100",
        "GETSET nokey 1",
        "GET nokey",
        "EXPIRE a 100",
        "GETSET a 101",
        "TTL a",
        "GETSET a",
        "GETDEL a",
        "GETDEL a",
        "EXISTS a",
        "GETDEL",
    ]);
    // GETEX and its options.
    d.script(&[
        "GETEX b",
        "TTL b",
        "GETEX b EX 100",
        "+ TTL b",
        "GETEX b PERSIST",
        "TTL b",
        "GETEX b PX 100000",
        "+ PTTL b",
        "GETEX b EXAT @AT",
        "EXPIRETIME b",
        "GETEX b PXAT @ATMS",
        "PEXPIRETIME b",
        "GETEX b",
        "PEXPIRETIME b",
        "GETEX b EX 0",
        "GETEX b PX -1",
        "GETEX b EX abc",
        "GETEX b EX 10 PX 10",
        "GETEX b PERSIST EX 10",
        "GETEX b EX 10 PERSIST",
        "GETEX b FOO",
        "GETEX b EX",
        "GETEX b EX 9223372036854775807",
        "PEXPIRETIME b",
        "GETEX missing",
        "GETEX missing EX 10",
        "GETEX missing PERSIST",
        "GETEX c PXAT 1",
        "EXISTS c",
        "GETEX",
    ]);
    // INCR family, overflow and non-integer errors.
    d.script(&[
        "INCR n",
        "INCR n",
        "INCRBY n 10",
        "DECR n",
        "DECRBY n 5",
        "INCRBY n -3",
        "DECRBY n -3",
        "GET n",
        "DECR newdec",
        "INCRBY newinc -7",
        "SET n 9223372036854775806",
        "INCR n",
        "INCR n",
        "GET n",
        "INCRBY n -1",
        "SET n -9223372036854775807",
        "DECR n",
        "DECR n",
        "DECRBY n 1",
        "SET n 0",
        "DECRBY n -9223372036854775808",
        "INCRBY n -9223372036854775808",
        "INCRBY n 9223372036854775807",
        "INCRBY n 9223372036854775808",
        "INCRBY n abc",
        "INCRBY n 1.5",
        "INCRBY n ''",
        "DECRBY n 1e3",
        "SET s abc",
        "INCR s",
        "DECR s",
        "INCRBY s 2",
        "SET s 1.5",
        "INCR s",
        "SET s 007",
        "INCR s",
        "SET s +5",
        "INCR s",
        "SET s -0",
        "INCR s",
        "SET s ''",
        "INCR s",
        "SET s 99999999999999999999",
        "INCR s",
        "INCR",
        "INCR a b",
        "INCRBY n",
    ]);
    // INCRBYFLOAT formatting and errors.
    d.script(&[
        "INCRBYFLOAT f 1.5",
        "INCRBYFLOAT f 10",
        "INCRBYFLOAT f -0.25",
        "INCRBYFLOAT f 5.0e3",
        "INCRBYFLOAT f -11261.25",
        "GET f",
        "INCRBYFLOAT f 1e-5",
        "INCRBYFLOAT f abc",
        "INCRBYFLOAT f inf",
        "INCRBYFLOAT f -inf",
        "INCRBYFLOAT f nan",
        "INCRBYFLOAT f ''",
        "INCRBYFLOAT f 1.5x",
        "SET f 1e308",
        "INCRBYFLOAT f 1e308",
        "GET f",
        "SET f abc",
        "INCRBYFLOAT f 1",
        "SET f 3",
        "INCRBYFLOAT f 0.1",
        "SET f 0",
        "INCRBYFLOAT f 0.1",
        "INCRBYFLOAT f 0.1",
        "INCRBYFLOAT f 0.1",
        "SET f 10",
        "INCRBYFLOAT f 3.0",
        "INCRBYFLOAT f 1.23456789012345678",
        "SET f 5.0",
        "INCRBYFLOAT f 0",
        "SET f 1.5e2",
        "INCRBYFLOAT f 0",
        "INCRBYFLOAT f 12345678901234567890",
        "INCRBYFLOAT f",
        "INCRBYFLOAT n 1",
        "SET n 9223372036854775807",
        "INCRBYFLOAT n 1",
        "INCR n",
    ]);
    // APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE.
    d.script(&[
        "APPEND ap hello",
        "APPEND ap _world",
        "GET ap",
        "STRLEN ap",
        "STRLEN missing",
        "APPEND ap ''",
        "APPEND empty ''",
        "EXISTS empty",
        "SET num 12",
        "APPEND num 34",
        "GET num",
        "INCR num",
        "STRLEN num",
        "SET bignum -9223372036854775808",
        "STRLEN bignum",
        "APPEND ap",
        "STRLEN",
        "GETRANGE ap 0 4",
        "GETRANGE ap -5 -1",
        "GETRANGE ap 5 3",
        "GETRANGE ap -100 100",
        "GETRANGE ap 0 -100",
        "GETRANGE ap -1 -5",
        "GETRANGE ap 100 200",
        "GETRANGE ap 0 9223372036854775807",
        "GETRANGE ap -9223372036854775808 -1",
        "GETRANGE ap -9223372036854775808 9223372036854775807",
        "GETRANGE ap 10 10",
        "GETRANGE ap 11 11",
        "GETRANGE missing 0 -1",
        "GETRANGE ap a b",
        "GETRANGE ap 0",
        "GETRANGE num 1 2",
        "GETRANGE empty 0 -1",
        "SET e ''",
        "GETRANGE e 0 -1",
        "GETRANGE e 0 0",
        "SUBSTR ap 1 3",
        "SUBSTR ap -3 -1",
        "SUBSTR missing 0 1",
        "SETRANGE sr 5 abc",
        "GET sr",
        "SETRANGE sr 0 XY",
        "GET sr",
        "SETRANGE sr 7 longer",
        "GET sr",
        "SETRANGE sr -1 x",
        "SETRANGE sr abc x",
        "SETRANGE sr 536870911 ab",
        "SETRANGE sr 536870912 x",
        "SETRANGE sr 9223372036854775807 x",
        "SETRANGE sr 536870912 ''",
        "SETRANGE sr 3 ''",
        "SETRANGE new 0 ''",
        "SETRANGE new 10 ''",
        "EXISTS new",
        "SETRANGE new2 -1 ''",
        "SETRANGE new3 536870912 x",
        "EXISTS new3",
        "SET num 1234",
        "SETRANGE num 1 9",
        "GET num",
        "INCR num",
        "SETRANGE sr 0",
        "GET sr",
    ]);
    // LCS.
    d.script(&[
        "SET l1 ohmytext",
        "SET l2 mynewtext",
        "LCS l1 l2",
        "LCS l1 l2 LEN",
        "LCS l1 l2 IDX",
        "LCS l1 l2 IDX MINMATCHLEN 4",
        "LCS l1 l2 IDX WITHMATCHLEN",
        "LCS l1 l2 IDX MINMATCHLEN 2 WITHMATCHLEN",
        "LCS l1 l2 idx minmatchlen 0 withmatchlen",
        "LCS l1 l2 IDX MINMATCHLEN -5",
        "LCS l1 l2 LEN MINMATCHLEN 4",
        "LCS l1 l2 WITHMATCHLEN",
        "LCS l1 l2 LEN IDX",
        "LCS l1 l2 MINMATCHLEN abc",
        "LCS l1 l2 MINMATCHLEN",
        "LCS l1 l2 FOO",
        "LCS l1 missing",
        "LCS l1 missing LEN",
        "LCS l1 missing IDX WITHMATCHLEN",
        "LCS missing missing2",
        "LCS l1 l1",
        "LCS l1 l1 IDX WITHMATCHLEN",
        "SET l3 abcabcabc",
        "SET l4 cbacbacba",
        "LCS l3 l4",
        "LCS l3 l4 IDX WITHMATCHLEN",
        "LCS l1",
    ]);
    d.finish();
}

#[test]
fn bitmaps() {
    let Some(mut d) = Diff::start("bitmaps") else {
        return;
    };
    // SETBIT and GETBIT.
    d.script(&[
        "SETBIT b 7 1",
        "SETBIT b 7 0",
        "SETBIT b 7 1",
        "GETBIT b 7",
        "GETBIT b 6",
        "GETBIT b 100",
        "GETBIT missing 0",
        "SETBIT b 100 1",
        "GET b",
        "STRLEN b",
        "SETBIT b 8 2",
        "SETBIT b 8 -1",
        "SETBIT b 8 x",
        "SETBIT b -1 1",
        "SETBIT b 4294967296 1",
        "SETBIT b abc 1",
        "GETBIT b -1",
        "GETBIT b 4294967296",
        "GETBIT b 4294967295",
        "GETBIT b x",
        "SETBIT b 1",
        "GETBIT b",
        "SET num 5",
        "SETBIT num 6 1",
        "GET num",
        "GETBIT num 5",
    ]);
    // BITCOUNT with BYTE and BIT ranges.
    d.script(&[
        "SET bc foobar",
        "BITCOUNT bc",
        "BITCOUNT bc 0 0",
        "BITCOUNT bc 1 1",
        "BITCOUNT bc 1 -2",
        "BITCOUNT bc 0 -1 BYTE",
        "BITCOUNT bc 5 30 BIT",
        "BITCOUNT bc -10 -1 BIT",
        "BITCOUNT bc 0 0 bit",
        "BITCOUNT bc 3 1",
        "BITCOUNT bc -100 100",
        "BITCOUNT bc -100 -50",
        "BITCOUNT bc 100 200",
        "BITCOUNT bc 0 9223372036854775807",
        "BITCOUNT bc 0 9223372036854775807 BIT",
        "BITCOUNT bc -9223372036854775808 -1 BIT",
        "BITCOUNT bc 0",
        "BITCOUNT bc 0 1 FOO",
        "BITCOUNT bc 0 1 BIT extra",
        "BITCOUNT bc a b",
        "BITCOUNT missing",
        "BITCOUNT missing 0 -1 BIT",
        "BITCOUNT missing 0",
        "BITCOUNT",
    ]);
    // BITPOS.
    d.check(&[b"SET", b"bp", b"\xff\xf0\x00"]);
    d.check(&[b"SET", b"ones", b"\xff\xff"]);
    d.check(&[b"SET", b"zeros", b"\x00\x00"]);
    d.script(&[
        "BITPOS bp 0",
        "BITPOS bp 1",
        "BITPOS bp 1 1",
        "BITPOS bp 0 1",
        "BITPOS bp 1 2",
        "BITPOS bp 0 0 1",
        "BITPOS bp 1 7 15 BIT",
        "BITPOS bp 0 7 15 BIT",
        "BITPOS bp 0 0 -1 BIT",
        "BITPOS bp 1 -3 -1 BIT",
        "BITPOS bp 0 0 -1 BYTE",
        "BITPOS bp 1 2 1",
        "BITPOS bp 1 100",
        "BITPOS bp 0 100",
        "BITPOS bp 1 -100",
        "BITPOS missing 0",
        "BITPOS missing 1",
        "BITPOS missing 0 0 -1 BIT",
        "BITPOS ones 0",
        "BITPOS ones 0 0",
        "BITPOS ones 0 0 -1",
        "BITPOS ones 0 0 -1 BIT",
        "BITPOS ones 1",
        "BITPOS zeros 1",
        "BITPOS zeros 0",
        "BITPOS zeros 1 0 -1",
        "BITPOS bp 2",
        "BITPOS bp -1",
        "BITPOS bp x",
        "BITPOS bp 1 0 1 FOO",
        "BITPOS bp 1 a",
        "BITPOS bp 1 0 b",
        "BITPOS bp 1 0 1 BIT extra",
        "BITPOS bp",
    ]);
    // BITOP.
    d.script(&[
        "SET x1 foobar",
        "SET x2 abcdef",
        "SET short ab",
        "BITOP AND dest x1 x2",
        "GET dest",
        "BITOP OR dest x1 x2",
        "GET dest",
        "BITOP XOR dest x1 x2",
        "GET dest",
        "BITOP XOR dest x1 x2 missing",
        "GET dest",
        "BITOP AND dest x1 missing",
        "GET dest",
        "BITOP OR dest x1 short",
        "GET dest",
        "BITOP AND dest x1 short",
        "GET dest",
        "BITOP XOR dest short x1",
        "GET dest",
        "BITOP NOT dest x1",
        "GET dest",
        "BITOP not dest short",
        "GET dest",
        "BITOP NOT dest missing",
        "EXISTS dest",
        "SET dest x",
        "BITOP AND dest missing missing2",
        "EXISTS dest",
        "BITOP OR dest x1",
        "GET dest",
        "BITOP NOT dest x1 x2",
        "BITOP NOT dest",
        "BITOP FOO dest x1",
        "BITOP AND dest",
        "BITOP AND",
        "BITOP and dest x1 x1",
        "GET dest",
        "BITOP OR x1 x1 x2",
        "GET x1",
    ]);
    // BITFIELD and BITFIELD_RO.
    d.script(&[
        "BITFIELD bf SET u8 0 255",
        "BITFIELD bf GET u8 0",
        "BITFIELD bf GET i8 0",
        "BITFIELD bf INCRBY u8 0 10",
        "BITFIELD bf OVERFLOW SAT INCRBY u8 0 300",
        "BITFIELD bf OVERFLOW FAIL INCRBY u8 0 1",
        "BITFIELD bf OVERFLOW FAIL INCRBY u8 0 -1",
        "BITFIELD bf OVERFLOW WRAP INCRBY i8 #1 200",
        "BITFIELD bf OVERFLOW SAT INCRBY i8 #1 -200",
        "BITFIELD bf OVERFLOW SAT INCRBY i8 #1 500",
        "BITFIELD bf SET i16 #2 -1",
        "BITFIELD bf GET u4 0 GET u4 4 GET i4 #3 GET u1 9",
        "BITFIELD bf GET i64 0",
        "BITFIELD bf GET u63 0",
        "BITFIELD bf SET i64 0 -9223372036854775808",
        "BITFIELD bf INCRBY i64 0 -1",
        "BITFIELD bf OVERFLOW SAT INCRBY i64 0 -1",
        "BITFIELD bf OVERFLOW FAIL INCRBY i64 0 -1",
        "BITFIELD bf OVERFLOW SAT INCRBY u63 0 9223372036854775807",
        "BITFIELD bf GET u63 0",
        "BITFIELD bf OVERFLOW FAIL SET u8 0 256",
        "BITFIELD bf OVERFLOW SAT SET i8 0 200",
        "BITFIELD bf GET i8 0",
        "BITFIELD bf OVERFLOW WRAP SET u4 0 20",
        "BITFIELD bf GET u4 0",
        "BITFIELD bf OVERFLOW FAIL INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 100 9 OVERFLOW WRAP INCRBY u2 100 1",
        "BITFIELD bf INCRBY u2 102 1 INCRBY u2 102 1 INCRBY u2 102 1 INCRBY u2 102 1",
        "BITFIELD bf SET u8 #1000 1",
        "STRLEN bf",
        "BITFIELD bf GET u8 #1000 GET u8 8000",
        "BITFIELD bf GET u64 0",
        "BITFIELD bf GET i65 0",
        "BITFIELD bf GET i0 0",
        "BITFIELD bf GET u0 0",
        "BITFIELD bf GET x8 0",
        "BITFIELD bf GET 8 0",
        "BITFIELD bf GET u8 -1",
        "BITFIELD bf GET u8 #-1",
        "BITFIELD bf GET u8 abc",
        "BITFIELD bf GET u8 4294967296",
        "BITFIELD bf SET u8 4294967296 1",
        "BITFIELD bf SET u8 0 abc",
        "BITFIELD bf INCRBY u8 0 abc",
        "BITFIELD bf INCRBY u8 0 1.5",
        "BITFIELD bf OVERFLOW FOO GET u8 0",
        "BITFIELD bf OVERFLOW",
        "BITFIELD bf OVERFLOW SAT",
        "BITFIELD bf FOO",
        "BITFIELD bf GET u8",
        "BITFIELD bf SET u8 0",
        "BITFIELD bf",
        "BITFIELD missing GET u8 0",
        "EXISTS missing",
        "BITFIELD missing OVERFLOW FAIL SET u8 0 300",
        "EXISTS missing",
        "BITFIELD bf get u8 0 set u8 0 1 incrby u8 0 1 overflow sat",
        "BITFIELD_RO bf GET u8 0 GET i4 #3",
        "BITFIELD_RO bf",
        "BITFIELD_RO missing GET u16 0",
        "BITFIELD_RO bf SET u8 0 1",
        "BITFIELD_RO bf INCRBY u8 0 1",
        "BITFIELD_RO bf OVERFLOW SAT GET u8 0",
        "BITFIELD_RO bf GET u64 0",
        "BITFIELD_RO",
        "BITFIELD",
    ]);
    d.finish();
}

#[test]
fn keys() {
    let Some(mut d) = Diff::start("keys") else {
        return;
    };
    // DEL, UNLINK, EXISTS, TYPE, TOUCH.
    d.script(&[
        "SET a 1",
        "SET b 2",
        "HSET h f v",
        "DEL a b missing",
        "DEL a",
        "UNLINK h missing",
        "EXISTS a b h",
        "SET a 1",
        "HSET h f v",
        "EXISTS a a a missing",
        "TYPE a",
        "TYPE h",
        "TYPE missing",
        "TOUCH a h missing",
        "TOUCH missing",
        "DEL",
        "UNLINK",
        "EXISTS",
        "TYPE",
        "TYPE a b",
        "TOUCH",
    ]);
    // EXPIRE family with NX XX GT LT, TTL, PERSIST.
    d.script(&[
        "EXPIRE a 100",
        "+ TTL a",
        "+ PTTL a",
        "EXPIRE missing 100",
        "EXPIRE a 100 NX",
        "EXPIRE a 200 XX",
        "EXPIRE a 50 GT",
        "EXPIRE a 500 GT",
        "+ TTL a",
        "EXPIRE a 1000 LT",
        "EXPIRE a 10 LT",
        "EXPIRE a 10 lt",
        "EXPIRE a 10 NX XX",
        "EXPIRE a 10 GT LT",
        "EXPIRE a 10 NX GT",
        "EXPIRE a 10 NX LT",
        // A deadline 10 s from now is later than one set 10 s from an earlier
        // millisecond only when the clock has moved: ask with values whose
        // answer does not depend on it.
        "EXPIRE a 5 XX GT",
        "EXPIRE a 20 XX GT",
        "EXPIRE a 10 XX XX",
        "EXPIRE a 10 FOO",
        "EXPIRE a abc",
        "EXPIRE a 1.5",
        "EXPIRE a",
        "EXPIRE",
        "SET p 1",
        "EXPIRE p 100 GT",
        "TTL p",
        "EXPIRE p 100 XX",
        "TTL p",
        "EXPIRE p 100 LT",
        "+ TTL p",
        "PERSIST p",
        "PERSIST p",
        "PERSIST missing",
        "TTL p",
        "PERSIST",
        "PEXPIRE p 100000",
        "+ PTTL p",
        "PEXPIRE p 100000 NX",
        "PEXPIRE p 200000 GT",
        "PEXPIRE p 300000 LT",
        "PEXPIRE p 10 GT LT",
        "PEXPIRE missing 100",
        "EXPIREAT p @AT",
        "EXPIRETIME p",
        "PEXPIRETIME p",
        "TTL missing",
        "PTTL missing",
        "EXPIRETIME missing",
        "PEXPIRETIME missing",
        "SET q 1",
        "TTL q",
        "PTTL q",
        "EXPIRETIME q",
        "PEXPIRETIME q",
        "PEXPIREAT p @ATMS",
        "PEXPIRETIME p",
        "EXPIRETIME p",
        "EXPIREAT p 1 GT",
        "EXPIREAT q @AT NX",
        "EXPIREAT q @AT NX",
        "EXPIREAT q @AT XX",
        "PEXPIREAT q @ATMS GT",
        "PEXPIRETIME q",
        "EXPIREAT q @AT LT",
        "PEXPIRETIME q",
        "EXPIREAT q @AT GT LT",
        "EXPIREAT q abc",
        "EXPIREAT missing @AT",
        "EXPIREAT p 1",
        "EXISTS p",
        "SET p 1",
        "PEXPIREAT p 1",
        "EXISTS p",
        "SET a 1",
        "EXPIRE a -1",
        "EXISTS a",
        "SET a 1",
        "EXPIRE a 0",
        "EXISTS a",
        "SET a 1",
        "PEXPIRE a -100",
        "EXISTS a",
        "SET a 1",
        "EXPIRE a 9223372036854775807",
        "EXPIRE a 9223372036854775",
        "PEXPIRE a 9223372036854775807",
        "EXPIREAT a 9223372036854775807",
        "PEXPIREAT a 9223372036854775807",
        "EXPIRE a -9223372036854775808",
        "EXISTS a",
        "TTL a",
        "TTL",
        "PTTL a b",
    ]);
    // RENAME and RENAMENX.
    d.script(&[
        "SET r1 v",
        "RENAME r1 r2",
        "GET r2",
        "EXISTS r1",
        "RENAME missing x",
        "RENAME r2 r2",
        "RENAME missing missing",
        "RENAMENX r2 r2",
        "SET r3 x",
        "RENAMENX r2 r3",
        "RENAMENX r2 r4",
        "GET r4",
        "RENAMENX missing r5",
        "EXPIREAT r4 @AT",
        "RENAME r4 r6",
        "EXPIRETIME r6",
        "RENAME r3 r6",
        "EXPIRETIME r6",
        "GET r6",
        "HSET rh f v",
        "RENAME rh r6",
        "TYPE r6",
        "HGET r6 f",
        "RENAME r6",
        "RENAMENX r6",
    ]);
    // COPY and MOVE.
    d.script(&[
        "SET c1 v",
        "COPY c1 c2",
        "COPY c1 c2",
        "SET c1 v2",
        "COPY c1 c2 REPLACE",
        "GET c2",
        "COPY missing c3",
        "COPY missing c2 REPLACE",
        "GET c2",
        "COPY c1 c1",
        "COPY c1 c1 REPLACE",
        "COPY c1 c2 DB 1",
        "COPY c1 c2 DB 1",
        "COPY c1 c2 DB 1 REPLACE",
        "COPY c1 c1 DB 1 REPLACE",
        "COPY c1 c1 DB 0",
        "COPY c1 c2 DB 16",
        "COPY c1 c2 DB -1",
        "COPY c1 c2 DB abc",
        "COPY c1 c2 DB",
        "COPY c1 c2 FOO",
        "COPY c1 c2 REPLACE REPLACE",
        "COPY c1",
        "EXPIREAT c1 @AT",
        "COPY c1 c5",
        "EXPIRETIME c5",
        "HSET hh a 1 b 2",
        "COPY hh hh2",
        "% HGETALL hh2",
        "HSET hh c 3",
        "HLEN hh2",
        "COPY hh c2 REPLACE",
        "TYPE c2",
        "SELECT 1",
        "GET c2",
        "GET c1",
        "SELECT 0",
        "SET m v",
        "MOVE m 1",
        "EXISTS m",
        "MOVE m 1",
        "SELECT 1",
        "GET m",
        "SET m other",
        "SELECT 0",
        "SET m v",
        "MOVE m 1",
        "GET m",
        "MOVE m 0",
        "MOVE m 16",
        "MOVE m -1",
        "MOVE m abc",
        "MOVE missing 1",
        "EXPIREAT m @AT",
        "MOVE m 2",
        "SELECT 2",
        "EXPIRETIME m",
        "SELECT 0",
        "MOVE m",
    ]);
    // OBJECT ENCODING of strings of various shapes.
    let long44 = format!("SET e4 {}", "x".repeat(44));
    let long45 = format!("SET e5 {}", "x".repeat(45));
    d.script(&[
        "SET e1 123",
        "OBJECT ENCODING e1",
        "SET e2 -123",
        "OBJECT ENCODING e2",
        "SET e3 abc",
        "OBJECT ENCODING e3",
        &long44,
        "OBJECT ENCODING e4",
        &long45,
        "OBJECT ENCODING e5",
        "SET e6 12345678901234567890",
        "OBJECT ENCODING e6",
        "SET e7 0123",
        "OBJECT ENCODING e7",
        "SET e8 9223372036854775807",
        "OBJECT ENCODING e8",
        "SET e8 -9223372036854775808",
        "OBJECT ENCODING e8",
        "SET e9 ''",
        "OBJECT ENCODING e9",
        "APPEND e3 x",
        "OBJECT ENCODING e3",
        "SET e10 10",
        "INCR e10",
        "OBJECT ENCODING e10",
        "INCR e11",
        "OBJECT ENCODING e11",
        "SETRANGE e1 0 9",
        "OBJECT ENCODING e1",
        "SET e12 1.5",
        "OBJECT ENCODING e12",
        "INCRBYFLOAT e12 1",
        "OBJECT ENCODING e12",
        "INCRBYFLOAT e13 1",
        "OBJECT ENCODING e13",
        "MSET e14 77 e15 abc",
        "OBJECT ENCODING e14",
        "OBJECT ENCODING e15",
        "SETEX e16 100 5",
        "OBJECT ENCODING e16",
        "SETNX e17 5",
        "OBJECT ENCODING e17",
        "GETSET e17 6",
        "OBJECT ENCODING e17",
        "SETBIT e19 0 1",
        "OBJECT ENCODING e19",
        "APPEND e20 12",
        "OBJECT ENCODING e20",
        "SET e21 5",
        "APPEND e21 ''",
        "OBJECT ENCODING e21",
        "OBJECT ENCODING missing",
        "OBJECT ENCODING",
        "OBJECT ENCODING e1 e2",
        "OBJECT FOO",
        "OBJECT foo e1",
        "OBJECT",
    ]);
    d.check(&[b"SET", b"e18", b" 1"]);
    d.check(&[b"OBJECT", b"ENCODING", b"e18"]);
    // Wrong arity, unknown commands and unknown subcommands.
    d.script(&[
        "GET",
        "SET a",
        "GETRANGE a 0",
        "HSET h f",
        "HGET h",
        "HGETALL",
        "FOO",
        "FOO a b",
        "foo bar",
        "''",
        "CLIENT FOO",
        "CLIENT foo bar",
        "CONFIG FOO",
        "OBJECT HELPX",
        "CLIENT",
        "CONFIG",
    ]);
    let long_arg = "y".repeat(200);
    d.check(&[b"NOSUCHCMD", long_arg.as_bytes(), b"z"]);
    d.check(&[b"GET", b"a b"]);
    d.check(&[b"NO SUCH", b"a b"]);
    // KEYS, SCAN, RANDOMKEY, DBSIZE.
    d.script(&[
        "FLUSHALL",
        "RANDOMKEY",
        "SCAN 0",
        "KEYS *",
        "SET only 1",
        "RANDOMKEY",
        "MSET a1 1 a2 2 b1 3 abc 4",
        "HSET hk f v",
        "~ KEYS *",
        "~ KEYS a*",
        "~ KEYS a?",
        "~ KEYS [ab]1",
        "~ KEYS *c",
        "KEYS nomatch*",
        "$ SCAN 0 COUNT 1000",
        "$ SCAN 0 MATCH a* COUNT 1000",
        "$ SCAN 0 TYPE hash COUNT 1000",
        "$ SCAN 0 TYPE string MATCH *1 COUNT 1000",
        "SCAN 0 COUNT 0",
        "SCAN 0 COUNT abc",
        "SCAN abc",
        "SCAN 0 FOO",
        "SCAN",
        "DBSIZE",
        "KEYS",
    ]);
    d.finish();
}

#[test]
fn hashes() {
    let Some(mut d) = Diff::start("hashes") else {
        return;
    };
    d.script(&[
        "HSET h f1 v1 f2 v2",
        "HSET h f1 x f3 y",
        "HSET h f1",
        "HSET h f1 v1 f2",
        "HSET h",
        "HMSET h a 1 b 2",
        "HMSET h a",
        "HMSET h a 1 b",
        "HSETNX h a 5",
        "HSETNX h c 3",
        "HSETNX h2 a 1",
        "HSETNX h2 a",
        "HGET h f1",
        "HGET h missing",
        "HGET missing f",
        "HGET h f1 extra",
        "HMGET h f1 a nope",
        "HMGET missing a b",
        "HMGET h",
        "HLEN h",
        "HLEN missing",
        "HLEN",
        "HEXISTS h a",
        "HEXISTS h nope",
        "HEXISTS missing a",
        "HEXISTS h",
        "% HGETALL h",
        "~ HKEYS h",
        "~ HVALS h",
        "HGETALL missing",
        "HKEYS missing",
        "HVALS missing",
        "& HSCAN h 0 COUNT 100",
        "& HSCAN h 0 MATCH f* COUNT 100",
        "HSCAN missing 0",
        "HSCAN h abc",
        "HDEL h a nope",
        "HDEL h b c",
        "HDEL h b",
        "HDEL missing a",
        "HDEL h",
        "HDEL h2 a",
        "EXISTS h2",
        "HSET e f ''",
        "HGET e f",
        "HSTRLEN e f",
        "HSET h f1 a f1 b",
        "HGET h f1",
    ]);
    // HINCRBY and HINCRBYFLOAT.
    d.script(&[
        "HINCRBY n f 5",
        "HINCRBY n f -10",
        "HINCRBY n f abc",
        "HINCRBY n f 1.5",
        "HINCRBY n f ''",
        "HSET n s abc",
        "HINCRBY n s 1",
        "HSET n big 9223372036854775807",
        "HINCRBY n big 1",
        "HINCRBY n big -1",
        "HSET n small -9223372036854775808",
        "HINCRBY n small -1",
        "HSET n fl 1.5",
        "HINCRBY n fl 1",
        "HSET n lead 007",
        "HINCRBY n lead 1",
        "HINCRBY n",
        "HINCRBY n f",
        "HINCRBYFLOAT n fl 1.5",
        "HINCRBYFLOAT n fl 0.1",
        "HINCRBYFLOAT n fl -3.1",
        "HINCRBYFLOAT n new 2.5e3",
        "HINCRBYFLOAT n s 1",
        "HINCRBYFLOAT n fl abc",
        "HINCRBYFLOAT n fl inf",
        "HINCRBYFLOAT n fl nan",
        "HINCRBYFLOAT n fl ''",
        "HSET n huge 1e308",
        "HINCRBYFLOAT n huge 1e308",
        "HGET n huge",
        "HINCRBYFLOAT n f 1",
        "HGET n f",
        "HINCRBYFLOAT n big 1",
        "HINCRBYFLOAT n",
        "HSTRLEN n s",
        "HSTRLEN n nope",
        "HSTRLEN missing f",
        "HSTRLEN n f",
        "HSTRLEN n big",
        "HSTRLEN n",
    ]);
    // HRANDFIELD where the reply is deterministic.
    d.script(&[
        "HRANDFIELD missing",
        "HRANDFIELD missing 5",
        "HRANDFIELD missing -5",
        "HRANDFIELD missing 5 WITHVALUES",
        "HRANDFIELD missing 0",
        "HRANDFIELD n 0",
        "HRANDFIELD n 0 WITHVALUES",
        "~ HRANDFIELD n 100",
        "% HRANDFIELD n 100 WITHVALUES",
        "HRANDFIELD n abc",
        "HRANDFIELD n 1 FOO",
        "HRANDFIELD n 1 WITHVALUES extra",
        "HRANDFIELD n -9223372036854775808",
        "HRANDFIELD n -9223372036854775808 WITHVALUES",
        "HSET one only v",
        "HRANDFIELD one",
        "HRANDFIELD one 1",
        "HRANDFIELD one -3",
        "HRANDFIELD one -2 WITHVALUES",
        "HRANDFIELD one 5 WITHVALUES",
        "HRANDFIELD",
    ]);
    // WRONGTYPE in both directions.
    d.script(&[
        "SET s str",
        "HSET h f v",
        "HSET s f v",
        "HMSET s f v",
        "HSETNX s f v",
        "HGET s f",
        "HMGET s f",
        "HDEL s f",
        "HLEN s",
        "HEXISTS s f",
        "HGETALL s",
        "HKEYS s",
        "HVALS s",
        "HINCRBY s f 1",
        "HINCRBYFLOAT s f 1",
        "HSTRLEN s f",
        "HRANDFIELD s",
        "HRANDFIELD s 2",
        "HSCAN s 0",
        "GET h",
        "GETSET h v",
        "GETDEL h",
        "GETEX h",
        "GETEX h PERSIST",
        "SET h v GET",
        "SET h v XX GET",
        "SET h v NX GET",
        "MGET h s",
        "APPEND h x",
        "STRLEN h",
        "INCR h",
        "DECR h",
        "INCRBY h 1",
        "DECRBY h 1",
        "INCRBYFLOAT h 1",
        "GETRANGE h 0 -1",
        "SUBSTR h 0 -1",
        "SETRANGE h 0 x",
        "SETRANGE h 0 ''",
        "LCS h s",
        "LCS s h",
        "SETBIT h 0 1",
        "GETBIT h 0",
        "BITCOUNT h",
        "BITPOS h 1",
        "BITOP AND dest h s",
        "BITOP NOT dest h",
        "BITFIELD h GET u8 0",
        "BITFIELD_RO h GET u8 0",
        "OBJECT ENCODING h",
        "TYPE h",
        "% HGETALL h",
        "GET s",
        "SETNX h v",
        "MSETNX h v",
        "SET h v",
        "GET h",
        "TYPE h",
    ]);
    d.finish();
}

#[test]
fn transactions() {
    let Some(mut d) = Diff::start("transactions") else {
        return;
    };
    let other = d.connect();
    d.script(&[
        "MULTI",
        "SET a 1",
        "INCR a",
        "GET a",
        "EXEC",
        "MULTI",
        "SET a 5",
        "DISCARD",
        "GET a",
        "EXEC",
        "DISCARD",
        "MULTI",
        "EXEC",
        "MULTI",
        "MULTI",
        "SET b 1",
        "EXEC",
        "GET b",
        "MULTI",
        "SET c 1",
        "GET",
        "FOO",
        "EXEC",
        "GET c",
        "MULTI",
        "SET c 1",
        "FOO bar",
        "EXEC",
        "GET c",
        "MULTI",
        "SET s abc",
        "INCR s",
        "HSET s f v",
        "SET s2 v EX abc",
        "GET s",
        "EXEC",
        "MULTI",
        "WATCH x",
        "SET x 1",
        "EXEC",
        "MULTI",
        "PING",
        "ECHO hello",
        "SELECT 1",
        "SET z 1",
        "SELECT 0",
        "EXISTS z",
        "EXEC",
        "EXISTS z",
        "SELECT 1",
        "GET z",
        "SELECT 0",
        "MULTI",
        "DISCARD",
        "DISCARD",
        "MULTI extra",
        "EXEC extra",
        "WATCH",
        "UNWATCH extra",
    ]);
    // WATCH: changes from the same connection, from another, and to other keys.
    d.script(&["SET k v", "WATCH k", "SET k mine", "MULTI", "GET k", "EXEC"]);
    d.script(&["WATCH k", "GET k"]);
    d.script_on(other, &["SET k changed"]);
    d.script(&["MULTI", "SET k mine", "EXEC", "GET k"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["SET unrelated 1", "GET k"]);
    d.script(&["MULTI", "SET k mine", "EXEC", "GET k"]);
    d.script(&["WATCH k unrelated", "UNWATCH"]);
    d.script_on(other, &["SET k x"]);
    d.script(&["MULTI", "GET k", "EXEC"]);
    d.script(&["WATCH nokey"]);
    d.script_on(other, &["SET nokey 1"]);
    d.script(&["MULTI", "PING", "EXEC"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["EXPIRE k 100"]);
    d.script(&["MULTI", "PING", "EXEC"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["DEL k"]);
    d.script(&["MULTI", "PING", "EXEC"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["DEL k"]);
    d.script(&["MULTI", "PING", "EXEC"]);
    d.script(&["SET k v", "WATCH k"]);
    d.script_on(other, &["FLUSHALL"]);
    d.script(&["MULTI", "PING", "EXEC"]);
    d.script(&["SET k v", "WATCH k", "MULTI", "DISCARD"]);
    d.script_on(other, &["SET k after-discard"]);
    d.script(&["MULTI", "GET k", "EXEC"]);
    d.script(&["WATCH k", "MULTI", "EXEC"]);
    d.script_on(other, &["SET k after-exec"]);
    d.script(&["MULTI", "GET k", "EXEC"]);
    d.script(&["WATCH k", "WATCH k"]);
    d.script_on(other, &["SELECT 1", "SET k elsewhere", "SELECT 0"]);
    d.script(&["MULTI", "GET k", "EXEC"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["HSET k f v"]);
    d.script(&["MULTI", "TYPE k", "EXEC"]);
    d.script(&["WATCH k"]);
    d.script_on(other, &["SET k v", "MULTI", "SET k w", "EXEC"]);
    d.script(&["MULTI", "GET k", "EXEC"]);
    d.finish();
}

#[test]
fn connection() {
    let Some(mut d) = Diff::start("connection") else {
        return;
    };
    let other = d.connect();
    d.script(&[
        "PING",
        "PING hello",
        "PING a b",
        "ping",
        "ECHO hello",
        "ECHO ''",
        "ECHO",
        "ECHO a b",
        "SELECT 16",
        "SELECT -1",
        "SELECT abc",
        "SELECT",
        "SELECT 15",
        "SET in15 v",
        "DBSIZE",
        "SELECT 0",
        "DBSIZE",
        "DBSIZE extra",
        "SET a 1",
        "SELECT 1",
        "SET b 2",
        "SET c 3",
        "DBSIZE",
        "SELECT 0",
        "DBSIZE",
        "SWAPDB 0 1",
        "DBSIZE",
        "GET b",
        "GET a",
    ]);
    d.script_on(other, &["DBSIZE", "GET c"]);
    d.script(&[
        "SELECT 1",
        "GET a",
        "SELECT 0",
        "SWAPDB 0 0",
        "SWAPDB 0 16",
        "SWAPDB -1 0",
        "SWAPDB 0 abc",
        "SWAPDB 0",
        "FLUSHDB",
        "DBSIZE",
        "SELECT 1",
        "DBSIZE",
        "SELECT 15",
        "DBSIZE",
        "FLUSHALL",
        "DBSIZE",
        "SELECT 1",
        "DBSIZE",
        "SELECT 0",
        "SET x 1",
        "FLUSHDB ASYNC",
        "DBSIZE",
        "SET x 1",
        "FLUSHDB SYNC",
        "FLUSHDB FOO",
        "FLUSHDB SYNC ASYNC",
        "SET x 1",
        "FLUSHALL ASYNC",
        "FLUSHALL SYNC",
        "FLUSHALL FOO",
        "DBSIZE",
    ]);
    d.script(&[
        "CLIENT GETNAME",
        "CLIENT SETNAME myname",
        "CLIENT GETNAME",
        "CLIENT SETNAME ''",
        "CLIENT GETNAME",
        "CLIENT SETNAME",
        "CLIENT SETNAME a b",
        "CLIENT GETNAME extra",
    ]);
    d.check(&[b"CLIENT", b"SETNAME", b"a b"]);
    d.check(&[b"CLIENT", b"SETNAME", b"a\nb"]);
    d.check(&[b"CLIENT", b"SETNAME", b"caf\xc3\xa9"]);
    d.script(&[
        "CLIENT GETNAME",
        "^ HELLO",
        "^ HELLO 2",
        "^ HELLO 2 SETNAME hname",
        "CLIENT GETNAME",
        "^ HELLO 2 AUTH default anything",
        "HELLO 2 AUTH nosuchuser secret",
        "HELLO 2 AUTH default",
        "HELLO 2 FOO",
        "HELLO 4",
        "HELLO 1",
        "HELLO 0",
        "HELLO abc",
        "HELLO -1",
        "AUTH secret",
        "AUTH default secret",
        "AUTH nosuchuser secret",
        "AUTH",
        "AUTH a b c",
        "PING",
    ]);
    d.finish();
}

/// Every byte value 0..=255 round-trips in keys, values, fields and across MSET/MGET.
#[test]
fn binary_keys_and_values() {
    let Some(mut d) = Diff::start("binary") else {
        return;
    };
    let all: Vec<u8> = (0..=255u8).collect();
    let rev: Vec<u8> = (0..=255u8).rev().collect();
    d.check(&[b"SET", &all, &rev]);
    d.check(&[b"GET", &all]);
    d.check(&[b"STRLEN", &all]);
    d.check(&[b"EXISTS", &all]);
    d.check(&[b"GETRANGE", &all, b"250", b"-1"]);
    d.check(&[b"APPEND", &all, b"\r\n\x00"]);
    d.check(&[b"GET", &all]);
    d.check(&[b"SET", &rev, &all]);
    d.check(&[b"GET", &rev]);
    d.check(&[b"TYPE", &all]);
    d.check(&[b"LCS", &all, &rev, b"LEN"]);

    // Single-byte keys and values of every byte value, in one MSET and one MGET.
    let singles: Vec<[u8; 1]> = (0..=255u8).map(|b| [b]).collect();
    let doubles: Vec<[u8; 2]> = (0..=255u8).map(|b| [b, 255 - b]).collect();
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for (k, v) in singles.iter().zip(&doubles) {
        mset.push(k);
        mset.push(v);
    }
    d.check(&mset);
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(singles.iter().map(|k| &k[..]));
    d.check(&mget);
    for k in [
        &singles[0],
        &singles[10],
        &singles[13],
        &singles[32],
        &singles[255],
    ] {
        d.check(&[b"GET", k]);
    }
    d.check(&[b"DBSIZE"]);

    // Hash fields and values of every byte value.
    let mut hset: Vec<&[u8]> = vec![b"HSET", &all];
    for (f, v) in singles.iter().zip(&doubles) {
        hset.push(f);
        hset.push(v);
    }
    d.check(&hset);
    d.check(&[b"HSET", &all, &all, &rev]);
    d.check(&[b"HLEN", &all]);
    d.check(&[b"HGET", &all, &all]);
    d.check(&[b"HSTRLEN", &all, &all]);
    let mut hmget: Vec<&[u8]> = vec![b"HMGET", &all];
    hmget.extend(singles.iter().map(|k| &k[..]));
    d.check(&hmget);
    d.check_on(0, Norm::Pairs, &[b"HGETALL", &all]);
    d.check_on(0, Norm::Sorted, &[b"HKEYS", &all]);
    d.check(&[b"HEXISTS", &all, b"\x00"]);
    d.check(&[b"HDEL", &all, b"\x00", b"\xff"]);
    d.check(&[b"HLEN", &all]);
    d.check(&[b"TYPE", &all]);
    d.check(&[b"RENAME", &rev, b"\x00\xff\r\n"]);
    d.check(&[b"GET", b"\x00\xff\r\n"]);
    d.check_on(0, Norm::Sorted, &[b"KEYS", b"\x00*"]);
    d.finish();
}
