//! Power-failure torture of PMwCAS on the `sim` backend.
//!
//! A seeded single-threaded workload of multi-word operations (transfers, three-way
//! rotations, node replacements that free the old node and its child on success and the new
//! ones on failure, one in eight made to fail) runs on a fresh image. The power fails at a
//! chosen fence (or right after a chosen condition-pointer install), with a random subset of
//! the words not yet on media kept; the image is reopened and recovered. Then:
//! - no account or slot word holds a descriptor pointer, condition pointer or dirty bit (P3);
//! - the state is exactly the state before or after the operation the failure interrupted:
//!   every acknowledged operation is present and the interrupted one is all-or-nothing;
//! - balances sum to the starting total;
//! - the node pool's committed objects are exactly the slots' nodes and their children:
//!   nothing replaced leaks and nothing live is freed (memory policies applied exactly once),
//!   and Halloc's invariant H1 holds;
//! - the recovered instance runs more operations, and a second crash and open find nothing
//!   in flight and the same state.
//!
//! One crash point in eight also fails the power during the first recovery, at one of its
//! first fences, and checks the recovery of that image instead.
//!
//! Mutation tests switch off one recovery rule at a time and check that the torture fails.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::*;
use nacre_pmem::{CrashPolicy, Pool, SplitMix64};
use nacre_pmwcas::{PmwcasOptions, RecoveryMutation, FLAGS};

const OPS: u64 = 30;

/// How the power fails in one run.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// At this fence (counted from the open of the instance on the base image).
    Fence(u64),
    /// Right after the n-th condition pointer is installed.
    Condition(u64),
}

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

/// Runs the workload once; returns the fences it issued and the states it went through
/// (before op 0, after op 0, ...) with the index of the op the failure interrupted.
fn run_workload(
    base: &[u8],
    seed: u64,
    failure: Option<Failure>,
    opts: &PmwcasOptions,
) -> (Arc<Pool>, u64, Vec<State>, Option<usize>) {
    let pool = Arc::new(Pool::open_sim(base.to_vec(), &pool_opts()).expect("image"));
    let mut o = opts.clone();
    if let Some(Failure::Condition(n)) = failure {
        o.crash_at_condition = Some(n);
    }
    let (pm, stats) = open(&pool, &o).expect("open base");
    assert_eq!(stats.in_flight, 0);
    let sim = pool.sim().expect("sim");
    let start = sim.fence_count();
    if let Some(Failure::Fence(f)) = failure {
        sim.stop_at_fence(start + f);
    }
    let mut rng = SplitMix64::new(seed);
    let mut states = vec![read_state(&pm)];
    let mut interrupted = None;
    for op in 0..OPS {
        let was = sim.is_stopped();
        step(&pm, &mut rng, 100 + op);
        states.push(read_state(&pm));
        if !was && sim.is_stopped() {
            interrupted = Some(op as usize);
        }
    }
    let fences = sim.fence_count() - start;
    drop(pm);
    (pool, fences, states, interrupted)
}

fn committed_matches_slots(pm: &nacre_pmwcas::Pmwcas, st: &State) -> Result<(), String> {
    let nodes = pm.node_pool(0).expect("node pool");
    nodes.verify().map_err(|e| format!("H1: {e}"))?;
    let committed: BTreeSet<u64> = nodes.committed().iter().map(|o| o.get()).collect();
    let mut live = BTreeSet::new();
    for &n in &st.slots {
        live.insert(n);
        live.insert(node_child(pm.pmem(), n));
    }
    ensure!(
        committed == live,
        "committed nodes {committed:x?} are not the live ones {live:x?} (leak or double free)"
    );
    Ok(())
}

/// What the recoveries of a torture run went through.
#[derive(Debug, Default)]
struct Coverage {
    rolled_forward: u64,
    rolled_back: u64,
    pointers_replaced: u64,
    conditions_undone: u64,
    dirty_cleared: u64,
    objects_freed: u64,
    recoveries_interrupted: u64,
    max_recovery: std::time::Duration,
}

fn check_image(
    image: Vec<u8>,
    states: &[State],
    interrupted: Option<usize>,
    opts: &PmwcasOptions,
    seed: u64,
    cov: &mut Coverage,
) -> Result<(), String> {
    let mut image = image;
    if seed % 8 == 5 {
        // The power fails again during recovery (R6: recovery repeats with the same result).
        let pool = Arc::new(Pool::open_sim(image, &pool_opts()).map_err(|e| e.to_string())?);
        let sim = pool.sim().expect("sim");
        sim.stop_at_fence(sim.fence_count() + 1 + (seed / 8) % 6);
        open(&pool, opts).map_err(|e| format!("interrupted recovery failed: {e}"))?;
        image = sim.crash(crash_policy(seed / 8 + 1));
        cov.recoveries_interrupted += 1;
    }
    let pool = Arc::new(Pool::open_sim(image, &pool_opts()).map_err(|e| e.to_string())?);
    let (pm, stats) = open(&pool, opts).map_err(|e| format!("recovery failed: {e}"))?;
    cov.rolled_forward += u64::from(stats.rolled_forward);
    cov.rolled_back += u64::from(stats.rolled_back);
    cov.pointers_replaced += u64::from(stats.pointers_replaced);
    cov.conditions_undone += u64::from(stats.conditions_undone);
    cov.dirty_cleared += u64::from(stats.dirty_cleared);
    cov.objects_freed += u64::from(stats.objects_freed);
    cov.max_recovery = cov.max_recovery.max(stats.elapsed);
    for (k, w) in raw_words(&pool).iter().enumerate() {
        ensure!(
            w & FLAGS == 0,
            "word {k} holds {w:#x} after recovery ({stats:?})"
        );
    }
    let st = read_state(&pm);
    let ok = match interrupted {
        Some(op) => st == states[op] || st == states[op + 1],
        None => Some(&st) == states.last(),
    };
    ensure!(
        ok,
        "state {st:?} after a failure in op {interrupted:?} is neither before nor after it: \
         before {:?}, after {:?} ({stats:?})",
        interrupted.map(|op| &states[op]),
        interrupted.map(|op| &states[op + 1]),
    );
    let sum: u64 = st.accounts.iter().sum();
    ensure!(
        sum == START_BALANCE * ACCOUNTS as u64,
        "balances sum to {sum}"
    );
    committed_matches_slots(&pm, &st)?;
    // The recovered instance works, and what recovery wrote is durable.
    let mut rng = SplitMix64::new(seed ^ 0xABCD);
    for k in 0..4 {
        step(&pm, &mut rng, 10_000 + k);
    }
    let after = read_state(&pm);
    drop(pm);
    let again = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool2 = Arc::new(Pool::open_sim(again, &pool_opts()).map_err(|e| e.to_string())?);
    let (pm2, _) = open(&pool2, opts).map_err(|e| format!("second open: {e}"))?;
    for (k, w) in raw_words(&pool2).iter().enumerate() {
        ensure!(
            w & FLAGS == 0,
            "word {k} holds {w:#x} after the second open"
        );
    }
    ensure!(
        read_state(&pm2) == after,
        "operations after recovery were lost"
    );
    committed_matches_slots(&pm2, &after)?;
    Ok(())
}

/// `crashes` crash points: fences swept in order, with every fourth point a failure right
/// after a condition install, each with its own crash image policy and workload seed.
fn torture(crashes: u64, opts: &PmwcasOptions, cov: &mut Coverage) -> Result<(), String> {
    let base = base_image();
    let seeds = 4;
    let mut full = Vec::new();
    for s in 0..seeds {
        let (_, fences, _, _) = run_workload(&base, s, None, opts);
        full.push(fences);
    }
    for n in 0..crashes {
        let seed = n % seeds;
        let f = full[seed as usize];
        let failure = if n % 4 == 3 {
            Failure::Condition(1 + (n / 4) % (OPS * 2))
        } else {
            Failure::Fence(1 + (n / seeds) % (f + 1))
        };
        let (pool, _, states, interrupted) = run_workload(&base, seed, Some(failure), opts);
        let image = pool.sim().expect("sim").crash(crash_policy(n));
        drop(pool);
        check_image(image, &states, interrupted, opts, n, cov)
            .map_err(|e| format!("crash point {n} ({failure:?}, seed {seed}): {e}"))?;
    }
    Ok(())
}

fn torture_ok(crashes: u64) -> Coverage {
    let t = std::time::Instant::now();
    let mut cov = Coverage::default();
    if let Err(e) = torture(crashes, &options(), &mut cov) {
        panic!("{e}");
    }
    eprintln!("{crashes} crash points in {:?}: {cov:?}", t.elapsed());
    cov
}

#[test]
fn power_failures_leave_every_operation_whole_and_every_node_freed_once() {
    let cov = torture_ok(1000);
    // Every recovery rule had work to do.
    assert!(cov.rolled_forward > 0, "{cov:?}");
    assert!(cov.rolled_back > 0, "{cov:?}");
    assert!(cov.pointers_replaced > 0, "{cov:?}");
    assert!(cov.conditions_undone > 0, "{cov:?}");
    assert!(cov.dirty_cleared > 0, "{cov:?}");
    assert!(cov.objects_freed > 0, "{cov:?}");
    assert!(cov.recoveries_interrupted > 0, "{cov:?}");
}

#[test]
#[ignore = "long run: cargo test -p nacre-pmwcas --release --test torture -- --ignored"]
fn power_failures_leave_every_operation_whole_long() {
    torture_ok(20_000);
}

fn mutation_is_caught(mutation: RecoveryMutation, crashes: u64) {
    let opts = PmwcasOptions {
        recovery_mutation: Some(mutation),
        ..options()
    };
    match torture(crashes, &opts, &mut Coverage::default()) {
        Ok(()) => panic!("torture passed without the {mutation:?} rule in {crashes} crashes"),
        Err(e) => eprintln!("without {mutation:?}: {e}"),
    }
}

#[test]
fn torture_catches_recovery_rolling_back_succeeded_operations() {
    mutation_is_caught(RecoveryMutation::RollBackSucceeded, 240);
}

#[test]
fn torture_catches_recovery_without_roll_back() {
    mutation_is_caught(RecoveryMutation::SkipRollBack, 240);
}

#[test]
fn torture_catches_recovery_without_dirty_clear() {
    mutation_is_caught(RecoveryMutation::SkipDirtyClear, 240);
}

#[test]
fn torture_catches_recovery_without_condition_restore() {
    mutation_is_caught(RecoveryMutation::SkipConditionRestore, 240);
}

#[test]
fn torture_catches_recovery_without_memory_policies() {
    mutation_is_caught(RecoveryMutation::SkipPolicies, 240);
}

#[test]
fn torture_catches_recovery_freeing_descriptors_before_repairs_are_durable() {
    mutation_is_caught(RecoveryMutation::FreeBeforeRepairsDurable, 1000);
}

#[test]
fn torture_catches_recovery_freeing_uncommitted_objects() {
    mutation_is_caught(RecoveryMutation::IgnoreCommittedCheck, 240);
}
