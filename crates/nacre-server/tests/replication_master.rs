//! nacre-server as a master with a real redis-server 7.0 replica: a full synchronization
//! while writes go on, then a stream of every type and of the commands whose effects Redis
//! rewrites for replicas (relative expiries, INCRBYFLOAT, SPOP, served blocking pops, XADD
//! ids, scripts, MULTI/EXEC, active expiry); after `WAIT`, both hold the same data set, key
//! by key. A cut link resumes with a partial resynchronization.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{q, text, RedisServer, Server};
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

fn info_field(c: &mut Connection, section: &str, field: &str) -> String {
    let t = text(&q(c, &["INFO", section]));
    t.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
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
