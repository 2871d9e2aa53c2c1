//! The inner-node cache (C1-C3 in inner_cache.rs): descents that use DRAM copies of inner
//! nodes answer as descents that read PM, while splits and merges replace inner nodes and
//! their offsets are reused; when a reused offset keeps its old copy (a mutation), stale
//! copies send descents astray and the test sees it.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use nacre_bztree::{BzMutation, BzTree};
use nacre_pmem::SplitMix64;

/// Rounds of: a pause, every key read (filling and using copies), then a burst of inserts and deletes that splits and merges inner nodes
/// and frees them for reuse. The first disagreement with the model, if any.
fn rounds(t: &BzTree, seed: u64) -> Result<(), String> {
    let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut rng = SplitMix64::new(seed);
    for round in 0..12u64 {
        std::thread::sleep(Duration::from_millis(4));
        for i in 0..1500u64 {
            let k = key(i);
            let got = t.get(&k).map_err(|e| format!("round {round}: get: {e}"))?;
            if got != m.get(&k).copied() {
                return Err(format!(
                    "round {round}: {k:?} read {got:?}, model {:?}",
                    m.get(&k)
                ));
            }
        }
        for _ in 0..600 {
            let i = rng.next_u64() % 1500;
            let k = key(i);
            if rng.next_u64() % 3 == 0 {
                let old = t.delete(&k).map_err(|e| format!("delete: {e}"))?;
                if old != m.remove(&k) {
                    return Err(format!("round {round}: delete {k:?} found {old:?}"));
                }
            } else {
                let v = rng.next_u64() >> 8;
                t.upsert(&k, v).map_err(|e| format!("upsert: {e}"))?;
                m.insert(k, v);
            }
        }
    }
    let all = try_contents(t)?;
    if all != m {
        return Err("the final scan differs from the model".into());
    }
    Ok(())
}

#[test]
fn descents_through_cached_inner_nodes_agree_with_the_model() {
    for seed in 0..3 {
        let pool = new_pool(POOL_SIZE);
        let (t, _) = open(&pool, &options()).expect("open");
        rounds(&t, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn the_same_rounds_without_the_cache_agree_too() {
    let pool = new_pool(POOL_SIZE);
    let mut o = options();
    o.inner_cache = false;
    let (t, _) = open(&pool, &o).expect("open");
    rounds(&t, 0).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn stale_copies_are_caught_when_a_reused_offset_keeps_its_copy() {
    let mut caught = 0;
    for seed in 0..3 {
        let pool = new_pool(POOL_SIZE);
        let mut o = options();
        o.mutation = Some(BzMutation::SkipCacheForget);
        let (t, _) = open(&pool, &o).expect("open");
        if let Err(e) = rounds(&t, seed) {
            eprintln!("seed {seed}: {e}");
            caught += 1;
        }
    }
    assert!(caught > 0, "stale inner copies went unnoticed");
}

#[test]
fn readers_using_copies_agree_while_a_writer_splits_and_merges_in_bursts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pool = new_pool(8 << 20);
    let opts = nacre_bztree::BzTreeOptions {
        nodes: 4096,
        descriptors: 256,
        ..options()
    };
    let (t, _) = open(&pool, &opts).expect("open");
    let stable = |i: u64| format!("m{i:06}").into_bytes();
    for i in 0..600 {
        t.insert(&stable(i), i).expect("insert");
    }
    let done = AtomicBool::new(false);
    let model = std::thread::scope(|s| {
        let (t, done) = (&t, &done);
        for r in 0..2u64 {
            s.spawn(move || {
                let mut rng = SplitMix64::new(70 + r);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 1000 {
                    let i = rng.next_u64() % 600;
                    assert_eq!(t.get(&stable(i)).expect("get"), Some(i), "stable key {i}");
                    reads += 1;
                }
            });
        }
        let w = s.spawn(move || {
            let mut m = BTreeMap::new();
            let mut rng = SplitMix64::new(5);
            for burst in 0..30u64 {
                std::thread::sleep(Duration::from_millis(3));
                for _ in 0..300 {
                    let k = key(rng.next_u64() % 2000);
                    // Grow, then shrink: inner nodes split, then merge.
                    if rng.next_u64() % 10 < if (burst / 10) % 2 == 1 { 7 } else { 2 } {
                        assert_eq!(t.delete(&k).expect("delete"), m.remove(&k));
                    } else {
                        let v = rng.next_u64() >> 8;
                        assert_eq!(t.upsert(&k, v).expect("upsert"), m.insert(k, v));
                    }
                }
            }
            m
        });
        let m = w.join().expect("writer");
        done.store(true, Ordering::Release);
        m
    });
    let mut want = model;
    for i in 0..600 {
        want.insert(stable(i), i);
    }
    assert_eq!(contents(&t), want);
}
