//! Values longer than a zone (up to 512 MiB, Redis's `proto-max-bulk-len`) are stored in zones
//! of their own: they read back whole, survive reopens, give their zones back when overwritten
//! or deleted, stay readable for snapshots, and a damaged byte is reported, never returned.

mod common;

use std::time::Instant;

use nacre::{Db, Error, FullCause, IterOptions, Options, MAX_VALUE};
use nacre_pmem::Backend;

use common::eventually;

const ZONE: u64 = 128 << 10;

fn opts(path: &std::path::Path, backend: Backend, pool: u64) -> Options {
    let mut o = Options::new(path).backend(backend);
    o.pool_size = pool;
    o.zone_size = ZONE;
    o.memtable_size = 512 << 10;
    o.recovery_threads = 2;
    o
}

/// A value whose every byte depends on its seed and position.
fn value(seed: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Sizes around every boundary: inline, just out of line, one zone, across zones.
fn sizes() -> Vec<usize> {
    let z = ZONE as usize;
    vec![
        0,
        1,
        z / 8,
        z / 8 + 1,
        z - 1,
        z,
        z + 1,
        3 * z + z / 2,
        10 * z,
    ]
}

#[test]
fn values_of_every_size_read_back_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("pool");
    {
        let db = Db::open(opts(&path, Backend::Emulated, 16 << 20)).expect("open");
        let sub = db.subtable("s").expect("subtable");
        for (i, n) in sizes().into_iter().enumerate() {
            db.put(&sub, format!("k{i}"), value(i as u64, n))
                .expect("put");
        }
        for (i, n) in sizes().into_iter().enumerate() {
            assert_eq!(
                db.get(&sub, format!("k{i}")).expect("get"),
                Some(value(i as u64, n)),
                "size {n}"
            );
        }
        let s = db.stats();
        assert!(s.blob_zones >= 1 + 1 + 2 + 4 + 10, "{s:#?}");
        let got: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter(&sub, IterOptions::default())
            .expect("iter")
            .collect::<Result<_, _>>()
            .expect("scan");
        assert_eq!(got.len(), sizes().len());
        for (k, v) in got {
            let i: usize = std::str::from_utf8(&k[1..])
                .expect("key")
                .parse()
                .expect("n");
            assert_eq!(v, value(i as u64, sizes()[i]), "scan of k{i}");
        }
        db.check().expect("check");
    }
    let db = Db::open(opts(&path, Backend::Emulated, 16 << 20)).expect("reopen");
    let sub = db.subtable("s").expect("subtable");
    for (i, n) in sizes().into_iter().enumerate() {
        assert_eq!(
            db.get(&sub, format!("k{i}")).expect("get"),
            Some(value(i as u64, n)),
            "size {n} after reopen"
        );
    }
    db.check().expect("check after reopen");
}

#[test]
fn overwrites_and_deletes_give_blob_zones_back() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = 16u64 << 20;
    let db = Db::open(opts(&dir.path().join("pool"), Backend::Emulated, pool)).expect("open");
    let sub = db.subtable("s").expect("subtable");
    let n = 3 * ZONE as usize + 100;
    let mut written = 0u64;
    let mut round = 0u64;
    // Ten pools' worth of large values over four keys.
    while written < 10 * pool {
        round += 1;
        let k = round % 4;
        if let Err(e) = db.put(&sub, format!("big{k}"), value(round, n)) {
            panic!("put {round} after {written} bytes: {e}: {:#?}", db.stats());
        }
        written += n as u64;
        if round % 7 == 0 {
            db.delete(&sub, format!("big{}", (k + 1) % 4))
                .expect("delete");
        }
    }
    for k in 0..4u64 {
        let last = (1..=round).rev().find(|r| r % 4 == k).expect("round");
        let deleted = (1..=round)
            .rev()
            .find(|r| r % 7 == 0 && (r % 4 + 1) % 4 == k)
            .is_some_and(|d| d >= last);
        let want = (!deleted).then(|| value(last, n));
        assert_eq!(
            db.get(&sub, format!("big{k}")).expect("get"),
            want,
            "key {k}"
        );
    }
    db.check().expect("check");
    for k in 0..4u64 {
        db.delete(&sub, format!("big{k}")).expect("delete");
    }
    // Filler writes seal the memtable; merges drop the blobs; their zones go back.
    for i in 0..2000u64 {
        db.put(&sub, format!("small{i}"), [7u8; 200]).expect("put");
    }
    let s = eventually(&db, "blob zones given back", |s| s.blob_zones == 0);
    assert!(s.cleaner_zones_freed > 0);
    db.check().expect("check");
}

#[test]
fn a_snapshot_keeps_an_overwritten_blob_readable() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(opts(&dir.path().join("pool"), Backend::Emulated, 16 << 20)).expect("open");
    let sub = db.subtable("s").expect("subtable");
    let n = 2 * ZONE as usize;
    db.put(&sub, "k", value(1, n)).expect("put");
    let snap = db.snapshot();
    for r in 2..40u64 {
        db.put(&sub, "k", value(r, n)).expect("put");
        for i in 0..50u64 {
            db.put(&sub, format!("fill{i}"), [r as u8; 1000])
                .expect("put");
        }
    }
    assert_eq!(db.get_at(&sub, "k", &snap).expect("get"), Some(value(1, n)));
    assert_eq!(db.get(&sub, "k").expect("get"), Some(value(39, n)));
    db.check().expect("check");
    drop(snap);
    for i in 0..2000u64 {
        db.put(&sub, format!("fill{i}"), [1u8; 200]).expect("put");
    }
    eventually(&db, "only the newest blob keeps zones", |s| {
        s.blob_zones == 2
    });
    db.check().expect("check");
}

#[test]
fn limits_are_errors_not_hangs() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(opts(&dir.path().join("pool"), Backend::Emulated, 8 << 20)).expect("open");
    let sub = db.subtable("s").expect("subtable");
    match db.put(&sub, "k", vec![0u8; MAX_VALUE + 1]) {
        Err(Error::TooLarge { what: "value", .. }) => {}
        other => panic!("a value over 512 MiB: {other:?}"),
    }
    // Larger than the whole pool: refused at once.
    match db.put(&sub, "k", vec![1u8; 16 << 20]) {
        Err(Error::PoolFull {
            cause: FullCause::ValueLargerThanPool { .. },
            ..
        }) => {}
        other => panic!("a value larger than the pool: {other:?}"),
    }
    // Larger than what is free while other values hold the rest: full, and deletes make
    // room again.
    let big = 2 << 20;
    let mut stored = 0;
    loop {
        match db.put(&sub, format!("b{stored}"), value(stored, big)) {
            Ok(()) => stored += 1,
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(stored < 8, "an 8 MiB pool took {stored} values of 2 MiB");
    }
    assert!(stored >= 1);
    db.check().expect("check");
    for i in 0..stored {
        assert_eq!(
            db.get(&sub, format!("b{i}")).expect("get"),
            Some(value(i, big))
        );
        db.delete(&sub, format!("b{i}")).expect("delete");
    }
    db.put(&sub, "again", value(99, big))
        .expect("deletes made room");
    assert_eq!(db.get(&sub, "again").expect("get"), Some(value(99, big)));
    db.check().expect("check");
}

#[test]
fn a_damaged_blob_byte_is_an_error_never_data() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("pool");
    let n = 2 * ZONE as usize + 5;
    {
        let db = Db::open(opts(&path, Backend::Emulated, 8 << 20)).expect("open");
        let sub = db.subtable("s").expect("subtable");
        db.put(&sub, "k", value(5, n)).expect("put");
    }
    // Find the value's bytes in the file and flip one.
    let mut bytes = std::fs::read(&path).expect("read pool");
    let v = value(5, n);
    let probe = &v[ZONE as usize + 1000..ZONE as usize + 1064];
    let at = bytes
        .windows(probe.len())
        .position(|w| w == probe)
        .expect("value bytes in the pool");
    bytes[at + 10] ^= 0x20;
    std::fs::write(&path, &bytes).expect("write pool");
    let db = Db::open(opts(&path, Backend::Emulated, 8 << 20)).expect("reopen");
    let sub = db.subtable("s").expect("subtable");
    match db.get(&sub, "k") {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("checksum"), "{what}"),
        other => panic!(
            "a damaged blob read as {:?}",
            other.map(|v| v.map(|v| v.len()))
        ),
    }
}

/// The largest value accepted, on a pool that holds it twice (a put and its overwrite).
#[test]
fn a_512_mib_value_round_trips() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("dir");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 1280 << 20;
    let db = Db::open(o).expect("open");
    let sub = db.subtable("s").expect("subtable");
    let v = value(512, MAX_VALUE);
    let t = Instant::now();
    db.put(&sub, "huge", &v).expect("put 512 MiB");
    let put = t.elapsed();
    let t = Instant::now();
    let got = db.get(&sub, "huge").expect("get").expect("present");
    let get = t.elapsed();
    assert!(got == v, "512 MiB read back");
    drop(got);
    db.put(&sub, "huge", b"small now").expect("overwrite");
    assert_eq!(
        db.get(&sub, "huge").expect("get"),
        Some(b"small now".to_vec())
    );
    eprintln!("512 MiB value: put {put:?}, get {get:?}");
    db.check().expect("check");
}
