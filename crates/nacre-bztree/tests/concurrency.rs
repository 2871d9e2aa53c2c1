//! Concurrency: writers on disjoint key ranges (each with its own model), writers racing
//! inserts and deletes on one shared range, and readers and scanners running throughout.
//! Readers check that keys nobody writes stay visible with their values and that scans come
//! back in strictly increasing order; at the end the tree equals the merged expected state,
//! passes the structural check, and its committed nodes are exactly the reachable ones.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use nacre_bztree::BzTreeOptions;
use nacre_pmem::SplitMix64;

const WRITERS: u64 = 4;
const OWN_KEYS: u64 = 1500;
const SHARED: u64 = 300;
const STABLE: u64 = 200;

fn own_key(w: u64, i: u64) -> Vec<u8> {
    format!("o{w}-{i:06}").into_bytes()
}

fn shared_key(i: u64) -> Vec<u8> {
    format!("s{i:06}").into_bytes()
}

fn stable_key(i: u64) -> Vec<u8> {
    format!("z{i:06}").into_bytes()
}

#[test]
fn concurrent_writers_readers_and_scanners_agree_with_the_merged_model() {
    let pool = new_pool(24 << 20);
    let opts = BzTreeOptions {
        nodes: 8192,
        descriptors: 1024,
        reclaim_batch: 16,
        ..options()
    };
    let (t, _) = open(&pool, &opts).expect("open");
    for i in 0..STABLE {
        assert!(t.insert(&stable_key(i), i).expect("insert"));
    }
    let done = AtomicBool::new(false);
    let shared_inserts = AtomicU64::new(0);
    let shared_deletes = AtomicU64::new(0);
    let models: Vec<BTreeMap<Vec<u8>, u64>> = std::thread::scope(|s| {
        let t = &t;
        let done = &done;
        for r in 0..2u64 {
            s.spawn(move || {
                let mut rng = SplitMix64::new(900 + r);
                let mut rounds = 0u64;
                while !done.load(Ordering::Acquire) || rounds < 10 {
                    let i = rng.next_u64() % STABLE;
                    assert_eq!(t.get(&stable_key(i)).expect("get"), Some(i));
                    let from = own_key(rng.next_u64() % WRITERS, rng.next_u64() % OWN_KEYS);
                    let got = t.scan(&from, None, 64).expect("scan");
                    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "scan out of order");
                    assert!(got.first().is_none_or(|(k, _)| *k >= from));
                    let all_stable = t.scan(b"z", None, usize::MAX).expect("scan");
                    assert_eq!(
                        all_stable.len() as u64,
                        STABLE,
                        "stable keys missing in a scan"
                    );
                    rounds += 1;
                }
            });
        }
        let shared: Vec<_> = (0..2u64)
            .map(|w| {
                let (ins, del) = (&shared_inserts, &shared_deletes);
                s.spawn(move || {
                    let mut rng = SplitMix64::new(500 + w);
                    for _ in 0..4000 {
                        let k = shared_key(rng.next_u64() % SHARED);
                        if rng.next_u64() % 3 == 0 {
                            if t.delete(&k).expect("delete").is_some() {
                                del.fetch_add(1, Ordering::Relaxed);
                            }
                        } else if t.insert(&k, 7).expect("insert") {
                            ins.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let own: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut m = BTreeMap::new();
                    let mut rng = SplitMix64::new(w);
                    for op in 0..6000u64 {
                        let k = own_key(w, rng.next_u64() % OWN_KEYS);
                        let v = rng.next_u64() >> 8;
                        // Grow for a while, then shrink, then grow: splits and merges.
                        let del = if (op / 2000) % 2 == 1 { 7 } else { 2 };
                        match rng.next_u64() % 10 {
                            x if x < del => {
                                assert_eq!(t.delete(&k).expect("delete"), m.remove(&k))
                            }
                            8 => {
                                let old = m.get_mut(&k).map(|x| std::mem::replace(x, v));
                                assert_eq!(t.update(&k, v).expect("update"), old);
                            }
                            9 => assert_eq!(t.upsert(&k, v).expect("upsert"), m.insert(k, v)),
                            _ => {
                                let fresh = !m.contains_key(&k);
                                assert_eq!(t.insert(&k, v).expect("insert"), fresh);
                                m.entry(k).or_insert(v);
                            }
                        }
                    }
                    m
                })
            })
            .collect();
        let models = own.into_iter().map(|h| h.join().expect("writer")).collect();
        for h in shared {
            h.join().expect("shared writer");
        }
        done.store(true, Ordering::Release);
        models
    });
    let mut want: BTreeMap<Vec<u8>, u64> = models.into_iter().flatten().collect();
    for i in 0..STABLE {
        want.insert(stable_key(i), i);
    }
    let got = contents(&t);
    let shared_left: Vec<_> = got
        .keys()
        .filter(|k| k.starts_with(b"s"))
        .cloned()
        .collect();
    // Every successful shared insert is matched by a successful delete or a key still there.
    assert_eq!(
        shared_inserts.load(Ordering::Relaxed),
        shared_deletes.load(Ordering::Relaxed) + shared_left.len() as u64
    );
    for k in shared_left {
        want.insert(k, 7);
    }
    assert_eq!(got, want);
    let c = check_memory(&t).expect("check");
    let smo = t.smo_stats();
    eprintln!("{smo:?}, {} keys, depth {}", c.keys, c.depth);
    assert!(
        smo.splits > 0 && smo.merges > 0 && smo.consolidations > 0,
        "{smo:?}"
    );
}
