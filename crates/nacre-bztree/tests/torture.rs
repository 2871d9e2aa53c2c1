//! Power-failure torture of the BzTree on the `sim` backend.
//!
//! A seeded single-threaded workload of inserts, deletes, updates and upserts over a tree of
//! a few levels (512-byte nodes, so it splits, merges and consolidates all the time) runs on
//! a fresh image. The power fails at a chosen fence, with a random subset of the words not
//! yet on media kept; the image is reopened and recovered. Then:
//! - the tree holds exactly the state before or after the operation the failure interrupted
//!   (every acknowledged operation is present, the interrupted one is all-or-nothing; a
//!   record reserved but never made visible never shows: T2);
//! - the structural check passes (order, separator bounds, one depth, checksums) and no slot
//!   is reserved under the new epoch (T1);
//! - Halloc's committed node set is exactly the reachable node set (no leak, no double free);
//! - the recovered tree takes more operations, and a second crash and open keep them.
//!
//! One crash point in eight also fails the power during the first recovery, at one of its
//! first fences, and checks the recovery of that image instead.
//!
//! Mutation tests switch off one durability or recovery rule at a time and check that the
//! torture fails.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use nacre_bztree::{BzMutation, BzTree, BzTreeOptions};
use nacre_pmem::{CrashPolicy, Pool, SplitMix64};
use nacre_pmwcas::RecoveryMutation;

const OPS: u64 = 120;
const KEYS: u64 = 180;

type Model = BTreeMap<Vec<u8>, u64>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn crash_policy(n: u64) -> CrashPolicy {
    let mut rng = SplitMix64::new(n ^ 0x5EED);
    match n % 4 {
        0 => CrashPolicy::KeepNone,
        1 => CrashPolicy::KeepAll,
        _ => CrashPolicy::KeepRandom {
            seed: n,
            keep: rng.next_f64(),
        },
    }
}

/// One workload step on tree and model. Deletes dominate every other window of ops so
/// leaves shrink and merge as well as grow and split.
fn step(t: &BzTree, m: &mut Model, rng: &mut SplitMix64, op: u64) -> Result<(), String> {
    // Each 60 ops work a band of 30 keys (a few leaves): first mostly inserts (splits,
    // consolidations), then mostly deletes (merges).
    let k = tkey(((op / 60) * 47 + rng.next_u64() % 30) % KEYS);
    let v = rng.next_u64() >> 8;
    let shrinking = (op / 30) % 2 == 1;
    let r = rng.next_u64() % 10;
    let e = |e: nacre_bztree::BzError| format!("op {op}: {e}");
    if (!shrinking && r < 1) || (shrinking && r < 9) {
        let got = t.delete(&k).map_err(e)?;
        ensure!(
            got == m.remove(&k),
            "op {op}: delete {k:?} returned {got:?}"
        );
    } else if r < 7 || shrinking {
        let fresh = !m.contains_key(&k);
        ensure!(
            t.insert(&k, v).map_err(e)? == fresh,
            "op {op}: insert {k:?}"
        );
        m.entry(k).or_insert(v);
    } else if r < 8 {
        let got = t.upsert(&k, v).map_err(e)?;
        ensure!(
            got == m.insert(k.clone(), v),
            "op {op}: upsert {k:?} returned {got:?}"
        );
    } else {
        let old = m.get_mut(&k).map(|x| std::mem::replace(x, v));
        let got = t.update(&k, v).map_err(e)?;
        ensure!(got == old, "op {op}: update {k:?} returned {got:?}");
    }
    Ok(())
}

/// Torture keys: 4 bytes, so 256-byte nodes hold about ten records.
fn tkey(i: u64) -> Vec<u8> {
    (i as u32).to_be_bytes().to_vec()
}

/// The torture's tree: 256-byte nodes, 4-byte keys.
fn topts() -> BzTreeOptions {
    BzTreeOptions {
        node_size: 256,
        max_key_len: 4,
        ..options()
    }
}

/// A fresh image holding a tree of every third key.
fn base_image(opts: &BzTreeOptions) -> (Vec<u8>, Model) {
    let pool = new_pool(POOL_SIZE);
    let (t, _) = open(&pool, opts).expect("open");
    let mut m = Model::new();
    for i in 0..KEYS / 3 {
        let k = tkey(i * 3);
        t.upsert(&k, i).expect("upsert");
        m.insert(k, i);
    }
    t.close().expect("close");
    (pool.sim().expect("sim").crash(CrashPolicy::KeepNone), m)
}

/// Runs the workload; returns the pool, the fences it issued, the model after each op
/// (states[0] before op 0) and the op during which the power failed.
fn run_workload(
    base: &[u8],
    start: &Model,
    seed: u64,
    fail_at: Option<u64>,
    opts: &BzTreeOptions,
) -> (Arc<Pool>, u64, Vec<Model>, Option<usize>) {
    let pool = Arc::new(Pool::open_sim(base.to_vec(), &pool_opts()).expect("image"));
    let (t, _) = open(&pool, opts).expect("open base");
    let sim = pool.sim().expect("sim");
    let first = sim.fence_count();
    if let Some(f) = fail_at {
        sim.stop_at_fence(first + f);
    }
    let mut rng = SplitMix64::new(seed);
    let mut m = start.clone();
    let mut states = vec![m.clone()];
    let mut interrupted = None;
    for op in 0..OPS {
        let was = sim.is_stopped();
        step(&t, &mut m, &mut rng, op).unwrap_or_else(|e| panic!("workload: {e}"));
        states.push(m.clone());
        if !was && sim.is_stopped() {
            interrupted = Some(op as usize);
        }
    }
    let fences = sim.fence_count() - first;
    if fail_at.is_none() {
        let c = t.check().expect("check");
        eprintln!(
            "seed {seed}: {fences} fences, {:?}, {} keys {} leaves depth {}",
            t.smo_stats(),
            c.keys,
            c.leaves,
            c.depth
        );
    }
    drop(t);
    (pool, fences, states, interrupted)
}

#[derive(Debug, Default)]
struct Coverage {
    rolled_forward: u64,
    rolled_back: u64,
    objects_freed: u64,
    frozen_after_recovery: u64,
    stale_reservations: u64,
    recoveries_interrupted: u64,
    max_open: std::time::Duration,
}

fn check_image(
    image: Vec<u8>,
    states: &[Model],
    interrupted: Option<usize>,
    opts: &BzTreeOptions,
    n: u64,
    cov: &mut Coverage,
) -> Result<(), String> {
    let mut image = image;
    if n % 8 == 5 {
        let pool = Arc::new(Pool::open_sim(image, &pool_opts()).map_err(|e| e.to_string())?);
        let sim = pool.sim().expect("sim");
        sim.stop_at_fence(sim.fence_count() + 1 + (n / 8) % 6);
        open(&pool, opts).map_err(|e| format!("interrupted recovery failed: {e}"))?;
        image = sim.crash(crash_policy(n / 8 + 1));
        cov.recoveries_interrupted += 1;
    }
    let pool = Arc::new(Pool::open_sim(image, &pool_opts()).map_err(|e| e.to_string())?);
    let (t, stats) = open(&pool, opts).map_err(|e| format!("recovery failed: {e}"))?;
    cov.rolled_forward += u64::from(stats.pmwcas.rolled_forward);
    cov.rolled_back += u64::from(stats.pmwcas.rolled_back);
    cov.objects_freed += u64::from(stats.pmwcas.objects_freed);
    cov.max_open = cov.max_open.max(stats.elapsed);
    let c = check_memory(&t)?;
    ensure!(
        c.pending_reservations == 0,
        "{} slots reserved under the new epoch after open",
        c.pending_reservations
    );
    cov.frozen_after_recovery += c.frozen;
    cov.stale_reservations += c.stale_reservations;
    let got = try_contents(&t)?;
    let ok = match interrupted {
        Some(op) => got == states[op] || got == states[op + 1],
        None => Some(&got) == states.last(),
    };
    if !ok {
        let want = interrupted.map_or(states.len() - 1, |op| op + 1);
        let diff: Vec<_> = got
            .iter()
            .filter(|(k, v)| states[want].get(*k) != Some(v))
            .chain(states[want].iter().filter(|(k, _)| !got.contains_key(*k)))
            .take(6)
            .collect();
        return Err(format!(
            "contents after a failure in op {interrupted:?} match neither side; differing \
             entries (vs after): {diff:?}"
        ));
    }
    // The recovered tree works (frozen leftovers are helped), and what it does is durable.
    let mut m = got;
    let mut rng = SplitMix64::new(n ^ 0xABCD);
    for op in 0..12 {
        step(&t, &mut m, &mut rng, 100 + op).map_err(|e| format!("after recovery: {e}"))?;
    }
    check_memory(&t)?;
    drop(t);
    let again = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool2 = Arc::new(Pool::open_sim(again, &pool_opts()).map_err(|e| e.to_string())?);
    let (t2, _) = open(&pool2, opts).map_err(|e| format!("second open: {e}"))?;
    ensure!(
        try_contents(&t2)? == m,
        "operations after recovery were lost"
    );
    check_memory(&t2)?;
    Ok(())
}

fn torture(crashes: u64, opts: &BzTreeOptions, cov: &mut Coverage) -> Result<(), String> {
    // The base image is built with every rule in place; mutations apply to the workload.
    let clean = BzTreeOptions {
        mutation: None,
        pmwcas_mutation: None,
        ..opts.clone()
    };
    let (base, start) = base_image(&clean);
    let seeds = 8;
    let full: Vec<u64> = (0..seeds)
        .map(|s| run_workload(&base, &start, s, None, opts).1)
        .collect();
    for n in 0..crashes {
        let seed = n % seeds;
        let f = 1 + ((n / seeds) * 7919 + n) % full[seed as usize];
        let (pool, _, states, interrupted) = run_workload(&base, &start, seed, Some(f), opts);
        let image = pool.sim().expect("sim").crash(crash_policy(n));
        drop(pool);
        check_image(image, &states, interrupted, opts, n, cov)
            .map_err(|e| format!("crash point {n} (fence {f}, seed {seed}): {e}"))?;
    }
    Ok(())
}

fn torture_ok(crashes: u64) -> Coverage {
    let t = std::time::Instant::now();
    let mut cov = Coverage::default();
    if let Err(e) = torture(crashes, &topts(), &mut cov) {
        panic!("{e}");
    }
    eprintln!("{crashes} crash points in {:?}: {cov:?}", t.elapsed());
    cov
}

#[test]
fn power_failures_keep_the_tree_whole_and_every_node_owned_once() {
    let cov = torture_ok(800);
    assert!(cov.rolled_forward > 0, "{cov:?}");
    assert!(cov.rolled_back > 0, "{cov:?}");
    assert!(cov.objects_freed > 0, "{cov:?}");
    assert!(cov.frozen_after_recovery > 0, "{cov:?}");
    assert!(cov.stale_reservations > 0, "{cov:?}");
    assert!(cov.recoveries_interrupted > 0, "{cov:?}");
}

#[test]
#[ignore = "long run: cargo test -p nacre-bztree --release --test torture -- --ignored"]
fn power_failures_keep_the_tree_whole_long() {
    torture_ok(20_000);
}

fn mutation_is_caught(opts: BzTreeOptions, what: &str, crashes: u64) {
    match torture(crashes, &opts, &mut Coverage::default()) {
        Ok(()) => panic!("torture passed without {what} in {crashes} crashes"),
        Err(e) => eprintln!("without {what}: {e}"),
    }
}

#[test]
fn torture_catches_open_without_epoch_bump() {
    let opts = BzTreeOptions {
        mutation: Some(BzMutation::SkipEpochBump),
        ..topts()
    };
    mutation_is_caught(opts, "the epoch bump (T1)", 240);
}

#[test]
fn torture_catches_records_made_visible_before_they_are_durable() {
    let opts = BzTreeOptions {
        mutation: Some(BzMutation::SkipRecordFlush),
        ..topts()
    };
    mutation_is_caught(opts, "the record flush (B3)", 240);
}

#[test]
fn torture_catches_nodes_linked_before_they_are_durable() {
    let opts = BzTreeOptions {
        mutation: Some(BzMutation::SkipNodeFlush),
        ..topts()
    };
    mutation_is_caught(opts, "the node flush (B4)", 240);
}

#[test]
fn torture_catches_pmwcas_recovery_without_memory_policies() {
    let opts = BzTreeOptions {
        pmwcas_mutation: Some(RecoveryMutation::SkipPolicies),
        ..topts()
    };
    mutation_is_caught(opts, "PMwCAS memory policies at recovery", 240);
}
