//! Scans cost what they return, not the versions they pass: a key overwritten tens of thousands
//! of times under an old snapshot is stepped over at once, forward and reverse, whether its
//! versions sit in a memtable or in the Global Index.

use std::time::{Duration, Instant};

use nacre::{Db, IterOptions, Options, Snapshot, Subtable};
use nacre_pmem::Backend;

const VERSIONS: u64 = 32_000;

fn scan(
    db: &Db,
    sub: &Subtable,
    snap: Option<&Snapshot>,
    reverse: bool,
) -> (Vec<Vec<u8>>, Duration) {
    let t = Instant::now();
    let rows: Vec<Vec<u8>> = db
        .iter(
            sub,
            IterOptions {
                snapshot: snap,
                reverse,
                ..Default::default()
            },
        )
        .expect("iter")
        .map(|r| r.expect("row").1)
        .collect();
    (rows, t.elapsed())
}

fn hot_key_under_snapshots(memtable: u64, snapshots_every: u64) {
    let dir = tempfile::tempdir().expect("dir");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 256 << 20;
    o.memtable_size = memtable;
    o.zone_size = 1 << 20;
    let db = Db::open(o).expect("open");
    let sub = db.subtable("s").expect("subtable");
    db.put(&sub, "a", "first a").expect("put");
    db.put(&sub, "hot", "v0").expect("put");
    db.put(&sub, "z", "first z").expect("put");
    let old = db.snapshot();
    // Snapshots along the way keep versions in the Global Index as well.
    let mut held = Vec::new();
    for i in 1..=VERSIONS {
        db.put(&sub, "hot", format!("v{i}")).expect("put");
        if snapshots_every > 0 && i % snapshots_every == 0 {
            held.push(db.snapshot());
        }
    }
    db.put(&sub, "a", "second a").expect("put");
    let want_old: Vec<Vec<u8>> = ["first a", "v0", "first z"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let want_new: Vec<Vec<u8>> = ["second a", &format!("v{VERSIONS}"), "first z"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    for reverse in [false, true] {
        let (mut rows, took) = scan(&db, &sub, Some(&old), reverse);
        eprintln!("old snapshot, reverse {reverse}, {VERSIONS} versions: {took:?}");
        if reverse {
            rows.reverse();
        }
        assert_eq!(rows, want_old, "at the old snapshot, reverse {reverse}");
        assert!(
            took < Duration::from_millis(250),
            "scan at the old snapshot past {VERSIONS} versions, reverse {reverse}: {took:?}"
        );
        let (mut rows, took) = scan(&db, &sub, None, reverse);
        if reverse {
            rows.reverse();
        }
        assert_eq!(rows, want_new, "latest, reverse {reverse}");
        assert!(took < Duration::from_millis(250), "latest scan: {took:?}");
    }
    if let Some(s) = held.get(3) {
        let (rows, _) = scan(&db, &sub, Some(s), true);
        assert_eq!(rows[1], format!("v{}", 4 * snapshots_every).into_bytes());
    }
    db.check().expect("check");
}

#[test]
fn a_hot_key_in_one_memtable_is_stepped_over() {
    hot_key_under_snapshots(64 << 20, 0);
}

#[test]
fn a_hot_key_in_the_global_index_is_stepped_over() {
    // Small memtables: the versions are merged, and the snapshots keep many of them.
    hot_key_under_snapshots(1 << 20, 8);
}
