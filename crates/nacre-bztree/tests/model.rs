//! The tree against a `BTreeMap` model: random inserts, updates, upserts, deletes, reads and
//! scans, with enough keys to force many splits, merges and consolidations; structure and
//! memory checked along the way; a clean reopen keeps everything.

mod common;

use std::collections::BTreeMap;

use common::*;
use nacre_bztree::{BzError, BzTree};
use nacre_pmem::{CrashPolicy, SplitMix64};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Update(u64, u64),
    Upsert(u64, u64),
    Delete(u64),
    Get(u64),
    Scan(u64, u64, usize),
    /// Update if the value is the model's (`true`) or one it is not (`false`).
    UpdateIf(u64, bool, u64),
    Seek(u64),
    SeekBefore(u64),
}

fn apply(t: &BzTree, m: &mut BTreeMap<Vec<u8>, u64>, op: &Op) {
    match *op {
        Op::Insert(k, v) => {
            let fresh = !m.contains_key(&key(k));
            assert_eq!(t.insert(&key(k), v).expect("insert"), fresh, "{op:?}");
            m.entry(key(k)).or_insert(v);
        }
        Op::Update(k, v) => {
            let old = m.get_mut(&key(k)).map(|x| std::mem::replace(x, v));
            assert_eq!(t.update(&key(k), v).expect("update"), old, "{op:?}");
        }
        Op::Upsert(k, v) => {
            assert_eq!(
                t.upsert(&key(k), v).expect("upsert"),
                m.insert(key(k), v),
                "{op:?}"
            );
        }
        Op::Delete(k) => {
            assert_eq!(
                t.delete(&key(k)).expect("delete"),
                m.remove(&key(k)),
                "{op:?}"
            );
        }
        Op::Get(k) => assert_eq!(t.get(&key(k)).expect("get"), m.get(&key(k)).copied()),
        Op::Scan(a, b, limit) => {
            let (a, b) = (key(a.min(b)), key(a.max(b)));
            let want: Vec<_> = m
                .range(a.clone()..b.clone())
                .take(limit)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            assert_eq!(t.scan(&a, Some(&b), limit).expect("scan"), want, "{op:?}");
            // The same range a leaf at a time, stopped once it has `limit` entries.
            let mut walked = Vec::new();
            t.for_each_leaf(&a, Some(&b), |es| {
                assert!(!es.is_empty(), "an empty leaf is not handed over");
                walked.extend(es);
                Ok(walked.len() < limit)
            })
            .expect("walk");
            walked.truncate(limit);
            assert_eq!(walked, want, "walk {op:?}");
        }
        Op::UpdateIf(k, right, v) => {
            let cur = m.get(&key(k)).copied();
            let expected = match (cur, right) {
                (Some(c), true) => c,
                (Some(c), false) => c ^ 1,
                (None, _) => v ^ 1,
            };
            let got = t.update_if(&key(k), expected, v).expect("update_if");
            if cur == Some(expected) {
                assert_eq!(got, Ok(()), "{op:?}");
                m.insert(key(k), v);
            } else {
                assert_eq!(got, Err(cur), "{op:?}");
            }
        }
        Op::Seek(k) => {
            let want = m.range(key(k)..).next().map(|(k, v)| (k.clone(), *v));
            assert_eq!(t.seek(&key(k)).expect("seek"), want, "{op:?}");
        }
        Op::SeekBefore(k) => {
            let want = m.range(..key(k)).next_back().map(|(k, v)| (k.clone(), *v));
            assert_eq!(t.seek_before(&key(k)).expect("seek_before"), want, "{op:?}");
        }
    }
}

fn random_op(rng: &mut SplitMix64, keys: u64, delete_bias: u64) -> Op {
    let k = rng.next_u64() % keys;
    let v = rng.next_u64() >> 4;
    match rng.next_u64() % 16 {
        0..=4 => Op::Insert(k, v),
        5 => Op::Update(k, v),
        6..=7 => Op::Upsert(k, v),
        x if x < 8 + delete_bias => Op::Delete(k),
        14 => match rng.next_u64() % 4 {
            0 => Op::Scan(k, rng.next_u64() % keys, (rng.next_u64() % 50) as usize),
            1 => Op::UpdateIf(k, rng.next_u64() % 2 == 0, v),
            2 => Op::Seek(k),
            _ => Op::SeekBefore(k),
        },
        _ => Op::Get(k),
    }
}

#[test]
fn random_operations_match_a_btreemap_through_many_smos() {
    let pool = new_pool(8 << 20);
    let opts = nacre_bztree::BzTreeOptions {
        nodes: 4096,
        ..options()
    };
    let (t, _) = open(&pool, &opts).expect("open");
    let mut m = BTreeMap::new();
    let mut rng = SplitMix64::new(42);
    // Grow, shrink (merges), grow again.
    for (phase, (n, bias)) in [(12_000u64, 2u64), (12_000, 6), (8_000, 2)]
        .iter()
        .enumerate()
    {
        for i in 0..*n {
            let op = random_op(&mut rng, 3000, *bias);
            apply(&t, &mut m, &op);
            if i % 2000 == 0 {
                check_memory(&t).unwrap_or_else(|e| panic!("phase {phase} op {i}: {e}"));
            }
        }
        assert_eq!(contents(&t), m, "phase {phase}");
    }
    let c = check_memory(&t).expect("final check");
    let smo = t.smo_stats();
    eprintln!("{smo:?} {c:?}", c = (c.keys, c.leaves, c.inner, c.depth));
    assert!(
        smo.splits > 50 && smo.merges > 5 && smo.consolidations > 50,
        "{smo:?}"
    );
    assert!(c.depth >= 3, "depth {}", c.depth);
    // Everything is durable: a power failure that keeps nothing unflushed loses nothing.
    drop(t);
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool = std::sync::Arc::new(nacre_pmem::Pool::open_sim(image, &pool_opts()).expect("image"));
    let (t, stats) = open(&pool, &opts).expect("reopen");
    assert!(!stats.created);
    assert_eq!(contents(&t), m);
    check_memory(&t).expect("check after reopen");
}

/// A walk whose callback changes the tree (each key it is handed updated, a new key after
/// it inserted, splitting leaves as it goes) hands over every key that was there before,
/// once and in order.
#[test]
fn a_walk_that_changes_the_tree_hands_over_every_earlier_key_once() {
    let pool = new_pool(8 << 20);
    let opts = nacre_bztree::BzTreeOptions {
        nodes: 4096,
        ..options()
    };
    let (t, _) = open(&pool, &opts).expect("open");
    let before: Vec<Vec<u8>> = (0..3000u64).map(|k| key(k * 2)).collect();
    for k in &before {
        t.insert(k, 1).expect("insert");
    }
    let mut seen = Vec::new();
    t.for_each_leaf(b"", None, |es| {
        for (k, v) in es {
            if v == 1 {
                t.update(&k, 2).expect("update");
                let mut after = k.clone();
                after.push(b'x');
                t.insert(&after, 3).expect("insert after");
                seen.push(k);
            } else {
                assert_eq!(v, 3, "{k:?}: only keys the walk inserted are new");
            }
        }
        Ok(true)
    })
    .expect("walk");
    assert_eq!(seen, before);
    assert!(t.smo_stats().splits > 10, "{:?}", t.smo_stats());
    check_memory(&t).expect("check");
}

#[test]
fn deleting_everything_collapses_the_tree_and_frees_its_nodes() {
    let pool = new_pool(8 << 20);
    let (t, _) = open(&pool, &options()).expect("open");
    let free0 = t.node_pool().free_count();
    for i in 0..2000 {
        assert!(t.insert(&key(i), i).expect("insert"));
    }
    assert!(check_memory(&t).expect("check").depth >= 3);
    for i in (0..2000).rev() {
        assert_eq!(t.delete(&key(i)).expect("delete"), Some(i));
    }
    assert!(contents(&t).is_empty());
    let c = check_memory(&t).expect("check");
    let smo = t.smo_stats();
    assert!(smo.merges > 50 && smo.root_collapses > 0, "{smo:?}");
    assert!(c.depth <= 2 && c.leaves + c.inner <= 3, "{c:?}");
    // Memory comes back once descriptors are reclaimed (after their epochs).
    t.pmwcas().collect().expect("collect");
    t.pmwcas().collect().expect("collect");
    t.pmwcas().collect().expect("collect");
    assert!(
        t.node_pool().free_count() + 3 >= free0,
        "{} of {free0}",
        t.node_pool().free_count()
    );
}

#[test]
fn long_keys_and_large_values_are_refused_with_typed_errors() {
    let pool = new_pool(POOL_SIZE);
    let (t, _) = open(&pool, &options()).expect("open");
    let long = vec![b'x'; 25];
    assert!(matches!(
        t.insert(&long, 1),
        Err(BzError::KeyTooLong { len: 25, max: 24 })
    ));
    assert!(matches!(t.get(&long), Err(BzError::KeyTooLong { .. })));
    assert!(matches!(
        t.insert(b"a", 1 << 61),
        Err(BzError::ValueTooLarge { .. })
    ));
    assert!(t.insert(&[b'y'; 24], (1 << 61) - 1).expect("max"));
    assert!(t.insert(b"", 5).expect("empty key"));
    assert_eq!(t.get(b"").expect("get"), Some(5));
    assert_eq!(t.scan(b"", None, 10).expect("scan").len(), 2);
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u64..400;
    prop_oneof![
        4 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, u64::from(v))),
        1 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::Update(k, u64::from(v))),
        2 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::Upsert(k, u64::from(v))),
        3 => k.clone().prop_map(Op::Delete),
        1 => k.clone().prop_map(Op::Get),
        1 => (k.clone(), k.clone(), 0usize..40).prop_map(|(a, b, l)| Op::Scan(a, b, l)),
        1 => (k.clone(), any::<bool>(), any::<u32>())
            .prop_map(|(k, r, v)| Op::UpdateIf(k, r, u64::from(v))),
        1 => k.clone().prop_map(Op::Seek),
        1 => k.prop_map(Op::SeekBefore),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn prop_tree_matches_btreemap(ops in proptest::collection::vec(op_strategy(), 1..1500)) {
        let pool = new_pool(POOL_SIZE);
        let (t, _) = open(&pool, &options()).expect("open");
        let mut m = BTreeMap::new();
        for op in &ops {
            apply(&t, &mut m, op);
        }
        prop_assert_eq!(contents(&t), m);
        check_memory(&t).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn seeks_cross_deleted_ranges_both_ways() {
    let pool = new_pool(8 << 20);
    let (t, _) = open(&pool, &options()).expect("open");
    for i in 0..3000 {
        assert!(t.insert(&key(i), i).expect("insert"));
    }
    // A hole of many leaves' worth of keys, deleted from both ends.
    for i in 0..500 {
        for k in [1000 + i, 1999 - i] {
            assert_eq!(t.delete(&key(k)).expect("delete"), Some(k));
        }
    }
    for probe in [1000, 1500, 1999, 2000] {
        assert_eq!(
            t.seek_before(&key(probe)).expect("seek_before"),
            Some((key(999), 999)),
            "{probe}"
        );
    }
    assert_eq!(t.seek(&key(1000)).expect("seek"), Some((key(2000), 2000)));
    // Walking backwards one entry at a time visits every key once, in order.
    let mut seen = Vec::new();
    let mut at = key(u64::MAX >> 4);
    while let Some((k, v)) = t.seek_before(&at).expect("seek_before") {
        seen.push(v);
        at = k;
    }
    let want: Vec<u64> = (0..1000).chain(2000..3000).rev().collect();
    assert_eq!(seen, want);
    assert_eq!(t.seek_before(&key(0)).expect("first"), None);
    assert_eq!(t.seek(&key(3000)).expect("past the end"), None);
}
