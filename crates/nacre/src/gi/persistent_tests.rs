//! The persistent index against a model: keys with zero bytes and keys that are prefixes
//! of others, changes as a merge, the horizon and the cleaner make them, point reads at
//! snapshots, walks, ghost counts; then a power failure keeps everything.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use nacre_halloc::Halloc;
use nacre_pmem::{Backend, CrashPolicy, PmOffset, Pool, PoolOptions, SplitMix64};

use super::*;

fn sim_pool(size: u64) -> Arc<Pool> {
    Arc::new(Pool::create_sim(size, &PoolOptions::with_backend(Backend::Sim)).expect("pool"))
}

/// The records the tests' entries name: offset -> (key, sequence number), as the record's
/// header would say (P3).
#[derive(Clone, Default)]
struct Records(Arc<Mutex<HashMap<u64, KeyAndSeq>>>);

type KeyAndSeq = (Vec<u8>, u64);

/// An entry as a walk sees it: key, sequence (`None`: the head), offset, flags.
type Seen = (Vec<u8>, Option<u64>, PmOffset, bool, bool);

impl Records {
    fn add(&self, key: &[u8], v: &PmVersion) {
        self.0
            .lock()
            .expect("records")
            .insert(v.at.get(), (key.to_vec(), v.seq));
    }

    fn seq_of(&self) -> SeqOf {
        let recs = self.0.clone();
        Arc::new(move |at: PmOffset, key: &[u8]| {
            match recs.lock().expect("records").get(&at.get()) {
                Some((k, seq)) if k == key => Ok(*seq),
                _ => Err(Error::corrupt_at("names no record of the key", at)),
            }
        })
    }
}

fn open_on(pool: &Arc<Pool>, recs: &Records) -> PersistentIndex {
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    PersistentIndex::open(&halloc, "gi", (512, 2048, 16), recs.seq_of()).expect("open")
}

/// Keys that stress P1: empty, zero bytes, prefixes of each other, 0xFF bytes.
const KEYS: &[&[u8]] = &[
    b"",
    b"\0",
    b"\0\0",
    b"\0\xFF",
    b"a",
    b"a\0",
    b"a\0b",
    b"a\x01",
    b"ab",
    b"abc",
    b"b",
    b"\xFF",
    b"\xFF\xFF",
    b"\xFF\0",
];

/// Per key: versions newest first, and the ghost count.
type Model = BTreeMap<Vec<u8>, (Vec<PmVersion>, u64)>;

fn model_get(m: &Model, key: &[u8], snap: u64) -> Option<PmVersion> {
    m.get(key)
        .and_then(|(vs, _)| vs.iter().find(|v| v.seq <= snap).copied())
}

/// Every entry in tree order against the model: heads first, then older versions.
fn check_all(ix: &PersistentIndex, m: &Model) {
    let mut items = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let batch = ix.scan(after.as_deref(), 7).expect("scan");
        let done = batch.len() < 7;
        after = batch.last().map(|it| it.tree_key.clone());
        items.extend(batch);
        if done {
            break;
        }
    }
    let got: Vec<Seen> = items
        .iter()
        .map(|it| (it.key.clone(), it.seq, it.at, it.tomb, it.blob))
        .collect();
    let mut want = Vec::new();
    for (k, (vs, _)) in m {
        for (i, v) in vs.iter().enumerate() {
            want.push((k.clone(), (i > 0).then_some(v.seq), v.at, v.tomb, v.blob));
        }
    }
    assert_eq!(got, want, "entries in tree order");
    for key in KEYS {
        let (versions, ghosts) = ix.versions(key).expect("versions");
        match m.get(*key) {
            Some((vs, g)) => assert_eq!((&versions, ghosts), (vs, *g), "{key:?}"),
            None => assert!(versions.is_empty(), "{key:?}"),
        }
    }
}

#[test]
fn random_changes_match_a_model_and_survive_a_power_failure() {
    let pool = sim_pool(16 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let mut m = Model::new();
    let mut rng = SplitMix64::new(7);
    let mut next_at = 64u64;
    let mut next_seq = 1u64;
    let mut fresh_at = |rng: &mut SplitMix64| {
        let at = PmOffset(next_at);
        next_at += 8 * (1 + rng.next_u64() % 50);
        at
    };
    for step in 0..6000 {
        let key = KEYS[(rng.next_u64() % KEYS.len() as u64) as usize];
        let (old, old_ghosts) = m.get(key).cloned().unwrap_or_default();
        let mut want = old.clone();
        let mut ghosts = old_ghosts;
        match rng.next_u64() % 10 {
            0..=3 => {
                // A merge: a new newest version; the horizon keeps some older ones, and the
                // dropped ones become ghosts.
                let v = PmVersion {
                    seq: next_seq,
                    at: fresh_at(&mut rng),
                    tomb: rng.next_u64() % 5 == 0,
                    blob: rng.next_u64() % 7 == 0,
                };
                next_seq += 1 + rng.next_u64() % 3;
                recs.add(key, &v);
                want.insert(0, v);
                let keep = 1 + (rng.next_u64() % 4) as usize;
                ghosts += want.len().saturating_sub(keep) as u64;
                want.truncate(keep);
            }
            4..=5 => {
                let snap = rng.next_u64() % (next_seq + 2);
                assert_eq!(
                    ix.get(key, snap).expect("get"),
                    model_get(&m, key, snap),
                    "{step}"
                );
                continue;
            }
            6 if !want.is_empty() => {
                // The cleaner moves one version's record.
                let i = (rng.next_u64() % want.len() as u64) as usize;
                want[i].at = fresh_at(&mut rng);
                recs.add(key, &want[i]);
            }
            7 => {
                // The horizon drops every version (a tombstone with no ghost left).
                want.clear();
                ghosts = 0;
            }
            8 if !want.is_empty() => {
                // Zones given back: ghosts leave PM.
                ghosts = ghosts.saturating_sub(rng.next_u64() % 3);
            }
            _ => {
                // A change cut by a crash, made again from what the tree holds (P5).
                let have = ix.entries(key).expect("entries");
                assert_eq!(have, Entries::of(&old, old_ghosts).expect("of"), "{step}");
                ix.change(key, &have, &old, old_ghosts).expect("again");
                continue;
            }
        }
        let have = Entries::of(&old, old_ghosts).expect("of");
        ix.change(key, &have, &want, ghosts).expect("change");
        if want.is_empty() {
            m.remove(key);
        } else {
            m.insert(key.to_vec(), (want, ghosts));
        }
        if step % 500 == 0 {
            check_all(&ix, &m);
        }
    }
    check_all(&ix, &m);
    // A writer whose idea of the head is wrong is told so, and changes nothing.
    let (key, (vs, g)) = m
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .expect("a key");
    let mut wrong = vs.clone();
    wrong[0].at = PmOffset(wrong[0].at.get() + 8);
    let err = ix.change(&key, &Entries::of(&wrong, g).expect("of"), &vs, g);
    assert!(matches!(err, Err(Error::Corrupt { .. })), "{err:?}");
    // Every change was a PMwCAS: a power failure that keeps nothing unflushed keeps it all.
    drop(ix);
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool =
        Arc::new(Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image"));
    let ix = open_on(&pool, &recs);
    check_all(&ix, &m);
    ix.tree().check().expect("tree check");
}

fn one(seq: u64, at: u64) -> PmVersion {
    PmVersion {
        seq,
        at: PmOffset(at),
        tomb: false,
        blob: false,
    }
}

#[test]
fn a_saturated_ghost_count_stays() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let v = PmVersion {
        tomb: true,
        ..one(5, 4096)
    };
    recs.add(b"k", &v);
    ix.change(b"k", &Entries::default(), &[v], GHOST_MAX - 1)
        .expect("insert");
    let have = |g| Entries::of(&[v], g).expect("of");
    ix.change(b"k", &have(GHOST_MAX - 1), &[v], GHOST_MAX + 5)
        .expect("up");
    assert_eq!(ix.versions(b"k").expect("versions").1, GHOST_MAX);
    // The writer's count went down; the tree's stays saturated, even as the version moves.
    let moved = one(5, 8192);
    let moved = PmVersion {
        tomb: true,
        ..moved
    };
    recs.add(b"k", &moved);
    ix.change(b"k", &have(GHOST_MAX - 3), &[moved], GHOST_MAX - 3)
        .expect("down");
    assert_eq!(
        ix.versions(b"k").expect("versions"),
        (vec![moved], GHOST_MAX)
    );
    assert_eq!(ix.get(b"k", 9).expect("get"), Some(moved));
}

#[test]
fn offsets_and_keys_that_do_not_fit_are_refused() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let none = Entries::default();
    assert!(
        ix.change(b"k", &none, &[one(1, 12)], 0).is_err(),
        "not a multiple of 8"
    );
    assert!(
        ix.change(b"k", &none, &[one(1, OFFSET_LIMIT)], 0).is_err(),
        "past 1 TiB"
    );
    let last = one(1, OFFSET_LIMIT - 8);
    recs.add(b"k", &last);
    ix.change(b"k", &none, &[last], 0).expect("last offset");
    assert_eq!(ix.get(b"k", 1).expect("get"), Some(last));
    // 16 bytes fit; each zero byte takes one more.
    assert!(ix.fits(&[1; 16]) && !ix.fits(&[1; 17]) && !ix.fits(&[0; 9]));
    assert!(matches!(
        ix.change(&[1; 17], &none, &[one(1, 8)], 0),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn a_head_that_names_another_keys_record_is_corruption() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let v = one(3, 64);
    recs.add(b"other", &v);
    ix.change(b"k", &Entries::default(), &[v], 0)
        .expect("insert");
    assert!(matches!(ix.get(b"k", 9), Err(Error::Corrupt { .. })));
    assert!(matches!(ix.versions(b"k"), Err(Error::Corrupt { .. })));
}

#[test]
fn a_damaged_entry_key_is_corruption_never_a_key() {
    let mut out = Vec::new();
    for bad in [&b""[..], b"a", b"a\0", b"a\0\x01", b"a\0\0\x01\x02"] {
        assert!(decode_key(bad, &mut out).is_err(), "{bad:?}");
    }
    let k = version_key(b"a\0b", 9);
    assert_eq!(decode_key(&k, &mut out).expect("decode"), Some(9));
    assert_eq!(out, b"a\0b");
    assert_eq!(
        decode_key(&head_key(b"a\0b"), &mut out).expect("head"),
        None
    );
    assert_eq!(out, b"a\0b");
}

/// Point reads and merges' inserts against the volatile index, one thread, 200,000 keys of
/// 16 bytes in scrambled order, on an `emulated` pool in /dev/shm (or the temp directory).
/// `cargo test -p nacre --release --lib gi::persistent::tests::timing -- --ignored --nocapture`
#[test]
#[ignore]
fn timing_against_the_volatile_index() {
    use crate::gi::GlobalIndex;
    use crate::index::MemIndex;
    use std::time::Instant;
    const N: u64 = 200_000;
    let dir = tempfile::Builder::new()
        .tempdir_in(if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .expect("dir");
    let pool = Arc::new(
        Pool::create(
            dir.path().join("pool"),
            256 << 20,
            &PoolOptions::with_backend(Backend::Emulated),
        )
        .expect("pool"),
    );
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    let seq_of: SeqOf = Arc::new(|at: PmOffset, _: &[u8]| Ok(at.get() / 8));
    let ix = PersistentIndex::open(&halloc, "gi", (1024, 40_000, 16), seq_of).expect("open");
    let vol = GlobalIndex::default();
    let key = |i: u64| {
        format!(
            "user{:012}",
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_007
        )
        .into_bytes()
    };
    let keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    let rate = |t: Instant| N as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        let v = PmVersion {
            seq: i as u64 + 1,
            at: PmOffset(8 * (i as u64 + 1)),
            tomb: false,
            blob: false,
        };
        ix.change(k, &Entries::default(), &[v], 0).expect("insert");
    }
    let pm_insert = rate(t);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        vol.insert(k, i as u64 + 1, PmOffset(8 * (i as u64 + 1)));
    }
    let vol_insert = rate(t);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate().rev() {
        let v = ix.get(k, u64::MAX >> 1).expect("get").expect("found");
        assert_eq!(v.seq, i as u64 + 1);
    }
    let pm_get = rate(t);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate().rev() {
        assert_eq!(vol.get(k, u64::MAX >> 1).expect("found").0, i as u64 + 1);
    }
    let vol_get = rate(t);
    let c = ix.tree().check().expect("check");
    println!("| structure | insert | point read |");
    println!("|---|---|---|");
    println!("| persistent index (BzTree, `emulated`, 1 KiB nodes; {} leaves, depth {}) | {pm_insert:.0}/s | {pm_get:.0}/s |", c.leaves, c.depth);
    println!("| volatile Global Index (skip list) | {vol_insert:.0}/s | {vol_get:.0}/s |");
}

#[test]
fn every_flipped_bit_of_a_value_is_corruption() {
    let mut rng = SplitMix64::new(3);
    for _ in 0..200 {
        let v = PmVersion {
            seq: 1,
            at: PmOffset((rng.next_u64() % (OFFSET_LIMIT / 8)) * 8),
            tomb: rng.next_u64() % 2 == 0,
            blob: rng.next_u64() % 2 == 0,
        };
        let ghosts = rng.next_u64() % (GHOST_MAX + 1);
        let w = encode_value(&v, ghosts).expect("encode");
        assert!(w < 1 << 61, "{w:#x} uses PMwCAS's bits");
        assert_eq!(decode_value(1, w).expect("decode"), (v, ghosts));
        for bit in 0..61 {
            assert!(
                matches!(decode_value(1, w ^ (1 << bit)), Err(Error::Corrupt { .. })),
                "bit {bit} of {w:#x}"
            );
        }
    }
}

#[test]
fn a_flipped_value_in_the_pool_reads_as_corruption() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let v = one(3, 0x1238);
    recs.add(b"key", &v);
    ix.change(b"key", &Entries::default(), &[v], 2)
        .expect("insert");
    let w = encode_value(&v, 2).expect("encode");
    drop(ix);
    // Find the value word in the image and flip one bit of its ghost count.
    let mut image = pool.sim().expect("sim").crash(CrashPolicy::KeepAll);
    let at = image
        .chunks_exact(8)
        .position(|c| c == w.to_le_bytes())
        .expect("value word in the image")
        * 8;
    image[at + 1] ^= 0x04;
    let pool =
        Arc::new(Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image"));
    let ix = open_on(&pool, &recs);
    assert!(matches!(ix.get(b"key", 9), Err(Error::Corrupt { .. })));
    assert!(matches!(ix.entries(b"key"), Err(Error::Corrupt { .. })));
    let have = Entries {
        head: Some(w),
        older: Vec::new(),
    };
    assert!(matches!(
        ix.change(b"key", &have, &[v], 1),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn indexes_in_one_forest_stay_apart_and_a_dropped_one_goes() {
    let pool = sim_pool(8 << 20);
    let recs = Records::default();
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    let opts = PersistentIndex::forest_options("gis", 4, 512, 2048, 16);
    let (forest, _) = nacre_bztree::BzForest::open(&halloc, &opts).expect("forest");
    let a = PersistentIndex::in_forest(&forest, 0, recs.seq_of()).expect("a");
    let b = PersistentIndex::in_forest(&forest, 3, recs.seq_of()).expect("b");
    for i in 0..300u64 {
        let key = format!("key{i}");
        let (va, vb) = (one(i + 1, 8 * (i + 1)), one(i + 1, 8 * (i + 1000)));
        recs.add(key.as_bytes(), &va);
        recs.add(key.as_bytes(), &vb);
        a.change(key.as_bytes(), &Entries::default(), &[va], 0)
            .expect("a");
        b.change(key.as_bytes(), &Entries::default(), &[vb], 0)
            .expect("b");
    }
    assert_eq!(
        a.get(b"key7", 100).expect("a").map(|v| v.at),
        Some(PmOffset(64))
    );
    assert_eq!(
        b.get(b"key7", 100).expect("b").map(|v| v.at),
        Some(PmOffset(8 * 1007))
    );
    // A spilled generation's index is dropped whole; the other is untouched.
    drop(b);
    assert!(forest.drop_tree(3).expect("drop"));
    let b = PersistentIndex::in_forest(&forest, 3, recs.seq_of()).expect("b again");
    assert_eq!(b.get(b"key7", 100).expect("b"), None);
    assert_eq!(a.versions(b"key299").expect("a").0.len(), 1);
}

#[test]
fn a_full_node_pool_is_pool_full_never_corruption() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    let ix = PersistentIndex::open(&halloc, "tiny", (512, 8, 16), recs.seq_of()).expect("open");
    let mut refused = None;
    for i in 0..10_000u64 {
        let key = format!("key{i:06}");
        let v = one(i + 1, 8 * (i + 1));
        recs.add(key.as_bytes(), &v);
        if let Err(e) = ix.change(key.as_bytes(), &Entries::default(), &[v], 0) {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("8 nodes fill up");
    assert!(matches!(e, Error::PoolFull { .. }), "{e:?}");
    // What went in before is still read back.
    assert_eq!(
        ix.get(b"key000000", 9).expect("get").map(|v| v.at),
        Some(PmOffset(8))
    );
}
