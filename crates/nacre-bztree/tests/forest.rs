//! Forests: several trees sharing one PMwCAS instance, node pool and header. Operations on
//! interleaved trees match one `BTreeMap` per tree; the node pool's committed set is exactly
//! the union of the trees' reachable nodes; and a power failure at any fence of a workload
//! that creates a tree, drops one and works on three keeps every tree at the state before or
//! after the interrupted operation (a drop cut short is finished after open, freeing every
//! node once).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::*;
use nacre_bztree::{BzError, BzForest, BzMutation, BzTree, BzTreeOptions};
use nacre_halloc::Halloc;
use nacre_pmem::{CrashPolicy, Pool, SplitMix64};

type Model = BTreeMap<Vec<u8>, u64>;

fn fopts(trees: u32) -> BzTreeOptions {
    BzTreeOptions {
        node_size: 512,
        max_key_len: 9,
        trees,
        ..options()
    }
}

fn open_forest(pool: &Arc<Pool>, opts: &BzTreeOptions) -> nacre_bztree::Result<BzForest> {
    let halloc = Halloc::open(pool.clone())?;
    Ok(BzForest::open(&halloc, opts)?.0)
}

/// Every tree of the forest that exists, with its contents; the structural check of each,
/// and the committed node set against the union of reachable ones.
fn check_forest(f: &BzForest) -> Result<Vec<Option<Model>>, String> {
    // A drop a crash cut short is finished first (the graveyard's nodes are not a tree's).
    f.finish_drop().map_err(|e| format!("finish_drop: {e}"))?;
    let mut out = Vec::new();
    let mut reachable = BTreeSet::new();
    let mut any: Option<BzTree> = None;
    for slot in 0..f.trees() {
        match f.existing(slot).map_err(|e| format!("tree {slot}: {e}"))? {
            Some(t) => {
                let c = t.check().map_err(|e| format!("check {slot}: {e}"))?;
                for n in &c.nodes {
                    if !reachable.insert(n.get()) {
                        return Err(format!("node {:#x} reachable from two trees", n.get()));
                    }
                }
                out.push(Some(try_contents(&t)?));
                any = Some(t);
            }
            None => out.push(None),
        }
    }
    if let Some(t) = any {
        for _ in 0..8 {
            t.pmwcas().collect().map_err(|e| format!("collect: {e}"))?;
        }
        let committed: BTreeSet<u64> = t.node_pool().committed().iter().map(|o| o.get()).collect();
        if committed != reachable {
            return Err(format!(
                "committed nodes differ from the trees' reachable ones: leaked {:x?}, freed {:x?}",
                committed.difference(&reachable).collect::<Vec<_>>(),
                reachable.difference(&committed).collect::<Vec<_>>()
            ));
        }
    }
    Ok(out)
}

#[test]
fn interleaved_trees_match_their_models_and_share_nodes_without_mixing() {
    let pool = new_pool(8 << 20);
    let opts = BzTreeOptions {
        nodes: 4096,
        ..fopts(5)
    };
    let f = open_forest(&pool, &opts).expect("open");
    let trees: Vec<BzTree> = (0..4).map(|s| f.tree(s).expect("tree").0).collect();
    let mut models = vec![Model::new(); 4];
    let mut rng = SplitMix64::new(11);
    for i in 0..16_000u64 {
        let t = (rng.next_u64() % 4) as usize;
        let k = key(rng.next_u64() % 700);
        let v = rng.next_u64() >> 4;
        match rng.next_u64() % 5 {
            0..=2 => assert_eq!(
                trees[t].upsert(&k, v).expect("upsert"),
                models[t].insert(k, v)
            ),
            3 => assert_eq!(trees[t].delete(&k).expect("delete"), models[t].remove(&k)),
            _ => assert_eq!(trees[t].get(&k).expect("get"), models[t].get(&k).copied()),
        }
        if i % 4000 == 0 {
            check_forest(&f).expect("check");
        }
    }
    let got = check_forest(&f).expect("check");
    for (t, m) in models.iter().enumerate() {
        assert_eq!(got[t].as_ref(), Some(m), "tree {t}");
    }
    assert_eq!(got[4], None, "tree 4 was never opened");
    // Dropping a tree gives every node of it back and leaves the others as they were.
    let free_before = trees[0].node_pool().free_count();
    let used_by_3 = trees[3].check().expect("check").nodes.len() as u64;
    assert!(used_by_3 > 10, "{used_by_3}");
    assert!(f.drop_tree(3).expect("drop"));
    assert!(!f.drop_tree(4).expect("drop an absent tree"));
    for _ in 0..4 {
        trees[0].pmwcas().collect().expect("collect");
    }
    assert_eq!(trees[0].node_pool().free_count(), free_before + used_by_3);
    let got = check_forest(&f).expect("check after the drop");
    assert_eq!(got[3], None);
    for (t, m) in models.iter().enumerate().take(3) {
        assert_eq!(got[t].as_ref(), Some(m), "tree {t} after the drop");
    }
    // The slot takes a new, empty tree.
    let (t3, created) = f.tree(3).expect("tree 3 again");
    assert!(created && t3.get(&key(1)).expect("get").is_none());
    models[3].clear();
    // A power failure that keeps nothing unflushed keeps every tree.
    drop(trees);
    drop(f);
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let pool = Arc::new(Pool::open_sim(image, &pool_opts()).expect("image"));
    let f = open_forest(&pool, &opts).expect("reopen");
    let got = check_forest(&f).expect("check after reopen");
    for (t, m) in models.iter().enumerate() {
        assert_eq!(got[t].as_ref(), Some(m), "tree {t} after reopen");
    }
    // The shape, tree count included, is fixed at creation.
    for trees in [4, 6] {
        let other = BzTreeOptions {
            trees,
            ..opts.clone()
        };
        assert!(matches!(
            open_forest(&pool, &other),
            Err(BzError::InvalidOptions(_))
        ));
    }
    assert!(matches!(f.tree(5), Err(BzError::InvalidOptions(_))));
}

const OPS: u64 = 90;

/// The trees' models (`None`: the tree does not exist).
type Models = Vec<Option<Model>>;

/// One step of the torture's workload: op 10 creates tree 1, op 60 drops tree 2 (the next
/// op on it creates it anew and does nothing more), the others work trees 0, 2 and (once it exists) 1 in turn,
/// mostly upserts, some deletes.
fn step(f: &BzForest, ms: &mut Models, rng: &mut SplitMix64, op: u64) -> Result<(), String> {
    if op == 10 {
        f.tree(1).map_err(|e| format!("create: {e}"))?;
        ms[1] = Some(Model::new());
        return Ok(());
    }
    if op == 60 {
        let had = f.drop_tree(2).map_err(|e| format!("drop: {e}"))?;
        if !had || ms[2].take().is_none() {
            return Err("tree 2 was not there to drop".into());
        }
        return Ok(());
    }
    let t = if op < 10 {
        [0, 2][op as usize % 2]
    } else {
        (op % 3) as usize
    };
    let tree = f.tree(t as u32).map_err(|e| e.to_string())?.0;
    let Some(m) = ms[t].as_mut() else {
        // A dropped tree: this op created it anew (one PMwCAS), and does nothing else.
        ms[t] = Some(Model::new());
        return Ok(());
    };
    let k = key(rng.next_u64() % 60);
    let v = rng.next_u64() >> 4;
    if rng.next_u64() % 4 == 0 {
        let got = tree.delete(&k).map_err(|e| e.to_string())?;
        if got != m.remove(&k) {
            return Err(format!("delete {k:?} on tree {t}: {got:?}"));
        }
    } else {
        let got = tree.upsert(&k, v).map_err(|e| e.to_string())?;
        if got != m.insert(k.clone(), v) {
            return Err(format!("upsert {k:?} on tree {t}: {got:?}"));
        }
    }
    Ok(())
}

/// The trees after each op.
type States = Vec<Models>;

fn run(
    base: &[u8],
    start: &Models,
    seed: u64,
    fail_at: Option<u64>,
    opts: &BzTreeOptions,
) -> (Arc<Pool>, u64, States, Option<usize>) {
    let pool = Arc::new(Pool::open_sim(base.to_vec(), &pool_opts()).expect("image"));
    let f = open_forest(&pool, opts).expect("open");
    let sim = pool.sim().expect("sim");
    let first = sim.fence_count();
    if let Some(n) = fail_at {
        sim.stop_at_fence(first + n);
    }
    let mut ms = start.clone();
    let mut states = vec![ms.clone()];
    let mut rng = SplitMix64::new(seed);
    let mut interrupted = None;
    for op in 0..OPS {
        let was = sim.is_stopped();
        step(&f, &mut ms, &mut rng, op).unwrap_or_else(|e| panic!("workload: {e}"));
        states.push(ms.clone());
        if !was && sim.is_stopped() {
            interrupted = Some(op as usize);
        }
    }
    let fences = sim.fence_count() - first;
    drop(f);
    (pool, fences, states, interrupted)
}

/// Power failures at `crashes` fences of the workload (run with `opts`); the first that
/// leaves a tree at neither side of its operation, or breaks the node accounting.
fn torture(crashes: u64, opts: &BzTreeOptions) -> Result<(), String> {
    let base = {
        let pool = new_pool(POOL_SIZE);
        let f = open_forest(&pool, &fopts(3)).expect("open");
        for slot in [0, 2] {
            let t = f.tree(slot).expect("tree").0;
            for i in 0..20 {
                t.upsert(&key(i * 3), i).expect("upsert");
            }
        }
        drop(f);
        pool.sim().expect("sim").crash(CrashPolicy::KeepNone)
    };
    let start: Models = (0..3)
        .map(|t| (t != 1).then(|| (0..20).map(|i| (key(i * 3), i)).collect()))
        .collect();
    let seeds = 4;
    let full: Vec<u64> = (0..seeds)
        .map(|s| run(&base, &start, s, None, opts).1)
        .collect();
    eprintln!("fences per workload: {full:?}");
    for n in 0..crashes {
        let seed = n % seeds;
        let at = 1 + (n * 7919 / seeds) % full[seed as usize];
        let (pool, _, states, interrupted) = run(&base, &start, seed, Some(at), opts);
        let policy = match n % 3 {
            0 => CrashPolicy::KeepNone,
            1 => CrashPolicy::KeepAll,
            _ => CrashPolicy::KeepRandom { seed: n, keep: 0.5 },
        };
        let image = pool.sim().expect("sim").crash(policy);
        let pool = Arc::new(Pool::open_sim(image, &pool_opts()).map_err(|e| e.to_string())?);
        let clean = BzTreeOptions {
            mutation: None,
            ..opts.clone()
        };
        let f = open_forest(&pool, &clean).map_err(|e| format!("crash {n}: open: {e}"))?;
        let got = check_forest(&f).map_err(|e| format!("crash {n} (fence {at}): {e}"))?;
        let ok = match interrupted {
            Some(op) => got == states[op] || got == states[op + 1],
            None => Some(&got) == states.last(),
        };
        if !ok {
            return Err(format!(
                "crash {n} (fence {at}, seed {seed}): trees match neither side of op \
                 {interrupted:?}"
            ));
        }
    }
    Ok(())
}

#[test]
fn power_failures_keep_every_tree_of_a_forest_whole() {
    torture(400, &fopts(3)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
#[ignore = "long run: cargo test -p nacre-bztree --release --test forest -- --ignored"]
fn power_failures_keep_every_tree_of_a_forest_whole_long() {
    torture(10_000, &fopts(3)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_forest_torture_catches_nodes_linked_before_they_are_durable() {
    let opts = BzTreeOptions {
        mutation: Some(BzMutation::SkipNodeFlush),
        ..fopts(3)
    };
    let e = torture(400, &opts).expect_err("the mutation went unnoticed");
    eprintln!("caught: {e}");
}
