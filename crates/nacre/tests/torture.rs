//! Power-failure torture of the engine on the `sim` backend: writer threads commit batches
//! through the Reorder Ring, the power fails at a random fence with a random subset of
//! unflushed words kept, the database is recovered from the crash image, and then:
//! every acknowledged batch is fully present (C3); no batch is partially visible (atomicity);
//! the visible sequence numbers are exactly 1..=n, so a visible batch implies every batch
//! granted before it is visible (C2); the rebuilt index agrees with a full scan; and the
//! recovered database takes new writes.
//!
//! Both commit modes run: two fences per group, and one fence per group, where a crash in the
//! fence leaves any subset of a group's records, headers, commit points and `commit_id`. Batches
//! span up to three subtables and groups several batches, so a group's commit points can
//! persist in some memtables and not others. Mutation tests switch off one recovery rule at a
//! time and check that the torture then fails.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use nacre::{CommitMode, Db, IterOptions, Options, Pipelining, RecoveryMutation, WriteBatch};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

const THREADS: u64 = 3;
const BATCHES: u64 = 25;
const SUBTABLES: [&str; 3] = ["s0", "s1", "s2"];

/// How one torture run is set up.
#[derive(Clone, Copy)]
struct Setup {
    mode: CommitMode,
    pipelining: Pipelining,
    mutation: Option<RecoveryMutation>,
}

/// What the recoveries of a torture run went through.
#[derive(Debug, Default)]
struct Coverage {
    rolled_back_several: u64,
    lowered_commit_id: u64,
}

fn opts(setup: Setup) -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.commit_mode = setup.mode;
    o.pipelining = setup.pipelining;
    o.recovery_mutation = setup.mutation;
    o.pool_size = 6 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o.ring_capacity = 4;
    o.batch_size = 3;
    o.commit_buckets = 2;
    o.recovery_threads = 2;
    o
}

fn value(t: u64, b: u64, i: u64) -> Vec<u8> {
    let n = 20 + ((t * 131 + b * 17 + i * 7) % 400) as usize;
    (0..n)
        .map(|j| (j as u64 ^ t ^ b << 3 ^ i << 6) as u8)
        .collect()
}

/// The keys of batch (t, b): (subtable index, key). Up to four keys over up to three
/// subtables.
fn batch_keys(t: u64, b: u64) -> Vec<(usize, Vec<u8>)> {
    let n = 1 + (t + b) % 4;
    (0..n)
        .map(|i| {
            (
                ((t * 2 + b + i) % 3) as usize,
                format!("t{t}/b{b:03}/o{i}").into_bytes(),
            )
        })
        .collect()
}

fn subtables(db: &Db) -> Vec<nacre::Subtable> {
    SUBTABLES
        .iter()
        .map(|n| db.subtable(n).expect("subtable"))
        .collect()
}

fn base_image(setup: Setup) -> Vec<u8> {
    let db = Db::open(opts(setup)).expect("open");
    subtables(&db);
    db.sim().expect("sim").crash(CrashPolicy::KeepNone)
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// One workload with a power failure at a random fence (none if `max_fence` is 0), then the
/// checks. Returns the fences the workload issued, or what check failed.
fn run_once(
    setup: Setup,
    base: &[u8],
    seed: u64,
    max_fence: u64,
    cov: &mut Coverage,
) -> Result<u64, String> {
    let mut rng = SplitMix64::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) + 1);
    let pool =
        Pool::open_sim(base.to_vec(), &PoolOptions::with_backend(Backend::Sim)).expect("image");
    let db = Arc::new(Db::open_pool(pool, opts(setup)).expect("open"));
    let subs = subtables(&db);
    let sim_handle = db.sim().expect("sim");
    let sim: &nacre_pmem::SimControl = &sim_handle;
    let start = sim.fence_count();
    if max_fence > 0 {
        sim.stop_at_fence(start + 1 + rng.next_u64() % max_fence);
    }
    let acked: Mutex<BTreeSet<(u64, u64)>> = Mutex::new(BTreeSet::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, subs, acked) = (&db, &subs, &acked);
            s.spawn(move || {
                for b in 0..BATCHES {
                    let mut batch = WriteBatch::new();
                    for (i, (sub, k)) in batch_keys(t, b).into_iter().enumerate() {
                        batch.put(&subs[sub], k, value(t, b, i as u64));
                    }
                    db.write(batch).expect("write");
                    if !sim.is_stopped() {
                        acked.lock().expect("lock").insert((t, b));
                    }
                }
            });
        }
    });
    let fences = sim.fence_count() - start;
    let image = sim.crash(CrashPolicy::KeepRandom {
        seed,
        keep: rng.next_f64(),
    });
    drop(subs);
    drop(db);

    let pool =
        Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("crash image opens");
    let db = Db::open_pool(pool, opts(setup))
        .map_err(|e| format!("seed {seed}: recovery failed: {e}"))?;
    let rep = db.recovery_report();
    cov.rolled_back_several += u64::from(rep.rolled_back > 1);
    cov.lowered_commit_id += u64::from(rep.lowered_commit_id);
    let subs = subtables(&db);
    let acked = acked.into_inner().expect("acked");
    let mut seqs = Vec::new();
    let mut present: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); SUBTABLES.len()];
    for t in 0..THREADS {
        for b in 0..BATCHES {
            let keys = batch_keys(t, b);
            let mut found = 0;
            for (i, (sub, k)) in keys.iter().enumerate() {
                let got = db
                    .get_with_seq(&subs[*sub], k)
                    .map_err(|e| format!("seed {seed}: get: {e}"))?;
                if let Some((seq, v)) = got {
                    ensure!(
                        v == value(t, b, i as u64),
                        "seed {seed}: value of {k:?} damaged"
                    );
                    seqs.push(seq);
                    found += 1;
                    present[*sub].insert(k.clone(), v);
                }
            }
            ensure!(
                found == 0 || found == keys.len(),
                "seed {seed}: batch ({t},{b}) partially visible ({found}/{})",
                keys.len()
            );
            ensure!(
                !acked.contains(&(t, b)) || found == keys.len(),
                "seed {seed}: acknowledged batch ({t},{b}) lost"
            );
        }
    }
    seqs.sort_unstable();
    let n = seqs.len() as u64;
    ensure!(
        seqs.iter().copied().eq(1..=n),
        "seed {seed}: visible sequence numbers have gaps (C2): {seqs:?}"
    );
    ensure!(
        db.latest_sequence() == n,
        "seed {seed}: latest sequence {} with {n} visible",
        db.latest_sequence()
    );
    for (i, s) in subs.iter().enumerate() {
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
            .iter(s, IterOptions::default())
            .expect("iter")
            .map(|r| r.expect("record"))
            .collect();
        ensure!(
            scanned == present[i],
            "seed {seed}: index disagrees with a full scan"
        );
    }
    db.put(&subs[0], b"after", b"recovery")
        .map_err(|e| format!("seed {seed}: write after recovery: {e}"))?;
    ensure!(
        db.get(&subs[0], b"after").expect("get") == Some(b"recovery".to_vec())
            && db.latest_sequence() == n + 1,
        "seed {seed}: write after recovery not visible as sequence {}",
        n + 1
    );
    Ok(fences)
}

/// Crashes at `crashes` random points; the first failed check, if any.
fn torture(setup: Setup, crashes: u64, cov: &mut Coverage) -> Result<(), String> {
    let base = base_image(setup);
    let full = run_once(setup, &base, u64::MAX, 0, cov)?;
    assert!(full > 20, "a full run issues fences");
    for seed in 0..crashes {
        run_once(setup, &base, seed, full + 2, cov)?;
    }
    Ok(())
}

fn torture_mode(mode: CommitMode, crashes: u64) -> Coverage {
    torture_setup(mode, Pipelining::On, crashes)
}

fn torture_setup(mode: CommitMode, pipelining: Pipelining, crashes: u64) -> Coverage {
    let mut cov = Coverage::default();
    let setup = Setup {
        mode,
        pipelining,
        mutation: None,
    };
    if let Err(e) = torture(setup, crashes, &mut cov) {
        panic!("{mode:?}: {e}");
    }
    cov
}

#[test]
fn power_failures_lose_no_acknowledged_batch_and_tear_none_two_fence() {
    torture_mode(CommitMode::TwoFence, 500);
}

#[test]
fn power_failures_lose_no_acknowledged_batch_and_tear_none_single_fence() {
    let cov = torture_mode(CommitMode::SingleFence, 700);
    // The cases the single-fence rules exist for did occur.
    assert!(cov.rolled_back_several > 0, "{cov:?}");
    assert!(cov.lowered_commit_id > 0, "{cov:?}");
}

/// The `msync` backend's defaults: one fence per group, a bucket's next group formed only after
/// the previous one committed.
#[test]
fn power_failures_lose_no_acknowledged_batch_and_tear_none_single_fence_unpipelined() {
    torture_setup(CommitMode::SingleFence, Pipelining::Off, 300);
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test torture -- --ignored"]
fn power_failures_lose_no_acknowledged_batch_and_tear_none_long_two_fence() {
    torture_mode(CommitMode::TwoFence, 20_000);
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test torture -- --ignored"]
fn power_failures_lose_no_acknowledged_batch_and_tear_none_long_single_fence() {
    torture_mode(CommitMode::SingleFence, 20_000);
}

/// Torture in `mode` with `mutation` must fail within `crashes` crash points.
fn mutation_is_caught(mode: CommitMode, mutation: RecoveryMutation, crashes: u64) {
    let setup = Setup {
        mode,
        pipelining: Pipelining::On,
        mutation: Some(mutation),
    };
    match torture(setup, crashes, &mut Coverage::default()) {
        Ok(()) => panic!("torture passed without the {mutation:?} rule in {crashes} crashes"),
        Err(e) => eprintln!("without {mutation:?}: {e}"),
    }
}

#[test]
fn torture_catches_recovery_without_item_count() {
    mutation_is_caught(
        CommitMode::SingleFence,
        RecoveryMutation::SkipItemCount,
        700,
    );
}

#[test]
fn torture_catches_recovery_without_commit_id_lowering() {
    mutation_is_caught(
        CommitMode::SingleFence,
        RecoveryMutation::SkipCommitIdLowering,
        700,
    );
}

#[test]
fn torture_catches_recovery_keeping_groups_above_commit_id() {
    // A whole group without its `commit_id` is what a crash in the second fence leaves; in
    // single-fence mode it needs every word of the group but one to survive, which random
    // crash images rarely produce.
    mutation_is_caught(
        CommitMode::TwoFence,
        RecoveryMutation::SkipAboveCommitId,
        700,
    );
}
