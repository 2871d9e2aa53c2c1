//! SIGKILL under concurrent load of every command family, then restart: every acknowledged
//! write is there, nothing unacknowledged is half-applied (MULTI/EXEC transfers keep their
//! total), expired keys stay expired and live ones keep their expiry.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::Server;

/// A model key: a string key, or one field of a hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum K {
    S(String),
    H(String, String),
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
        let op = r.next() % 8;
        let i = r.next() % 6;
        let sk = format!("w{w}:s{i}");
        let hk = format!("w{w}:h{}", i % 2);
        let field = format!("f{}", r.next() % 4);
        let val = format!("v{}", r.next() % 1_000_000);
        let mut m = model.lock().unwrap();
        let cur = |k: &K, m: &Model| m.acked.get(k).cloned().flatten();
        let (changes, cmd): (Vec<(K, Option<String>)>, redis::Pipeline) = match op {
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
        for k in &m.long_ttl {
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

fn kill_loop(rounds: usize, workers: usize) {
    let mut s = Server::start(&[]);
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
    kill_loop(30, 6);
}

#[test]
#[ignore = "long: 300 kills"]
fn sigkill_under_load_long() {
    kill_loop(300, 8);
}
