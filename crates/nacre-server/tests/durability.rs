//! SIGKILL under concurrent load of every command family, then restart: every acknowledged
//! write is there (list order, set membership, sorted-set scores, and a sorted set's score
//! index agreeing with its members), nothing unacknowledged is half-applied (MULTI/EXEC
//! transfers keep their total), expired keys stay expired and live ones keep their expiry.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::Server;

/// A model key: a string key, one field of a hash, a whole list (its elements joined by
/// commas), one member of a set ("1" when present) or one member of a sorted set (its score).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum K {
    S(String),
    H(String, String),
    L(String),
    Set(String, String),
    Z(String, String),
}

/// One worker's keys: what was acknowledged, and the write in flight when the server died.
#[derive(Default)]
struct Model {
    acked: HashMap<K, Option<String>>,
    pending: Vec<(K, Option<String>)>,
    /// Keys set with a long expiry (must still have a TTL).
    long_ttl: Vec<String>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const TOTAL: i64 = 2000;

fn worker(port: u16, w: usize, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>, seed: u64) {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return;
    };
    let Ok(mut c) = client.get_connection() else {
        return;
    };
    let mut r = Rng(seed | 1);
    let a = format!("w{w}:acct:a");
    let b = format!("w{w}:acct:b");
    while !stop.load(Ordering::Relaxed) {
        let op = r.next() % 15;
        let i = r.next() % 6;
        let sk = format!("w{w}:s{i}");
        let hk = format!("w{w}:h{}", i % 2);
        let field = format!("f{}", r.next() % 4);
        let val = format!("v{}", r.next() % 1_000_000);
        let mut m = model.lock().unwrap();
        let cur = |k: &K, m: &Model| m.acked.get(k).cloned().flatten();
        let lk = format!("w{w}:l{}", i % 2);
        let setk = format!("w{w}:set{}", i % 2);
        let zk = format!("w{w}:z{}", i % 2);
        let list_now: Vec<String> = cur(&K::L(lk.clone()), &m)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        let joined = |l: &[String]| (!l.is_empty()).then(|| l.join(","));
        let (changes, cmd): (Vec<(K, Option<String>)>, redis::Pipeline) = match op {
            8 => {
                let mut l = list_now.clone();
                l.push(val.clone());
                let mut p = redis::pipe();
                p.cmd("RPUSH").arg(&lk).arg(&val);
                (vec![(K::L(lk.clone()), joined(&l))], p)
            }
            9 => {
                let l = list_now.get(1..).unwrap_or_default().to_vec();
                let mut p = redis::pipe();
                p.cmd("LPOP").arg(&lk);
                (vec![(K::L(lk.clone()), joined(&l))], p)
            }
            10 => {
                // Before the middle element: shifts one side of the list.
                let mut l = list_now.clone();
                let mut p = redis::pipe();
                if l.is_empty() {
                    l.push(val.clone());
                    p.cmd("LPUSH").arg(&lk).arg(&val);
                } else {
                    let mid = l.len() / 2;
                    let pivot = l[mid].clone();
                    let at = l.iter().position(|x| *x == pivot).unwrap_or(mid);
                    l.insert(at, val.clone());
                    p.cmd("LINSERT")
                        .arg(&lk)
                        .arg("BEFORE")
                        .arg(&pivot)
                        .arg(&val);
                }
                (vec![(K::L(lk.clone()), joined(&l))], p)
            }
            11 => {
                let mut p = redis::pipe();
                p.cmd("SADD").arg(&setk).arg(&field);
                (
                    vec![(K::Set(setk.clone(), field.clone()), Some("1".into()))],
                    p,
                )
            }
            12 => {
                let mut p = redis::pipe();
                p.cmd("SREM").arg(&setk).arg(&field);
                (vec![(K::Set(setk.clone(), field.clone()), None)], p)
            }
            13 => {
                let old: i64 = cur(&K::Z(zk.clone(), field.clone()), &m)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let by = (r.next() % 7) as i64 - 3;
                let mut p = redis::pipe();
                p.cmd("ZINCRBY").arg(&zk).arg(by).arg(&field);
                (
                    vec![(
                        K::Z(zk.clone(), field.clone()),
                        Some((old + by).to_string()),
                    )],
                    p,
                )
            }
            14 => {
                let mut p = redis::pipe();
                p.cmd("ZREM").arg(&zk).arg(&field);
                (vec![(K::Z(zk.clone(), field.clone()), None)], p)
            }
            0 => {
                let mut p = redis::pipe();
                p.cmd("SET").arg(&sk).arg(&val);
                (vec![(K::S(sk.clone()), Some(val.clone()))], p)
            }
            1 => {
                let old = cur(&K::S(sk.clone()), &m);
                let n = old.as_deref().and_then(|v| v.parse::<i64>().ok());
                let mut p = redis::pipe();
                match n {
                    Some(n) => {
                        p.cmd("INCR").arg(&sk);
                        (vec![(K::S(sk.clone()), Some((n + 1).to_string()))], p)
                    }
                    None => {
                        p.cmd("SET").arg(&sk).arg(7);
                        (vec![(K::S(sk.clone()), Some("7".into()))], p)
                    }
                }
            }
            2 => {
                let old = cur(&K::S(sk.clone()), &m).unwrap_or_default();
                let mut p = redis::pipe();
                p.cmd("APPEND").arg(&sk).arg("x");
                (vec![(K::S(sk.clone()), Some(format!("{old}x")))], p)
            }
            3 => {
                let mut p = redis::pipe();
                p.cmd("DEL").arg(&sk);
                (vec![(K::S(sk.clone()), None)], p)
            }
            4 => {
                let mut p = redis::pipe();
                p.cmd("HSET").arg(&hk).arg(&field).arg(&val);
                (
                    vec![(K::H(hk.clone(), field.clone()), Some(val.clone()))],
                    p,
                )
            }
            5 => {
                let mut p = redis::pipe();
                p.cmd("HDEL").arg(&hk).arg(&field);
                (vec![(K::H(hk.clone(), field.clone()), None)], p)
            }
            6 => {
                let (ka, kb) = (K::S(a.clone()), K::S(b.clone()));
                let va: i64 = cur(&ka, &m).and_then(|v| v.parse().ok()).unwrap_or(TOTAL);
                let vb: i64 = cur(&kb, &m).and_then(|v| v.parse().ok()).unwrap_or(0);
                let x = (r.next() % 10) as i64;
                let mut p = redis::pipe();
                p.atomic()
                    .cmd("DECRBY")
                    .arg(&a)
                    .arg(x)
                    .cmd("INCRBY")
                    .arg(&b)
                    .arg(x);
                (
                    vec![
                        (ka, Some((va - x).to_string())),
                        (kb, Some((vb + x).to_string())),
                    ],
                    p,
                )
            }
            _ => {
                let ek = format!("w{w}:e{i}");
                let mut p = redis::pipe();
                p.cmd("SET").arg(&ek).arg(&val).arg("EX").arg(100_000);
                if !m.long_ttl.contains(&ek) {
                    m.long_ttl.push(ek.clone());
                }
                (vec![(K::S(ek), Some(val.clone()))], p)
            }
        };
        m.pending = changes;
        drop(m);
        let res: redis::RedisResult<redis::Value> = cmd.query(&mut c);
        let mut m = model.lock().unwrap();
        match res {
            Ok(v) => {
                if let redis::Value::ServerError(e) = &v {
                    panic!("command failed: {e:?}");
                }
                let p = std::mem::take(&mut m.pending);
                for (k, v) in p {
                    m.acked.insert(k, v);
                }
            }
            Err(e)
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() =>
            {
                return
            }
            Err(e) => panic!("command failed: {e}"),
        }
    }
}

fn verify(s: &Server, models: &[Arc<Mutex<Model>>]) {
    let mut c = s.conn();
    // The key counts came from their records (C1-C3 in src/store/counts.rs), and the
    // background count over a snapshot taken at open agrees with them (C4).
    assert_eq!(
        common::info_field(&mut c, "nacre", "key_counts_at_start"),
        "records"
    );
    common::wait_for("the key count check", Duration::from_secs(30), || {
        common::info_field(&mut c, "nacre", "key_counts_checked") != "no"
    });
    assert_eq!(
        common::info_field(&mut c, "nacre", "key_counts_checked"),
        "agreed",
        "the key count records disagreed with the keys"
    );
    for (w, m) in models.iter().enumerate() {
        let mut m = m.lock().unwrap();
        let keys: Vec<K> = m
            .acked
            .keys()
            .chain(m.pending.iter().map(|(k, _)| k))
            .cloned()
            .collect();
        for k in keys {
            let actual: Option<String> = match &k {
                K::S(key) => redis::cmd("GET").arg(key).query(&mut c).unwrap(),
                K::H(key, f) => redis::cmd("HGET").arg(key).arg(f).query(&mut c).unwrap(),
                K::L(key) => {
                    let l: Vec<String> = redis::cmd("LRANGE")
                        .arg(key)
                        .arg(0)
                        .arg(-1)
                        .query(&mut c)
                        .unwrap();
                    (!l.is_empty()).then(|| l.join(","))
                }
                K::Set(key, f) => {
                    let hit: bool = redis::cmd("SISMEMBER")
                        .arg(key)
                        .arg(f)
                        .query(&mut c)
                        .unwrap();
                    hit.then(|| "1".to_string())
                }
                K::Z(key, f) => redis::cmd("ZSCORE").arg(key).arg(f).query(&mut c).unwrap(),
            };
            let acked = m.acked.get(&k).cloned().flatten();
            let pending = m
                .pending
                .iter()
                .find(|(p, _)| *p == k)
                .map(|(_, v)| v.clone());
            assert!(
                actual == acked || pending.as_ref() == Some(&actual),
                "worker {w} key {k:?}: found {actual:?}, acknowledged {acked:?}, in flight {pending:?}"
            );
            m.acked.insert(k, actual);
        }
        m.pending.clear();
        let a: Option<i64> = redis::cmd("GET")
            .arg(format!("w{w}:acct:a"))
            .query(&mut c)
            .unwrap();
        let b: Option<i64> = redis::cmd("GET")
            .arg(format!("w{w}:acct:b"))
            .query(&mut c)
            .unwrap();
        if let (Some(a), Some(b)) = (a, b) {
            assert_eq!(
                a + b,
                TOTAL,
                "worker {w}: a MULTI/EXEC transfer was half applied"
            );
        }
        // A sorted set's score index and its members agree.
        for i in 0..2 {
            let zk = format!("w{w}:z{i}");
            let pairs: Vec<(String, String)> = redis::cmd("ZRANGE")
                .arg(&zk)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(&mut c)
                .unwrap();
            let card: usize = redis::cmd("ZCARD").arg(&zk).query(&mut c).unwrap();
            assert_eq!(pairs.len(), card, "{zk}: index and count disagree");
            for (member, score) in pairs {
                let s: Option<String> = redis::cmd("ZSCORE")
                    .arg(&zk)
                    .arg(&member)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(
                    s.as_deref(),
                    Some(score.as_str()),
                    "{zk} {member}: index and member disagree"
                );
            }
        }
        // A key whose first SET was in flight at the kill may not exist: only acknowledged
        // ones must keep their expiry.
        for k in m
            .long_ttl
            .iter()
            .filter(|k| m.acked.contains_key(&K::S((*k).clone())))
        {
            let t: i64 = redis::cmd("TTL").arg(k).query(&mut c).unwrap();
            assert!(t > 0, "{k} lost its expiry (TTL {t})");
        }
    }
    // Keys set to expire long ago are gone.
    for i in 0..4 {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("short{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, None);
    }
}

fn kill_loop(rounds: usize, workers: usize, extra: &[&str]) {
    let mut s = Server::start(extra);
    {
        let mut c = s.conn();
        for w in 0..workers {
            let _: () = redis::cmd("SET")
                .arg(format!("w{w}:acct:a"))
                .arg(TOTAL)
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("SET")
                .arg(format!("w{w}:acct:b"))
                .arg(0)
                .query(&mut c)
                .unwrap();
        }
        for i in 0..4 {
            let _: () = redis::cmd("SET")
                .arg(format!("short{i}"))
                .arg("x")
                .arg("PX")
                .arg(1)
                .query(&mut c)
                .unwrap();
        }
    }
    let models: Vec<Arc<Mutex<Model>>> = (0..workers)
        .map(|_| Arc::new(Mutex::new(Model::default())))
        .collect();
    for (w, m) in models.iter().enumerate() {
        let mut m = m.lock().unwrap();
        m.acked
            .insert(K::S(format!("w{w}:acct:a")), Some(TOTAL.to_string()));
        m.acked
            .insert(K::S(format!("w{w}:acct:b")), Some("0".into()));
    }
    let mut seed = 0x1234_5678_9abc_def1u64;
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (m, st, port) = (models[w].clone(), stop.clone(), s.port);
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let sd = seed;
                thread::spawn(move || worker(port, w, m, st, sd))
            })
            .collect();
        thread::sleep(Duration::from_millis(30 + (seed >> 40) % 150));
        s.kill();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("worker panicked");
        }
        s.restart();
        verify(&s, &models);
        if round % 10 == 9 {
            eprintln!("{} kills survived", round + 1);
        }
    }
}

#[test]
fn sigkill_under_load_loses_no_acknowledged_write() {
    kill_loop(30, 6, &[]);
}

#[test]
fn sigkill_under_load_with_the_persistent_index_loses_nothing() {
    kill_loop(10, 4, &["--persistent-index", "yes"]);
}

#[test]
fn the_persistent_index_is_reported_where_it_is_on() {
    let info = |s: &Server| -> String {
        let mut c = s.conn();
        redis::cmd("INFO").arg("nacre").query(&mut c).expect("info")
    };
    let s = Server::start(&["--persistent-index", "yes"]);
    let mut c = s.conn();
    for i in 0..200 {
        common::q(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("persistent-index")
        .query(&mut c)
        .expect("config get");
    assert_eq!(got, vec!["persistent-index".to_string(), "yes".to_string()]);
    let text = info(&s);
    assert!(text.contains("persistent_index_stale:0\r\n"), "{text}");
    assert!(text.contains("persistent_index_long_versions:"), "{text}");
    let plain = Server::start(&[]);
    assert!(!info(&plain).contains("persistent_index"));
}

#[test]
#[ignore = "long: 300 kills"]
fn sigkill_under_load_long() {
    kill_loop(300, 8, &[]);
}
