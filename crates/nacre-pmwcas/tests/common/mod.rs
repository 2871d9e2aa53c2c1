//! Shared setup for the PMwCAS tests: a small `sim` pool with a row of account words, a few
//! slot words pointing at nodes (each with one child node) of a node pool, and a seeded
//! workload over them whose every operation is a PMwCAS.
#![allow(dead_code)]

use std::sync::Arc;

use nacre_halloc::Halloc;
use nacre_pmem::{Backend, PmOffset, Pool, PoolOptions, SplitMix64};
use nacre_pmwcas::{NodePool, NodePoolSpec, Pmwcas, PmwcasOptions, Policy, RecoveryStats};

pub const POOL_SIZE: u64 = 1 << 20;
pub const ACCOUNTS: usize = 10;
pub const SLOTS: usize = 3;
pub const START_BALANCE: u64 = 1000;
pub const NODE_SIZE: u64 = 64;

pub fn pool_opts() -> PoolOptions {
    PoolOptions::with_backend(Backend::Sim)
}

pub fn options() -> PmwcasOptions {
    PmwcasOptions {
        descriptors: 24,
        max_threads: 16,
        reclaim_batch: 4,
        node_pools: vec![NodePoolSpec {
            name: "nodes".into(),
            object_size: NODE_SIZE,
            count: 48,
        }],
        ..PmwcasOptions::default()
    }
}

/// Where the test's words live (a region named "words").
pub fn words_base(pool: &Pool) -> PmOffset {
    pool.region("words").expect("words region").offset
}

pub fn account(base: PmOffset, i: usize) -> PmOffset {
    base.add(8 * i as u64)
}

pub fn slot(base: PmOffset, s: usize) -> PmOffset {
    base.add(8 * (ACCOUNTS + s) as u64)
}

/// What the test words hold: balances, then slot values (node offsets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub accounts: Vec<u64>,
    pub slots: Vec<u64>,
}

/// Writes `tag` and `child` into a fresh node and persists it.
pub fn fill_node(pool: &Pool, node: PmOffset, tag: u64, child: u64) {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&tag.to_le_bytes());
    b.extend_from_slice(&child.to_le_bytes());
    // SAFETY: a fresh allocation of this test: no other thread reads or writes it before the
    // PMwCAS that publishes it.
    unsafe { pool.copy_persist(node, &b) }.expect("persist node");
}

pub fn node_child(pool: &Pool, node: u64) -> u64 {
    pool.load_u64(PmOffset(node).add(8))
}

/// Opens (recovering) the instance on `pool`.
pub fn open(
    pool: &Arc<Pool>,
    opts: &PmwcasOptions,
) -> nacre_pmwcas::Result<(Pmwcas, RecoveryStats)> {
    let halloc = Halloc::open(pool.clone())?;
    Pmwcas::open_or_create(&halloc, opts)
}

/// A fresh pool image: balances set, every slot pointing at a node with a child.
pub fn base_image() -> Vec<u8> {
    let pool = Arc::new(Pool::create_sim(POOL_SIZE, &pool_opts()).expect("sim pool"));
    let base = pool
        .reserve_region("words", 4096, 64, 0)
        .expect("words")
        .offset;
    for i in 0..ACCOUNTS {
        pool.persist_u64(account(base, i), START_BALANCE)
            .expect("persist");
    }
    let (pm, _) = open(&pool, &options()).expect("open");
    let nodes = pm.node_pool(0).expect("node pool");
    for s in 0..SLOTS {
        let child = nodes.alloc().expect("alloc");
        let node = nodes.alloc().expect("alloc");
        fill_node(&pool, child, 1, 0);
        fill_node(&pool, node, 1, child.get());
        let mut d = pm.descriptor().expect("descriptor");
        d.add_with_policy(
            slot(base, s),
            0,
            node.get(),
            Policy::FreeNewOnFailure,
            Some(nodes),
        )
        .expect("add");
        d.free_on_failure(nodes, child).expect("child");
        assert!(d.execute().expect("execute"));
    }
    pm.close().expect("close");
    let image = pool
        .sim()
        .expect("sim")
        .crash(nacre_pmem::CrashPolicy::KeepNone);
    image
}

/// Raw words (flags included) of every account and slot.
pub fn raw_words(pool: &Pool) -> Vec<u64> {
    let base = words_base(pool);
    (0..ACCOUNTS + SLOTS)
        .map(|i| pool.load_u64(base.add(8 * i as u64)))
        .collect()
}

/// The state as plain reads through PMwCAS (helping anything in flight).
pub fn read_state(pm: &Pmwcas) -> State {
    let base = words_base(pm.pmem());
    State {
        accounts: (0..ACCOUNTS)
            .map(|i| pm.read(account(base, i)).expect("read"))
            .collect(),
        slots: (0..SLOTS)
            .map(|s| pm.read(slot(base, s)).expect("read"))
            .collect(),
    }
}

/// One seeded workload step; returns whether its PMwCAS succeeded. `tag` numbers new nodes.
pub fn step(pm: &Pmwcas, rng: &mut SplitMix64, tag: u64) -> bool {
    let pool = pm.pmem();
    let base = words_base(pool);
    let nodes: &NodePool = pm.node_pool(0).expect("node pool");
    let pick = |rng: &mut SplitMix64| (rng.next_u64() % ACCOUNTS as u64) as usize;
    // One step in eight is made to fail: an expected value that is off by one.
    let stale = rng.next_u64() % 8 == 0;
    let mut d = pm.descriptor().expect("descriptor");
    let a = pick(rng);
    let mut b = pick(rng);
    if b == a {
        b = (a + 1) % ACCOUNTS;
    }
    let va = pm.read(account(base, a)).expect("read");
    let vb = pm.read(account(base, b)).expect("read");
    let amt = if va == 0 {
        0
    } else {
        rng.next_u64() % (va.min(50) + 1)
    };
    let skew = u64::from(stale);
    match rng.next_u64() % 3 {
        0 => {
            d.add(account(base, a), va + skew, va - amt).expect("add");
            d.add(account(base, b), vb, vb + amt).expect("add");
        }
        1 => {
            // Rotate three balances.
            let mut c = pick(rng);
            while c == a || c == b {
                c = (c + 1) % ACCOUNTS;
            }
            let vc = pm.read(account(base, c)).expect("read");
            d.add(account(base, a), va, vb).expect("add");
            d.add(account(base, b), vb + skew, vc).expect("add");
            d.add(account(base, c), vc, va).expect("add");
        }
        _ => {
            // Replace a node and its child, with a transfer in the same operation.
            let s = (rng.next_u64() % SLOTS as u64) as usize;
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
            d.add(account(base, a), va, va - amt).expect("add");
            d.add(account(base, b), vb + skew, vb + amt).expect("add");
        }
    }
    let ok = d.execute().expect("execute");
    assert_eq!(ok, !stale, "tag {tag}: outcome");
    ok
}
