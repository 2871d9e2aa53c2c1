//! Model test: random puts, deletes, batches across subtables, snapshots, iterators and
//! reopens, checked against a BTreeMap per subtable. Small zones and memtables make zone
//! jumps and memtable switches frequent.

use std::collections::BTreeMap;

use nacre::{Db, IterOptions, Options, Snapshot, WriteBatch};
use nacre_pmem::{Backend, SplitMix64};

type Model = BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>>;

fn opts(path: &std::path::Path) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = 48 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 256 << 10;
    o.recovery_threads = 2;
    o
}

fn key(rng: &mut SplitMix64) -> Vec<u8> {
    format!("k{:03}", rng.next_u64() % 300).into_bytes()
}

fn value(rng: &mut SplitMix64) -> Vec<u8> {
    let n = (rng.next_u64() % 700) as usize;
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

fn check_iterators(
    db: &Db,
    sub: &nacre::Subtable,
    m: &BTreeMap<Vec<u8>, Vec<u8>>,
    snap: Option<&Snapshot>,
    rng: &mut SplitMix64,
) {
    let all: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        scan(
            db,
            sub,
            IterOptions {
                snapshot: snap,
                ..Default::default()
            }
        ),
        all
    );
    let mut rev = all.clone();
    rev.reverse();
    assert_eq!(
        scan(
            db,
            sub,
            IterOptions {
                snapshot: snap,
                reverse: true,
                ..Default::default()
            }
        ),
        rev
    );
    let (a, b) = (key(rng), key(rng));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let want: Vec<_> = m
        .range(lo.clone()..hi.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for reverse in [false, true] {
        let mut w = want.clone();
        if reverse {
            w.reverse();
        }
        let got = scan(
            db,
            sub,
            IterOptions {
                snapshot: snap,
                lower: Some(lo.clone()),
                upper: Some(hi.clone()),
                reverse,
                ..Default::default()
            },
        );
        assert_eq!(got, w, "range {lo:?}..{hi:?} reverse {reverse}");
    }
    let prefix = format!("k{}", rng.next_u64() % 3).into_bytes();
    let want: Vec<_> = m
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        scan(
            db,
            sub,
            IterOptions {
                snapshot: snap,
                prefix: Some(prefix.clone()),
                ..Default::default()
            }
        ),
        want
    );
    let mut w = want;
    w.reverse();
    assert_eq!(
        scan(
            db,
            sub,
            IterOptions {
                snapshot: snap,
                prefix: Some(prefix),
                reverse: true,
                ..Default::default()
            }
        ),
        w
    );
}

/// Writes a batch of one to six random puts and deletes across `subs`, and the same into
/// `model`.
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

/// Takes a snapshot (with a copy of the model) while fewer than `max` are held; else releases
/// a random one after checking a get and the iterators at it against its copy.
fn snapshot_step(
    db: &Db,
    subs: &[nacre::Subtable],
    model: &Model,
    snaps: &mut Vec<(Snapshot, Model)>,
    max: usize,
    rng: &mut SplitMix64,
    at: &str,
) {
    if snaps.len() < max {
        snaps.push((db.snapshot(), model.clone()));
        return;
    }
    let (snap, old) = snaps.remove((rng.next_u64() % max as u64) as usize);
    for s in subs {
        let m = old.get(&s.id()).cloned().unwrap_or_default();
        let k = key(rng);
        assert_eq!(
            db.get_at(s, &k, &snap).expect("get"),
            m.get(&k).cloned(),
            "snapshot get, {at}"
        );
        check_iterators(db, s, &m, Some(&snap), rng);
    }
}

#[test]
fn random_operations_match_a_btreemap_across_reopens() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("dir");
    let path = dir.path().join("model.pool");
    let mut model: Model = BTreeMap::new();
    let mut rng = SplitMix64::new(42);
    for round in 0..5 {
        let db = Db::open(opts(&path)).expect("open");
        if round > 0 {
            let rep = db.recovery_report();
            assert!(rep.clean, "previous close was clean");
            assert!(rep.memtables >= 3, "{rep:?}");
            if round == 4 {
                assert!(rep.memtables > 6, "memtable switches happened: {rep:?}");
            }
        }
        let subs = [db.subtable("a").expect("a"), db.subtable("b").expect("b")];
        for s in &subs {
            let m = model.entry(s.id()).or_default();
            for (k, v) in m.iter() {
                assert_eq!(
                    db.get(s, k).expect("get").as_deref(),
                    Some(&v[..]),
                    "round {round}"
                );
            }
            check_iterators(&db, s, m, None, &mut rng);
        }
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        for step in 0..1500 {
            let s = &subs[(rng.next_u64() % 2) as usize];
            match rng.next_u64() % 10 {
                0..=4 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    db.put(s, &k, &v).expect("put");
                    model.entry(s.id()).or_default().insert(k, v);
                }
                5 | 6 => {
                    let k = key(&mut rng);
                    db.delete(s, &k).expect("delete");
                    model.entry(s.id()).or_default().remove(&k);
                }
                7 | 8 => {
                    write_random_batch(&db, &subs, &mut model, &mut rng);
                }
                _ => {
                    let at = format!("step {step}");
                    snapshot_step(&db, &subs, &model, &mut snaps, 4, &mut rng, &at);
                }
            }
            let k = key(&mut rng);
            assert_eq!(
                db.get(s, &k).expect("get"),
                model.get(&s.id()).and_then(|m| m.get(&k)).cloned()
            );
        }
        drop(snaps);
        db.close().expect("close");
    }
}

/// Tiny zones, memtables and pool: merges into the Global Index and zone cleaning run all the
/// time, with snapshots and iterators held across them and reopens after clean closes and
/// after power failures (the `sim` backend's crash image).
#[test]
fn random_operations_match_a_btreemap_while_merging_and_cleaning() {
    let opts = || {
        let mut o = Options::new("sim").backend(Backend::Sim);
        o.pool_size = 6 << 20;
        o.zone_size = 64 << 10;
        o.memtable_size = 128 << 10;
        o.recovery_threads = 2;
        o
    };
    let mut model: Model = BTreeMap::new();
    let mut rng = SplitMix64::new(4242);
    let mut image: Option<Vec<u8>> = None;
    let mut freed = 0;
    for round in 0..8 {
        let db = match image.take() {
            None => Db::open(opts()).expect("open"),
            Some(img) => Db::open_pool(
                nacre_pmem::Pool::open_sim(
                    img,
                    &nacre_pmem::PoolOptions::with_backend(Backend::Sim),
                )
                .expect("image"),
                opts(),
            )
            .expect("reopen"),
        };
        let subs = [db.subtable("a").expect("a"), db.subtable("b").expect("b")];
        for s in &subs {
            let m = model.entry(s.id()).or_default();
            check_iterators(&db, s, m, None, &mut rng);
        }
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        // An iterator opened now and read to its end while everything below happens.
        let held_sub = subs[0].clone();
        let held_model: Vec<_> = model
            .get(&held_sub.id())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut held = db.iter(&held_sub, IterOptions::default()).expect("iter");
        let mut held_seen = Vec::new();
        for step in 0..3000 {
            let s = &subs[(rng.next_u64() % 2) as usize];
            match rng.next_u64() % 12 {
                0..=5 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    if let Err(e) = db.put(s, &k, &v) {
                        panic!("put: {e}: {:#?}", db.stats());
                    }
                    model.entry(s.id()).or_default().insert(k, v);
                }
                6 | 7 => {
                    let k = key(&mut rng);
                    db.delete(s, &k).expect("delete");
                    model.entry(s.id()).or_default().remove(&k);
                }
                8 => {
                    write_random_batch(&db, &subs, &mut model, &mut rng);
                }
                9 => {
                    if let Some(r) = held.next() {
                        held_seen.push(r.expect("held iterator"));
                    }
                }
                _ => {
                    let at = format!("round {round} step {step}");
                    snapshot_step(&db, &subs, &model, &mut snaps, 3, &mut rng, &at);
                }
            }
            let k = key(&mut rng);
            assert_eq!(
                db.get(s, &k).expect("get"),
                model.get(&s.id()).and_then(|m| m.get(&k)).cloned(),
                "round {round} step {step}"
            );
        }
        held_seen.extend(held.map(|r| r.expect("held iterator")));
        assert_eq!(
            held_seen, held_model,
            "an iterator held across merges, round {round}"
        );
        for (snap, old) in &snaps {
            for s in &subs {
                let m = old.get(&s.id()).cloned().unwrap_or_default();
                check_iterators(&db, s, &m, Some(snap), &mut rng);
            }
        }
        drop(snaps);
        freed = freed.max(db.stats().cleaner_zones_freed);
        if round % 2 == 0 {
            image = Some(
                db.sim()
                    .expect("sim")
                    .crash(nacre_pmem::CrashPolicy::KeepNone),
            );
        } else {
            let sim = db.sim().expect("sim");
            db.close().expect("close");
            image = Some(sim.crash(nacre_pmem::CrashPolicy::KeepNone));
        }
    }
    assert!(freed > 0, "the cleaner gave zones back");
}
