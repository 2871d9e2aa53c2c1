//! nacre-server as a master with a real redis-server 7.0 replica: a full synchronization
//! while writes go on, then a stream of every type and of the commands whose effects Redis
//! rewrites for replicas (relative expiries, INCRBYFLOAT, SPOP, served blocking pops, XADD
//! ids, scripts, MULTI/EXEC, active expiry); after `WAIT`, both hold the same data set, key
//! by key. A cut link resumes with a partial resynchronization.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{info_field, q, text, RedisServer, Server};
use redis::{Connection, Value};

/// Every key of databases 0-2 with its type, value (members sorted where order is not
/// defined) and absolute expiry time.
fn data_set(c: &mut Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in 0..3 {
        q(c, &["SELECT", &db.to_string()]);
        let Value::Array(keys) = q(c, &["KEYS", "*"]) else {
            panic!("KEYS");
        };
        for k in keys {
            let k = text(&k);
            let t = text(&q(c, &["TYPE", &k]));
            let v = match t.as_str() {
                "string" => text(&q(c, &["GET", &k])),
                "hash" => {
                    let mut f: Vec<String> = match q(c, &["HGETALL", &k]) {
                        Value::Array(a) => a
                            .chunks(2)
                            .map(|p| format!("{}={}", text(&p[0]), text(&p[1])))
                            .collect(),
                        Value::Map(m) => m
                            .iter()
                            .map(|(a, b)| format!("{}={}", text(a), text(b)))
                            .collect(),
                        v => vec![text(&v)],
                    };
                    f.sort();
                    f.join(",")
                }
                "list" => text(&q(c, &["LRANGE", &k, "0", "-1"])),
                "set" => {
                    let mut m: Vec<String> = match q(c, &["SMEMBERS", &k]) {
                        Value::Array(a) | Value::Set(a) => a.iter().map(text).collect(),
                        v => vec![text(&v)],
                    };
                    m.sort();
                    m.join(",")
                }
                "zset" => text(&q(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
                "stream" => format!(
                    "{} {}",
                    text(&q(c, &["XRANGE", &k, "-", "+"])),
                    text(&q(c, &["XINFO", "GROUPS", &k]))
                ),
                t => panic!("type {t}"),
            };
            let at = text(&q(c, &["PEXPIRETIME", &k]));
            out.insert(format!("{db}/{k}"), format!("{t} {v} expire={at}"));
        }
    }
    q(c, &["SELECT", "0"]);
    out
}

fn load(c: &mut Connection, round: usize) {
    for i in 0..200 {
        let k = format!("r{round}:{i}");
        q(c, &["SET", &k, &i.to_string()]);
        q(
            c,
            &[
                "HSET",
                &format!("h{round}"),
                &format!("f{i}"),
                &i.to_string(),
            ],
        );
        q(c, &["RPUSH", &format!("l{round}"), &i.to_string()]);
        q(c, &["SADD", &format!("s{round}"), &i.to_string()]);
        q(
            c,
            &[
                "ZADD",
                &format!("z{round}"),
                &(i % 17).to_string(),
                &format!("m{i}"),
            ],
        );
    }
}

#[test]
fn a_redis_replica_holds_what_the_nacre_master_holds() {
    let master = Server::start(&[]);
    let mut c = master.conn();
    load(&mut c, 0);
    let Some(replica) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()])
    else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    // Writes while the replica synchronizes.
    load(&mut c, 1);
    let mut r = replica.conn();
    let t = Instant::now();
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the replica never synchronized"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    load(&mut c, 2);
    // What Redis rewrites for replicas.
    for args in [
        &["SET", "ex", "v", "EX", "1000"][..],
        &["SETEX", "sx", "500", "v"],
        &["PSETEX", "psx", "500000", "v"],
        &["SET", "pe", "v"],
        &["EXPIRE", "pe", "300"],
        &["PEXPIRE", "r0:1", "400000"],
        &["EXPIREAT", "r0:2", "4000000000"],
        &["SET", "gx", "v"],
        &["GETEX", "gx", "PX", "700000"],
        &["INCRBYFLOAT", "fl", "1.1"],
        &["INCRBYFLOAT", "fl", "2.25"],
        &["HINCRBYFLOAT", "hf", "f", "0.5"],
        &["SPOP", "s0"],
        &["SPOP", "s1", "5"],
        &["XADD", "st", "*", "a", "1"],
        &["XADD", "st", "*", "b", "2"],
        &["XADD", "st", "MAXLEN", "5", "*", "c", "3"],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "st",
            ">",
        ],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x'); redis.call('incr', KEYS[2]); return 1",
            "2",
            "ev1",
            "ev2",
        ],
        &["EVAL", "return redis.call('spop', KEYS[1])", "1", "s2"],
        &["SELECT", "1"],
        &["SET", "in1", "v"],
        &["RPUSH", "l1", "a", "b"],
        &["SELECT", "2"],
        &["SADD", "in2", "x"],
        &["SELECT", "0"],
        &["DEL", "r0:3"],
        &["SET", "gone", "v", "PX", "50"],
        &["RENAME", "r0:4", "renamed"],
        &["LMOVE", "l0", "l2", "LEFT", "RIGHT"],
        &["ZINCRBY", "z0", "2.5", "m1"],
    ] {
        let v = q(&mut c, args);
        assert!(!text(&v).starts_with("ERR:"), "{args:?}: {v:?}");
    }
    // MULTI/EXEC as one block.
    let mut p = redis::pipe();
    p.atomic()
        .cmd("SET")
        .arg("tx1")
        .arg("1")
        .cmd("INCR")
        .arg("tx2")
        .cmd("LPUSH")
        .arg("tx3")
        .arg("a");
    let _: Value = p.query(&mut c).unwrap();
    // A blocked pop served by a later push reaches the replica as the pop that served it.
    let port = master.port;
    let waiter = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        text(&q(&mut w, &["BLPOP", "queue", "10"]))
    });
    std::thread::sleep(Duration::from_millis(200));
    q(&mut c, &["RPUSH", "queue", "job1", "job2"]);
    assert_eq!(waiter.join().unwrap(), "[queue,job1]");
    // The key with 50 ms to live is deleted by the active expire cycle: replicas get a DEL.
    std::thread::sleep(Duration::from_millis(400));
    let acked = text(&q(&mut c, &["WAIT", "1", "5000"]));
    assert_eq!(acked, "1");
    let ours = data_set(&mut c);
    let theirs = data_set(&mut r);
    assert!(ours.len() > 600, "{}", ours.len());
    assert!(!ours.contains_key("0/gone"));
    let diff: Vec<String> = ours
        .iter()
        .filter(|(k, v)| theirs.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: nacre {v} / redis {:?}", theirs.get(k)))
        .chain(
            theirs
                .keys()
                .filter(|k| !ours.contains_key(*k))
                .map(|k| format!("{k}: only on the replica")),
        )
        .take(20)
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n"));
    // ROLE and INFO as Redis shows them.
    let role = text(&q(&mut c, &["ROLE"]));
    assert!(role.starts_with("[master,"), "{role}");
    assert_eq!(info_field(&mut c, "replication", "connected_slaves"), "1");
    assert_eq!(info_field(&mut c, "stats", "sync_full"), "1");
    let listed = text(&q(&mut c, &["CLIENT", "LIST", "TYPE", "replica"]));
    assert!(
        listed.contains("flags=S") && listed.lines().count() == 1,
        "{listed}"
    );

    // min-replicas-to-write: one good replica lets writes through, two are not there.
    q(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert_eq!(
        info_field(&mut c, "replication", "min_slaves_good_slaves"),
        "1"
    );
    assert_eq!(text(&q(&mut c, &["SET", "guarded", "1"])), "OK");
    q(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "2"]);
    let refused = common::run_text(&mut c, &["SET", "guarded", "2"]);
    assert!(
        refused.contains("Not enough good replicas to write."),
        "{refused}"
    );
    q(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]);

    // A cut link resumes where it was: a partial resynchronization, no second full one.
    q(&mut r, &["CLIENT", "KILL", "TYPE", "master"]);
    q(&mut c, &["SET", "after-cut", "1"]);
    let t = Instant::now();
    while text(&q(&mut r, &["GET", "after-cut"])) != "1" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the link did not resume"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "stats", "sync_full"), "1");
    assert_eq!(info_field(&mut c, "stats", "sync_partial_ok"), "1");
}

#[test]
fn replconf_psync_and_wait_answer_as_redis_without_replicas() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        text(&q(&mut c, &["REPLCONF", "listening-port", "1234"])),
        "OK"
    );
    assert!(text(&q(&mut c, &["REPLCONF", "listening-port"])).contains("syntax error"));
    assert!(text(&q(&mut c, &["REPLCONF", "bogus", "1"]))
        .contains("Unrecognized REPLCONF option: bogus"));
    // No replica: WAIT answers 0 after its timeout.
    let t = Instant::now();
    assert_eq!(text(&q(&mut c, &["WAIT", "1", "200"])), "0");
    assert!(t.elapsed() >= Duration::from_millis(190));
    assert_eq!(text(&q(&mut c, &["WAIT", "0", "0"])), "0");
    let role = text(&q(&mut c, &["ROLE"]));
    assert_eq!(role, "[master,0,[]]");
}

/// Field names of an `INFO` section, in order; a replica's line (`slaveN`) counts once, as
/// the names of its own fields.
fn info_fields(c: &mut Connection, section: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in text(&q(c, &["INFO", section])).lines() {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let name = if k.starts_with("slave") && k[5..].chars().all(|c| c.is_ascii_digit()) {
            let inner: Vec<&str> = v
                .split(',')
                .filter_map(|f| f.split_once('=').map(|p| p.0))
                .collect();
            format!("slaveN:{}", inner.join(","))
        } else {
            k.to_string()
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The shape of a reply: its kinds, recursively, with runs of alike elements counted once
/// (values, and how many replicas a master has, differ between the servers compared).
fn shape(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            let mut parts: Vec<String> = items.iter().map(shape).collect();
            parts.dedup();
            format!("[{}]", parts.join(","))
        }
        Value::Int(_) => "int".into(),
        Value::BulkString(_) => "bulk".into(),
        v => format!("{v:?}"),
    }
}

fn wait_link_up(c: &mut Connection) {
    let t = Instant::now();
    while info_field(c, "replication", "master_link_status") != "up" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the replica never synchronized"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn role_and_info_replication_have_redis_fields_on_both_sides() {
    let Some(redis_master) = RedisServer::start() else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let nacre_master = Server::start(&[]);
    let (Some(redis_of_redis), Some(redis_of_nacre)) = (
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &redis_master.port.to_string()]),
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &nacre_master.port.to_string()]),
    ) else {
        panic!("redis-server replicas did not start");
    };
    let nacre_of_redis = Server::start(&[]);
    let mut n = nacre_of_redis.conn();
    q(
        &mut n,
        &["REPLICAOF", "127.0.0.1", &redis_master.port.to_string()],
    );
    for c in [
        &mut redis_of_redis.conn(),
        &mut redis_of_nacre.conn(),
        &mut n,
    ] {
        wait_link_up(c);
    }
    let (mut rm, mut nm) = (redis_master.conn(), nacre_master.conn());
    // WAIT makes both masters see their replica's acknowledgement.
    for c in [&mut rm, &mut nm] {
        assert_ne!(text(&q(c, &["WAIT", "1", "5000"])), "0");
    }
    assert_eq!(
        info_fields(&mut nm, "replication"),
        info_fields(&mut rm, "replication")
    );
    assert_eq!(shape(&q(&mut nm, &["ROLE"])), shape(&q(&mut rm, &["ROLE"])));
    let mut rr = redis_of_redis.conn();
    assert_eq!(
        info_fields(&mut n, "replication"),
        info_fields(&mut rr, "replication")
    );
    assert_eq!(shape(&q(&mut n, &["ROLE"])), shape(&q(&mut rr, &["ROLE"])));
}

#[test]
fn the_backlog_is_freed_after_repl_backlog_ttl_without_replicas() {
    let master = Server::start(&[]);
    let mut c = master.conn();
    let Some(replica) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()])
    else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let mut r = replica.conn();
    let t = Instant::now();
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(t.elapsed() < Duration::from_secs(20), "no sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    q(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        info_field(&mut c, "replication", "repl_backlog_active"),
        "1"
    );
    let id = info_field(&mut c, "replication", "master_replid");
    q(&mut c, &["CONFIG", "SET", "repl-backlog-ttl", "1"]);
    drop(r);
    drop(replica);
    let t = Instant::now();
    while info_field(&mut c, "replication", "repl_backlog_active") != "0" {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the backlog was kept past its ttl"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "freed before the ttl"
    );
    assert_ne!(info_field(&mut c, "replication", "master_replid"), id);
    // Writes go on; a new replica gets a full synchronization and the data.
    q(&mut c, &["SET", "k2", "v2"]);
    let again =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]).unwrap();
    let mut r = again.conn();
    let t = Instant::now();
    while text(&q(&mut r, &["GET", "k2"])) != "v2" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no sync after the ttl"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        info_field(&mut c, "replication", "repl_backlog_active"),
        "1"
    );
}

#[test]
fn replicas_are_listed_at_the_address_they_announce() {
    let master = Server::start(&[]);
    let mut c = master.conn();
    let target = format!("127.0.0.1 {}", master.port);
    let nacre = Server::start(&[
        "--replicaof",
        &target,
        "--replica-announce-ip",
        "10.1.2.3",
        "--replica-announce-port",
        "7777",
    ]);
    let Some(_redis) = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
        "--replica-announce-ip",
        "10.9.8.7",
        "--replica-announce-port",
        "6666",
    ]) else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let t = Instant::now();
    loop {
        let info = text(&q(&mut c, &["INFO", "replication"]));
        if info.contains("ip=10.1.2.3,port=7777,state=online")
            && info.contains("ip=10.9.8.7,port=6666,state=online")
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let role = text(&q(&mut c, &["ROLE"]));
    assert!(role.contains("10.1.2.3") && role.contains("7777"), "{role}");
    drop(nacre);
}

#[test]
fn a_replica_that_stops_reading_keeps_its_place_past_the_backlog() {
    use std::io::{BufRead, BufReader, Read, Write};
    let master = Server::start(&[]);
    let mut c = master.conn();
    q(&mut c, &["SET", "before", "1"]);
    q(&mut c, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    let s = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut rd = BufReader::new(s);
    w.write_all(b"REPLCONF listening-port 1\r\nPSYNC ? -1\r\n")
        .unwrap();
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
    line.clear();
    rd.read_line(&mut line).unwrap();
    assert!(line.starts_with("+FULLRESYNC"), "{line}");
    // Keepalive newlines, then the payload.
    loop {
        line.clear();
        rd.read_line(&mut line).unwrap();
        if line.starts_with('$') {
            break;
        }
    }
    let len: usize = line.trim()[1..].parse().unwrap();
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload).unwrap();
    // The replica reads nothing while 2 MB of writes go by: 128 times the backlog.
    let value = "v".repeat(1000);
    for i in 0..2000 {
        q(&mut c, &["SET", &format!("k{i}"), &value]);
    }
    std::thread::sleep(Duration::from_millis(300));
    // Then it reads: every write is there, in order, and the link stays up.
    let mut seen = 0;
    let mut buf = Vec::new();
    while seen < 2000 {
        let mut chunk = [0u8; 65536];
        let n = rd.read(&mut chunk).expect("the master closed the link");
        assert!(n > 0, "the master closed the link after {seen} writes");
        buf.extend_from_slice(&chunk[..n]);
        seen = buf
            .windows(b"\r\nSET\r\n".len())
            .filter(|w| *w == b"\r\nSET\r\n")
            .count();
    }
    let text = String::from_utf8_lossy(&buf);
    assert!(text.contains("\r\nk0\r\n") && text.contains("\r\nk1999\r\n"));
    assert_eq!(info_field(&mut c, "replication", "connected_slaves"), "1");
}
