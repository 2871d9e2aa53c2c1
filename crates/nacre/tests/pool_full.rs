//! A PM-only pool that live data fills: the write that cannot fit gets `PoolFull` within a
//! cleaner pass (it never waits forever), the cleaner does not move live data that gains it
//! nothing, and deletes make the pool writable again at once.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre::{Db, Error, Options, Stats, WriteBatch};
use nacre_pmem::Backend;

/// How long one write may take before the test calls it stuck. A write into a full pool
/// should be answered within a cleaner pass (milliseconds); this is far above that.
const STUCK: Duration = Duration::from_secs(10);

fn opts(path: &std::path::Path, pool: u64, zone: u64, memtable: u64) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = pool;
    o.zone_size = zone;
    o.memtable_size = memtable;
    o.recovery_threads = 2;
    o
}

fn value(key: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{key}:").into_bytes();
    v.resize(len, key as u8);
    v
}

/// Runs `f` on a thread of its own and returns its result, failing the test if it has not
/// returned within [`STUCK`] (the thread is left behind: it may never return).
fn bounded<T: Send + 'static>(
    db: &Arc<Db>,
    what: &str,
    f: impl FnOnce(&Db) -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let d = db.clone();
    let start = Instant::now();
    std::thread::spawn(move || {
        let r = f(&d);
        // The database is dropped before the caller hears back: it may reopen it at once.
        drop(d);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(STUCK) {
        Ok(r) => (r, start.elapsed()),
        Err(_) => panic!("{what} did not return within {STUCK:?}: {:#?}", db.stats()),
    }
}

/// What the cleaner may move while a pool fills with data that is all live: a few zones'
/// worth (item headers and zone tails are the only dead bytes), never the pool many times.
fn assert_relocation_bounded(s: &Stats, pool: u64, what: &str) {
    assert!(
        s.cleaner_moved_bytes <= pool / 2,
        "{what}: the cleaner moved {} bytes of live data in a pool of {pool}: {s:#?}",
        s.cleaner_moved_bytes
    );
}

/// Puts distinct keys of `len`-byte values into `sub` until a put fails; each put is
/// bounded. Returns how many fit, the error, and how long the failing put took.
fn fill(db: &Arc<Db>, sub: &str, len: usize, limit: u64) -> (u64, Error, Duration) {
    let sub = sub.to_string();
    let (r, took) = bounded(db, "filling the pool", move |db| {
        let t = db.subtable(&sub).expect("subtable");
        let mut n = 0u64;
        loop {
            let start = Instant::now();
            match db.put(&t, format!("k{n:08}"), value(n, len)) {
                Ok(()) => n += 1,
                Err(e) => return (n, e, start.elapsed()),
            }
            assert!(n < limit, "{n} puts and still not full");
        }
    });
    eprintln!(
        "{} puts fit; the next failed after {:?} ({took:?} in all, the cleaner moved {} bytes): {}",
        r.0,
        r.2,
        db.stats().cleaner_moved_bytes,
        r.1
    );
    r
}

fn assert_pool_full(e: &Error, stats: &Stats) {
    assert!(matches!(e, Error::PoolFull { .. }), "{e}: {stats:#?}");
}

#[test]
fn a_pool_full_of_small_distinct_keys_answers_pool_full_and_deletes_make_room() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = 16 << 20;
    let db =
        Arc::new(Db::open(opts(&dir.path().join("p"), pool, 64 << 10, 1 << 20)).expect("open"));
    let (n, e, took) = fill(&db, "t", 1000, 100_000);
    let s = db.stats();
    assert_pool_full(&e, &s);
    assert!(n > 10_000, "only {n} puts fit: {s:#?}");
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert_relocation_bounded(&s, pool, "filling");
    // The pool stays full: another put fails as promptly, and moves nothing more.
    let (r, took) = bounded(&db, "a put into the full pool", |db| {
        let t = db.subtable("t").expect("subtable");
        db.put(&t, "one more", value(0, 1000))
    });
    let s2 = db.stats();
    assert_pool_full(&r.expect_err("the pool is full"), &s2);
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert!(
        s2.cleaner_moved_bytes - s.cleaner_moved_bytes <= 64 << 10,
        "a failed put moved {} bytes",
        s2.cleaner_moved_bytes - s.cleaner_moved_bytes
    );
    // Deleting a quarter of the keys makes room for new ones at once.
    let ((), took) = bounded(&db, "deleting a quarter", move |db| {
        let t = db.subtable("t").expect("subtable");
        for i in (0..n).step_by(4) {
            db.delete(&t, format!("k{i:08}")).expect("delete");
        }
    });
    let after = db.stats();
    let slowed = after.stall_time - s2.stall_time;
    eprintln!(
        "deleted {} keys in {took:?}, slowed {slowed:?} in {} stalls",
        n / 4,
        after.stalls - s2.stalls
    );
    // Deletes are how a full pool frees space: they are not slowed for lack of it.
    assert!(
        slowed < Duration::from_millis(500),
        "deletes were slowed for {slowed:?}: {after:#?}"
    );
    let (r, took) = bounded(&db, "a put after the deletes", move |db| {
        let t = db.subtable("t").expect("subtable");
        let start = Instant::now();
        for i in 0..n / 8 {
            db.put(&t, format!("new{i:08}"), value(i, 1000))?;
        }
        Ok::<_, Error>(start.elapsed())
    });
    let s3 = db.stats();
    r.unwrap_or_else(|e| panic!("puts after deletes: {e}: {s3:#?}"));
    eprintln!("{} puts after the deletes took {took:?}: {s3:#?}", n / 8);
    assert_relocation_bounded(&s3, 2 * pool, "after the deletes");
}

#[test]
fn a_pool_full_of_large_values_in_one_subtable_answers_pool_full() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = 64 << 20;
    let zone = 1 << 20;
    let db = Arc::new(Db::open(opts(&dir.path().join("p"), pool, zone, 16 << 20)).expect("open"));
    // Values of a tenth of a zone, stored in line (like 100 KB values in 4 MiB zones).
    let (n, e, took) = fill(&db, "big", 100_000, 10_000);
    let s = db.stats();
    assert_pool_full(&e, &s);
    assert!(n > 400, "only {n} puts fit: {s:#?}");
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert_relocation_bounded(&s, pool, "filling");
    let ((), _) = bounded(&db, "deleting a quarter", move |db| {
        let t = db.subtable("big").expect("subtable");
        for i in (0..n).step_by(4) {
            db.delete(&t, format!("k{i:08}")).expect("delete");
        }
    });
    let (r, took) = bounded(&db, "puts after the deletes", move |db| {
        let t = db.subtable("big").expect("subtable");
        for i in 0..n / 8 {
            db.put(&t, format!("new{i:08}"), value(i, 100_000))?;
        }
        Ok::<_, Error>(())
    });
    let s2 = db.stats();
    r.unwrap_or_else(|e| panic!("puts after deletes: {e}: {s2:#?}"));
    eprintln!("{} puts after the deletes took {took:?}", n / 8);
}

#[test]
fn a_batch_over_more_subtables_than_the_pool_can_hold_answers_pool_full() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = 16 << 20;
    let db =
        Arc::new(Db::open(opts(&dir.path().join("p"), pool, 64 << 10, 256 << 10)).expect("open"));
    // 160 values of 60 KB, each stored out of line in a zone of its own, and 160 subtables
    // that each need a memtable zone for the descriptors: more zones than the pool has.
    for i in 0..160u64 {
        db.subtable(&format!("s{i:03}")).expect("subtable");
    }
    let (r, took) = bounded(&db, "the batch", |db| {
        let mut b = WriteBatch::new();
        for i in 0..160u64 {
            let t = db.subtable(&format!("s{i:03}")).expect("subtable");
            b.put(&t, format!("k{i}"), value(i, 60_000));
        }
        db.write(b)
    });
    let s = db.stats();
    eprintln!("the batch failed after {took:?}: {r:?}");
    assert_pool_full(&r.expect_err("the batch cannot fit"), &s);
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert_relocation_bounded(&s, pool, "the batch");
    // Nothing of the batch stays: a smaller one fits.
    let (r, _) = bounded(&db, "a smaller batch", |db| {
        let mut b = WriteBatch::new();
        for i in 0..40u64 {
            let t = db.subtable(&format!("s{i:03}")).expect("subtable");
            b.put(&t, format!("k{i}"), value(i, 60_000));
        }
        db.write(b)
    });
    r.unwrap_or_else(|e| panic!("a smaller batch: {e}: {:#?}", db.stats()));
    let t = db.subtable("s007").expect("subtable");
    assert_eq!(db.get(&t, "k7").expect("get"), Some(value(7, 60_000)));
}

/// The sizes of the report (a 1 GiB pool with the default 4 MiB zones and 64 MiB memtables,
/// 100 KB values in one subtable): seconds, and a GiB of disk for the pool file. Run by hand
/// with `--ignored`.
#[test]
#[ignore = "long: fills a 1 GiB pool"]
fn long_a_gib_pool_full_of_100_kb_values_answers_pool_full() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = 1 << 30;
    let db =
        Arc::new(Db::open(opts(&dir.path().join("p"), pool, 4 << 20, 64 << 20)).expect("open"));
    let (n, e, took) = fill(&db, "big", 100_000, 20_000);
    let s = db.stats();
    assert_pool_full(&e, &s);
    assert!(n > 9_000, "only {n} puts fit: {s:#?}");
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert_relocation_bounded(&s, pool, "filling");
    let ((), took) = bounded(&db, "deleting a quarter", move |db| {
        let t = db.subtable("big").expect("subtable");
        for i in (0..n).step_by(4) {
            db.delete(&t, format!("k{i:08}")).expect("delete");
        }
    });
    eprintln!("deleted {} keys in {took:?}", n / 4);
    let (r, took) = bounded(&db, "puts after the deletes", move |db| {
        let t = db.subtable("big").expect("subtable");
        for i in 0..n / 8 {
            db.put(&t, format!("new{i:08}"), value(i, 100_000))?;
        }
        Ok::<_, Error>(())
    });
    let s2 = db.stats();
    r.unwrap_or_else(|e| panic!("puts after deletes: {e}: {s2:#?}"));
    eprintln!(
        "{} puts after the deletes took {took:?}; the cleaner moved {} bytes in all",
        n / 8,
        s2.cleaner_moved_bytes
    );
}

#[test]
fn a_full_pool_takes_writes_marked_to_free_space_and_is_writable_after_them() {
    // As a server does: 10 KB values until the pool is full, then a small write that drops
    // them all (a new namespace record in another subtable) marked as freeing space.
    let dir = tempfile::tempdir().expect("dir");
    let mut o = Options::new(dir.path().join("p")).backend(Backend::Emulated);
    o.pool_size = 64 << 20;
    let db = Arc::new(Db::open(o).expect("open"));
    let (n, e, _) = fill(&db, "data", 10_000, 100_000);
    assert_pool_full(&e, &db.stats());
    let (r, took) = bounded(&db, "a write marked as freeing space", move |db| {
        let sys = db.subtable("sys").expect("subtable");
        let mut b = WriteBatch::new();
        b.put(&sys, "namespace", "2").mark_frees_space();
        db.write(b)
    });
    r.unwrap_or_else(|e| panic!("the freeing write failed after {took:?}: {e}"));
    // What it made unreachable is deleted (as a server's background cleanup does), and the
    // pool takes new data again.
    let ((), _) = bounded(&db, "deleting every key", move |db| {
        let t = db.subtable("data").expect("subtable");
        for i in 0..n {
            db.delete(&t, format!("k{i:08}")).expect("delete");
        }
    });
    let (r, _) = bounded(&db, "puts after the deletes", move |db| {
        let t = db.subtable("data").expect("subtable");
        for i in 0..n / 2 {
            db.put(&t, format!("new{i:08}"), value(i, 10_000))?;
        }
        Ok::<_, Error>(())
    });
    r.unwrap_or_else(|e| panic!("puts after the deletes: {e}: {:#?}", db.stats()));
}

/// The subtables a server keeps (nacre-server's store): strings' values in `meta`, small
/// records in the others.
const SERVER_SUBTABLES: [&str; 5] = ["meta", "sub", "expire", "gc", "sys"];

/// Writes as a server does for SETs of 10 KB values from key `from` on, one batch per SET,
/// until one fails: the value in `meta`, now and then an expiry entry in `expire` and a
/// version mark in `sys`. Returns how many fit and the error.
fn fill_like_a_server(db: &Arc<Db>, from: u64, limit: u64) -> (u64, Error) {
    let (r, took) = bounded(db, "filling the pool", move |db| {
        let meta = db.subtable("meta").expect("subtable");
        let expire = db.subtable("expire").expect("subtable");
        let sys = db.subtable("sys").expect("subtable");
        let mut n = 0u64;
        loop {
            let i = from + n;
            let mut b = WriteBatch::new();
            b.put(&meta, format!("\0\0\0\x01k{i:08}"), value(i, 10_000));
            if i % 16 == 0 {
                b.put(&expire, format!("{i:016}k{i:08}"), []);
            }
            if i % 64 == 0 {
                b.put(&sys, "version-mark", i.to_le_bytes());
            }
            match db.write(b) {
                Ok(()) => n += 1,
                Err(e) => return (n, e),
            }
            assert!(n < limit, "{n} writes and still not full");
        }
    });
    let s = db.stats();
    eprintln!(
        "{} writes fit in {took:?}, then: {}; the cleaner freed {} zones and moved {} bytes, \
         {} zones free",
        r.0, r.1, s.cleaner_zones_freed, s.cleaner_moved_bytes, s.zones_free
    );
    r
}

/// What the cleaner did between `before` and `after`: zones freed and bytes moved.
fn cleaned(before: &Stats, after: &Stats) -> (u64, u64) {
    (
        after.cleaner_zones_freed - before.cleaner_zones_freed,
        after.cleaner_moved_bytes - before.cleaner_moved_bytes,
    )
}

/// The cleaner's work between `before` and `after` stays within `zones` zones freed and
/// `bytes` moved: it does not spin relocating data that gains a writer nothing.
fn assert_cleaned_at_most(before: &Stats, after: &Stats, zones: u64, bytes: u64, what: &str) {
    let (z, b) = cleaned(before, after);
    eprintln!("{what}: the cleaner freed {z} zones and moved {b} bytes");
    assert!(
        z <= zones && b <= bytes,
        "{what}: the cleaner freed {z} zones (at most {zones} expected) and moved {b} bytes \
         (at most {bytes}): {after:#?}"
    );
}

#[test]
fn a_full_pool_of_server_subtables_frees_only_zones_writers_can_use() {
    // The server's layout on a 64 MiB pool with the default 4 MiB zones (15 zones, 3 kept
    // for the cleaner): 10 KB values until the pool is full, a FLUSHALL (a small write to
    // `sys` marked as freeing space), deletes, a restart, and a refill.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("p");
    let open = || {
        let mut o = Options::new(&path).backend(Backend::Emulated);
        o.pool_size = 64 << 20;
        o.recovery_threads = 2;
        let db = Arc::new(Db::open(o).expect("open"));
        for s in SERVER_SUBTABLES {
            db.subtable(s).expect("subtable");
        }
        db
    };
    let db = open();
    let s0 = db.stats();
    let zones = s0.zones;
    let (n, e) = fill_like_a_server(&db, 0, 100_000);
    let s1 = db.stats();
    assert_pool_full(&e, &s1);
    assert!(n > 4000, "only {n} writes fit: {s1:#?}");
    // Filling a pool with live data leaves the cleaner little to do.
    assert_cleaned_at_most(&s0, &s1, zones, 64 << 20, "filling");
    // The pool stays full, and says so at once.
    let (r, took) = bounded(&db, "a write into the full pool", |db| {
        let meta = db.subtable("meta").expect("subtable");
        db.put(&meta, "one more", value(0, 10_000))
    });
    let s2 = db.stats();
    assert_pool_full(&r.expect_err("the pool is full"), &s2);
    assert!(took < Duration::from_secs(2), "PoolFull took {took:?}");
    assert_cleaned_at_most(&s1, &s2, 2, 4 << 20, "a write into the full pool");
    // A FLUSHALL: a small write marked as freeing space, in `sys` and `gc`.
    let flushall = |db: &Arc<Db>, gen: u32| {
        bounded(db, "a write marked as freeing space", move |db| {
            let sys = db.subtable("sys").expect("subtable");
            let gc = db.subtable("gc").expect("subtable");
            let mut b = WriteBatch::new();
            b.put(&sys, "namespaces", gen.to_le_bytes());
            b.put(&gc, 1u32.to_be_bytes(), []);
            b.mark_frees_space();
            db.write(b)
        })
    };
    let (r, took) = flushall(&db, 2);
    let s3 = db.stats();
    r.unwrap_or_else(|e| panic!("the freeing write failed after {took:?}: {e}: {s3:#?}"));
    assert_cleaned_at_most(&s2, &s3, 2, 4 << 20, "a write marked as freeing space");
    // A DEL, then a restart.
    let (r, _) = bounded(&db, "a delete", |db| {
        let meta = db.subtable("meta").expect("subtable");
        db.delete(&meta, format!("\0\0\0\x01k{:08}", 1))
    });
    r.unwrap_or_else(|e| panic!("a delete in a full pool: {e}: {:#?}", db.stats()));
    drop(db);
    let db = open();
    let s4 = db.stats();
    let (r, took) = flushall(&db, 3);
    let s5 = db.stats();
    r.unwrap_or_else(|e| panic!("the freeing write failed after {took:?}: {e}: {s5:#?}"));
    assert_cleaned_at_most(&s4, &s5, 2, 4 << 20, "a freeing write after a restart");
    // What the FLUSHALL dropped is deleted in the background, in batches marked as freeing
    // space; then the pool takes as much again.
    let ((), took) = bounded(&db, "deleting every key", move |db| {
        let meta = db.subtable("meta").expect("subtable");
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let mut b = WriteBatch::new();
            for i in chunk {
                b.delete(&meta, format!("\0\0\0\x01k{i:08}"));
            }
            b.mark_frees_space();
            db.write(b).expect("delete");
        }
    });
    eprintln!("deleted {n} keys in {took:?}");
    let s6 = db.stats();
    let (again, e) = fill_like_a_server(&db, n, 100_000);
    let s7 = db.stats();
    assert_pool_full(&e, &s7);
    assert!(
        again > n * 3 / 4,
        "{again} writes fit after the deletes, {n} before"
    );
    // Emptied zones are given back; live data is moved only to pack the few zones that still
    // held some: never the pool many times over.
    assert_cleaned_at_most(&s5, &s7, 3 * zones, 64 << 20, "deleting and refilling");
    assert!(
        s7.cleaner_zones_freed - s6.cleaner_zones_freed <= 2 * zones,
        "refilling: {s7:#?}"
    );
}
