//! The persistent index against a `BTreeMap` model in [`IKey`] order: keys with zero bytes
//! and keys that are prefixes of others, point reads at snapshots, walks both ways,
//! relocation, removal and ghost counts; then a power failure keeps everything.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use nacre_halloc::Halloc;
use nacre_pmem::{Backend, CrashPolicy, PmOffset, Pool, PoolOptions, SplitMix64};

use super::*;

fn sim_pool(size: u64) -> Arc<Pool> {
    Arc::new(Pool::create_sim(size, &PoolOptions::with_backend(Backend::Sim)).expect("pool"))
}

fn open_on(pool: &Arc<Pool>) -> PersistentIndex {
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    PersistentIndex::open(&halloc, "gi", 512, 2048, 16).expect("open")
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

#[derive(Default)]
struct Model {
    entries: BTreeMap<IKey, PmVersion>,
    ghosts: HashMap<Vec<u8>, u64>,
}

impl Model {
    fn get(&self, key: &[u8], snap: u64) -> Option<PmVersion> {
        let from = IKey {
            key: key.to_vec(),
            seq: snap,
        };
        self.entries
            .range(from..)
            .next()
            .filter(|(k, _)| k.key == key)
            .map(|(_, v)| *v)
    }

    fn newest(&self, key: &[u8]) -> Option<PmVersion> {
        self.get(key, u64::MAX)
    }
}

/// Every entry, one step at a time from either end (`step` is `next_into` or `prev_into`).
fn walk(
    step: impl Fn(Bound<&IKey>, &mut IKey) -> Result<Option<PmOffset>>,
) -> Vec<(IKey, PmOffset)> {
    let mut out = IKey::default();
    let mut seen = Vec::new();
    let mut cur: Option<IKey> = None;
    while let Some(at) = step(
        cur.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
        &mut out,
    )
    .expect("step")
    {
        seen.push((out.clone(), at));
        cur = Some(out.clone());
    }
    seen
}

fn check_walks(ix: &PersistentIndex, m: &Model) {
    let want: Vec<(IKey, PmOffset)> = m.entries.iter().map(|(k, v)| (k.clone(), v.at)).collect();
    assert_eq!(walk(|b, o| ix.next_into(b, o)), want, "forward walk");
    let mut back = walk(|b, o| ix.prev_into(b, o));
    back.reverse();
    assert_eq!(back, want, "backward walk");
}

#[test]
fn random_operations_match_a_model_and_survive_a_power_failure() {
    let pool = sim_pool(16 << 20);
    let ix = open_on(&pool);
    let mut m = Model::default();
    let mut rng = SplitMix64::new(7);
    let mut next_at = 64u64;
    for step in 0..6000 {
        let key = KEYS[(rng.next_u64() % KEYS.len() as u64) as usize];
        let seq = rng.next_u64() % 40;
        match rng.next_u64() % 10 {
            0..=3 => {
                let v = PmVersion {
                    seq,
                    at: PmOffset(next_at),
                    tomb: rng.next_u64() % 5 == 0,
                    blob: rng.next_u64() % 7 == 0,
                };
                next_at += 8 * (1 + rng.next_u64() % 50);
                let ik = IKey {
                    key: key.to_vec(),
                    seq,
                };
                let fresh = !m.entries.contains_key(&ik);
                if fresh {
                    // A merge carries the key's count into a new newest entry (P3).
                    let newest = m.newest(key).is_none_or(|n| n.seq < seq);
                    let g = if newest {
                        m.ghosts.get(key).copied().unwrap_or(0)
                    } else {
                        0
                    };
                    assert!(ix.insert(key, v, g).expect("insert"));
                    m.entries.insert(ik, v);
                } else {
                    // The same version again is a no-op; at another offset, corruption.
                    let old = m.entries[&ik];
                    assert!(!ix.insert(key, old, 0).expect("again"));
                    assert!(matches!(
                        ix.insert(
                            key,
                            PmVersion {
                                at: PmOffset(old.at.get() + 8),
                                ..old
                            },
                            0
                        ),
                        Err(Error::Corrupt { .. })
                    ));
                }
            }
            4..=5 => {
                let snap = rng.next_u64() % 45;
                assert_eq!(ix.get(key, snap).expect("get"), m.get(key, snap), "{step}");
            }
            6 => {
                let ik = IKey {
                    key: key.to_vec(),
                    seq,
                };
                // Keep the newest entry: its ghost count lives there (P3).
                if m.newest(key).is_some_and(|n| n.seq != seq) {
                    assert_eq!(
                        ix.remove(key, seq).expect("remove"),
                        m.entries.remove(&ik),
                        "{step}"
                    );
                }
            }
            7 => {
                let ik = IKey {
                    key: key.to_vec(),
                    seq,
                };
                let to = PmOffset(next_at);
                next_at += 64;
                match m.entries.get_mut(&ik) {
                    Some(v) => {
                        // Losing to a move made meanwhile: the expected offset is stale.
                        let stale = PmOffset(v.at.get() + 8);
                        assert!(!ix.relocate(key, seq, stale, to).expect("stale"));
                        assert!(ix.relocate(key, seq, v.at, to).expect("relocate"));
                        v.at = to;
                    }
                    None => assert!(!ix.relocate(key, seq, to, to).expect("absent")),
                }
            }
            _ => {
                let delta = (rng.next_u64() % 5) as i64 - 2;
                let got = ix.add_ghosts(key, delta).expect("ghosts");
                if m.newest(key).is_some() {
                    let g = m.ghosts.entry(key.to_vec()).or_insert(0);
                    *g = g.saturating_add_signed(delta);
                    assert_eq!(got, Some(*g), "{step}");
                } else {
                    assert_eq!(got, None);
                }
            }
        }
        if step % 500 == 0 {
            check_walks(&ix, &m);
        }
    }
    check_walks(&ix, &m);
    for key in KEYS {
        let (versions, ghosts) = ix.versions(key).expect("versions");
        let want: Vec<PmVersion> = m
            .entries
            .iter()
            .filter(|(k, _)| k.key == *key)
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(versions, want, "{key:?}");
        if !want.is_empty() {
            assert_eq!(ghosts, m.ghosts.get(*key).copied().unwrap_or(0), "{key:?}");
        }
    }
    // Every change was a PMwCAS: a power failure that keeps nothing unflushed keeps it all.
    drop(ix);
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool =
        Arc::new(Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image"));
    let ix = open_on(&pool);
    check_walks(&ix, &m);
    ix.tree().check().expect("tree check");
}

#[test]
fn a_saturated_ghost_count_stays() {
    let pool = sim_pool(4 << 20);
    let ix = open_on(&pool);
    let v = PmVersion {
        seq: 5,
        at: PmOffset(4096),
        tomb: true,
        blob: false,
    };
    assert!(ix.insert(b"k", v, GHOST_MAX - 1).expect("insert"));
    assert_eq!(ix.add_ghosts(b"k", 1).expect("up"), Some(GHOST_MAX));
    assert_eq!(ix.add_ghosts(b"k", -3).expect("down"), Some(GHOST_MAX));
    assert_eq!(ix.add_ghosts(b"k", 10).expect("up"), Some(GHOST_MAX));
    // The flags and offset beside it are untouched.
    assert_eq!(ix.get(b"k", 9).expect("get"), Some(v));
}

#[test]
fn offsets_and_keys_that_do_not_fit_are_refused() {
    let pool = sim_pool(4 << 20);
    let ix = open_on(&pool);
    let v = |at| PmVersion {
        seq: 1,
        at: PmOffset(at),
        tomb: false,
        blob: false,
    };
    assert!(ix.insert(b"k", v(12), 0).is_err(), "not a multiple of 8");
    assert!(ix.insert(b"k", v(OFFSET_LIMIT), 0).is_err(), "past 1 TiB");
    assert!(ix
        .insert(b"k", v(OFFSET_LIMIT - 8), 0)
        .expect("last offset"));
    assert_eq!(ix.get(b"k", 1).expect("get"), Some(v(OFFSET_LIMIT - 8)));
    // 16 bytes fit; each zero byte takes one more.
    assert!(ix.fits(&[1; 16]) && !ix.fits(&[1; 17]) && !ix.fits(&[0; 9]));
    assert!(matches!(
        ix.insert(&[1; 17], v(8), 0),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn a_damaged_entry_key_is_corruption_never_a_key() {
    let mut ik = IKey::default();
    for bad in [&b""[..], b"a", b"a\0", b"a\0\x01", b"a\0\0\x01\x02"] {
        assert!(decode_key(bad, &mut ik).is_err(), "{bad:?}");
    }
    let k = tree_key(b"a\0b", 9);
    decode_key(&k, &mut ik).expect("decode");
    assert_eq!((ik.key.as_slice(), ik.seq), (&b"a\0b"[..], 9));
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
    let ix = PersistentIndex::open(&halloc, "gi", 1024, 40_000, 16).expect("open");
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
        ix.insert(k, v, 0).expect("insert");
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
    let ix = open_on(&pool);
    let v = PmVersion {
        seq: 3,
        at: PmOffset(0x1238),
        tomb: false,
        blob: false,
    };
    assert!(ix.insert(b"key", v, 2).expect("insert"));
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
    let ix = open_on(&pool);
    assert!(matches!(ix.get(b"key", 9), Err(Error::Corrupt { .. })));
    assert!(matches!(
        ix.add_ghosts(b"key", -1),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn indexes_in_one_forest_stay_apart_and_a_dropped_one_goes() {
    let pool = sim_pool(8 << 20);
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    let opts = PersistentIndex::forest_options("gis", 4, 512, 2048, 16);
    let (forest, _) = nacre_bztree::BzForest::open(&halloc, &opts).expect("forest");
    let a = PersistentIndex::in_forest(&forest, 0).expect("a");
    let b = PersistentIndex::in_forest(&forest, 3).expect("b");
    for i in 0..300u64 {
        let v = |at: u64| PmVersion {
            seq: i + 1,
            at: PmOffset(at),
            tomb: false,
            blob: false,
        };
        let key = format!("key{i}");
        assert!(a.insert(key.as_bytes(), v(8 * (i + 1)), 0).expect("a"));
        assert!(b.insert(key.as_bytes(), v(8 * (i + 1000)), 0).expect("b"));
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
    let b = PersistentIndex::in_forest(&forest, 3).expect("b again");
    assert_eq!(b.get(b"key7", 100).expect("b"), None);
    assert_eq!(a.versions(b"key299").expect("a").0.len(), 1);
}

#[test]
fn a_full_node_pool_is_pool_full_never_corruption() {
    let pool = sim_pool(4 << 20);
    let halloc = Halloc::open(pool.clone()).expect("halloc");
    let ix = PersistentIndex::open(&halloc, "tiny", 512, 8, 16).expect("open");
    let mut refused = None;
    for i in 0..10_000u64 {
        let v = PmVersion {
            seq: i + 1,
            at: PmOffset(8 * (i + 1)),
            tomb: false,
            blob: false,
        };
        if let Err(e) = ix.insert(format!("key{i:06}").as_bytes(), v, 0) {
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
