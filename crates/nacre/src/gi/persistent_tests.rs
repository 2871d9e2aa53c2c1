//! The persistent index against a model: keys with zero bytes and keys that are prefixes
//! of others, changes as a merge, the horizon and the cleaner make them, reads, walks and
//! copy counts; then a power failure keeps everything.

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

/// Per key: the newest version and the count of other copies.
type Model = BTreeMap<Vec<u8>, (PmVersion, u64)>;

/// Every entry in tree order, and every key's read, against the model.
fn check_all(ix: &PersistentIndex, m: &Model) {
    let mut got = Vec::new();
    ix.walk(|it| {
        got.push((it.key, it.at, it.tomb, it.blob));
        Ok(())
    })
    .expect("walk");
    let want: Vec<_> = m
        .iter()
        .map(|(k, (v, _))| (k.clone(), v.at, v.tomb, v.blob))
        .collect();
    // Every range between two of the keys (escaped bytes and prefixes included).
    for from in KEYS.iter().map(|k| Some(*k)).chain([None]) {
        for to in KEYS.iter().map(|k| Some(*k)).chain([None]) {
            let mut part = Vec::new();
            ix.walk_range(from, to, |it| {
                part.push(it.key);
                Ok(())
            })
            .expect("walk_range");
            let expect: Vec<Vec<u8>> = m
                .keys()
                .filter(|k| from.is_none_or(|f| k.as_slice() >= f))
                .filter(|k| to.is_none_or(|t| k.as_slice() < t))
                .cloned()
                .collect();
            assert_eq!(part, expect, "walk_range({from:?}, {to:?})");
        }
    }
    assert_eq!(got, want, "entries in tree order");
    for key in KEYS {
        assert_eq!(
            ix.newest(key).expect("newest"),
            m.get(*key).copied(),
            "{key:?}"
        );
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
    for step in 0..8000 {
        let key = KEYS[(rng.next_u64() % KEYS.len() as u64) as usize];
        let old = m.get(key).copied();
        let have = old.map(|(v, c)| encode_value(&v, c).expect("word"));
        let mut want = old;
        match rng.next_u64() % 10 {
            0..=3 => {
                // A merge: a new newest version; the one it replaces is one more copy.
                let v = PmVersion {
                    seq: next_seq,
                    at: fresh_at(&mut rng),
                    tomb: rng.next_u64() % 5 == 0,
                    blob: rng.next_u64() % 7 == 0,
                };
                next_seq += 1 + rng.next_u64() % 3;
                recs.add(key, &v);
                want = Some((v, old.map_or(0, |(_, c)| c + 1)));
            }
            4 => {
                assert_eq!(ix.newest(key).expect("newest"), old, "{step}");
                continue;
            }
            5 if old.is_some() => {
                // The cleaner moves the newest version's record.
                if let Some((v, _)) = &mut want {
                    v.at = fresh_at(&mut rng);
                    recs.add(key, v);
                }
            }
            6 => {
                // The horizon drops the key (a tombstone with no copy left).
                want = None;
            }
            7 | 8 if old.is_some() => {
                // Zones given back: copies leave PM; or a count that reaches the limit.
                if let Some((_, c)) = &mut want {
                    *c = match rng.next_u64() % 8 {
                        0 => GHOST_MAX + rng.next_u64() % 3,
                        _ => c.saturating_sub(rng.next_u64() % 3),
                    };
                }
            }
            _ => {
                // A change cut by a crash, made again from what the tree holds (P5).
                let now = ix.word(key).expect("word");
                assert_eq!(now, have, "{step}");
                let (v, c) = old.unzip();
                ix.change(key, now, v.as_ref(), c.unwrap_or(0))
                    .expect("again");
                continue;
            }
        }
        let (v, c) = want.unzip();
        ix.change(key, have, v.as_ref(), c.unwrap_or(0))
            .expect("change");
        // A saturated count stays (P4).
        let want = want.map(|(v, c)| {
            let sat = old.is_some_and(|(_, o)| o >= GHOST_MAX) || c >= GHOST_MAX;
            (v, if sat { GHOST_MAX } else { c })
        });
        match want {
            Some(e) => m.insert(key.to_vec(), e),
            None => m.remove(key),
        };
        if step % 500 == 0 {
            check_all(&ix, &m);
        }
    }
    check_all(&ix, &m);
    // A writer whose idea of the entry is wrong is told so, and changes nothing.
    let (key, (v, c)) = m
        .iter()
        .next()
        .map(|(k, e)| (k.clone(), *e))
        .expect("a key");
    let wrong = PmVersion {
        at: PmOffset(v.at.get() + 8),
        ..v
    };
    let err = ix.change(
        &key,
        Some(encode_value(&wrong, c).expect("word")),
        Some(&v),
        c,
    );
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
fn offsets_and_keys_that_do_not_fit_are_refused() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    assert!(
        ix.change(b"k", None, Some(&one(1, 12)), 0).is_err(),
        "not a multiple of 8"
    );
    assert!(
        ix.change(b"k", None, Some(&one(1, OFFSET_LIMIT)), 0)
            .is_err(),
        "past 1 TiB"
    );
    let last = one(1, OFFSET_LIMIT - 8);
    recs.add(b"k", &last);
    ix.change(b"k", None, Some(&last), 0).expect("last offset");
    assert_eq!(ix.newest(b"k").expect("get"), Some((last, 0)));
    // 16 bytes fit; each zero byte takes one more.
    assert!(ix.fits(&[1; 16]) && !ix.fits(&[1; 17]) && !ix.fits(&[0; 9]));
    assert!(matches!(
        ix.change(&[1; 17], None, Some(&one(1, 8)), 0),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn an_entry_that_names_another_keys_record_is_corruption() {
    let pool = sim_pool(4 << 20);
    let recs = Records::default();
    let ix = open_on(&pool, &recs);
    let v = one(3, 64);
    recs.add(b"other", &v);
    ix.change(b"k", None, Some(&v), 0).expect("insert");
    assert!(matches!(ix.newest(b"k"), Err(Error::Corrupt { .. })));
}

#[test]
fn a_damaged_entry_key_is_corruption_never_a_key() {
    let mut out = Vec::new();
    for bad in [
        &b""[..],
        b"a",
        b"a\0",
        b"a\0\x01",
        b"a\0\0\x01",
        b"a\0\0\0\0",
    ] {
        assert!(decode_key(bad, &mut out).is_err(), "{bad:?}");
    }
    decode_key(&tree_key(b"a\0b"), &mut out).expect("decode");
    assert_eq!(out, b"a\0b");
    decode_key(&tree_key(b""), &mut out).expect("empty");
    assert!(out.is_empty());
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
        ix.change(k, None, Some(&v), 0).expect("insert");
    }
    let pm_insert = rate(t);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        vol.insert(k, i as u64 + 1, PmOffset(8 * (i as u64 + 1)));
    }
    let vol_insert = rate(t);
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate().rev() {
        let (v, _) = ix.newest(k).expect("get").expect("found");
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
            seq: 0,
            at: PmOffset((rng.next_u64() % (OFFSET_LIMIT / 8)) * 8),
            tomb: rng.next_u64() % 2 == 0,
            blob: rng.next_u64() % 2 == 0,
        };
        let ghosts = rng.next_u64() % (GHOST_MAX + 1);
        let w = encode_value(&v, ghosts).expect("encode");
        assert!(w < 1 << 61, "{w:#x} uses PMwCAS's bits");
        assert_eq!(decode_value(w).expect("decode"), (v, ghosts));
        for bit in 0..61 {
            assert!(
                matches!(decode_value(w ^ (1 << bit)), Err(Error::Corrupt { .. })),
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
    ix.change(b"key", None, Some(&v), 2).expect("insert");
    let w = encode_value(&v, 2).expect("encode");
    drop(ix);
    // Find the value word in the image and flip one bit of its count.
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
    assert!(matches!(ix.newest(b"key"), Err(Error::Corrupt { .. })));
    assert!(matches!(ix.walk(|_| Ok(())), Err(Error::Corrupt { .. })));
    assert!(matches!(
        ix.change(b"key", Some(w), Some(&v), 1),
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
        a.change(key.as_bytes(), None, Some(&va), 0).expect("a");
        b.change(key.as_bytes(), None, Some(&vb), 0).expect("b");
    }
    let at = |ix: &PersistentIndex| ix.newest(b"key7").expect("get").map(|(v, _)| v.at);
    assert_eq!(at(&a), Some(PmOffset(64)));
    assert_eq!(at(&b), Some(PmOffset(8 * 1007)));
    // A spilled generation's index is dropped whole; the other is untouched.
    drop(b);
    assert!(forest.drop_tree(3).expect("drop"));
    let b = PersistentIndex::in_forest(&forest, 3, recs.seq_of()).expect("b again");
    assert_eq!(at(&b), None);
    assert!(a.newest(b"key299").expect("a").is_some());
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
        if let Err(e) = ix.change(key.as_bytes(), None, Some(&v), 0) {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("8 nodes fill up");
    assert!(matches!(e, Error::PoolFull { .. }), "{e:?}");
    // What went in before is still read back.
    assert_eq!(
        ix.newest(b"key000000").expect("get").map(|(v, _)| v.at),
        Some(PmOffset(8))
    );
}
