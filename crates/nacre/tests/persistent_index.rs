//! `Options::persistent_index`: the Global Index's copy in PM follows every merge, the
//! horizon's drops, the cleaner's relocations and the spills, and after every open it equals
//! the volatile index rebuilt from the records (`Db::check` compares them, M1 in
//! gi/mirror.rs). Keys it cannot hold (too long) are left out and counted; a node pool that
//! fills leaves it stale, never the data wrong.

use std::collections::BTreeMap;
use std::path::Path;

use nacre::{Db, Error, Options, RecoveryMutation};
use nacre_pmem::{Backend, SplitMix64};

fn opts(dir: &Path) -> Options {
    let mut o = Options::new(dir.join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 24 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o.recovery_threads = 2;
    o.persistent_index = true;
    // Every open checks the trees as the last run left them (a drop without close is a
    // crash as far as the index knows).
    o.audit_persistent_index = true;
    o
}

/// Keys with zero bytes, keys that prefix others, and a few too long for the tree.
fn key(rng: &mut SplitMix64) -> Vec<u8> {
    let n = rng.next_u64() % 600;
    match n % 50 {
        0 => vec![b'L'; 300 + (n as usize % 7)],
        1 => vec![0, (n % 5) as u8, 0],
        2 => format!("k{}", n % 20).into_bytes(),
        _ => format!("k{n:04}").into_bytes(),
    }
}

type Model = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

/// The workload's three subtables, in the model's order.
fn subtables(db: &Db) -> Vec<nacre::Subtable> {
    ["a", "b", "c"]
        .iter()
        .map(|n| db.subtable(n).expect("subtable"))
        .collect()
}

/// Writes, overwrites and deletes across three subtables, with a snapshot held now and then
/// (older versions stay indexed), merges and compactions on request; checks as it goes.
fn workload(db: &Db, model: &mut Model, rng: &mut SplitMix64, rounds: u64) {
    let subs = subtables(db);
    let mut held = None;
    for r in 0..rounds {
        for _ in 0..400 {
            let s = (rng.next_u64() % 3) as usize;
            let k = key(rng);
            if rng.next_u64() % 5 == 0 {
                db.delete(&subs[s], &k).expect("delete");
                model.remove(&(s, k));
            } else {
                let v = vec![(rng.next_u64() % 251) as u8; 20 + (rng.next_u64() % 300) as usize];
                db.put(&subs[s], &k, &v).expect("put");
                model.insert((s, k), v);
            }
        }
        match r % 4 {
            0 => held = Some(db.snapshot()),
            2 => held = None,
            _ => {}
        }
        db.merge_memtables().expect("merge");
        if r % 3 == 2 {
            db.compact_pm().expect("compact");
        }
        db.check().unwrap_or_else(|e| panic!("round {r}: {e}"));
    }
    drop(held);
}

fn verify(db: &Db, model: &Model) {
    let subs = subtables(db);
    for ((s, k), v) in model {
        assert_eq!(
            db.get(&subs[*s], k).expect("get").as_ref(),
            Some(v),
            "{k:?}"
        );
    }
    db.check().unwrap_or_else(|e| panic!("{e}"));
    let pi = db.stats().persistent_index.expect("on");
    assert!(!pi.stale, "{pi:?}");
}

#[test]
fn the_index_follows_merges_drops_and_relocations_and_survives_reopens() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let mut model = Model::new();
    let mut rng = SplitMix64::new(3);
    let db = Db::open(opts(dir.path())).expect("open");
    workload(&db, &mut model, &mut rng, 12);
    let st = db.stats();
    assert!(st.cleaner_moved_bytes > 0, "the cleaner relocated records");
    let pi = st.persistent_index.expect("on");
    assert!(!pi.stale && pi.long_versions > 0, "{pi:?}");
    verify(&db, &model);
    db.close().expect("close");
    // A clean reopen, more work, then a reopen after a drop without close.
    let db = Db::open(opts(dir.path())).expect("reopen");
    verify(&db, &model);
    workload(&db, &mut model, &mut rng, 6);
    drop(db);
    let db = Db::open(opts(dir.path())).expect("reopen after drop");
    verify(&db, &model);
}

/// A database written with the index, then by a run without it; its directory, model and
/// random stream.
fn after_a_run_without_the_index() -> (tempfile::TempDir, Model, SplitMix64) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let mut model = Model::new();
    let mut rng = SplitMix64::new(5);
    let db = Db::open(opts(dir.path())).expect("open");
    workload(&db, &mut model, &mut rng, 4);
    db.close().expect("close");
    let mut off = opts(dir.path());
    off.persistent_index = false;
    let db = Db::open(off).expect("open without the index");
    assert!(db.stats().persistent_index.is_none());
    workload(&db, &mut model, &mut rng, 4);
    db.close().expect("close");
    (dir, model, rng)
}

#[test]
fn a_run_without_the_index_is_caught_up_by_the_next_open_with_it() {
    let (dir, mut model, mut rng) = after_a_run_without_the_index();
    // The run without it freed zones its entries point into, and marked the trees
    // untrusted: the next open starts them over instead of trusting them, so the audit
    // never sees them.
    let db = Db::open(opts(dir.path())).expect("open with it again");
    verify(&db, &model);
    drop(db);
    // Reconciled and trusted again: the trees pass the audit.
    let db = Db::open(opts(dir.path())).expect("audited open");
    verify(&db, &model);
    workload(&db, &mut model, &mut rng, 2);
    drop(db);
    let db = Db::open(opts(dir.path())).expect("audited open");
    verify(&db, &model);
}

#[test]
fn trusting_the_trees_after_a_run_without_the_index_is_caught() {
    let (dir, _, _) = after_a_run_without_the_index();
    let mut mutated = opts(dir.path());
    mutated.recovery_mutation = Some(RecoveryMutation::TrustIndexAlways);
    match Db::open(mutated) {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the audit passed entries the run without the index left behind"),
    }
}

#[test]
fn a_database_created_without_the_index_cannot_turn_it_on() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let mut off = opts(dir.path());
    off.persistent_index = false;
    Db::open(off).expect("create").close().expect("close");
    match Db::open(opts(dir.path())) {
        Err(Error::InvalidOptions(why)) => assert!(why.contains("persistent_index"), "{why}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened with an index it has no room for"),
    }
}

#[test]
fn a_full_node_pool_leaves_the_index_stale_and_the_data_right() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let mut o = opts(dir.path());
    o.persistent_index_share = 1;
    let db = Db::open(o.clone()).expect("open");
    let t = db.subtable("t").expect("subtable");
    for i in 0..6000u32 {
        db.put(&t, format!("key-{i:06}"), i.to_le_bytes())
            .expect("put");
    }
    db.merge_memtables().expect("merge");
    let pi = db.stats().persistent_index.expect("on");
    assert!(pi.stale, "6000 keys in 122 nodes: {pi:?}");
    db.check().unwrap_or_else(|e| panic!("{e}"));
    drop(t);
    db.close().expect("close");
    // The failure reached the engine root: an audited open says so, a plain one starts the
    // trees over.
    match Db::open(o.clone()) {
        Err(Error::Corrupt { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an audited open trusted a tree that failed"),
    }
    o.audit_persistent_index = false;
    let db = Db::open(o).expect("reopen");
    let t = db.subtable("t").expect("subtable");
    for i in (0..6000u32).step_by(97) {
        assert_eq!(
            db.get(&t, format!("key-{i:06}")).expect("get"),
            Some(i.to_le_bytes().to_vec())
        );
    }
    db.check().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn point_reads_from_the_tree_agree_with_the_model_through_spills_and_reopens() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let disk = tempfile::tempdir().expect("disk dir");
    let mut o = opts(dir.path());
    o.persistent_index_reads = true;
    o.gi_size_limit = 256 << 10;
    o.disk_dir = Some(disk.path().to_path_buf());
    let mut model = Model::new();
    let mut rng = SplitMix64::new(21);
    let db = Db::open(o.clone()).expect("open");
    // A snapshot read through the tree sees what it saw when taken.
    let t = db.subtable("a").expect("subtable");
    db.put(&t, "pinned", "old").expect("put");
    let snap = db.snapshot();
    db.put(&t, "pinned", "new").expect("put");
    workload(&db, &mut model, &mut rng, 6);
    assert_eq!(
        db.get_at(&t, "pinned", &snap).expect("get").as_deref(),
        Some(&b"old"[..])
    );
    drop(snap);
    model.insert((0, b"pinned".to_vec()), b"new".to_vec());
    db.flush().expect("flush");
    verify(&db, &model);
    workload(&db, &mut model, &mut rng, 4);
    verify(&db, &model);
    drop(t);
    drop(db);
    let db = Db::open(o).expect("reopen after drop");
    verify(&db, &model);
}

#[test]
fn spills_to_the_disk_levels_drop_each_frozen_generation() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let disk = tempfile::tempdir().expect("disk dir");
    let mut o = opts(dir.path());
    o.gi_size_limit = 256 << 10;
    o.disk_dir = Some(disk.path().to_path_buf());
    let mut model = Model::new();
    let mut rng = SplitMix64::new(9);
    let db = Db::open(o.clone()).expect("open");
    workload(&db, &mut model, &mut rng, 6);
    db.flush().expect("flush");
    let spills = db.stats().disk.expect("disk").spills;
    assert!(spills > 0, "spilled");
    verify(&db, &model);
    workload(&db, &mut model, &mut rng, 4);
    db.flush().expect("flush");
    db.close().expect("close");
    let db = Db::open(o).expect("reopen");
    verify(&db, &model);
}

/// While the volatile index is rebuilt in the background (held back here), reads answer
/// from the trees and the memtables not merged into them; writes, snapshots and
/// transactions work; what needs the rebuilt index (long keys, iterators, checks) waits
/// for it; and a database closed before the rebuild ran opens again whole.
#[test]
fn reads_writes_and_waits_while_the_index_is_rebuilt() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("dir");
    let mut model = Model::new();
    let mut rng = SplitMix64::new(11);
    let db = Db::open(opts(dir.path())).expect("open");
    workload(&db, &mut model, &mut rng, 8);
    // Unmerged writes on top, so reads need the trees and the memtables both.
    let a = db.subtable("a").expect("a");
    for i in 0..300u32 {
        let k = format!("k{:04}", i * 2).into_bytes();
        let v = format!("late-{i}").into_bytes();
        db.put(&a, &k, &v).expect("put");
        model.insert((0, k), v);
    }
    drop(a);
    drop(db);
    let mut held = opts(dir.path());
    held.hold_rebuild = true;
    // Closed before the rebuild ran: nothing of it was needed.
    let db = Db::open(held.clone()).expect("open held");
    assert!(db.recovery_report().background_rebuild);
    assert!(db.rebuilding());
    db.close().expect("close while rebuilding");
    let db = Db::open(held).expect("open held again");
    assert!(db.rebuilding(), "the rebuild is held back");
    let rep = db.recovery_report();
    assert!(rep.deferred_memtables > 0, "{rep:?}");
    // Statistics do not wait: they say the index is not rebuilt yet.
    assert!(db.stats().rebuilding);
    assert!(db.rebuilding());
    let subs = subtables(&db);
    let fits = |k: &[u8]| k.len() <= nacre::limits::PERSISTENT_INDEX_KEY_MAX;
    for ((s, k), v) in model.iter().filter(|((_, k), _)| fits(k)) {
        assert_eq!(
            db.get(&subs[*s], k).expect("get").as_ref(),
            Some(v),
            "{k:?}"
        );
    }
    assert_eq!(db.get(&subs[1], b"never written").expect("get"), None);
    assert!(db.rebuilding(), "short keys are served without the rebuild");
    // Writes, a snapshot, and a transaction that reads and writes.
    let snap = db.snapshot();
    db.put(&subs[2], b"k0002", b"new").expect("put");
    assert_eq!(
        db.get(&subs[2], b"k0002").expect("get").as_deref(),
        Some(&b"new"[..])
    );
    let old = model.get(&(2, b"k0002".to_vec()));
    assert_eq!(
        db.get_at(&subs[2], b"k0002", &snap)
            .expect("get at")
            .as_ref(),
        old
    );
    let mut t = db.begin_optimistic();
    let before = t.get(&subs[0], b"k0000").expect("txn get");
    assert_eq!(before.as_ref(), model.get(&(0, b"k0000".to_vec())));
    t.put(&subs[0], b"k0000", b"txn").expect("txn put");
    t.commit().expect("commit");
    model.insert((2, b"k0002".to_vec()), b"new".to_vec());
    model.insert((0, b"k0000".to_vec()), b"txn".to_vec());
    drop(snap);
    assert!(db.rebuilding(), "none of that waited for the rebuild");
    // A long key waits for the rebuild (and lets it go).
    let ((s, k), v) = model
        .iter()
        .find(|((_, k), _)| !fits(k))
        .expect("the workload wrote long keys");
    assert_eq!(db.get(&subs[*s], k).expect("get").as_ref(), Some(v));
    assert!(!db.rebuilding(), "a long key's read waited for the rebuild");
    // Iterators see the rebuilt index.
    for (i, sub) in subs.iter().enumerate() {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter(sub, Default::default())
            .expect("iter")
            .collect::<Result<_, _>>()
            .expect("scan");
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|((s, _), _)| *s == i)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(rows, want, "subtable {i}");
    }
    assert!(!db.rebuilding());
    assert!(!db.stats().rebuilding);
    verify(&db, &model);
}

#[test]
fn the_index_is_off_on_msync_where_each_persist_is_a_system_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::new();
    let mut rng = SplitMix64::new(11);
    // Created with the index (emulated), then two runs on msync without it.
    let db = Db::open(opts(dir.path())).expect("create");
    workload(&db, &mut model, &mut rng, 2);
    verify(&db, &model);
    db.close().expect("close");
    for round in 0..2 {
        let mut o = opts(dir.path()).backend(Backend::Msync);
        o.audit_persistent_index = false;
        let db = Db::open(o).expect("open");
        assert!(
            db.stats().persistent_index.is_none(),
            "round {round}: the index is on over msync"
        );
        assert!(!db.recovery_report().background_rebuild);
        workload(&db, &mut model, &mut rng, 2);
        let subs = subtables(&db);
        for ((s, k), v) in &model {
            assert_eq!(db.get(&subs[*s], k).expect("get").as_ref(), Some(v));
        }
        db.close().expect("close");
    }
    // Back on emulated with the index: caught up as after any run without it.
    let db = Db::open(opts(dir.path())).expect("open");
    verify(&db, &model);
}
