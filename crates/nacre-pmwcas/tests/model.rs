//! Model test: random sequences of PMwCAS operations (some with stale expected values, some
//! discarded before executing), clean reopens and power failures between operations, checked
//! against a sequential model (a plain vector of words). Plus the argument checks of
//! `Descriptor`.

mod common;

use std::sync::Arc;

use common::*;
use nacre_pmem::{CrashPolicy, PmOffset, Pool};
use nacre_pmwcas::{Pmwcas, PmwcasError, MAX_ENTRIES, MAX_VALUE};
use proptest::prelude::*;

const WORDS: usize = 12;

#[derive(Clone, Debug)]
enum Op {
    /// (word, stale expected value?, new value) for distinct words.
    Cas(Vec<(usize, bool, u64)>),
    /// Build a descriptor, then drop it.
    Discard(Vec<usize>),
    /// Power failure between operations (every acknowledged operation must survive it).
    Crash { keep_all: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let entry = (0..WORDS, prop::bool::weighted(0.15), 0..1_000_000u64);
    prop_oneof![
        8 => prop::collection::vec(entry, 1..=MAX_ENTRIES).prop_map(|v| {
            let mut seen = std::collections::BTreeSet::new();
            Op::Cas(v.into_iter().filter(|(w, _, _)| seen.insert(*w)).collect())
        }),
        1 => prop::collection::vec(0..WORDS, 1..4).prop_map(Op::Discard),
        1 => any::<bool>().prop_map(|keep_all| Op::Crash { keep_all }),
    ]
}

fn word(base: PmOffset, i: usize) -> PmOffset {
    base.add(8 * i as u64)
}

fn reopen(pool: &Arc<Pool>, keep_all: bool) -> (Arc<Pool>, Pmwcas) {
    let policy = if keep_all {
        CrashPolicy::KeepAll
    } else {
        CrashPolicy::KeepNone
    };
    let image = pool.sim().expect("sim").crash(policy);
    let pool = Arc::new(Pool::open_sim(image, &pool_opts()).expect("image"));
    let (pm, _) = open(&pool, &options()).expect("reopen");
    (pool, pm)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn operations_match_a_sequential_model(ops in prop::collection::vec(op(), 1..40)) {
        let mut pool = Arc::new(Pool::open_sim(base_image(), &pool_opts()).expect("image"));
        let (mut pm, _) = open(&pool, &options()).expect("open");
        // The model words are the account words (START_BALANCE each).
        let mut model = vec![START_BALANCE; WORDS.min(ACCOUNTS)];
        model.resize(WORDS, 0);
        for op in ops {
            let base = words_base(&pool);
            match op {
                Op::Cas(entries) => {
                    let mut d = pm.descriptor().expect("descriptor");
                    let mut expect = true;
                    for &(w, stale, new) in &entries {
                        // Slot words hold nodes the model does not own: use words past them.
                        let i = if w < ACCOUNTS { w } else { w + SLOTS };
                        let old = model[w] + u64::from(stale);
                        expect &= !stale;
                        d.add(word(base, i), old, new).expect("add");
                    }
                    prop_assert_eq!(d.execute().expect("execute"), expect);
                    if expect {
                        for &(w, _, new) in &entries {
                            model[w] = new;
                        }
                    }
                }
                Op::Discard(ws) => {
                    let mut d = pm.descriptor().expect("descriptor");
                    for (k, w) in ws.into_iter().enumerate() {
                        let _ = d.add(word(base, w + 100 * k), 5, 6);
                    }
                    drop(d);
                }
                Op::Crash { keep_all } => {
                    drop(pm);
                    (pool, pm) = reopen(&pool, keep_all);
                }
            }
            let base = words_base(&pool);
            for (w, &v) in model.iter().enumerate() {
                let i = if w < ACCOUNTS { w } else { w + SLOTS };
                prop_assert_eq!(pm.read(word(base, i)).expect("read"), v, "word {}", w);
            }
        }
    }
}

#[test]
fn descriptor_arguments_are_checked() {
    let pool = Arc::new(Pool::open_sim(base_image(), &pool_opts()).expect("image"));
    let (pm, _) = open(&pool, &options()).expect("open");
    let base = words_base(&pool);
    let mut d = pm.descriptor().expect("descriptor");
    d.add(base, 1, 2).expect("first add");
    assert!(matches!(
        d.add(base, 1, 2),
        Err(PmwcasError::DuplicateAddress { .. })
    ));
    assert!(matches!(
        d.add(base.add(8), MAX_VALUE + 1, 0),
        Err(PmwcasError::ValueHasFlagBits { .. })
    ));
    assert!(matches!(
        d.add(base.add(4), 0, 0),
        Err(PmwcasError::BadAddress { .. })
    ));
    assert!(matches!(
        d.add(PmOffset(64), 0, 0),
        Err(PmwcasError::BadAddress { .. })
    ));
    assert!(matches!(
        d.add(PmOffset(POOL_SIZE), 0, 0),
        Err(PmwcasError::BadAddress { .. })
    ));
    let region = pool.region("pmwcas.pmwcas").expect("region").offset;
    assert!(matches!(
        d.add(region.add(64), 0, 0),
        Err(PmwcasError::BadAddress { .. })
    ));
    for k in 1..MAX_ENTRIES {
        d.add(base.add(8 * (20 + k as u64)), 0, 1).expect("add");
    }
    assert!(matches!(
        d.add(base.add(8 * 40), 0, 1),
        Err(PmwcasError::TooManyEntries { .. })
    ));
    let nodes = pm.node_pool(0).expect("nodes");
    let committed = nodes.committed()[0];
    let mut e = pm.descriptor().expect("descriptor");
    assert!(matches!(
        e.free_on_failure(nodes, committed),
        Err(PmwcasError::NotFresh { .. })
    ));
    assert!(matches!(
        e.free_on_success(nodes, committed.add(8)),
        Err(PmwcasError::NotAnObject { .. })
    ));
}

#[test]
fn discarded_descriptors_return_their_fresh_objects() {
    let pool = Arc::new(Pool::open_sim(base_image(), &pool_opts()).expect("image"));
    let (pm, _) = open(&pool, &options()).expect("open");
    let nodes = pm.node_pool(0).expect("nodes");
    let free = nodes.free_count();
    for _ in 0..3 * options().descriptors {
        let y = nodes.alloc().expect("alloc");
        let mut d = pm.descriptor().expect("descriptor");
        d.free_on_failure(nodes, y).expect("fresh");
        drop(d);
    }
    assert_eq!(
        nodes.free_count(),
        free,
        "objects of discarded descriptors leaked"
    );
}
