//! Measurements (ignored; run with `cargo test -p nacre-bztree --release --test bench --
//! --ignored --nocapture`): open/recovery time against tree size, and single-thread insert
//! and lookup throughput against `BTreeMap` and `crossbeam-skiplist`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use common::*;
use nacre_bztree::BzTreeOptions;
use nacre_pmem::{CrashPolicy, Pool, SplitMix64};

fn big_opts(nodes: u64) -> BzTreeOptions {
    BzTreeOptions {
        name: "bench".into(),
        node_size: 4096,
        max_key_len: 32,
        nodes,
        descriptors: 1024,
        reclaim_batch: 64,
        ..BzTreeOptions::default()
    }
}

fn bench_key(i: u64) -> Vec<u8> {
    // Scrambled order, fixed width.
    format!(
        "key{:012}",
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
    )
    .into_bytes()
}

#[test]
#[ignore = "measurement: cargo test -p nacre-bztree --release --test bench -- --ignored --nocapture"]
fn open_time_does_not_grow_with_the_tree() {
    for &n in &[10_000u64, 100_000, 1_000_000] {
        let nodes = n / 40 + 256;
        let pool = new_pool((nodes * 4096 + (16 << 20)).next_power_of_two());
        let (t, _) = open(&pool, &big_opts(nodes)).expect("open");
        let start = Instant::now();
        for i in 0..n {
            t.insert(&bench_key(i), i).expect("insert");
        }
        let fill = start.elapsed();
        let c = t.check().expect("check");
        drop(t);
        let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
        drop(pool);
        let pool = Arc::new(Pool::open_sim(image, &pool_opts()).expect("image"));
        let (t, stats) = open(&pool, &big_opts(nodes)).expect("reopen");
        assert_eq!(t.get(&bench_key(n / 2)).expect("get"), Some(n / 2));
        eprintln!(
            "{n} keys ({} leaves, depth {}): filled in {fill:?}; open after power failure {:?} \
             (PMwCAS recovery {:?}, {} descriptors scanned)",
            c.leaves, c.depth, stats.elapsed, stats.pmwcas.elapsed, stats.pmwcas.descriptors
        );
    }
}

#[test]
#[ignore = "measurement: cargo test -p nacre-bztree --release --test bench -- --ignored --nocapture"]
fn single_thread_throughput_against_btreemap_and_skiplist() {
    let n = 200_000u64;
    let keys: Vec<Vec<u8>> = (0..n).map(bench_key).collect();
    let mut rng = SplitMix64::new(1);
    let probes: Vec<usize> = (0..n).map(|_| (rng.next_u64() % n) as usize).collect();
    let rate = |what: &str, ops: u64, t: std::time::Duration| {
        eprintln!(
            "{what}: {:.0} ops/s ({:.2} us/op)",
            ops as f64 / t.as_secs_f64(),
            t.as_secs_f64() * 1e6 / ops as f64
        );
    };
    let nodes = n / 40 + 256;
    let pool = new_pool((nodes * 4096 + (16 << 20)).next_power_of_two());
    let (t, _) = open(&pool, &big_opts(nodes)).expect("open");
    let s = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        t.insert(k, i as u64).expect("insert");
    }
    rate("bztree (sim pool) insert", n, s.elapsed());
    let s = Instant::now();
    for &p in &probes {
        assert_eq!(t.get(&keys[p]).expect("get"), Some(p as u64));
    }
    rate("bztree (sim pool) lookup", n, s.elapsed());

    let mut m = BTreeMap::new();
    let s = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        m.insert(k.clone(), i as u64);
    }
    rate("BTreeMap insert", n, s.elapsed());
    let s = Instant::now();
    for &p in &probes {
        assert_eq!(m.get(&keys[p]), Some(&(p as u64)));
    }
    rate("BTreeMap lookup", n, s.elapsed());

    let sk = crossbeam_skiplist::SkipMap::new();
    let s = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        sk.insert(k.clone(), i as u64);
    }
    rate("crossbeam SkipMap insert", n, s.elapsed());
    let s = Instant::now();
    for &p in &probes {
        assert_eq!(sk.get(&keys[p]).map(|e| *e.value()), Some(p as u64));
    }
    rate("crossbeam SkipMap lookup", n, s.elapsed());
}
