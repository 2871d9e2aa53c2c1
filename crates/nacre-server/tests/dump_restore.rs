//! DUMP and RESTORE against redis-server 7.0: a payload Redis dumps (in every encoding it
//! picks: listpacks, intsets, hash tables, skip lists, quicklists, integer and compressed
//! strings) restores into nacre-server with the same contents, and one nacre-server dumps
//! restores into Redis; options and errors answer as Redis's do.

mod common;

use common::{RedisServer, Server};
use redis::{Connection, Value};

/// Fills `c` with one key of every type and encoding.
fn fill(c: &mut Connection) {
    let mut q = |args: &[&str]| {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let _: Value = cmd.query(c).expect("fill");
    };
    q(&["SET", "str", "hello"]);
    q(&["SET", "int", "-12345"]);
    q(&["SET", "bigint", "9223372036854775807"]);
    let long = "abcabcabc".repeat(200);
    q(&["SET", "lzf", &long]);
    q(&["SET", "ttl", "v", "PX", "100000"]);
    q(&["RPUSH", "list", "a", "1", "-70000", "5000000000", "b"]);
    q(&["SADD", "intset", "1", "-2", "300", "70000", "5000000000"]);
    q(&["SADD", "set", "a", "b", "c"]);
    q(&["HSET", "hash", "f1", "v1", "f2", "12", "f3", "-1"]);
    q(&["ZADD", "zset", "1", "a", "-2.5", "b", "inf", "c", "0", "d"]);
    for i in 0..300 {
        let (n, v) = (i.to_string(), format!("value-{i}"));
        q(&["RPUSH", "biglist", &v]);
        q(&["SADD", "bigset", &v]);
        q(&["HSET", "bighash", &n, &v]);
        q(&["ZADD", "bigzset", &n, &v]);
    }
    let wide = "x".repeat(10_000);
    q(&["RPUSH", "widelist", &wide, "small", &wide]);
    // Streams: nodes of three entries, entries with the master's fields and without,
    // deletes inside a node and of a whole node, groups with pending entries and consumers.
    q(&["CONFIG", "SET", "stream-node-max-entries", "3"]);
    for i in 1..=10 {
        let (id, f, v) = (
            format!("{i}-1"),
            format!("f{}", i % 3),
            format!("{}", i * 1000),
        );
        q(&["XADD", "stream", &id, &f, &v, "other", "x"]);
    }
    q(&["XDEL", "stream", "2-1", "4-1", "5-1", "6-1"]);
    q(&["XGROUP", "CREATE", "stream", "g1", "0"]);
    q(&["XGROUP", "CREATE", "stream", "g2", "$"]);
    q(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "2",
        "STREAMS",
        "stream",
        ">",
    ]);
    q(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "bob",
        "COUNT",
        "2",
        "STREAMS",
        "stream",
        ">",
    ]);
    q(&["XGROUP", "CREATECONSUMER", "stream", "g1", "carol"]);
    q(&["XACK", "stream", "g1", "1-1"]);
    q(&["CONFIG", "SET", "stream-node-max-entries", "100"]);
    for i in 0..300 {
        let v = format!("value-{i}");
        q(&["XADD", "bigstream", &format!("{}-0", i + 1), "n", &v]);
    }
    q(&["XGROUP", "CREATE", "emptystream", "g", "$", "MKSTREAM"]);
}

const KEYS: &[&str] = &[
    "str",
    "int",
    "bigint",
    "lzf",
    "ttl",
    "list",
    "intset",
    "set",
    "hash",
    "zset",
    "biglist",
    "bigset",
    "bighash",
    "bigzset",
    "widelist",
    "stream",
    "bigstream",
    "emptystream",
];

/// A stream's contents without what depends on the clock: its entries, its counters and
/// nodes (`XINFO STREAM`, less the radix tree's inner node count, which is Redis's own),
/// its groups and who has what pending.
fn stream_contents(c: &mut Connection, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let entries: Value = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(c)
        .unwrap();
    out.push(format!("{entries:?}"));
    let info: Vec<Value> = redis::cmd("XINFO").arg("STREAM").arg(key).query(c).unwrap();
    for pair in info.chunks(2) {
        if pair[0] != Value::BulkString(b"radix-tree-nodes".to_vec()) {
            out.push(format!("{pair:?}"));
        }
    }
    let groups: Value = redis::cmd("XINFO").arg("GROUPS").arg(key).query(c).unwrap();
    out.push(format!("{groups:?}"));
    let names: Vec<Vec<Value>> = redis::cmd("XINFO").arg("GROUPS").arg(key).query(c).unwrap();
    for g in names {
        let Value::BulkString(name) = &g[1] else {
            panic!("group name {:?}", g[1]);
        };
        let pending: Value = redis::cmd("XPENDING").arg(key).arg(name).query(c).unwrap();
        out.push(format!("{pending:?}"));
    }
    out
}

/// Everything a key holds, in a comparable form (type, sorted contents).
fn contents(c: &mut Connection, key: &str) -> (String, Vec<String>) {
    let t: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let mut items: Vec<String> = match t.as_str() {
        "string" => vec![redis::cmd("GET").arg(key).query(c).unwrap()],
        "list" => redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap(),
        "set" => redis::cmd("SMEMBERS").arg(key).query(c).unwrap(),
        "hash" => redis::cmd("HGETALL").arg(key).query(c).unwrap(),
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .unwrap(),
        "stream" => stream_contents(c, key),
        other => panic!("{key} is a {other}"),
    };
    if matches!(t.as_str(), "set" | "hash") {
        if t == "hash" {
            let mut pairs: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
            pairs.sort();
            items = pairs;
        } else {
            items.sort();
        }
    }
    (t, items)
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).expect("dump")
}

fn restore(
    c: &mut Connection,
    key: &str,
    ttl: i64,
    payload: &[u8],
    opts: &[&str],
) -> redis::RedisResult<()> {
    let mut cmd = redis::cmd("RESTORE");
    cmd.arg(key).arg(ttl).arg(payload);
    for o in opts {
        cmd.arg(*o);
    }
    cmd.query(c)
}

#[test]
fn payloads_move_both_ways_with_redis() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let (mut r, mut n) = (redis.conn(), nacre.conn());
    fill(&mut r);
    fill(&mut n);
    for key in KEYS {
        let want = contents(&mut r, key);
        assert_eq!(contents(&mut n, key), want, "{key} before");
        // Redis's payload into Nacre, and Nacre's into Redis, under new names.
        let theirs = dump(&mut r, key);
        restore(&mut n, &format!("from-redis-{key}"), 0, &theirs, &[]).expect("restore");
        assert_eq!(
            contents(&mut n, &format!("from-redis-{key}")),
            want,
            "{key} from Redis"
        );
        let ours = dump(&mut n, key);
        restore(&mut r, &format!("from-nacre-{key}"), 0, &ours, &[]).expect("Redis restores it");
        assert_eq!(
            contents(&mut r, &format!("from-nacre-{key}")),
            want,
            "{key} into Redis"
        );
        // And back: Nacre reads what it wrote.
        restore(&mut n, &format!("again-{key}"), 0, &ours, &[]).expect("restore own");
        assert_eq!(
            contents(&mut n, &format!("again-{key}")),
            want,
            "{key} round trip"
        );
    }
    let missing: Value = redis::cmd("DUMP").arg("nosuchkey").query(&mut n).unwrap();
    assert_eq!(missing, Value::Nil);
}

#[test]
fn options_and_errors_answer_as_redis() {
    let redis = RedisServer::start();
    let nacre = Server::start(&[]);
    let mut sessions = vec![nacre.conn()];
    if let Some(r) = &redis {
        sessions.push(r.conn());
    }
    let mut answers: Vec<Vec<String>> = Vec::new();
    for c in &mut sessions {
        let mut out = Vec::new();
        let mut say = |r: redis::RedisResult<Value>| {
            out.push(match r {
                Ok(v) => format!("{v:?}"),
                Err(e) => format!("error {e}"),
            })
        };
        let _: () = redis::cmd("SET").arg("k").arg("v").query(c).unwrap();
        let p = dump(c, "k");
        let q = |args: Vec<Vec<u8>>, c: &mut Connection| {
            let mut cmd = redis::cmd("RESTORE");
            for a in args {
                cmd.arg(a);
            }
            cmd.query::<Value>(c)
        };
        let b = |s: &str| s.as_bytes().to_vec();
        say(q(vec![b("k"), b("0"), p.clone()], c));
        say(q(vec![b("k"), b("0"), p.clone(), b("REPLACE")], c));
        say(q(vec![b("k2"), b("-1"), p.clone()], c));
        say(q(vec![b("k2"), b("x"), p.clone()], c));
        let mut bad = p.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        say(q(vec![b("k2"), b("0"), bad], c));
        say(q(
            vec![b("k2"), b("0"), b("garbage-that-is-long-enough")],
            c,
        ));
        say(q(
            vec![b("k2"), b("0"), p.clone(), b("IDLETIME"), b("-1")],
            c,
        ));
        say(q(vec![b("k2"), b("0"), p.clone(), b("FREQ"), b("256")], c));
        say(q(
            vec![
                b("k2"),
                b("0"),
                p.clone(),
                b("IDLETIME"),
                b("5"),
                b("FREQ"),
                b("1"),
            ],
            c,
        ));
        say(q(vec![b("k2"), b("0"), p.clone(), b("BOGUS")], c));
        // ABSTTL in the past: nothing is created.
        say(q(vec![b("k3"), b("1000"), p.clone(), b("ABSTTL")], c));
        say(redis::cmd("EXISTS").arg("k3").query(c));
        // A relative TTL is kept.
        say(q(vec![b("k4"), b("100000"), p.clone()], c));
        let ttl: i64 = redis::cmd("PTTL").arg("k4").query(c).unwrap();
        say(Ok(Value::Int(i64::from(ttl > 90_000 && ttl <= 100_000))));
        say(q(vec![b("k5"), b("0"), p.clone(), b("FREQ"), b("7")], c));
        say(redis::cmd("GET").arg("k5").query(c));
        answers.push(out);
    }
    if answers.len() == 2 {
        assert_eq!(answers[0], answers[1], "nacre first, then redis");
    }
    assert!(answers[0][0].contains("BUSYKEY"), "{:?}", answers[0]);
    assert!(
        answers[0][4].contains("checksum are wrong"),
        "{:?}",
        answers[0]
    );
}
