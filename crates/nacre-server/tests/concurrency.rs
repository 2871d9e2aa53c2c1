//! Many clients on the same keys: no update is lost, WATCH/MULTI keeps invariants.

mod common;

use std::sync::Arc;
use std::thread;

use common::Server;

#[test]
fn fifty_clients_incr_one_key_and_every_increment_counts() {
    let s = Arc::new(Server::start(&[]));
    let per = 200;
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                let mut c = s.conn();
                for _ in 0..per {
                    let _: i64 = redis::cmd("INCR").arg("counter").query(&mut c).unwrap();
                    let _: i64 = redis::cmd("HINCRBY")
                        .arg("h")
                        .arg("f")
                        .arg(2)
                        .query(&mut c)
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut c = s.conn();
    let v: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(v, 50 * per);
    let f: i64 = redis::cmd("HGET").arg("h").arg("f").query(&mut c).unwrap();
    assert_eq!(f, 2 * 50 * per);
}

#[test]
fn pipelined_incrs_from_many_clients_add_up() {
    let s = Arc::new(Server::start(&[]));
    let handles: Vec<_> = (0..20)
        .map(|_| {
            let s = s.clone();
            thread::spawn(move || {
                let mut c = s.conn();
                for _ in 0..20 {
                    let mut p = redis::pipe();
                    for _ in 0..16 {
                        p.cmd("INCR").arg("p");
                    }
                    let r: Vec<i64> = p.query(&mut c).unwrap();
                    // Replies of one connection's pipeline come in order.
                    assert!(r.windows(2).all(|w| w[0] < w[1]), "{r:?}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let v: i64 = redis::cmd("GET").arg("p").query(&mut s.conn()).unwrap();
    assert_eq!(v, 20 * 20 * 16);
}

#[test]
fn watch_multi_retry_loops_keep_the_bank_total() {
    let s = Arc::new(Server::start(&[]));
    let accounts = 8;
    {
        let mut c = s.conn();
        for i in 0..accounts {
            let _: () = redis::cmd("SET")
                .arg(format!("acct:{i}"))
                .arg(1000)
                .query(&mut c)
                .unwrap();
        }
    }
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let s = s.clone();
            thread::spawn(move || {
                let mut c = s.conn();
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut rnd = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut aborted = 0;
                for _ in 0..60 {
                    let from = format!("acct:{}", rnd() % accounts);
                    let to = format!("acct:{}", rnd() % accounts);
                    if from == to {
                        continue;
                    }
                    loop {
                        let _: () = redis::cmd("WATCH")
                            .arg(&from)
                            .arg(&to)
                            .query(&mut c)
                            .unwrap();
                        let bal: i64 = redis::cmd("GET").arg(&from).query(&mut c).unwrap();
                        let amount = (rnd() % 50) as i64;
                        if bal < amount {
                            let _: () = redis::cmd("UNWATCH").query(&mut c).unwrap();
                            break;
                        }
                        let r: Option<(i64, i64)> = redis::pipe()
                            .atomic()
                            .cmd("DECRBY")
                            .arg(&from)
                            .arg(amount)
                            .cmd("INCRBY")
                            .arg(&to)
                            .arg(amount)
                            .query(&mut c)
                            .unwrap();
                        match r {
                            Some((f, _)) => {
                                assert!(f >= 0, "balance went negative: {f}");
                                break;
                            }
                            None => aborted += 1,
                        }
                    }
                }
                aborted
            })
        })
        .collect();
    let aborted: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let mut c = s.conn();
    let mut total = 0;
    for i in 0..accounts {
        let v: i64 = redis::cmd("GET")
            .arg(format!("acct:{i}"))
            .query(&mut c)
            .unwrap();
        assert!(v >= 0);
        total += v;
    }
    assert_eq!(
        total,
        1000 * accounts as i64,
        "{aborted} transactions aborted and retried"
    );
}

/// `MULTI; SET x 1; EXEC`: `None` when a watched key changed.
fn exec_set(c: &mut redis::Connection) -> Option<(String,)> {
    redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("x")
        .arg(1)
        .query(c)
        .unwrap()
}

#[test]
fn watch_aborts_on_expiry_and_flush() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let mut other = s.conn();
    // Expiry of a watched key aborts EXEC.
    let _: () = redis::cmd("SET")
        .arg("e")
        .arg("1")
        .arg("PX")
        .arg(50)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("WATCH").arg("e").query(&mut c).unwrap();
    thread::sleep(std::time::Duration::from_millis(120));
    let r = exec_set(&mut c);
    assert_eq!(r, None);
    // FLUSHDB from another client aborts EXEC.
    let _: () = redis::cmd("SET").arg("f").arg("1").query(&mut c).unwrap();
    let _: () = redis::cmd("WATCH").arg("f").query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHDB").query(&mut other).unwrap();
    let r = exec_set(&mut c);
    assert_eq!(r, None);
    // Setting a watched key to the value it already holds is a change, as in Redis.
    let _: () = redis::cmd("SET")
        .arg("same")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("WATCH").arg("same").query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("same")
        .arg("v")
        .query(&mut other)
        .unwrap();
    let r = exec_set(&mut c);
    assert_eq!(r, None);
    // Deleting a missing key or persisting a key without expiry is not.
    let _: () = redis::cmd("WATCH")
        .arg("missing")
        .arg("same")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("DEL").arg("missing").query(&mut other).unwrap();
    let _: i64 = redis::cmd("PERSIST").arg("same").query(&mut other).unwrap();
    let _: i64 = redis::cmd("HDEL")
        .arg("missing")
        .arg("f")
        .query(&mut other)
        .unwrap();
    let r = exec_set(&mut c);
    assert_eq!(r, Some(("OK".to_string(),)));
    // A change to another key does not.
    let _: () = redis::cmd("WATCH").arg("g").query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("unrelated")
        .arg("1")
        .query(&mut other)
        .unwrap();
    let r = exec_set(&mut c);
    assert_eq!(r, Some(("OK".to_string(),)));
}
