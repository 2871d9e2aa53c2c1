//! Hostile input through the API: option values of every size, subtable names of every length
//! and byte, keys and values at and past their limits. Each is either served or refused with a
//! typed error; none panics, aborts, hangs, leaks or leaves a file behind.

use std::path::Path;
use std::time::Duration;

use nacre::{limits, Db, Error, IterOptions, Options};
use nacre_pmem::Backend;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn shm_dir() -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    tempfile::Builder::new()
        .prefix("nacre-bad-input")
        .tempdir_in(base)
        .expect("tempdir")
}

fn small(path: &Path) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = 16 * MIB;
    o.zone_size = 128 << 10;
    o.memtable_size = 512 << 10;
    o.recovery_threads = 2;
    o
}

#[test]
fn options_out_of_range_are_refused_before_anything_is_created() {
    type Tweak = fn(&mut Options);
    let cases: Vec<(&str, Tweak)> = vec![
        ("max_subtables", |o| o.max_subtables = 0),
        ("max_subtables", |o| o.max_subtables = 1 << 61),
        ("max_subtables", |o| {
            o.max_subtables = limits::MAX_SUBTABLES + 1
        }),
        ("ring_capacity", |o| o.ring_capacity = 1),
        ("ring_capacity", |o| o.ring_capacity = 1 << 40),
        ("batch_size", |o| o.batch_size = 0),
        ("batch_size", |o| o.batch_size = usize::MAX),
        ("commit_buckets", |o| o.commit_buckets = 0),
        ("commit_buckets", |o| o.commit_buckets = 1 << 40),
        ("recovery_threads", |o| o.recovery_threads = 0),
        ("recovery_threads", |o| o.recovery_threads = usize::MAX),
        ("batch_wait", |o| o.batch_wait = Duration::from_secs(3600)),
        ("flush_delay_ns", |o| o.pool.flush_delay_ns = u64::MAX),
        ("pool_size", |o| o.pool_size = u64::MAX),
        ("zone_size", |o| o.zone_size = 0),
        ("zone_size", |o| o.zone_size = u64::MAX),
        ("memtable_size", |o| o.memtable_size = u64::MAX),
    ];
    for (field, tweak) in cases {
        let dir = shm_dir();
        let path = dir.path().join("db.pool");
        let mut o = small(&path);
        tweak(&mut o);
        match Db::open(o) {
            Err(Error::InvalidOptions(m)) => assert!(m.contains(field), "{field}: {m}"),
            other => panic!("{field}: {other:?}"),
        }
        assert!(!path.exists(), "{field}: a refused open left {path:?}");
    }
}

#[test]
fn a_pool_larger_than_the_file_system_is_refused_at_once() {
    let dir = shm_dir();
    let path = dir.path().join("huge.pool");
    let mut o = small(&path);
    o.pool_size = limits::POOL_SIZE_MAX;
    let e = Db::open(o).expect_err("64 TiB on this machine");
    assert!(e.to_string().contains("free"), "{e}");
    assert!(!path.exists());
    // The simulator refuses a pool larger than memory instead of aborting.
    let mut o = small(&path);
    o.pool.backend = Backend::Sim;
    o.pool_size = limits::POOL_SIZE_MAX;
    assert!(Db::open(o).is_err());
}

#[test]
fn a_failed_create_leaves_no_file_and_a_retry_works() {
    let dir = shm_dir();
    let path = dir.path().join("db.pool");
    let mut o = small(&path);
    // Valid options, but the pool cannot hold two zones of this size.
    o.pool_size = 4 * MIB;
    o.zone_size = 4 * MIB;
    o.memtable_size = 4 * MIB;
    let e = Db::open(o).expect_err("pool too small for its zones");
    assert!(matches!(e, Error::InvalidOptions(_)), "{e}");
    assert!(!path.exists(), "the failed create left its pool behind");
    let db = Db::open(small(&path)).expect("retry with valid options");
    let t = db.subtable("t").unwrap();
    db.put(&t, b"k", b"v").unwrap();
    db.close().unwrap();
}

#[test]
fn a_failed_open_of_an_existing_pool_never_removes_it() {
    let dir = shm_dir();
    let path = dir.path().join("db.pool");
    let db = Db::open(small(&path)).unwrap();
    let t = db.subtable("t").unwrap();
    db.put(&t, b"k", b"v").unwrap();
    db.close().unwrap();
    // Wrong backend for this file: refused, and the data stays.
    let mut o = small(&path);
    o.pool.backend = Backend::Dax;
    assert!(Db::open(o).is_err());
    assert!(path.exists());
    let db = Db::open(small(&path)).unwrap();
    let t = db.subtable("t").unwrap();
    assert_eq!(db.get(&t, b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn every_subtable_up_to_the_limit_works_and_the_next_fails_without_leaking() {
    let dir = shm_dir();
    let path = dir.path().join("db.pool");
    let mut o = small(&path);
    o.max_subtables = 8;
    let db = Db::open(o.clone()).unwrap();
    // "default" is the first.
    let names: Vec<String> = (1..8).map(|i| format!("s{i}")).collect();
    for n in &names {
        let s = db.subtable(n).expect(n);
        db.put(&s, n.as_bytes(), b"x")
            .expect("write to the last subtable too");
    }
    for _ in 0..50 {
        match db.subtable("one-too-many") {
            Err(Error::TooManySubtables { max: 8 }) => {}
            other => panic!("{other:?}"),
        }
    }
    db.check().expect("a failed subtable() leaked nothing");
    // Writes still work everywhere after the refusals.
    for n in &names {
        let s = db.subtable(n).unwrap();
        db.put(&s, b"again", b"y").unwrap();
    }
    db.close().unwrap();
    let db = Db::open(o).unwrap();
    assert_eq!(db.subtables().len(), 8);
    for n in &names {
        let s = db.subtable(n).unwrap();
        assert_eq!(
            db.get(&s, n.as_bytes()).unwrap().as_deref(),
            Some(&b"x"[..])
        );
    }
}

#[test]
fn subtable_names_with_nul_or_out_of_bounds_are_refused() {
    let dir = shm_dir();
    let db = Db::open(small(&dir.path().join("db.pool"))).unwrap();
    for bad in ["", "a\0b", "\0", &"n".repeat(41)] {
        match db.subtable(bad) {
            Err(Error::BadSubtableName { max: 40, .. }) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    // At the limit, and any other byte, is fine.
    let long = "é".repeat(20);
    assert_eq!(long.len(), 40);
    for ok in [long.as_str(), "\u{1}\u{7f}", " ", "default2"] {
        let s = db.subtable(ok).expect(ok);
        assert_eq!(s.name(), ok);
    }
}

#[test]
fn close_says_what_is_still_open() {
    let dir = shm_dir();
    let path = dir.path().join("db.pool");
    let db = Db::open(small(&path)).unwrap();
    let t = db.subtable("t").unwrap();
    db.put(&t, b"k", b"v").unwrap();
    let snap = db.snapshot();
    let it = db.iter(&t, IterOptions::default()).unwrap();
    match db.close() {
        Err(Error::StillOpen {
            snapshots: 1,
            iterators: 1,
        }) => {}
        other => panic!("{other:?}"),
    }
    // The iterator still reads (it keeps the pool mapped), and holds the file's lock.
    assert!(Db::open(small(&path)).is_err());
    drop(it);
    drop(snap);
    let db = Db::open(small(&path)).unwrap();
    assert!(db.recovery_report().clean, "the close was recorded");
    db.close().unwrap();
}

#[test]
fn the_report_says_whether_an_open_created_the_database() {
    let dir = shm_dir();
    let path = dir.path().join("db.pool");
    let db = Db::open(small(&path)).unwrap();
    let rep = db.recovery_report();
    assert!(rep.created && !rep.clean, "first open: {rep:?}");
    db.close().unwrap();
    let db = Db::open(small(&path)).unwrap();
    let rep = db.recovery_report();
    assert!(!rep.created && rep.clean, "reopen: {rep:?}");
    drop(db);
    // A pool whose engine root was never written (a kill between the two) is created too.
    let bare = dir.path().join("bare.pool");
    let opts = small(&bare);
    drop(nacre_pmem::Pool::create(&bare, opts.pool_size, &opts.pool).unwrap());
    let db = Db::open(opts).unwrap();
    assert!(db.recovery_report().created);
}

fn pick<T: Clone + std::fmt::Debug + 'static>(v: Vec<T>) -> impl Strategy<Value = T> {
    proptest::sample::select(v)
}

/// Mostly values that work, sometimes hostile ones.
fn mostly<T: Clone + std::fmt::Debug + 'static>(
    good: Vec<T>,
    bad: Vec<T>,
) -> impl Strategy<Value = T> {
    prop_oneof![5 => pick(good), 1 => pick(bad)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Any combination of option values: the database opens and works, or the open is
    /// refused with an error; nothing panics, and a refused open leaves no file.
    #[test]
    fn any_options_open_and_work_or_are_refused(
        pool in mostly(vec![6 * MIB, 8 * MIB, 24 * MIB], vec![0, 1, 4096, 3 * MIB, u64::MAX]),
        zone in mostly(vec![64 << 10, 128 << 10, 1 << 20], vec![0, 4096, 1 << 30, u64::MAX]),
        mem_zones in mostly(vec![1u64, 2, 4], vec![0, 1 << 40]),
        subs in mostly(vec![1u64, 2, 256, 4096], vec![0, limits::MAX_SUBTABLES, 1 << 61, u64::MAX]),
        ring in mostly(vec![2usize, 3, 64, 1024], vec![0, 1, limits::RING_CAPACITY_MAX, usize::MAX]),
        batch in mostly(vec![1usize, 2, 32, 4096], vec![0, usize::MAX]),
        buckets in mostly(vec![1usize, 2, 4, 64], vec![0, 1 << 40]),
        threads in mostly(vec![1usize, 2, 16], vec![0, usize::MAX]),
        wait_us in mostly(vec![0u64, 5, 1000], vec![10_001, 3_600_000_000]),
    ) {
        let dir = shm_dir();
        let path = dir.path().join("db.pool");
        let mut o = Options::new(&path).backend(Backend::Emulated);
        o.pool_size = pool;
        o.zone_size = zone;
        o.memtable_size = zone.saturating_mul(mem_zones);
        o.max_subtables = subs;
        o.ring_capacity = ring;
        o.batch_size = batch;
        o.commit_buckets = buckets;
        o.recovery_threads = threads;
        o.batch_wait = Duration::from_micros(wait_us);
        match Db::open(o.clone()) {
            Ok(db) => {
                let t = db.subtable(nacre::DEFAULT_SUBTABLE).unwrap();
                let value = vec![7u8; 300];
                for i in 0..200u32 {
                    db.put(&t, i.to_be_bytes(), &value).unwrap();
                }
                let n = db.iter(&t, IterOptions::default()).unwrap().count();
                prop_assert_eq!(n, 200);
                db.close().unwrap();
                let db = Db::open(o).unwrap();
                let t = db.subtable(nacre::DEFAULT_SUBTABLE).unwrap();
                prop_assert_eq!(db.get(&t, 199u32.to_be_bytes()).unwrap(), Some(value));
            }
            Err(_) => prop_assert!(!path.exists(), "a refused open left its pool behind"),
        }
    }

    /// Subtable names of any bytes and length, keys and values of any bytes: served exactly,
    /// or refused with a typed error.
    #[test]
    fn any_names_and_keys_are_served_exactly_or_refused(
        name in proptest::collection::vec(any::<u8>(), 0..60),
        key in proptest::collection::vec(any::<u8>(), 0..300),
        value in proptest::collection::vec(any::<u8>(), 0..3000),
    ) {
        let dir = shm_dir();
        let db = Db::open(small(&dir.path().join("db.pool"))).unwrap();
        let name = String::from_utf8_lossy(&name).into_owned();
        match db.subtable(&name) {
            Ok(s) => {
                prop_assert!(!name.is_empty() && name.len() <= 40 && !name.contains('\0'));
                db.put(&s, &key, &value).unwrap();
                prop_assert_eq!(db.get(&s, &key).unwrap(), Some(value.clone()));
                let rows: Vec<_> = db.iter(&s, IterOptions::default()).unwrap()
                    .collect::<Result<_, _>>().unwrap();
                prop_assert_eq!(rows, vec![(key.clone(), value.clone())]);
            }
            Err(Error::BadSubtableName { .. }) => {
                prop_assert!(name.is_empty() || name.len() > 40 || name.contains('\0'));
            }
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}
