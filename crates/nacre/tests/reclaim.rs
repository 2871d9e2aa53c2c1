//! The engine runs forever: overwrites and deletes give their space back while the database
//! runs (merges into the Global Index, zone cleaning), snapshots keep what they read, and a
//! pool is full only when live data fills it.

mod common;

use std::collections::BTreeMap;

use nacre::{Db, Error, FullCause, IterOptions, Options, Stats, WriteBatch};
use nacre_pmem::{Backend, SplitMix64};

use common::eventually;

fn opts(path: &std::path::Path, backend: Backend, pool: u64) -> Options {
    let mut o = Options::new(path).backend(backend);
    o.pool_size = pool;
    o.zone_size = 128 << 10;
    o.memtable_size = 512 << 10;
    o.recovery_threads = 2;
    o
}

fn value(key: u64, round: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{key}:{round}:").into_bytes();
    v.resize(len, (key ^ round) as u8);
    v
}

/// Overwrites `keys` keys with `len`-byte values until `factor` times the pool has been
/// written; checks the values and that used PM stays bounded. Returns the stats at the end.
fn write_forever(db: &Db, pool: u64, keys: u64, len: usize, factor: u64) -> Stats {
    let sub = db.subtable("forever").expect("subtable");
    let mut rng = SplitMix64::new(7);
    let mut latest: BTreeMap<u64, u64> = BTreeMap::new();
    let mut written = 0u64;
    let mut round = 0u64;
    let mut max_used = 0u64;
    while written < factor * pool {
        let k = rng.next_u64() % keys;
        round += 1;
        match db.put(&sub, format!("key{k:05}"), value(k, round, len)) {
            Ok(()) => {}
            Err(e) => panic!("put {round} after {written} bytes: {e}: {:#?}", db.stats()),
        }
        latest.insert(k, round);
        written += len as u64 + 8;
        if round % 4096 == 0 {
            let s = db.stats();
            max_used = max_used.max(s.pm_used_bytes());
        }
    }
    for (k, r) in &latest {
        assert_eq!(
            db.get(&sub, format!("key{k:05}")).expect("get"),
            Some(value(*k, *r, len)),
            "key {k}"
        );
    }
    let s = db.stats();
    assert!(s.cleaner_zones_freed > 0, "the cleaner ran: {s:#?}");
    assert!(
        max_used < pool,
        "used PM stays below the pool ({max_used} of {pool})"
    );
    s
}

#[test]
fn overwriting_a_thousand_keys_writes_fifty_pools_without_filling_one() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("forever.pool");
    let pool = 8 << 20;
    let db = Db::open(opts(&path, Backend::Emulated, pool)).expect("open");
    let s = write_forever(&db, pool, 1000, 400, 50);
    assert!(s.user_bytes_written >= 50 * pool - (1 << 20));
    let gi_keys: u64 = s.subtables.iter().map(|t| t.gi_keys).sum();
    assert!(gi_keys <= 1000, "{s:#?}");
    drop(db);
    // Everything is still there after a reopen, and the pool keeps running.
    let db = Db::open(opts(&path, Backend::Emulated, pool)).expect("reopen");
    let sub = db.subtable("forever").expect("subtable");
    let n = db
        .iter(&sub, IterOptions::default())
        .expect("iter")
        .inspect(|r| assert!(r.is_ok(), "{r:?}"))
        .count();
    assert!(n > 900 && n <= 1000, "{n} keys");
    write_forever(&db, pool, 1000, 400, 5);
}

#[test]
fn overwriting_keys_on_the_simulator_reclaims_space() {
    let pool = 4 << 20;
    let db = Db::open(opts(std::path::Path::new("sim"), Backend::Sim, pool)).expect("open");
    write_forever(&db, pool, 200, 300, 8);
}

#[test]
fn deleting_everything_gives_the_space_back_and_inserting_again_works() {
    let pool = 6 << 20;
    let db = Db::open(opts(std::path::Path::new("sim"), Backend::Sim, pool)).expect("open");
    let sub = db.subtable("cycles").expect("subtable");
    let mut last_free = 0;
    for cycle in 0..6u64 {
        // Fill most of the pool with live data, then delete all of it.
        let mut n = 0u64;
        loop {
            match db.put(&sub, format!("c{cycle}/k{n:06}"), value(n, cycle, 1000)) {
                Ok(()) => n += 1,
                Err(Error::PoolFull { .. }) => break,
                Err(e) => panic!("cycle {cycle}: {e}"),
            }
            if n * 1000 > pool * 7 / 10 {
                break;
            }
        }
        assert!(n > 1000, "cycle {cycle}: only {n} puts fit");
        for i in 0..n {
            assert_eq!(
                db.get(&sub, format!("c{cycle}/k{i:06}")).expect("get"),
                Some(value(i, cycle, 1000))
            );
            db.delete(&sub, format!("c{cycle}/k{i:06}"))
                .expect("delete");
        }
        assert_eq!(
            db.iter(&sub, IterOptions::default()).expect("iter").count(),
            0,
            "cycle {cycle}: everything deleted"
        );
        let s = db.stats();
        last_free = last_free.max(s.zones_free);
    }
    assert!(last_free > 0);
}

#[test]
fn a_full_pool_becomes_writable_again_after_deletes() {
    let pool = 4 << 20;
    let db = Db::open(opts(std::path::Path::new("sim"), Backend::Sim, pool)).expect("open");
    let sub = db.subtable("full").expect("subtable");
    let mut n = 0u64;
    let err = loop {
        match db.put(&sub, format!("k{n:06}"), value(n, 0, 2000)) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100_000);
    };
    assert!(
        matches!(
            err,
            Error::PoolFull {
                cause: FullCause::LiveData,
                ..
            }
        ),
        "{err}"
    );
    for i in 0..n / 2 {
        db.delete(&sub, format!("k{i:06}"))
            .expect("deletes work on a full pool");
    }
    // The deleted half's space comes back without a reopen.
    let mut more = 0u64;
    for i in 0..n / 4 {
        if let Err(e) = db.put(&sub, format!("again{i:06}"), value(i, 1, 2000)) {
            panic!("writable again after {i}: {e}: {:#?}", db.stats());
        }
        more += 1;
    }
    assert!(more > 0);
    for i in n / 2..n {
        assert_eq!(
            db.get(&sub, format!("k{i:06}")).expect("get"),
            Some(value(i, 0, 2000))
        );
    }
}

#[test]
fn a_held_snapshot_pins_old_versions_and_its_release_frees_them() {
    let pool = 8 << 20;
    let db = Db::open(opts(std::path::Path::new("sim"), Backend::Sim, pool)).expect("open");
    let sub = db.subtable("snap").expect("subtable");
    for k in 0..100u64 {
        db.put(&sub, format!("k{k:03}"), value(k, 0, 500))
            .expect("put");
    }
    let snap = db.snapshot();
    let mut it = db
        .iter(
            &sub,
            IterOptions {
                snapshot: Some(&snap),
                ..Default::default()
            },
        )
        .expect("iter");
    let first = it.next().expect("one").expect("record");
    // Overwrite everything many times: merges and cleaning run while the snapshot and the
    // iterator are held.
    for round in 1..=40u64 {
        for k in 0..100u64 {
            db.put(&sub, format!("k{k:03}"), value(k, round, 500))
                .expect("put");
        }
    }
    let held = eventually(&db, "merges ran", |s| {
        s.subtables.iter().any(|t| t.gi_keys > 0)
    });
    assert_eq!(first, (b"k000".to_vec(), value(0, 0, 500)));
    let rest: Vec<_> = it.map(|r| r.expect("record")).collect();
    assert_eq!(rest.len(), 99);
    for (k, (key, v)) in rest.iter().enumerate() {
        let k = k as u64 + 1;
        assert_eq!(
            (key, v),
            (&format!("k{k:03}").into_bytes(), &value(k, 0, 500))
        );
    }
    for k in 0..100u64 {
        assert_eq!(
            db.get_at(&sub, format!("k{k:03}"), &snap).expect("get"),
            Some(value(k, 0, 500)),
            "the snapshot reads the first round"
        );
        assert_eq!(
            db.get(&sub, format!("k{k:03}")).expect("get"),
            Some(value(k, 40, 500))
        );
    }
    let pinned: u64 = held.subtables.iter().map(|t| t.gi_versions).sum();
    drop(snap);
    // The next merge drops the versions only the snapshot read.
    for k in 0..100u64 {
        db.put(&sub, format!("k{k:03}"), value(k, 41, 500))
            .expect("put");
    }
    for round in 42..60u64 {
        for k in 0..100u64 {
            db.put(&sub, format!("k{k:03}"), value(k, round, 500))
                .expect("put");
        }
    }
    let after = eventually(&db, "released versions dropped", |s| {
        s.snapshots == 0 && s.subtables.iter().map(|t| t.gi_versions).sum::<u64>() <= 100
    });
    assert!(pinned > 100, "the snapshot kept old versions: {pinned}");
    assert_eq!(after.oldest_snapshot, None);
}

/// Puts `n` small records in one batch, deletes them in batches of 512 (as the server's
/// cleaner drops a big collection), merges the memtables and compacts on request.
fn big_delete_then_compact(db: &Db, sub: &nacre::Subtable, tag: &str, n: u64) -> Stats {
    let mut b = WriteBatch::new();
    for i in 0..n {
        b.put(sub, format!("{tag}/{i}"), b"");
    }
    db.write(b).expect("put");
    for chunk in (0..n).collect::<Vec<_>>().chunks(512) {
        let mut b = WriteBatch::new();
        for i in chunk {
            b.delete(sub, format!("{tag}/{i}"));
        }
        db.write(b).expect("delete");
    }
    db.merge_memtables().expect("merge");
    db.compact_pm().expect("compact");
    db.stats()
}

#[test]
fn a_big_delete_gives_its_space_and_tombstones_back_on_request_without_pressure() {
    // The server's zones and memtables.
    let pool = 128 << 20;
    let mut o = opts(std::path::Path::new("sim"), Backend::Sim, pool);
    o.zone_size = 4 << 20;
    o.memtable_size = 64 << 20;
    let db = Db::open(o).expect("open");
    let sub = db.subtable("big").expect("subtable");
    let other = db.subtable("other").expect("subtable");
    db.put(&other, "kept", b"v").expect("put");
    for (round, n) in [100_000u64, 7_777, 150_000].into_iter().enumerate() {
        let s = big_delete_then_compact(&db, &sub, &format!("r{round}"), n);
        let gi_keys: u64 = s.subtables.iter().map(|t| t.gi_keys).sum();
        assert!(
            gi_keys == 1 && s.live_bytes < 1000,
            "round {round}: only the kept key is left: {s:#?}"
        );
        assert!(
            s.zones_free + 8 > s.zones,
            "round {round}: zones back: {s:#?}"
        );
        assert_eq!(db.get(&other, "kept").expect("get"), Some(b"v".to_vec()));
    }
    db.check().expect("check");
}

#[test]
fn a_key_put_and_deleted_in_one_nearly_empty_zone_leaves_nothing_after_compaction() {
    let pool = 8 << 20;
    let db = Db::open(opts(std::path::Path::new("sim"), Backend::Sim, pool)).expect("open");
    let sub = db.subtable("meta").expect("subtable");
    for round in 0..3u64 {
        db.put(&sub, "k", value(1, round, 100)).expect("put");
        db.delete(&sub, "k").expect("delete");
        db.merge_memtables().expect("merge");
        db.compact_pm().expect("compact");
        let s = db.stats();
        assert!(
            s.live_bytes == 0 && s.subtables.iter().all(|t| t.gi_keys == 0),
            "round {round}: the tombstone is gone with its put: {s:#?}"
        );
    }
    db.check().expect("check");
}
