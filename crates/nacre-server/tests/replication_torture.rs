//! Replication under chaos: writers on a nacre-server master while links are cut, the
//! replica and the master are SIGKILLed and restarted. Checked throughout and at the end:
//! - the replica is never ahead of its master (only durable writes enter the stream);
//! - every write the master acknowledged is in the master after its restarts;
//! - every write `WAIT 1` confirmed is in the replica's pool even when the replica is killed
//!   and started alone (its acknowledgements cover only durable writes);
//! - once writes stop, the replica catches up and holds exactly the master's data set.
//!
//! `cargo test -p nacre-server --test replication_torture` runs a short round; the long one
//! is `#[ignore]`d: `cargo test --release -p nacre-server --test replication_torture -- --ignored`.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{info_field, q, Server};
use redis::Connection;

const WRITERS: usize = 3;

fn conn(port: u16) -> Option<Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let c = c.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(c)
}

fn counter(c: &mut Connection, w: usize) -> i64 {
    let v: Option<i64> = redis::cmd("GET")
        .arg(format!("c{w}"))
        .query(c)
        .unwrap_or(None);
    v.unwrap_or(0)
}

/// What the writers know.
#[derive(Default)]
struct Acked {
    /// The last value each writer's INCR returned (acknowledged by the master).
    master: [i64; WRITERS],
    /// The last value each writer saw confirmed by `WAIT 1`.
    replica: [i64; WRITERS],
}

/// One writer: INCR its counter and RPUSH the value to its list; every tenth write `WAIT 1`.
/// Errors (a killed master, a cut link) are retried on a new connection.
fn writer(w: usize, port: Arc<AtomicU16>, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) {
    let mut c: Option<Connection> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Some(cc) = c.as_mut() else {
            c = conn(port.load(Ordering::Relaxed));
            if c.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        let r: redis::RedisResult<(i64, i64)> = redis::pipe()
            .cmd("INCR")
            .arg(format!("c{w}"))
            .cmd("RPUSH")
            .arg(format!("l{w}"))
            .arg("x")
            .query(cc);
        let Ok((v, _)) = r else {
            c = None;
            continue;
        };
        acked.lock().unwrap().master[w] = v;
        n += 1;
        if n % 10 == 0 {
            let r: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(1000).query(cc);
            match r {
                Ok(1) => {
                    let mut a = acked.lock().unwrap();
                    a.replica[w] = a.replica[w].max(v);
                }
                Ok(_) => {}
                Err(_) => c = None,
            }
        }
    }
}

/// The replica's counters never pass the master's (read the replica first: the master's
/// only grow).
fn check_not_ahead(r: &mut Connection, m: &mut Connection, what: &str) {
    for w in 0..WRITERS {
        let rv = counter(r, w);
        let mv = counter(m, w);
        assert!(
            rv <= mv,
            "{what}: the replica has c{w}={rv}, the master {mv}"
        );
    }
}

fn torture(rounds: usize, seed: u64) {
    let mdir = tempfile::tempdir().unwrap();
    let rdir = tempfile::tempdir().unwrap();
    let mut master = Server::start_in(mdir.path(), &[]);
    let mut replica_args = vec![
        "--replicaof".to_string(),
        format!("127.0.0.1 {}", master.port),
    ];
    let args: Vec<&str> = replica_args.iter().map(String::as_str).collect();
    let mut replica = Server::start_in(rdir.path(), &args);
    let port = Arc::new(AtomicU16::new(master.port));
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (p, a, s) = (port.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || writer(w, p, a, s))
        })
        .collect();
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut events = [0usize; 5];
    for round in 0..rounds {
        std::thread::sleep(Duration::from_millis(100 + next() % 300));
        let event = (next() % 5) as usize;
        events[event] += 1;
        match event {
            // The link cut from either side.
            0 => {
                if let Some(mut r) = conn(replica.port) {
                    let _ = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg("master")
                        .query::<redis::Value>(&mut r);
                }
            }
            1 => {
                if let Some(mut m) = conn(master.port) {
                    let _ = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg("replica")
                        .query::<redis::Value>(&mut m);
                }
            }
            // The replica killed and restarted.
            2 => replica.restart(),
            // The master killed and restarted: every acknowledged write is still there.
            3 => {
                master.kill();
                let acknowledged = acked.lock().unwrap().master;
                master.restart();
                port.store(master.port, Ordering::Relaxed);
                let mut m = conn(master.port).expect("the master is back");
                for (w, &a) in acknowledged.iter().enumerate() {
                    let v = counter(&mut m, w);
                    assert!(
                        v >= a,
                        "round {round}: the master lost acknowledged writes: c{w}={v}, acknowledged {a}"
                    );
                }
                let target = format!("127.0.0.1 {}", master.port);
                if replica_args != ["--replicaof", target.as_str()] {
                    // The master came back on another port: point the replica at it.
                    replica_args = vec!["--replicaof".into(), target];
                    let a: Vec<&str> = replica_args.iter().map(String::as_str).collect();
                    replica.set_args(&a);
                    let mut r = conn(replica.port).expect("replica");
                    q(
                        &mut r,
                        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
                    );
                }
            }
            // The replica killed and started alone: what WAIT confirmed is in its pool.
            _ => {
                let confirmed = acked.lock().unwrap().replica;
                replica.kill();
                let alone = Server::start_in(rdir.path(), &[]);
                let mut r = alone.conn();
                // A replica killed while loading a full synchronization starts empty (its
                // partial data set is dropped); any other holds what it acknowledged.
                let keys: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
                for w in (0..WRITERS).filter(|_| keys > 0) {
                    let v = counter(&mut r, w);
                    assert!(
                        v >= confirmed[w],
                        "round {round}: the replica lost writes it had acknowledged: c{w}={v}, WAIT confirmed {}",
                        confirmed[w]
                    );
                }
                drop(r);
                drop(alone);
                // Started alone it forgot its master (a master's writes would make its
                // position false); as a replica again it synchronizes afresh.
                replica.restart();
            }
        }
        if let (Some(mut r), Some(mut m)) = (conn(replica.port), conn(master.port)) {
            check_not_ahead(&mut r, &mut m, &format!("round {round}"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    // The replica catches up and holds exactly the master's data set.
    let mut m = master.conn();
    let mut r = replica.conn();
    let t = Instant::now();
    loop {
        let up = info_field(&mut r, "replication", "master_link_status") == "up";
        let mo = info_field(&mut m, "replication", "master_repl_offset");
        let ro = info_field(&mut r, "replication", "slave_repl_offset");
        if up && mo == ro {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the replica did not catch up (link up {up}, offsets {mo} / {ro})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let acked = acked.lock().unwrap();
    for w in 0..WRITERS {
        let (mv, rv) = (counter(&mut m, w), counter(&mut r, w));
        assert_eq!(rv, mv, "c{w} at the end");
        assert!(
            mv >= acked.master[w],
            "c{w} lost acknowledged writes at the end"
        );
        let len = |c: &mut Connection| -> i64 {
            redis::cmd("LLEN").arg(format!("l{w}")).query(c).unwrap()
        };
        assert_eq!(len(&mut r), len(&mut m), "l{w} at the end");
        assert_eq!(len(&mut m), mv, "l{w} and c{w} were written together");
    }
    eprintln!(
        "{rounds} rounds (link cut by the replica {}, by the master {}, replica killed {}, master killed {}, replica killed and read alone {}); final counters {:?}",
        events[0], events[1], events[2], events[3], events[4], acked.master
    );
}

#[test]
fn replication_survives_cut_links_and_killed_nodes() {
    torture(12, 0x5EED_1234_ABCD_0001);
}

#[test]
#[ignore]
fn replication_survives_cut_links_and_killed_nodes_long() {
    torture(300, 0x0DDB_A11C_0FFE_E001);
}
