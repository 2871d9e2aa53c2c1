//! The salvage open (`Options::salvage`): a pool with damage to what decides what is live
//! opens as far as it is intact. What it serves is exactly the intact subtables, checked
//! against a model; its report names the subtables it left out, and nothing is freed.

use std::collections::BTreeMap;
use std::path::Path;

use nacre::{Db, Error, IterOptions, Options};
use nacre_pmem::{Backend, Pool, PoolOptions};

const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

fn opts(path: &Path, salvage: bool) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = 16 << 20;
    o.zone_size = 128 << 10;
    o.memtable_size = 256 << 10;
    o.recovery_threads = 2;
    o.salvage = salvage;
    o
}

type Model = BTreeMap<&'static str, BTreeMap<Vec<u8>, Vec<u8>>>;

fn build(path: &Path) -> Model {
    let db = Db::open(opts(path, false)).unwrap();
    let mut model = Model::new();
    for (n, name) in NAMES.iter().enumerate() {
        let t = db.subtable(name).unwrap();
        let m = model.entry(*name).or_default();
        for i in 0..1500u32 {
            let k = format!("k{i:05}").into_bytes();
            let v = format!("<{name} {i}>")
                .repeat(1 + (i as usize + n) % 9)
                .into_bytes();
            db.put(&t, &k, &v).unwrap();
            m.insert(k, v);
        }
    }
    db.close().unwrap();
    model
}

/// Every subtable but `lost` reads exactly its model, by get and by scan; `lost` serves
/// none of its data (refused by name, or, where its object's name was unreadable, a new
/// empty subtable of that name).
fn assert_serves_exactly(db: &Db, model: &Model, lost: &str, name_known: bool) {
    for (name, m) in model {
        if *name == lost {
            if name_known {
                assert!(
                    matches!(db.subtable(name), Err(Error::Corrupt { .. })),
                    "{name}"
                );
            } else {
                let t = db.subtable(name).unwrap();
                assert_eq!(db.iter(&t, IterOptions::default()).unwrap().count(), 0);
            }
            continue;
        }
        let t = db.subtable(name).unwrap();
        for (k, v) in m {
            assert_eq!(db.get(&t, k).unwrap().as_ref(), Some(v), "{name}");
        }
        let rows: BTreeMap<Vec<u8>, Vec<u8>> = db
            .iter(&t, IterOptions::default())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            &rows == m,
            "{name}: {} rows served, {} in the model",
            rows.len(),
            m.len()
        );
    }
}

fn flip(path: &Path, at: usize, mask: u8) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= mask;
    std::fs::write(path, b).unwrap();
}

fn find(path: &Path, needle: &[u8], within: Option<(u64, u64)>) -> usize {
    let b = std::fs::read(path).unwrap();
    let (lo, hi) = within.map_or((0, b.len()), |(o, l)| (o as usize, (o + l) as usize));
    lo + b[lo..hi]
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle")
}

fn region(path: &Path, name: &str) -> (u64, u64) {
    let pool = Pool::open(path, &PoolOptions::with_backend(Backend::Emulated)).unwrap();
    let r = pool.region(name).expect("region");
    (r.offset.get(), r.len)
}

fn check_salvage(path: &Path, model: &Model, lost: &str, name_known: bool) {
    let mut model = model.clone();
    match Db::open(opts(path, false)) {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("a normal open of damaged metadata: {:?}", other.map(|_| ())),
    }
    for round in 0..2 {
        let db = Db::open(opts(path, true)).expect("salvage open");
        let rep = db.recovery_report();
        assert_eq!(rep.lost.len(), 1, "{:?}", rep.lost);
        assert_eq!(rep.lost[0].name.as_deref(), name_known.then_some(lost));
        assert!(!rep.lost[0].reason.is_empty());
        assert_eq!(rep.released_zones, 0, "salvage freed zones");
        assert_serves_exactly(&db, &model, lost, name_known);
        // Writes to intact subtables work and survive the next salvage open.
        let first = *NAMES.iter().find(|n| **n != lost).unwrap();
        let t = db.subtable(first).unwrap();
        db.put(&t, format!("new{round}"), "written after salvage")
            .unwrap();
        model.get_mut(first).unwrap().insert(
            format!("new{round}").into_bytes(),
            b"written after salvage".to_vec(),
        );
        db.close().unwrap();
    }
    let db = Db::open(opts(path, true)).unwrap();
    let t = db
        .subtable(NAMES.iter().find(|n| **n != lost).unwrap())
        .unwrap();
    assert!(db.get(&t, "new0").unwrap().is_some() && db.get(&t, "new1").unwrap().is_some());
}

#[test]
fn a_damaged_record_identity_loses_its_subtable_alone() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("db.pool");
    let model = build(&path);
    // A key byte of one of beta's records: its identity check fails, the item cannot be
    // walked past it.
    let at = find(&path, b"<beta 700>", None);
    flip(&path, at - 2, 0x01);
    check_salvage(&path, &model, "beta", true);
}

#[test]
fn a_damaged_subtable_object_loses_that_subtable_alone() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("db.pool");
    let model = build(&path);
    let subs = region(&path, "hp.subtables");
    let at = find(&path, b"gamma", Some(subs));
    flip(&path, at + 1, 0x04);
    check_salvage(&path, &model, "gamma", false);
}

#[test]
fn damage_to_the_engine_root_fails_even_a_salvage_open() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("db.pool");
    build(&path);
    let root = region(&path, "nacre.engine");
    flip(&path, root.0 as usize + 17, 0x01);
    match Db::open(opts(&path, true)) {
        Err(Error::Corrupt { what, at: Some(_) }) => assert!(what.contains("commit_id"), "{what}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_subtable_object_that_lost_its_committed_bit_is_never_freed() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("db.pool");
    let model = build(&path);
    // The subtable objects' pool: header (64 B), free-list head, then one entry word per
    // object (bit 63: committed) from +128, objects from +128 + 8 x count rounded up to 64.
    let (base, _) = region(&path, "hp.subtables");
    let count = 256u64;
    let array = (128 + 8 * count).next_multiple_of(64);
    let name_at = find(&path, b"beta", Some((base + array, 64 * count))) as u64;
    let index = (name_at - 16 - base - array) / 64;
    flip(&path, (base + 128 + 8 * index + 7) as usize, 0x80);
    match Db::open(opts(&path, false)) {
        Err(Error::Corrupt { what, .. }) => assert!(what.contains("no subtable"), "{what}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let db = Db::open(opts(&path, true)).unwrap();
    let rep = db.recovery_report();
    assert_eq!(rep.released_zones + rep.released_memtables, 0, "{rep:?}");
    assert_eq!(rep.lost.len(), 1, "{:?}", rep.lost);
    assert!(rep.lost[0].id.is_some() && rep.lost[0].name.is_none());
    assert!(rep.quarantined_memtables > 0);
    assert_serves_exactly(&db, &model, "beta", false);
}
