//! Pub/sub against the real binary: the same sessions, byte for byte, against
//! redis-server 7.0 where it is installed (subscribe confirmations, messages and pattern
//! messages in RESP2 and RESP3, the subscribed-mode restrictions, PUBSUB introspection),
//! and on their own a subscriber that never reads is disconnected without stopping the
//! publisher.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::{raw_exchange, RedisServer, Server};

/// Encodes a command as RESP.
fn resp(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

const WAIT: Duration = Duration::from_millis(150);

/// One scripted session over a subscriber connection `s` and a publisher `p`: what each
/// step brought back on the subscriber (and on the publisher where it matters).
fn session(port: u16) -> Vec<(String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut p = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut out = Vec::new();
    let mut step =
        |name: &str, on_pub: bool, args: &[&str], s: &mut TcpStream, p: &mut TcpStream| {
            let got = if on_pub {
                let r = raw_exchange(p, &resp(args), WAIT);
                let mut sub = raw_exchange(s, b"", WAIT);
                let mut all = r;
                all.extend_from_slice(b" | ");
                all.append(&mut sub);
                all
            } else {
                raw_exchange(s, &resp(args), WAIT)
            };
            out.push((name.to_string(), got));
        };
    step(
        "subscribe",
        false,
        &["SUBSCRIBE", "news", "sport"],
        &mut s,
        &mut p,
    );
    step(
        "subscribe again",
        false,
        &["SUBSCRIBE", "news"],
        &mut s,
        &mut p,
    );
    step(
        "psubscribe",
        false,
        &["PSUBSCRIBE", "n*", "x?z"],
        &mut s,
        &mut p,
    );
    step(
        "publish",
        true,
        &["PUBLISH", "news", "hello"],
        &mut s,
        &mut p,
    );
    step(
        "publish pattern",
        true,
        &["PUBLISH", "xyz", "p"],
        &mut s,
        &mut p,
    );
    step(
        "publish none",
        true,
        &["PUBLISH", "nobody", ""],
        &mut s,
        &mut p,
    );
    step(
        "channels",
        true,
        &["PUBSUB", "CHANNELS", "n*"],
        &mut s,
        &mut p,
    );
    step(
        "channels glob",
        true,
        &["PUBSUB", "CHANNELS", "s*"],
        &mut s,
        &mut p,
    );
    step(
        "numsub",
        true,
        &["PUBSUB", "NUMSUB", "news", "none"],
        &mut s,
        &mut p,
    );
    step("numpat", true, &["PUBSUB", "NUMPAT"], &mut s, &mut p);
    step("shard", true, &["PUBSUB", "SHARDCHANNELS"], &mut s, &mut p);
    step("bad sub", true, &["PUBSUB", "NOPE"], &mut s, &mut p);
    step("get refused", false, &["GET", "k"], &mut s, &mut p);
    step("ping", false, &["PING"], &mut s, &mut p);
    step("ping msg", false, &["PING", "m"], &mut s, &mut p);
    step(
        "unsubscribe one",
        false,
        &["UNSUBSCRIBE", "sport"],
        &mut s,
        &mut p,
    );
    step(
        "unsubscribe missing",
        false,
        &["UNSUBSCRIBE", "nope"],
        &mut s,
        &mut p,
    );
    step("punsubscribe all", false, &["PUNSUBSCRIBE"], &mut s, &mut p);
    step("unsubscribe all", false, &["UNSUBSCRIBE"], &mut s, &mut p);
    step("unsubscribe none", false, &["UNSUBSCRIBE"], &mut s, &mut p);
    step("get again", false, &["GET", "k"], &mut s, &mut p);
    // (Its reply holds the client id, which differs.)
    step("hello 3 *", false, &["HELLO", "3"], &mut s, &mut p);
    step("subscribe 3", false, &["SUBSCRIBE", "c3"], &mut s, &mut p);
    step("publish 3", true, &["PUBLISH", "c3", "m3"], &mut s, &mut p);
    step("get in 3", false, &["GET", "k"], &mut s, &mut p);
    step("ping in 3", false, &["PING"], &mut s, &mut p);
    step("reset", false, &["RESET"], &mut s, &mut p);
    step(
        "publish after reset",
        true,
        &["PUBLISH", "c3", "x"],
        &mut s,
        &mut p,
    );
    step("arity", false, &["SUBSCRIBE"], &mut s, &mut p);
    out
}

#[test]
fn pubsub_sessions_match_redis() {
    let nacre = Server::start(&[]);
    let redis = RedisServer::start();
    // Both sessions at once (each step waits for late bytes).
    let (ours, theirs) = std::thread::scope(|sc| {
        let t = redis.as_ref().map(|r| sc.spawn(|| session(r.port)));
        (session(nacre.port), t.map(|t| t.join().expect("session")))
    });
    // On its own: the messages arrive.
    let publish = &ours.iter().find(|(n, _)| n == "publish").unwrap().1;
    let text = String::from_utf8_lossy(publish);
    assert!(text.starts_with(":2\r\n"), "{text}");
    assert!(
        text.contains("message\r\n$4\r\nnews\r\n$5\r\nhello"),
        "{text}"
    );
    assert!(text.contains("pmessage\r\n$2\r\nn*\r\n"), "{text}");
    let Some(theirs) = theirs else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let mut bad = 0;
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        if a != b && !name.ends_with('*') {
            bad += 1;
            eprintln!(
                "MISMATCH {name}\n  nacre: {:?}\n  redis: {:?}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }
    assert_eq!(bad, 0, "{bad} steps differ from redis-server");
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected() {
    let nacre = Server::start(&[]);
    let mut s = TcpStream::connect(("127.0.0.1", nacre.port)).expect("connect");
    raw_exchange(&mut s, &resp(&["SUBSCRIBE", "flood"]), WAIT);
    let mut p = nacre.conn();
    let payload = "x".repeat(64 << 10);
    let mut reached_zero = false;
    for _ in 0..20_000 {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("flood")
            .arg(&payload)
            .query(&mut p)
            .unwrap();
        if n == 0 {
            reached_zero = true;
            break;
        }
    }
    assert!(
        reached_zero,
        "a subscriber that reads nothing was never disconnected"
    );
    let n: i64 = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("flood")
        .query(&mut p)
        .map(|v: Vec<redis::Value>| match v.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        })
        .unwrap();
    assert!(n <= 1);
}

/// Keyspace events of a command script, as one subscriber of every event receives them.
fn keyspace_session(port: u16) -> (Vec<u8>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut p = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    raw_exchange(
        &mut p,
        &resp(&["CONFIG", "SET", "notify-keyspace-events", "AKEn"]),
        WAIT,
    );
    raw_exchange(&mut s, &resp(&["PSUBSCRIBE", "__key*__:*"]), WAIT);
    let script: &[&[&str]] = &[
        &["SET", "s", "v"],
        &["SET", "s", "w", "EX", "100"],
        &["APPEND", "s", "x"],
        &["INCR", "n"],
        &["DECRBY", "n", "2"],
        &["INCRBYFLOAT", "n", "1.5"],
        &["SETRANGE", "s", "0", "q"],
        &["PERSIST", "s"],
        &["EXPIRE", "s", "50"],
        &["RENAME", "s", "s2"],
        &["DEL", "s2", "n"],
        &["HSET", "h", "f", "v"],
        &["HINCRBY", "h", "c", "1"],
        &["HDEL", "h", "f", "c"],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l", "z"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["LPOP", "l"],
        &["RPOP", "l"],
        &["RPOP", "l2"],
        &["SADD", "st", "a", "b"],
        &["SADD", "st", "a"],
        &["SREM", "st", "a"],
        &["SMOVE", "st", "st2", "b"],
        &["SINTERSTORE", "st3", "st2", "missing"],
        &["SUNIONSTORE", "st3", "st2"],
        &["ZADD", "z", "1", "a", "2", "b"],
        &["ZINCRBY", "z", "5", "a"],
        &["ZADD", "z", "INCR", "1", "b"],
        &["ZREM", "z", "a"],
        &["ZPOPMIN", "z"],
        &["MULTI"],
        &["SET", "m1", "x"],
        &["LPUSH", "m2", "y"],
        &["EXEC"],
        &["GETDEL", "m1"],
        &["RPUSH", "src", "3", "1", "2"],
        &["SORT", "src", "STORE", "sorted"],
        &["SORT", "nothing", "STORE", "sorted"],
        &["EXPIRE", "m2", "0"],
        // Keys replaced, moved and copied; stores that empty or replace their target.
        &["SET", "a", "1"],
        &["SET", "b", "2"],
        &["RENAME", "a", "b"],
        &["COPY", "b", "c"],
        &["COPY", "b", "c", "REPLACE"],
        &["MOVE", "c", "1"],
        &["BITOP", "OR", "bo", "b"],
        &["BITOP", "OR", "bo", "missing"],
        &["SORT", "src", "STORE", "sorted"],
        &["RPUSH", "one", "x"],
        &["LMOVE", "one", "one", "LEFT", "RIGHT"],
        &["LTRIM", "one", "1", "0"],
        &["SADD", "sm", "only"],
        &["SMOVE", "sm", "sm2", "only"],
        &["ZADD", "za", "1", "a"],
        &["ZUNIONSTORE", "zu", "1", "za"],
        &["ZRANGESTORE", "zu", "za", "5", "9", "BYSCORE"],
        &["ZINTERSTORE", "zi", "2", "za", "zu"],
        &["HINCRBYFLOAT", "h2", "f", "1.5"],
        &["SETEX", "se", "100", "v"],
        &["GETEX", "se", "PERSIST"],
        &["GETEX", "se", "EX", "50"],
        &["SETRANGE", "se", "0", ""],
        &["LPUSH", "lp", "1", "2"],
        &["LMPOP", "1", "lp", "RIGHT", "COUNT", "5"],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x'); return redis.call('del', KEYS[1])",
            "1",
            "ev",
        ],
        &["SET", "gone", "x", "PX", "1"],
    ];
    let mut all = Vec::new();
    for cmd in script {
        all.extend_from_slice(&resp(cmd));
    }
    raw_exchange(&mut p, &all, WAIT);
    // The active expire cycle removes `gone` (both servers run it ten times a second).
    let events = raw_exchange(&mut s, b"", Duration::from_millis(1500));
    (events, Vec::new())
}

#[test]
fn keyspace_notifications_match_redis() {
    let nacre = Server::start(&[]);
    let redis = RedisServer::start();
    let (ours, theirs) = std::thread::scope(|sc| {
        let t = redis
            .as_ref()
            .map(|r| sc.spawn(|| keyspace_session(r.port)));
        (
            keyspace_session(nacre.port).0,
            t.map(|t| t.join().expect("session").0),
        )
    });
    let text = String::from_utf8_lossy(&ours);
    assert!(
        text.contains("__keyevent@0__:expired\r\n$4\r\ngone"),
        "{text}"
    );
    let Some(theirs) = theirs else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    // Compare message by message for a readable difference.
    let split = |b: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(b)
            .split("*4\r\n")
            .map(|m| m.replace("\r\n", " "))
            .collect()
    };
    let (a, b) = (split(&ours), split(&theirs));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "event {i} differs (nacre first)");
    }
    assert_eq!(
        a.len(),
        b.len(),
        "event counts differ:\n nacre {a:?}\n redis {b:?}"
    );
}
