//! A stream work queue under SIGKILL: producers append, consumers of one group read new
//! entries and acknowledge them, a claimer takes over what others have pending and
//! acknowledges it too; the server is killed at random moments and restarted. After every
//! restart: every acknowledged XADD is there with its fields, no acknowledged XACK is undone,
//! every delivery acknowledged to a consumer and not acknowledged back is still pending, and
//! every pending entry is owned by exactly one consumer.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::Server;
use redis::{Connection, Value};

/// What clients were told.
#[derive(Default)]
struct Model {
    /// Appended entries: id → the producer's tag.
    added: HashMap<String, String>,
    /// Ids delivered to some consumer.
    delivered: BTreeSet<String>,
    /// Ids whose XACK was acknowledged.
    acked: BTreeSet<String>,
    /// Ids in an XACK that had no reply (the kill came first).
    maybe_acked: BTreeSet<String>,
}

fn bulk(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn array(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// The ids of the entries in an XREADGROUP reply, or of XAUTOCLAIM's claimed entries.
fn entry_ids(entries: &Value) -> Vec<String> {
    array(entries).iter().map(|e| bulk(&array(e)[0])).collect()
}

/// Acknowledges `ids`, recording them as maybe acknowledged first; false if the server died.
fn ack(c: &mut Connection, model: &Mutex<Model>, ids: &[String]) -> bool {
    if ids.is_empty() {
        return true;
    }
    model
        .lock()
        .unwrap()
        .maybe_acked
        .extend(ids.iter().cloned());
    let mut cmd = redis::cmd("XACK");
    cmd.arg("q").arg("g").arg(ids);
    match cmd.query::<i64>(c) {
        Ok(n) => {
            // Fewer when the claimer took and acknowledged some first: either way none of
            // them is pending once this reply (which follows both commits) arrives.
            assert!(n as usize <= ids.len(), "XACK of {ids:?} acknowledged {n}");
            let mut m = model.lock().unwrap();
            for id in ids {
                m.maybe_acked.remove(id);
                m.acked.insert(id.clone());
            }
            true
        }
        Err(_) => false,
    }
}

fn producer(port: u16, p: usize, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>) {
    let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|cl| cl.get_connection())
    else {
        return;
    };
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let tag = format!("p{p}-{n}");
        let r: redis::RedisResult<String> = redis::cmd("XADD")
            .arg("q")
            .arg("*")
            .arg("tag")
            .arg(&tag)
            .query(&mut c);
        match r {
            Ok(id) => {
                model.lock().unwrap().added.insert(id, tag);
            }
            Err(_) => return,
        }
    }
}

fn consumer(port: u16, name: String, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>, claim: bool) {
    let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|cl| cl.get_connection())
    else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let ids = if claim {
            let r: redis::RedisResult<Value> = redis::cmd("XAUTOCLAIM")
                .arg("q")
                .arg("g")
                .arg(&name)
                .arg(0)
                .arg("0-0")
                .arg("COUNT")
                .arg(5)
                .query(&mut c);
            match r {
                Ok(v) => {
                    let parts = array(&v);
                    assert!(array(&parts[2]).is_empty(), "nothing is deleted");
                    entry_ids(&parts[1])
                }
                Err(_) => return,
            }
        } else {
            let r: redis::RedisResult<Value> = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg("g")
                .arg(&name)
                .arg("COUNT")
                .arg(5)
                .arg("STREAMS")
                .arg("q")
                .arg(">")
                .query(&mut c);
            match r {
                Ok(Value::Nil) => Vec::new(),
                Ok(v) => {
                    let ids = entry_ids(&array(&array(&v)[0])[1]);
                    model.lock().unwrap().delivered.extend(ids.iter().cloned());
                    ids
                }
                Err(_) => return,
            }
        };
        // Half of what a consumer gets it acknowledges at once; the rest stays pending for
        // the claimer (which acknowledges all it takes).
        let take: Vec<String> = if claim {
            ids
        } else {
            ids.into_iter().step_by(2).collect()
        };
        if !ack(&mut c, &model, &take) {
            return;
        }
    }
}

/// The checks after a restart.
fn verify(s: &Server, model: &Mutex<Model>) {
    let mut c = s.conn();
    let m = model.lock().unwrap();
    // Every acknowledged XADD, with its fields.
    let entries: Value = redis::cmd("XRANGE")
        .arg("q")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .unwrap();
    let mut present: HashMap<String, String> = HashMap::new();
    for e in array(&entries) {
        let e = array(e);
        present.insert(bulk(&e[0]), bulk(&array(&e[1])[1]));
    }
    for (id, tag) in &m.added {
        assert_eq!(present.get(id), Some(tag), "acknowledged XADD {id} ({tag})");
    }
    // The group's pending entries, with their owners.
    let pel: Value = redis::cmd("XPENDING")
        .arg("q")
        .arg("g")
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .query(&mut c)
        .unwrap();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for p in array(&pel) {
        let p = array(p);
        let id = bulk(&p[0]);
        assert!(present.contains_key(&id), "pending {id} is an entry");
        owner.insert(id, bulk(&p[1]));
    }
    for id in &m.acked {
        assert!(!owner.contains_key(id), "acknowledged XACK of {id} undone");
    }
    for id in &m.delivered {
        if !m.acked.contains(id) && !m.maybe_acked.contains(id) {
            assert!(
                owner.contains_key(id),
                "delivered {id} is no longer pending"
            );
        }
    }
    // Each pending entry is in its owner's list, and in no other.
    let consumers: Value = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg("q")
        .arg("g")
        .query(&mut c)
        .unwrap();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for info in array(&consumers) {
        let name = bulk(&array(info)[1]);
        let own: Value = redis::cmd("XPENDING")
            .arg("q")
            .arg("g")
            .arg("-")
            .arg("+")
            .arg(1_000_000)
            .arg(&name)
            .query(&mut c)
            .unwrap();
        for p in array(&own) {
            let id = bulk(&array(p)[0]);
            assert_eq!(owner.get(&id), Some(&name), "{id} listed under {name}");
            assert!(
                seen.insert(id.clone(), name.clone()).is_none(),
                "{id} owned twice"
            );
        }
    }
    assert_eq!(seen, owner, "every pending entry has exactly one owner");
    // The group has delivered at least everything a consumer was told about.
    let groups: Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg("q")
        .query(&mut c)
        .unwrap();
    let g = array(&array(&groups)[0]);
    let last = bulk(&g[7]);
    let key = |id: &str| {
        let (a, b) = id.split_once('-').unwrap();
        (a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap())
    };
    if let Some(max) = m.delivered.iter().map(|i| key(i)).max() {
        assert!(
            key(&last) >= max,
            "last delivered id {last} behind a delivery"
        );
    }
}

fn kill_loop(rounds: usize) {
    let mut s = Server::start(&[]);
    {
        let mut c = s.conn();
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("q")
            .arg("g")
            .arg("$")
            .arg("MKSTREAM")
            .query(&mut c)
            .unwrap();
    }
    let model = Arc::new(Mutex::new(Model::default()));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for p in 0..2 {
            let (m, st, port) = (model.clone(), stop.clone(), s.port);
            handles.push(thread::spawn(move || producer(port, p + 10 * round, m, st)));
        }
        for i in 0..4 {
            let (m, st, port) = (model.clone(), stop.clone(), s.port);
            let claim = i == 3;
            let name = if claim {
                "claimer".to_string()
            } else {
                format!("c{i}")
            };
            handles.push(thread::spawn(move || consumer(port, name, m, st, claim)));
        }
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        thread::sleep(Duration::from_millis(40 + (seed >> 40) % 160));
        s.kill();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("client panicked");
        }
        s.restart();
        verify(&s, &model);
        if round % 10 == 9 {
            let m = model.lock().unwrap();
            eprintln!(
                "{} kills survived: {} added, {} delivered, {} acknowledged",
                round + 1,
                m.added.len(),
                m.delivered.len(),
                m.acked.len()
            );
        }
    }
}

#[test]
fn stream_work_queue_survives_sigkill() {
    kill_loop(15);
}

#[test]
#[ignore = "long: 200 kills"]
fn stream_work_queue_survives_sigkill_long() {
    kill_loop(200);
}
