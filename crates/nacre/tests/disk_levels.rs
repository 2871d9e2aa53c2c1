//! The disk levels: a Global Index limit of a few zones, so that freezes, spills and
//! compactions happen constantly, checked against a BTreeMap per subtable with snapshots and
//! iterators held across spills, reopens after clean closes and after power failures (the
//! `sim` backend's crash image with the disk directory as the failure left it); and data many
//! times larger than PM.

use std::collections::BTreeMap;

use nacre::{Db, IterOptions, Options, Snapshot, WriteBatch};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

type Model = BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>>;

fn sim_opts(disk: &std::path::Path) -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = 6 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o.gi_size_limit = 256 << 10;
    o.recovery_threads = 2;
    o.disk_dir = Some(disk.to_path_buf());
    o
}

fn key(rng: &mut SplitMix64) -> Vec<u8> {
    format!("k{:04}", rng.next_u64() % 2000).into_bytes()
}

fn value(rng: &mut SplitMix64) -> Vec<u8> {
    let n = (rng.next_u64() % 400) as usize;
    (0..n)
        .map(|i| (i as u8).wrapping_add(rng.next_u64() as u8))
        .collect()
}

fn scan(db: &Db, sub: &nacre::Subtable, o: IterOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter(sub, o)
        .expect("iter")
        .map(|r| r.expect("record"))
        .collect()
}

/// Full scans both ways and one bounded scan, against `m`.
fn check_scans(
    db: &Db,
    sub: &nacre::Subtable,
    m: &BTreeMap<Vec<u8>, Vec<u8>>,
    snap: Option<&Snapshot>,
    rng: &mut SplitMix64,
    at: &str,
) {
    let all: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let fwd = scan(
        db,
        sub,
        IterOptions {
            snapshot: snap,
            ..Default::default()
        },
    );
    assert_eq!(fwd.len(), all.len(), "forward scan length, {at}");
    assert!(fwd == all, "forward scan, {at}");
    let mut rev = all.clone();
    rev.reverse();
    let got = scan(
        db,
        sub,
        IterOptions {
            snapshot: snap,
            reverse: true,
            ..Default::default()
        },
    );
    assert!(got == rev, "reverse scan, {at}");
    let (a, b) = (key(rng), key(rng));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let want: Vec<_> = m
        .range(lo.clone()..hi.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let reverse = rng.next_u64() % 2 == 0;
    let mut got = scan(
        db,
        sub,
        IterOptions {
            snapshot: snap,
            lower: Some(lo),
            upper: Some(hi),
            reverse,
            ..Default::default()
        },
    );
    if reverse {
        got.reverse();
    }
    assert!(got == want, "bounded scan, {at}");
}

fn write_random_batch(db: &Db, subs: &[nacre::Subtable], model: &mut Model, rng: &mut SplitMix64) {
    let mut b = WriteBatch::new();
    for _ in 0..1 + rng.next_u64() % 6 {
        let t = &subs[(rng.next_u64() % 2) as usize];
        let k = key(rng);
        if rng.next_u64() % 4 == 0 {
            b.delete(t, &k);
            model.entry(t.id()).or_default().remove(&k);
        } else {
            let v = value(rng);
            b.put(t, &k, &v);
            model.entry(t.id()).or_default().insert(k, v);
        }
    }
    db.write(b).expect("batch");
}

fn reopen(image: Option<Vec<u8>>, o: Options) -> Db {
    match image {
        None => Db::open(o).expect("open"),
        Some(img) => Db::open_pool(
            Pool::open_sim(img, &PoolOptions::with_backend(Backend::Sim)).expect("image"),
            o,
        )
        .expect("reopen"),
    }
}

#[test]
fn random_operations_match_a_btreemap_across_spills_reopens_and_power_failures() {
    let dir = tempfile::tempdir().expect("dir");
    let disk = dir.path().join("disk");
    let mut model: Model = BTreeMap::new();
    let mut rng = SplitMix64::new(7);
    let mut image: Option<Vec<u8>> = None;
    let mut spills = 0;
    let mut compactions = 0;
    for round in 0..6 {
        let db = reopen(image.take(), sim_opts(&disk));
        let subs = [db.subtable("a").expect("a"), db.subtable("b").expect("b")];
        for s in &subs {
            let m = model.entry(s.id()).or_default();
            check_scans(&db, s, m, None, &mut rng, &format!("round {round} open"));
            for (k, v) in m.iter() {
                assert_eq!(db.get(s, k).expect("get").as_deref(), Some(&v[..]));
            }
        }
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        let held_sub = subs[0].clone();
        let held_model: Vec<_> = model
            .get(&held_sub.id())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut held = db.iter(&held_sub, IterOptions::default()).expect("iter");
        let mut held_seen = Vec::new();
        for step in 0..2500 {
            let s = &subs[(rng.next_u64() % 2) as usize];
            let at = format!("round {round} step {step}");
            match rng.next_u64() % 14 {
                0..=6 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    if let Err(e) = db.put(s, &k, &v) {
                        panic!("put: {e}: {:#?}", db.stats());
                    }
                    model.entry(s.id()).or_default().insert(k, v);
                }
                7 | 8 => {
                    let k = key(&mut rng);
                    db.delete(s, &k).expect("delete");
                    model.entry(s.id()).or_default().remove(&k);
                }
                9 => write_random_batch(&db, &subs, &mut model, &mut rng),
                10 => {
                    if let Some(r) = held.next() {
                        held_seen.push(r.expect("held iterator"));
                    }
                }
                _ if snaps.len() < 3 => snaps.push((db.snapshot(), model.clone())),
                _ => {
                    let (snap, old) = snaps.remove((rng.next_u64() % 3) as usize);
                    for s in &subs {
                        let m = old.get(&s.id()).cloned().unwrap_or_default();
                        let k = key(&mut rng);
                        assert_eq!(
                            db.get_at(s, &k, &snap).expect("get"),
                            m.get(&k).cloned(),
                            "snapshot get, {at}"
                        );
                        check_scans(&db, s, &m, Some(&snap), &mut rng, &at);
                    }
                }
            }
            let k = key(&mut rng);
            assert_eq!(
                db.get(s, &k).expect("get"),
                model.get(&s.id()).and_then(|m| m.get(&k)).cloned(),
                "{at}"
            );
        }
        held_seen.extend(held.map(|r| r.expect("held iterator")));
        assert!(
            held_seen == held_model,
            "an iterator held across spills, round {round}"
        );
        for (snap, old) in &snaps {
            for s in &subs {
                let m = old.get(&s.id()).cloned().unwrap_or_default();
                check_scans(&db, s, &m, Some(snap), &mut rng, "snapshots at the end");
            }
        }
        drop(snaps);
        let st = db.stats();
        let d = st.disk.clone().expect("disk stats");
        spills += d.spills;
        compactions += d.compactions;
        db.check().expect("check");
        let sim = db.sim().expect("sim");
        if round % 2 == 0 {
            sim.stop_now();
            image = Some(sim.crash(CrashPolicy::KeepNone));
            drop(db);
        } else {
            db.close().expect("close");
            image = Some(sim.crash(CrashPolicy::KeepNone));
        }
    }
    assert!(spills >= 6, "spills happened: {spills}");
    eprintln!("spills {spills}, compactions {compactions}");
}

#[test]
fn data_many_times_larger_than_pm_reads_back_after_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let disk = dir.path().join("disk");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 8 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 256 << 10;
    o.disk_dir = Some(disk.clone());
    let n = 32_000u64;
    // Incompressible values, so the tables' size shows the data's.
    let val = |i: u64| {
        let mut r = SplitMix64::new(i);
        (0..125)
            .flat_map(|_| r.next_u64().to_le_bytes())
            .collect::<Vec<u8>>()
    };
    let k = |i: u64| format!("user{:08}", i.wrapping_mul(0x9E37_79B9) % 100_000_000).into_bytes();
    {
        let db = Db::open(o.clone()).expect("open");
        let t = db.subtable("t").expect("t");
        for i in 0..n {
            db.put(&t, k(i), val(i)).expect("put");
        }
        for i in (0..n).step_by(7) {
            assert_eq!(db.get(&t, k(i)).expect("get"), Some(val(i)), "key {i}");
        }
        let t0 = std::time::Instant::now();
        while db.stats().disk.expect("disk").spills < 2 {
            assert!(t0.elapsed().as_secs() < 60, "{:?}", db.stats().disk);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let d = db.stats().disk.expect("disk");
        assert!(
            d.disk_bytes > 2 * o.pool_size,
            "data outgrew PM: {d:?}, pool {}",
            o.pool_size
        );
        db.close().expect("close");
    }
    let db = Db::open(o.clone()).expect("reopen");
    let t = db.subtable("t").expect("t");
    for i in (0..n).step_by(3) {
        assert_eq!(db.get(&t, k(i)).expect("get"), Some(val(i)), "key {i}");
    }
    let rows = db.iter(&t, IterOptions::default()).expect("iter").count();
    assert_eq!(rows as u64, n);
    drop(db);
    // Without its disk levels the database does not open.
    let mut bare = o.clone();
    bare.disk_dir = None;
    let e = Db::open(bare).expect_err("needs its disk levels");
    assert!(e.to_string().contains("disk_dir"), "{e}");
    // Nor on another directory.
    let mut other = o;
    other.disk_dir = Some(dir.path().join("elsewhere"));
    let e = Db::open(other).expect_err("another directory");
    assert!(e.to_string().contains("identity"), "{e}");
}

/// Flips one byte at a time in the disk levels' table files: every read returns the right
/// value or an error, never wrong data, and a table failing its checks is named by its file.
#[test]
fn a_flipped_byte_in_a_table_is_reported_with_its_file_never_returned() {
    let dir = tempfile::tempdir().expect("dir");
    let disk = dir.path().join("disk");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 8 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 256 << 10;
    o.gi_size_limit = 512 << 10;
    o.disk_dir = Some(disk.clone());
    let n = 6_000u64;
    let k = |i: u64| format!("key{i:06}").into_bytes();
    let val = |i: u64| {
        let mut r = SplitMix64::new(i ^ 0xABCD);
        (0..40)
            .flat_map(|_| r.next_u64().to_le_bytes())
            .collect::<Vec<u8>>()
    };
    {
        let db = Db::open(o.clone()).expect("open");
        let t = db.subtable("t").expect("t");
        for i in 0..n {
            db.put(&t, k(i), val(i)).expect("put");
        }
        // A spill counts once the background worker has finished it.
        let t0 = std::time::Instant::now();
        while db.stats().disk.expect("disk").spills == 0 {
            assert!(t0.elapsed().as_secs() < 60, "{:?}", db.stats().disk);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        db.close().expect("close");
    }
    let tables: Vec<std::path::PathBuf> = std::fs::read_dir(disk.join("subtable-1").join("tables"))
        .expect("tables")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(!tables.is_empty());
    let mut rng = SplitMix64::new(99);
    let (mut named, mut clean) = (0, 0);
    for trial in 0..12 {
        let file = &tables[(rng.next_u64() % tables.len() as u64) as usize];
        let mut bytes = std::fs::read(file).expect("read");
        let at = (rng.next_u64() % bytes.len() as u64) as usize;
        bytes[at] ^= 1 << (rng.next_u64() % 8);
        let original = std::fs::read(file).expect("read");
        std::fs::write(file, &bytes).expect("write");
        match Db::open(o.clone()) {
            Err(e) => {
                // Damage to what the tree needs to open: a clear error, no data at all.
                let s = e.to_string();
                assert!(s.contains("disk"), "trial {trial}: {s}");
            }
            Ok(db) => {
                let t = db.subtable("t").expect("t");
                let v = db.verify();
                assert!(v.disk_tables > 0, "{v:?}");
                let named_by_verify = v
                    .problems
                    .iter()
                    .any(|p| p.what.contains(&file.display().to_string()));
                let mut errors = 0;
                for i in 0..n {
                    match db.get(&t, k(i)) {
                        Ok(v) => assert_eq!(v, Some(val(i)), "trial {trial}: key {i} wrong"),
                        Err(e) => {
                            errors += 1;
                            let s = e.to_string();
                            if s.contains("tables/") {
                                assert!(
                                    s.contains(&file.display().to_string()),
                                    "trial {trial}: names another file: {s}"
                                );
                                named += 1;
                            }
                        }
                    }
                }
                let mut rows = 0u64;
                for r in db.iter(&t, IterOptions::default()).expect("iter") {
                    match r {
                        Ok((key, v)) => {
                            let i: u64 = String::from_utf8_lossy(&key[3..]).parse().expect("key");
                            assert_eq!(v, val(i), "trial {trial}: scan returned a wrong value");
                            rows += 1;
                        }
                        Err(e) => {
                            let s = e.to_string();
                            assert!(s.contains("disk"), "trial {trial}: {s}");
                            break;
                        }
                    }
                }
                if errors == 0 {
                    clean += 1;
                    assert!(rows <= n);
                } else {
                    assert!(
                        named_by_verify,
                        "trial {trial}: verify names the damaged table"
                    );
                }
                drop(db);
            }
        }
        std::fs::write(file, &original).expect("restore");
    }
    eprintln!("tables named in errors: {named} reads; trials without read errors: {clean}");
    assert!(named > 0, "some flip hit a data block and was named");
}

/// A spill that cannot write its tables (a directory squats on the names of the next tables:
/// no table file can be created, even by root; a real I/O error, no injected fault) refuses
/// the writes that need space with `SpillFailed` naming the cause; every acknowledged write
/// still reads back; once the names are free the retried spill succeeds and writes resume
/// without a reopen, and a reopen recovers everything.
#[test]
fn a_spill_that_cannot_create_its_tables_refuses_writes_until_it_can_then_they_resume() {
    let dir = tempfile::tempdir().expect("dir");
    let disk = dir.path().join("disk");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 8 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 256 << 10;
    o.gi_size_limit = 512 << 10;
    o.disk_dir = Some(disk.clone());
    let k = |i: u64| format!("key{i:06}").into_bytes();
    let val = |i: u64| vec![(i % 251) as u8; 300];
    let db = Db::open(o.clone()).expect("open");
    let t = db.subtable("t").expect("t");
    let mut i = 0u64;
    while db.stats().disk.expect("disk").spills == 0 {
        db.put(&t, k(i), val(i)).expect("put");
        i += 1;
        assert!(i < 200_000, "no spill");
    }
    let tables = disk.join(format!("subtable-{}", t.id())).join("tables");
    let next = std::fs::read_dir(&tables)
        .expect("tables")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .map_or(0, |m| m + 1);
    // A table the background work writes meanwhile may take a name first: that name is
    // skipped (the ones after it are still squatted).
    let mut squat = Vec::new();
    for id in next..next + 64 {
        let d = tables.join(id.to_string());
        match std::fs::create_dir(&d) {
            Ok(()) => squat.push(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("squat: {e}"),
        }
    }
    let acked = loop {
        match db.put(&t, k(i), val(i)) {
            Ok(()) => i += 1,
            Err(e) => {
                assert!(matches!(e, nacre::Error::SpillFailed { .. }), "{e}");
                let s = e.to_string();
                assert!(
                    s.contains("writing spilled tables"),
                    "the cause is named: {s}"
                );
                break i;
            }
        }
        assert!(i < 400_000, "the failed spill never refused a write");
    };
    for j in (0..acked).step_by(13) {
        assert_eq!(db.get(&t, k(j)).expect("get"), Some(val(j)), "key {j}");
    }
    assert!(db.put(&t, k(acked), val(acked)).is_err(), "still refused");
    for d in &squat {
        std::fs::remove_dir(d).expect("unsquat");
    }
    let t0 = std::time::Instant::now();
    while let Err(e) = db.put(&t, k(i), val(i)) {
        assert!(matches!(e, nacre::Error::SpillFailed { .. }), "{e}");
        assert!(t0.elapsed().as_secs() < 20, "writes never resumed: {e}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    i += 1;
    for j in 0..i {
        assert_eq!(db.get(&t, k(j)).expect("get"), Some(val(j)), "key {j}");
    }
    drop(t);
    db.close().expect("close");
    let db = Db::open(o).expect("reopen");
    let t = db.subtable("t").expect("t");
    for j in 0..i {
        assert_eq!(
            db.get(&t, k(j)).expect("get"),
            Some(val(j)),
            "key {j} after reopen"
        );
    }
    db.put(&t, b"more", b"x").expect("writable");
}
