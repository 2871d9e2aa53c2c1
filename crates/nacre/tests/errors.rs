//! Bad input and full pools: clear errors, nothing acknowledged lost.

use nacre::{Db, Error, Options, WriteBatch};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions};

fn small(pool_size: u64) -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = pool_size;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o
}

#[test]
fn a_full_pool_refuses_writes_and_keeps_everything_acknowledged() {
    let db = Db::open(small(4 << 20)).expect("open");
    let s = db.subtable("fill").expect("subtable");
    let value = vec![7u8; 3000];
    let mut acked = 0u64;
    let err = loop {
        match db.put(&s, format!("key{acked:06}"), &value) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100_000, "a 4 MiB pool never filled");
    };
    assert!(matches!(err, Error::PoolFull { .. }), "{err}");
    assert!(err.to_string().contains("pool full"), "{err}");
    assert!(acked > 100, "{acked}");
    // still full, still readable, nothing lost
    assert!(matches!(
        db.put(&s, "more", &value),
        Err(Error::PoolFull { .. })
    ));
    for i in 0..acked {
        assert_eq!(
            db.get(&s, format!("key{i:06}")).expect("get").as_deref(),
            Some(&value[..])
        );
    }
    assert_eq!(db.get(&s, "more").expect("get"), None);
    let image = db.sim().expect("sim").crash(CrashPolicy::KeepNone);
    drop(db);
    let db = Db::open_pool(
        Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image"),
        small(4 << 20),
    )
    .expect("reopen");
    let s = db.subtable("fill").expect("subtable");
    for i in 0..acked {
        assert_eq!(
            db.get(&s, format!("key{i:06}")).expect("get").as_deref(),
            Some(&value[..]),
            "key {i} after reopen"
        );
    }
}

#[test]
fn oversized_records_bad_names_and_foreign_subtables_are_refused() {
    let db = Db::open(small(8 << 20)).expect("open");
    let s = db.subtable("s").expect("subtable");
    let e = db
        .put(&s, vec![b'k'; 64 << 10], "v")
        .expect_err("too large");
    assert!(matches!(e, Error::TooLarge { what: "record", .. }), "{e}");
    // A long value is stored out of line; a batch refused for a long key gives its zones back.
    db.put(&s, "long", vec![3u8; 64 << 10]).expect("long value");
    assert_eq!(db.get(&s, "long").expect("get"), Some(vec![3u8; 64 << 10]));
    let free = db.stats().zones_free;
    let mut b = WriteBatch::new();
    b.put(&s, "blob", vec![4u8; 200 << 10])
        .put(&s, vec![b'k'; 64 << 10], "v");
    let e = db.write(b).expect_err("key too large");
    assert!(matches!(e, Error::TooLarge { what: "record", .. }), "{e}");
    assert_eq!(db.get(&s, "blob").expect("get"), None);
    assert_eq!(
        db.stats().zones_free,
        free,
        "the refused batch's blob zones went back"
    );
    db.check().expect("check");
    let mut b = WriteBatch::new();
    for i in 0..40 {
        b.put(&s, format!("k{i}"), vec![1u8; 2000]);
    }
    // Records of one batch for one subtable may exceed a zone: they span zones.
    db.write(b).expect("a batch larger than one zone");
    assert_eq!(db.get(&s, "k39").expect("get"), Some(vec![1u8; 2000]));
    for bad in ["", &"x".repeat(49)] {
        assert!(matches!(
            db.subtable(bad),
            Err(Error::BadSubtableName { .. })
        ));
    }
    let other = Db::open(small(8 << 20)).expect("other");
    let foreign = other.subtable("s").expect("subtable");
    assert!(matches!(
        db.put(&foreign, "k", "v"),
        Err(Error::InvalidOptions(_))
    ));
    assert!(db.get(&foreign, "k").is_err());
    let mut b = WriteBatch::new();
    b.put(&s, "mine", "1").put(&foreign, "theirs", "2");
    assert!(
        matches!(db.write(b), Err(Error::InvalidOptions(_))),
        "a batch mixing databases"
    );
    assert_eq!(
        db.get(&s, "mine").expect("get"),
        None,
        "nothing of it applied"
    );
    let mut o = small(8 << 20);
    o.memtable_size = 100_000;
    assert!(matches!(Db::open(o), Err(Error::InvalidOptions(_))));
    // empty batches are a no-op
    db.write(WriteBatch::new()).expect("empty batch");
    assert_eq!(db.subtables(), vec!["default".to_string(), "s".to_string()]);
}

#[test]
fn a_file_that_is_not_a_pool_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().join("junk.pool");
    std::fs::write(&p, vec![0x5Au8; 2 << 20]).expect("write");
    let mut o = Options::new(&p).backend(Backend::Msync);
    o.pool_size = 8 << 20;
    let e = Db::open(o).expect_err("not a pool");
    assert!(
        matches!(e, Error::Pmem(nacre_pmem::PmemError::NotAPool { .. })),
        "{e}"
    );
    assert_eq!(std::fs::read(&p).expect("read"), vec![0x5Au8; 2 << 20]);
}
