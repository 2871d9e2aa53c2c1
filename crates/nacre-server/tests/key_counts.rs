//! Key counts kept in PM (counts.rs): after a SIGKILL the server answers `DBSIZE` and `INFO
//! keyspace` from their records at once, exact through every kind of change (new keys,
//! deletes, collections, RENAME, MOVE, SWAPDB, FLUSHDB); a pool without the records (an
//! earlier build's) is counted in the background once and keeps them from then on.

mod common;

use std::sync::Arc;

use common::Server;
use nacre::{Db, Options, WriteBatch};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions};
use nacre_server::client::Client;
use nacre_server::cmd::{execute, Outcome};
use nacre_server::shared::{ClientInfo, Shared};
use nacre_server::store::{self, counts};

fn dbsizes(s: &Server, dbs: usize) -> Vec<i64> {
    let mut c = s.conn();
    (0..dbs)
        .map(|db| {
            common::q(&mut c, &["SELECT", &db.to_string()]);
            redis::cmd("DBSIZE").query(&mut c).expect("dbsize")
        })
        .collect()
}

#[test]
fn after_a_sigkill_the_counts_are_read_from_their_records_at_once() {
    let mut s = Server::start(&[]);
    {
        let mut c = s.conn();
        for i in 0..300 {
            common::q(&mut c, &["SET", &format!("k{i}"), "v"]);
        }
        for i in 0..40 {
            common::q(&mut c, &["DEL", &format!("k{i}")]);
        }
        // Overwrites and a DEL of a missing key change nothing.
        common::q(&mut c, &["SET", "k100", "again"]);
        common::q(&mut c, &["DEL", "missing"]);
        common::q(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
        common::q(&mut c, &["RPUSH", "l", "a", "b"]);
        common::q(&mut c, &["LPOP", "l"]);
        common::q(&mut c, &["SADD", "s", "m"]);
        common::q(&mut c, &["SREM", "s", "m"]);
        common::q(&mut c, &["ZADD", "z", "1", "m"]);
        common::q(&mut c, &["RENAME", "k200", "renamed"]);
        common::q(&mut c, &["RENAME", "k201", "k202"]);
        common::q(&mut c, &["EXPIRE", "k203", "100000"]);
        common::q(&mut c, &["MOVE", "k204", "1"]);
        common::q(&mut c, &["SELECT", "1"]);
        for i in 0..50 {
            common::q(&mut c, &["SET", &format!("one{i}"), "v"]);
        }
        common::q(&mut c, &["SWAPDB", "1", "3"]);
        common::q(&mut c, &["SELECT", "2"]);
        for i in 0..20 {
            common::q(&mut c, &["SET", &format!("two{i}"), "v"]);
        }
        common::q(&mut c, &["FLUSHDB"]);
        for i in 0..7 {
            common::q(&mut c, &["SET", &format!("two{i}"), "v"]);
        }
        common::q(&mut c, &["MULTI"]);
        common::q(&mut c, &["SET", "in-multi", "v"]);
        common::q(&mut c, &["DEL", "two0"]);
        common::q(&mut c, &["EXEC"]);
    }
    let want = dbsizes(&s, 4);
    assert_eq!(want, vec![300 - 40 + 3 - 1 - 1, 0, 7, 51]);
    for round in 0..2 {
        s.kill();
        s.restart();
        let mut c = s.conn();
        assert_eq!(
            common::info_field(&mut c, "nacre", "key_counts_at_start"),
            "records",
            "round {round}"
        );
        // (Round 0's changes below cancel out: `h` goes, `round0` comes.)
        assert_eq!(dbsizes(&s, 4), want, "round {round}");
        let keyspace: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
        assert!(
            keyspace.contains(&format!("db0:keys={},", want[0])),
            "{keyspace}"
        );
        assert!(keyspace.contains("db3:keys=51,"), "{keyspace}");
        // More changes before the next kill.
        common::q(&mut c, &["DEL", "h"]);
        common::q(&mut c, &["SET", &format!("round{round}"), "v"]);
    }
    // A clean shutdown, then a start from its record.
    s.signal("TERM");
    assert!(s.wait_exit(std::time::Duration::from_secs(30)).is_some());
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        common::info_field(&mut c, "nacre", "key_counts_at_start"),
        "clean"
    );
    assert_eq!(dbsizes(&s, 4), vec![want[0] + 1, 0, 7, 51]);
}

fn opts() -> Options {
    let mut o = Options::new("unused-for-sim").backend(Backend::Sim);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.recovery_threads = 2;
    o
}

/// The keyspace on `image`, as a start after a crash opens it: the counts' source, and the
/// shared state once the background count (if any) is done.
fn start(image: Vec<u8>) -> (String, Shared2) {
    let pool = Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image");
    let db = Db::open_pool(pool, opts()).expect("open");
    let (st, report, job) = store::open::open_db(db, 2, Default::default()).expect("keyspace");
    let st = Arc::new(st);
    st.commits.close(&st);
    let source = report.counts_source().to_string();
    if let Some(j) = job {
        let counted = st.count_keys(j).expect("count");
        assert!(counted.disagreed.is_empty(), "{:?}", counted.disagreed);
    }
    let cfg = nacre_server::Config {
        databases: 2,
        ..Default::default()
    };
    (source, Shared::new(st, cfg, report).into_arc())
}

type Shared2 = Arc<Shared>;

fn run(shared: &Shared, c: &mut Client, args: &[&str]) {
    let args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    match execute(shared, c, args) {
        Outcome::Reply(_, t) => shared
            .store
            .commits
            .wait_blocking(&shared.store, t.0)
            .expect("commit"),
        _ => panic!("unexpected outcome"),
    }
}

#[test]
fn a_pool_without_count_records_is_counted_once_then_keeps_them() {
    let db = Db::open(opts()).expect("open");
    let sim = db.sim().expect("sim");
    let (st, report, job) = store::open::open_db(db, 2, Default::default()).expect("keyspace");
    assert_eq!(report.counts_source(), "created");
    assert!(job.is_none());
    let st = Arc::new(st);
    st.commits.close(&st);
    let shared = Shared::new(st, nacre_server::Config::default(), report).into_arc();
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    for i in 0..120 {
        run(&shared, &mut c, &["SET", &format!("k{i}"), "v"]);
    }
    run(&shared, &mut c, &["HSET", "h", "f", "v"]);
    run(&shared, &mut c, &["DEL", "k0", "k1"]);
    // What an earlier build left: keys, and no count records.
    let st = &shared.store;
    let mut b = WriteBatch::new();
    b.delete(&st.subs.sys, counts::KEPT);
    for s in 0..counts::SLOTS {
        b.delete(&st.subs.sys, counts::slot_key(s));
    }
    st.db.write(b).expect("drop the records");
    let image = sim.crash(CrashPolicy::KeepAll);
    drop(c);
    drop(shared);

    // Counted in the background, which puts the records right.
    let (source, shared) = start(image);
    assert_eq!(source, "counted");
    assert_eq!(shared.store.dbsize(0), 119);
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    run(&shared, &mut c, &["SET", "after", "v"]);
    run(&shared, &mut c, &["SELECT", "1"]);
    run(&shared, &mut c, &["SET", "other", "v"]);
    let sim = shared.store.db.sim().expect("sim");
    let image = sim.crash(CrashPolicy::KeepAll);
    drop(c);
    drop(shared);

    // From the records from now on.
    let (source, shared) = start(image.clone());
    assert_eq!(source, "records");
    assert_eq!(shared.store.dbsize(0), 120);
    assert_eq!(shared.store.dbsize(1), 1);
    drop(shared);

    // A damaged slot record: not trusted, counted again.
    let pool = Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image");
    let db = Db::open_pool(pool, opts()).expect("open");
    let sys = db.subtable("sys").expect("sys");
    let used = (0..counts::SLOTS)
        .find(|&s| db.get(&sys, counts::slot_key(s)).expect("get").is_some())
        .expect("a slot record");
    db.put(&sys, counts::slot_key(used), b"\x07\x00short")
        .expect("damage");
    let sim = db.sim().expect("sim");
    drop(sys);
    let image = sim.crash(CrashPolicy::KeepAll);
    drop(db);
    let (source, shared) = start(image);
    assert_eq!(source, "counted");
    assert_eq!(shared.store.dbsize(0), 120);
    assert_eq!(shared.store.dbsize(1), 1);
    let sim = shared.store.db.sim().expect("sim");
    let image = sim.crash(CrashPolicy::KeepAll);
    drop(shared);
    let (source, shared) = start(image);
    assert_eq!(source, "records");
    assert_eq!(shared.store.dbsize(0), 120);
}

#[test]
fn more_batches_in_flight_than_slots_share_them() {
    // The commits are not closed: batches stay staged (each holding its slot, C2) until
    // someone waits; past 1,024 a batch shares a slot and depends on its holder.
    let shared = common::in_process(opts());
    let sim = shared.store.db.sim().expect("sim");
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    let n = counts::SLOTS + 300;
    let mut last = 0;
    for i in 0..n {
        let args = vec![b"SET".to_vec(), format!("k{i}").into_bytes(), b"v".to_vec()];
        match execute(&shared, &mut c, args) {
            Outcome::Reply(_, t) => last = t.0,
            _ => panic!("unexpected outcome"),
        }
    }
    assert_eq!(shared.store.commits.slots.held(), counts::SLOTS);
    shared
        .store
        .commits
        .wait_blocking(&shared.store, last)
        .expect("commit");
    assert_eq!(shared.store.commits.slots.held(), 0);
    assert_eq!(shared.store.dbsize(0), n as i64);
    let image = sim.crash(CrashPolicy::KeepAll);
    drop(c);
    drop(shared);
    let (source, shared) = start(image);
    assert_eq!(source, "records");
    assert_eq!(shared.store.dbsize(0), n as i64);
}

#[test]
fn a_count_record_that_fails_its_checksum_is_counted_again() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let opts = || {
        let mut o = Options::new(&path).backend(Backend::Emulated);
        o.pool_size = 32 << 20;
        o.zone_size = 256 << 10;
        o.memtable_size = 1 << 20;
        o.recovery_threads = 2;
        o
    };
    // Opens the keyspace as a start does; dropped without a clean close, the next start
    // recovers as after a crash.
    let open = || {
        let db = Db::open(opts()).expect("open");
        let (st, report, job) = store::open::open_db(db, 1, Default::default()).expect("keyspace");
        let st = Arc::new(st);
        st.commits.close(&st);
        let source = report.counts_source().to_string();
        if let Some(j) = job {
            st.count_keys(j).expect("count");
        }
        (
            source,
            Shared::new(st, nacre_server::Config::default(), report).into_arc(),
        )
    };
    let (_, shared) = open();
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    for i in 0..50 {
        run(&shared, &mut c, &["SET", &format!("k{i}"), "v"]);
    }
    run(&shared, &mut c, &["DEL", "k0"]);
    drop(c);
    drop(shared);
    // Every copy of slot 0's record (the first slot taken) gets a flipped value byte.
    let mut bytes = std::fs::read(&path).expect("read");
    let key = counts::slot_key(0);
    let at: Vec<usize> = bytes
        .windows(key.len())
        .enumerate()
        .filter(|(_, w)| *w == &key[..])
        .map(|(i, _)| i + key.len())
        .collect();
    assert!(!at.is_empty(), "no count record in the pool");
    for a in at {
        bytes[a] ^= 0x01;
    }
    std::fs::write(&path, &bytes).expect("write");
    // Not trusted: counted, and the records written again.
    let (source, shared) = open();
    assert_eq!(source, "counted");
    assert_eq!(shared.store.dbsize(0), 49);
    drop(shared);
    let (source, shared) = open();
    assert_eq!(source, "records");
    assert_eq!(shared.store.dbsize(0), 49);
}
