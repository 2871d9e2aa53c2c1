//! MIGRATE between nacre-server and redis-server 7.0, both ways and nacre to nacre: keys of
//! every type arrive whole with their TTLs; COPY, REPLACE, KEYS, NOKEY, AUTH and AUTH2;
//! errors (arguments, the target's, timeouts, refused connections) answer as Redis's
//! MIGRATE answers the same invocation; a key written while its migration waits for the
//! target is kept; connections are cached and released after 10 seconds.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{run, RedisServer, Server};
use redis::{Connection, Value};

fn q(c: &mut Connection, args: &[&str]) -> Value {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    run(c, &a)
}

fn text(v: &Value) -> String {
    match v {
        Value::Okay => "OK".into(),
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::Nil => "(nil)".into(),
        other => format!("{other:?}"),
    }
}

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    match q(c, args) {
        Value::Int(i) => i,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Fills `c` with keys of every type, some expiring; their names.
fn fill(c: &mut Connection) -> Vec<&'static str> {
    let mut ok = |args: &[&str]| {
        let v = q(c, args);
        assert!(!text(&v).starts_with("ERR:"), "{args:?}: {v:?}");
    };
    ok(&["SET", "str", "hello"]);
    ok(&["SET", "int", "-12345"]);
    ok(&["SET", "ttlstr", "v", "PX", "100000"]);
    ok(&["SET", "long", &"abcabc".repeat(300)]);
    ok(&["RPUSH", "list", "a", "1", "-70000", "b"]);
    ok(&["PEXPIRE", "list", "200000"]);
    ok(&["SADD", "intset", "1", "-2", "70000"]);
    ok(&["SADD", "set", "a", "b", "c"]);
    ok(&["HSET", "hash", "f1", "v1", "f2", "12"]);
    ok(&["PEXPIRE", "hash", "300000"]);
    ok(&["ZADD", "zset", "1", "a", "-2.5", "b", "inf", "c"]);
    for i in 0..200 {
        let (n, v) = (i.to_string(), format!("value-{i}"));
        ok(&["RPUSH", "biglist", &v]);
        ok(&["SADD", "bigset", &v]);
        ok(&["HSET", "bighash", &n, &v]);
        ok(&["ZADD", "bigzset", &n, &v]);
    }
    ok(&["PEXPIRE", "bigzset", "400000"]);
    for i in 1..=6 {
        let (id, v) = (format!("{i}-1"), format!("{}", i * 10));
        ok(&["XADD", "stream", &id, "f", &v]);
    }
    ok(&["XDEL", "stream", "3-1"]);
    ok(&["XGROUP", "CREATE", "stream", "g1", "0"]);
    ok(&[
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
    ok(&["PEXPIRE", "stream", "500000"]);
    vec![
        "str", "int", "ttlstr", "long", "list", "intset", "set", "hash", "zset", "biglist",
        "bigset", "bighash", "bigzset", "stream",
    ]
}

/// What a key holds, in comparable form.
fn contents(c: &mut Connection, key: &str) -> Vec<String> {
    let t = text(&q(c, &["TYPE", key]));
    let list = |v: Value| -> Vec<String> {
        match v {
            Value::Array(a) | Value::Set(a) => a.iter().map(text).collect(),
            other => panic!("{key}: {other:?}"),
        }
    };
    let mut items = match t.as_str() {
        "string" => vec![text(&q(c, &["GET", key]))],
        "list" => list(q(c, &["LRANGE", key, "0", "-1"])),
        "set" => list(q(c, &["SMEMBERS", key])),
        "hash" => list(q(c, &["HGETALL", key]))
            .chunks(2)
            .map(|p| p.join("="))
            .collect(),
        "zset" => list(q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        "stream" => vec![
            format!("{:?}", q(c, &["XRANGE", key, "-", "+"])),
            format!("{:?}", q(c, &["XINFO", "GROUPS", key])),
            format!("{:?}", q(c, &["XPENDING", key, "g1"])),
        ],
        "none" => Vec::new(),
        other => panic!("{key} is a {other}"),
    };
    if matches!(t.as_str(), "set" | "hash") {
        items.sort();
    }
    items.insert(0, t);
    items
}

/// Moves every filled key from `from` to the server on `port` (one key at a time, then the
/// rest with KEYS) and checks that they arrive whole with their TTLs and leave `from`.
fn moves_everything(from: &mut Connection, to: &mut Connection, port: u16) {
    let keys = fill(from);
    let before: Vec<(Vec<String>, i64)> = keys
        .iter()
        .map(|k| (contents(from, k), int(from, &["PTTL", k])))
        .collect();
    let port = port.to_string();
    let (one, rest) = keys.split_at(4);
    for k in one {
        let r = q(from, &["MIGRATE", "127.0.0.1", &port, k, "0", "5000"]);
        assert_eq!(r, Value::Okay, "{k}");
    }
    let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
    args.extend(rest);
    assert_eq!(q(from, &args), Value::Okay);
    for (k, (want, ttl)) in keys.iter().zip(before) {
        assert_eq!(int(from, &["EXISTS", k]), 0, "{k} left behind");
        assert_eq!(contents(to, k), want, "{k}");
        let got = int(to, &["PTTL", k]);
        if ttl < 0 {
            assert_eq!(got, -1, "{k}");
        } else {
            assert!(
                got <= ttl && got > ttl - 10_000,
                "{k}: ttl {got}, was {ttl}"
            );
        }
    }
}

#[test]
fn every_type_moves_between_nacre_and_redis() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed: skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let other = Server::start(&[]);
    // Nacre to Redis, Redis's own MIGRATE to Nacre, Nacre to Nacre.
    moves_everything(&mut nacre.conn(), &mut redis.conn(), redis.port);
    q(&mut redis.conn(), &["FLUSHALL"]);
    moves_everything(&mut redis.conn(), &mut nacre.conn(), nacre.port);
    q(&mut nacre.conn(), &["FLUSHALL"]);
    moves_everything(&mut nacre.conn(), &mut other.conn(), other.port);
    // A value larger than one 64 KiB write.
    let mut n = nacre.conn();
    for i in 0..200 {
        let items: Vec<String> = (0..100).map(|j| format!("item {i} {j}")).collect();
        let mut args = vec!["RPUSH", "large"];
        args.extend(items.iter().map(|s| s.as_str()));
        q(&mut n, &args);
    }
    let payload = q(&mut n, &["DUMP", "large"]);
    assert!(matches!(&payload, Value::BulkString(b) if b.len() > 128 * 1024));
    let port = redis.port.to_string();
    assert_eq!(
        q(
            &mut n,
            &["MIGRATE", "127.0.0.1", &port, "large", "0", "10000"]
        ),
        Value::Okay
    );
    assert_eq!(int(&mut redis.conn(), &["LLEN", "large"]), 20_000);
    assert_eq!(int(&mut n, &["EXISTS", "large"]), 0);
}

/// Runs `args` on a nacre source and a Redis source holding the same keys, against the same
/// target; both replies.
fn both(n: &mut Connection, r: &mut Connection, args: &[&str]) -> (Value, Value) {
    (q(n, args), q(r, args))
}

#[test]
fn options_answer_as_redis() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed: skipped");
        return;
    };
    let Some(target) = RedisServer::start() else {
        return;
    };
    let nacre = Server::start(&[]);
    let (mut n, mut r, mut t) = (nacre.conn(), redis.conn(), target.conn());
    let port = target.port.to_string();
    let p = port.as_str();
    let reset = |n: &mut Connection, r: &mut Connection, t: &mut Connection| {
        for c in [&mut *n, &mut *r] {
            q(c, &["FLUSHALL"]);
            q(c, &["MSET", "k1", "v1", "k2", "v2", "k3", "v3"]);
            q(c, &["RPUSH", "list", "a", "b"]);
        }
        q(t, &["FLUSHALL"]);
    };
    reset(&mut n, &mut r, &mut t);
    // Argument errors, NOKEY, and what needs no target.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let cases: Vec<Vec<&str>> = vec![
        vec!["MIGRATE", "127.0.0.1", p, "k1", "0", "1000", "foo"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "0", "1000", "AUTH"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "0", "1000", "AUTH2", "u"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "0", "1000", "COPY", "bar"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            p,
            "k1",
            "0",
            "1000",
            "KEYS",
            "a",
            "b",
        ],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "0", "x"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "x", "1000"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "x", "x", "foo"],
        vec!["MIGRATE", "127.0.0.1", p, "nokey", "0", "1000"],
        vec!["MIGRATE", "127.0.0.1", "x", "nokey", "0", "1000"],
        vec!["MIGRATE", "127.0.0.1", p, "", "0", "1000", "KEYS"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            p,
            "",
            "0",
            "1000",
            "KEYS",
            "n1",
            "n2",
            "n2",
        ],
        vec!["MIGRATE", "127.0.0.1", "x", "k1", "0", "1000"],
        vec!["MIGRATE", "127.0.0.1", &dead, "k1", "0", "1000"],
        vec!["MIGRATE", "127.0.0.1", "-1", "k1", "0", "1000"],
        vec!["MIGRATE", "", p, "k1", "0", "1000"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "99", "1000", "COPY"],
        vec!["MIGRATE", "127.0.0.1", p, "k1", "-1", "1000", "COPY"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            p,
            "k1",
            "0",
            "1000",
            "AUTH",
            "pw",
            "COPY",
        ],
        vec![
            "MIGRATE",
            "127.0.0.1",
            p,
            "k1",
            "0",
            "1000",
            "AUTH2",
            "u",
            "pw",
        ],
    ];
    for args in &cases {
        let (ours, theirs) = both(&mut n, &mut r, args);
        assert_eq!(ours, theirs, "{args:?}");
        assert_eq!(int(&mut n, &["EXISTS", "k1"]), 1, "{args:?}");
    }
    assert_eq!(
        text(&q(&mut n, &cases[4])),
        "ERR:ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(text(&q(&mut n, &cases[8])), "NOKEY");
    // As Redis's: a refused connection shows when the pipeline is written; only a target
    // that does not resolve fails to connect.
    assert_eq!(
        text(&q(&mut n, &cases[13])),
        "ERR:IOERR error or timeout writing to target instance"
    );
    assert_eq!(
        text(&q(&mut n, &cases[14])),
        "ERR:IOERR error or timeout connecting to the client"
    );
    assert_eq!(
        text(&q(&mut n, &cases[16])),
        "ERR:ERR Target instance replied with error: ERR DB index is out of range"
    );
    // COPY keeps the key; without REPLACE the target's key is BUSY; with it, replaced.
    let copy = ["MIGRATE", "127.0.0.1", p, "list", "0", "1000", "COPY"];
    assert_eq!(q(&mut r, &copy), Value::Okay);
    q(&mut t, &["FLUSHALL"]);
    assert_eq!(q(&mut n, &copy), Value::Okay);
    assert_eq!(int(&mut n, &["EXISTS", "list"]), 1);
    assert_eq!(int(&mut t, &["LLEN", "list"]), 2);
    let (ours, theirs) = both(&mut n, &mut r, &copy);
    assert_eq!(ours, theirs);
    assert_eq!(
        text(&ours),
        "ERR:ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    q(&mut n, &["RPUSH", "list", "c"]);
    let replace = ["MIGRATE", "127.0.0.1", p, "list", "0", "1000", "REPLACE"];
    assert_eq!(q(&mut n, &replace), Value::Okay);
    assert_eq!(int(&mut t, &["LLEN", "list"]), 3);
    assert_eq!(int(&mut n, &["EXISTS", "list"]), 0);
    // KEYS with keys some of which are missing: the others move.
    reset(&mut n, &mut r, &mut t);
    let some = [
        "MIGRATE",
        "127.0.0.1",
        p,
        "",
        "0",
        "1000",
        "KEYS",
        "no1",
        "k1",
        "no2",
        "k3",
    ];
    assert_eq!(q(&mut n, &some), Value::Okay);
    assert_eq!(int(&mut n, &["EXISTS", "k1", "k2", "k3"]), 1);
    assert_eq!(text(&q(&mut t, &["GET", "k1"])), "v1");
    assert_eq!(text(&q(&mut t, &["GET", "k3"])), "v3");
    assert_eq!(int(&mut t, &["EXISTS", "k2"]), 0);
    // Only the keys the target acknowledged leave: k2 is busy there.
    reset(&mut n, &mut r, &mut t);
    q(&mut t, &["SET", "k2", "theirs"]);
    let all = [
        "MIGRATE",
        "127.0.0.1",
        p,
        "",
        "0",
        "1000",
        "KEYS",
        "k1",
        "k2",
        "k3",
    ];
    let (ours, theirs) = both(&mut n, &mut r, &all);
    assert_eq!(ours, theirs);
    assert!(text(&ours).contains("BUSYKEY"), "{ours:?}");
    assert_eq!(int(&mut n, &["EXISTS", "k1", "k2", "k3"]), 1);
    assert_eq!(text(&q(&mut n, &["GET", "k2"])), "v2");
    assert_eq!(text(&q(&mut t, &["GET", "k2"])), "theirs");
    // A key named twice is sent twice: the second RESTORE is refused, as in Redis.
    reset(&mut n, &mut r, &mut t);
    let twice = [
        "MIGRATE",
        "127.0.0.1",
        p,
        "",
        "0",
        "1000",
        "KEYS",
        "k1",
        "k1",
    ];
    let ours = q(&mut n, &twice);
    q(&mut t, &["FLUSHALL"]);
    let theirs = q(&mut r, &twice);
    assert_eq!(ours, theirs);
    assert_eq!(int(&mut n, &["EXISTS", "k1"]), 0);
}

#[test]
fn auth_and_auth2() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed: skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let target = Server::start(&["--requirepass", "foobar"]);
    let mut t = target.conn();
    assert_eq!(q(&mut t, &["AUTH", "foobar"]), Value::Okay);
    assert_eq!(
        q(
            &mut t,
            &["ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@all"]
        ),
        Value::Okay
    );
    let redis_target = RedisServer::start().expect("redis-server");
    let mut rt = redis_target.conn();
    q(&mut rt, &["CONFIG", "SET", "requirepass", "foobar"]);
    q(&mut rt, &["AUTH", "foobar"]);
    q(
        &mut rt,
        &["ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@all"],
    );
    let (mut n, mut r) = (nacre.conn(), redis.conn());
    for (tport, tc) in [
        (target.port, &mut t as &mut Connection),
        (redis_target.port, &mut rt),
    ] {
        let p = tport.to_string();
        let p = p.as_str();
        for c in [&mut n, &mut r] {
            q(c, &["SET", "k", "v"]);
        }
        let cases: &[&[&str]] = &[
            &["MIGRATE", "127.0.0.1", p, "k", "0", "1000", "COPY"],
            &[
                "MIGRATE",
                "127.0.0.1",
                p,
                "k",
                "0",
                "1000",
                "COPY",
                "AUTH",
                "bad",
            ],
            &[
                "MIGRATE",
                "127.0.0.1",
                p,
                "k",
                "0",
                "1000",
                "COPY",
                "AUTH2",
                "alice",
                "bad",
            ],
            &[
                "MIGRATE",
                "127.0.0.1",
                p,
                "k",
                "0",
                "1000",
                "COPY",
                "AUTH2",
                "nobody",
                "pw",
            ],
        ];
        for args in cases {
            let (ours, theirs) = both(&mut n, &mut r, args);
            assert_eq!(ours, theirs, "{args:?}");
            assert!(text(&ours).starts_with("ERR:ERR Target instance replied with error: "));
        }
        assert_eq!(
            text(&q(&mut n, cases[0])),
            "ERR:ERR Target instance replied with error: NOAUTH Authentication required."
        );
        assert_eq!(
            text(&q(&mut n, cases[1])),
            "ERR:ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled."
        );
        assert_eq!(
            q(
                &mut n,
                &[
                    "MIGRATE",
                    "127.0.0.1",
                    p,
                    "k",
                    "0",
                    "1000",
                    "AUTH",
                    "foobar"
                ]
            ),
            Value::Okay
        );
        assert_eq!(int(&mut n, &["EXISTS", "k"]), 0);
        assert_eq!(text(&q(tc, &["GET", "k"])), "v");
        q(&mut n, &["SET", "k", "v2"]);
        assert_eq!(
            q(
                &mut n,
                &[
                    "MIGRATE",
                    "127.0.0.1",
                    p,
                    "k",
                    "0",
                    "1000",
                    "REPLACE",
                    "AUTH2",
                    "alice",
                    "pw"
                ]
            ),
            Value::Okay
        );
        assert_eq!(text(&q(tc, &["GET", "k"])), "v2");
    }
}

#[test]
fn timeouts_and_unreachable_targets_answer_as_redis() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed: skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let (mut n, mut r) = (nacre.conn(), redis.conn());
    // A target that accepts connections (the kernel does) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    for c in [&mut n, &mut r] {
        q(c, &["SET", "k", "v"]);
    }
    let args = ["MIGRATE", "127.0.0.1", &port, "k", "0", "300"];
    let t = Instant::now();
    let ours = q(&mut n, &args);
    let took = t.elapsed();
    assert_eq!(
        text(&ours),
        "ERR:IOERR error or timeout reading to target instance"
    );
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(q(&mut r, &args), ours);
    assert_eq!(int(&mut n, &["EXISTS", "k"]), 1);
    // The timed-out connection is not cached: the next try connects again.
    assert_eq!(q(&mut n, &args), ours);
    // While MIGRATE waits, the server goes on serving the key to other clients.
    let nport = nacre.port;
    let waiting = thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{nport}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        q(&mut c, &["MIGRATE", "127.0.0.1", &port, "k", "0", "1500"])
    });
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(q(&mut n, &["APPEND", "k", "2"]), Value::Int(2));
    assert!(t.elapsed() < Duration::from_millis(500));
    assert!(text(&waiting.join().unwrap()).contains("IOERR"));
    assert_eq!(text(&q(&mut n, &["GET", "k"])), "v2");
    drop(silent);
}

/// A target that records the commands it is sent and answers `+OK` to each once told to.
struct FakeTarget {
    port: u16,
    /// Sends each command as it arrives.
    commands: mpsc::Receiver<Vec<Vec<u8>>>,
    /// Tells it to answer this many commands.
    answer: mpsc::Sender<usize>,
}

impl FakeTarget {
    fn start() -> FakeTarget {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (ctx, commands) = mpsc::channel();
        let (answer, arx) = mpsc::channel::<usize>();
        thread::spawn(move || {
            let Ok((s, _)) = l.accept() else { return };
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let reader = thread::spawn(move || {
                while let Some(cmd) = read_command(&mut r) {
                    if ctx.send(cmd).is_err() {
                        return;
                    }
                }
            });
            while let Ok(n) = arx.recv() {
                for _ in 0..n {
                    if w.write_all(b"+OK\r\n").is_err() {
                        return;
                    }
                }
            }
            let _ = reader.join();
        });
        FakeTarget {
            port,
            commands,
            answer,
        }
    }

    fn next(&self) -> Vec<String> {
        self.commands
            .recv_timeout(Duration::from_secs(10))
            .expect("a command")
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }
}

fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let n: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::new();
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut a = vec![0u8; len + 2];
        r.read_exact(&mut a).ok()?;
        a.truncate(len);
        args.push(a);
    }
    Some(args)
}

#[test]
fn a_key_written_during_its_migration_stays() {
    let nacre = Server::start(&[]);
    let mut n = nacre.conn();
    q(&mut n, &["SET", "k", "v1", "PX", "100000"]);
    q(&mut n, &["SET", "other", "x"]);
    let Value::BulkString(payload) = q(&mut n, &["DUMP", "k"]) else {
        panic!("no payload");
    };
    for write_meanwhile in [true, false] {
        let fake = FakeTarget::start();
        let (nport, fport) = (nacre.port, fake.port.to_string());
        let migrating = thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{nport}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            q(
                &mut c,
                &[
                    "MIGRATE",
                    "127.0.0.1",
                    &fport,
                    "",
                    "3",
                    "5000",
                    "REPLACE",
                    "AUTH2",
                    "u",
                    "p",
                    "KEYS",
                    "k",
                    "other",
                ],
            )
        });
        // AUTH first, then SELECT, then a RESTORE per key with its TTL and payload.
        assert_eq!(fake.next(), ["AUTH", "u", "p"]);
        assert_eq!(fake.next(), ["SELECT", "3"]);
        let restore = fake.next();
        assert_eq!(restore[0], "RESTORE");
        assert_eq!(restore[1], "k");
        let ttl: i64 = restore[2].parse().unwrap();
        assert!(ttl > 80_000 && ttl <= 100_000, "{ttl}");
        assert_eq!(
            restore[3].as_bytes(),
            String::from_utf8_lossy(&payload).as_bytes()
        );
        assert_eq!(restore[4], "REPLACE");
        assert_eq!(
            fake.next(),
            [
                "RESTORE",
                "other",
                "0",
                &restore_payload(&mut n, "other"),
                "REPLACE"
            ]
        );
        if write_meanwhile {
            // Nothing is locked while the target has not answered.
            assert_eq!(q(&mut n, &["SET", "k", "v2"]), Value::Okay);
        }
        fake.answer.send(4).unwrap();
        assert_eq!(migrating.join().unwrap(), Value::Okay);
        assert_eq!(int(&mut n, &["EXISTS", "other"]), 0);
        if write_meanwhile {
            assert_eq!(text(&q(&mut n, &["GET", "k"])), "v2");
            q(&mut n, &["SET", "k", "v1", "PX", "100000"]);
            q(&mut n, &["SET", "other", "x"]);
        } else {
            assert_eq!(int(&mut n, &["EXISTS", "k"]), 0);
        }
    }
}

fn restore_payload(c: &mut Connection, key: &str) -> String {
    // `other` has been sent but not yet deleted: its DUMP is the payload sent.
    match q(c, &["DUMP", key]) {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn connections_are_cached_then_released() {
    let nacre = Server::start(&[]);
    let mut target = Server::start(&[]);
    let mut n = nacre.conn();
    let stat = |c: &mut Connection, name: &str| -> i64 {
        let info = text(&q(c, &["INFO", "stats"]));
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {info}"))
    };
    assert_eq!(stat(&mut n, "migrate_cached_sockets"), 0);
    let p = target.port.to_string();
    let connections = stat(&mut target.conn(), "total_connections_received");
    for i in 0..3 {
        q(&mut n, &["SET", "k", &i.to_string()]);
        let r = q(
            &mut n,
            &["MIGRATE", "127.0.0.1", &p, "k", "0", "1000", "REPLACE"],
        );
        assert_eq!(r, Value::Okay);
    }
    assert_eq!(stat(&mut n, "migrate_cached_sockets"), 1);
    // One connection served the three (and this INFO's own).
    assert_eq!(
        stat(&mut target.conn(), "total_connections_received"),
        connections + 2
    );
    // A cached connection the target closed is replaced without an error.
    target.restart();
    let p = target.port.to_string();
    q(&mut n, &["SET", "k", "again"]);
    let r = q(
        &mut n,
        &["MIGRATE", "127.0.0.1", &p, "k", "0", "1000", "REPLACE"],
    );
    assert_eq!(r, Value::Okay);
    assert_eq!(text(&q(&mut target.conn(), &["GET", "k"])), "again");
    // A client tracking the key hears that it left.
    q(&mut n, &["SET", "k", "tracked"]);
    let mut tracker = nacre.raw();
    let hello = common::raw_exchange(
        &mut tracker,
        b"HELLO 3\r\nCLIENT TRACKING on\r\nGET k\r\n",
        Duration::from_millis(300),
    );
    assert!(hello.ends_with(b"+OK\r\n$7\r\ntracked\r\n"), "{hello:?}");
    let r = q(
        &mut n,
        &["MIGRATE", "127.0.0.1", &p, "k", "0", "1000", "REPLACE"],
    );
    assert_eq!(r, Value::Okay);
    let pushed = common::raw_exchange(&mut tracker, b"", Duration::from_millis(300));
    assert_eq!(pushed, b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
    // Idle for 10 seconds, it is closed.
    let t = Instant::now();
    while stat(&mut n, "migrate_cached_sockets") != 0 {
        assert!(t.elapsed() < Duration::from_secs(20), "never released");
        thread::sleep(Duration::from_millis(250));
    }
    assert!(t.elapsed() >= Duration::from_secs(9), "{:?}", t.elapsed());
}

#[test]
fn keys_transactions_and_scripts() {
    let redis = RedisServer::start();
    let nacre = Server::start(&[]);
    let mut n = nacre.conn();
    // COMMAND GETKEYS finds MIGRATE's keys as Redis does.
    let forms: &[&[&str]] = &[
        &["MIGRATE", "h", "1", "k", "0", "1"],
        &["MIGRATE", "h", "1", "", "0", "1"],
        &["MIGRATE", "h", "1", "", "0", "1", "KEYS"],
        &["MIGRATE", "h", "1", "", "0", "1", "KEYS", "a", "b"],
        &["MIGRATE", "h", "1", "k", "0", "1", "KEYS", "a"],
        &[
            "MIGRATE", "h", "1", "", "0", "1", "COPY", "AUTH", "keys", "KEYS", "a",
        ],
        &[
            "MIGRATE", "h", "1", "", "0", "1", "AUTH2", "keys", "x", "KEYS", "a", "KEYS",
        ],
        &["MIGRATE", "h", "1", "", "0", "1", "AUTH", "keys", "COPY"],
        &["MIGRATE", "h", "1", "", "0", "1", "KEYS", "store", "x"],
    ];
    if let Some(redis) = &redis {
        let mut r = redis.conn();
        for f in forms {
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let mut args = vec!["COMMAND", sub];
                args.extend(f.iter());
                assert_eq!(q(&mut n, &args), q(&mut r, &args), "{args:?}");
            }
        }
    }
    // In MULTI: Redis's argument errors and NOKEY; keys are not moved from a transaction.
    q(&mut n, &["SET", "k", "v"]);
    let mut raw = nacre.raw();
    let got = common::raw_exchange(
        &mut raw,
        b"MULTI\r\nMIGRATE 127.0.0.1 1 k 0 x\r\nMIGRATE 127.0.0.1 1 nokey 0 1000\r\n\
          MIGRATE 127.0.0.1 1 k 0 1000\r\nEXEC\r\n",
        Duration::from_millis(500),
    );
    let want = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n\
        -ERR value is not an integer or out of range\r\n+NOKEY\r\n\
        -ERR MIGRATE can't move keys inside MULTI/EXEC: the transaction's keys would stay locked while it waits for the target\r\n";
    assert_eq!(String::from_utf8_lossy(&got), want);
    assert_eq!(int(&mut n, &["EXISTS", "k"]), 1);
    // In a script, likewise not moved.
    let r = q(
        &mut n,
        &[
            "EVAL",
            "return redis.pcall('MIGRATE', '127.0.0.1', '1', KEYS[1], '0', '1000')",
            "1",
            "k",
        ],
    );
    assert!(text(&r).starts_with("ERR:"), "{r:?}");
    assert_eq!(int(&mut n, &["EXISTS", "k"]), 1);
}
