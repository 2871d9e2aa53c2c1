//! Concurrent PMwCAS: threads run random multi-word operations over shared words, helping
//! each other's operations in flight. Checks conservation (balances keep their sum), that no
//! word is left holding a pointer or a dirty bit, that node replacements free every replaced
//! node exactly once, and (with power failures at random fences) that recovery restores all
//! of this from any crash image.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use nacre_pmem::{CrashPolicy, PmOffset, Pool, SplitMix64};
use nacre_pmwcas::{Pmwcas, PmwcasOptions, Policy, FLAGS};

const THREADS: u64 = 4;

/// The base image's options (its descriptor count is fixed at creation).
fn concurrent_options() -> PmwcasOptions {
    options()
}

/// One operation, retried until it succeeds; returns the number of failed attempts.
fn contended_step(pm: &Pmwcas, rng: &mut SplitMix64, tag: u64) -> u64 {
    let pool = pm.pmem();
    let base = words_base(pool);
    let nodes = pm.node_pool(0).expect("node pool");
    let mut failures = 0;
    let kind = rng.next_u64() % 4;
    let a = (rng.next_u64() % ACCOUNTS as u64) as usize;
    let b = (a + 1 + (rng.next_u64() % (ACCOUNTS as u64 - 1)) as usize) % ACCOUNTS;
    let s = (rng.next_u64() % SLOTS as u64) as usize;
    loop {
        let mut d = pm.descriptor().expect("descriptor");
        let va = pm.read(account(base, a)).expect("read");
        let vb = pm.read(account(base, b)).expect("read");
        let amt = va.min(7);
        d.add(account(base, a), va, va - amt).expect("add");
        d.add(account(base, b), vb, vb + amt).expect("add");
        let mut fresh = Vec::new();
        if kind == 0 {
            let x = pm.read(slot(base, s)).expect("read");
            let xc = node_child(pool, x);
            let yc = nodes.alloc().expect("alloc");
            let y = nodes.alloc().expect("alloc");
            fill_node(pool, yc, tag, 0);
            fill_node(pool, y, tag, yc.get());
            d.add_with_policy(slot(base, s), x, y.get(), Policy::FreeOne, Some(nodes))
                .expect("add");
            d.free_on_success(nodes, PmOffset(xc)).expect("free child");
            d.free_on_failure(nodes, yc).expect("new child");
            fresh.push(y);
        }
        if d.execute().expect("execute") {
            return failures;
        }
        failures += 1;
    }
}

fn check_quiescent(pm: &Pmwcas) {
    let pool = pm.pmem();
    for (k, w) in raw_words(pool).iter().enumerate() {
        assert_eq!(w & FLAGS, 0, "word {k} holds {w:#x}");
    }
    let st = read_state(pm);
    assert_eq!(
        st.accounts.iter().sum::<u64>(),
        START_BALANCE * ACCOUNTS as u64,
        "balances not conserved: {st:?}"
    );
    let nodes = pm.node_pool(0).expect("node pool");
    nodes.verify().expect("H1");
    let committed: BTreeSet<u64> = nodes.committed().iter().map(|o| o.get()).collect();
    let mut live = BTreeSet::new();
    for &n in &st.slots {
        live.insert(n);
        live.insert(node_child(pool, n));
    }
    assert_eq!(committed, live, "replaced nodes leaked or live nodes freed");
}

#[test]
fn concurrent_operations_conserve_balances_and_free_each_node_once() {
    let pool = Arc::new(Pool::open_sim(base_image(), &pool_opts()).expect("image"));
    let (pm, _) = open(&pool, &concurrent_options()).expect("open");
    let failures = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (pm, failures) = (&pm, &failures);
            s.spawn(move || {
                let mut rng = SplitMix64::new(t + 1);
                for k in 0..1500 {
                    let f = contended_step(pm, &mut rng, t * 10_000 + k);
                    failures.fetch_add(f, Ordering::Relaxed);
                }
            });
        }
    });
    // Reclaim what is left so every policy has been applied.
    while pm.pending_reclamation() > 0 {
        pm.collect().expect("collect");
    }
    check_quiescent(&pm);
    eprintln!(
        "{} failed attempts under contention",
        failures.load(Ordering::Relaxed)
    );
}

#[test]
fn concurrent_operations_survive_power_failures() {
    let base = base_image();
    let mut rng = SplitMix64::new(99);
    for round in 0..150u64 {
        let pool = Arc::new(Pool::open_sim(base.clone(), &pool_opts()).expect("image"));
        let (pm, _) = open(&pool, &concurrent_options()).expect("open");
        let sim = pool.sim().expect("sim");
        sim.stop_at_fence(sim.fence_count() + 1 + rng.next_u64() % 1500);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let pm = &pm;
                s.spawn(move || {
                    let mut rng = SplitMix64::new(round * 100 + t);
                    for k in 0..80 {
                        contended_step(pm, &mut rng, t * 10_000 + k);
                    }
                });
            }
        });
        let policy = CrashPolicy::KeepRandom {
            seed: round,
            keep: rng.next_f64(),
        };
        let image = sim.crash(policy);
        drop(pm);
        drop(pool);
        let pool = Arc::new(Pool::open_sim(image, &pool_opts()).expect("crash image"));
        let (pm, stats) = open(&pool, &concurrent_options()).expect("recovery");
        assert!(stats.in_flight <= stats.descriptors);
        check_quiescent(&pm);
    }
}
