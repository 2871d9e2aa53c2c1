//! The TPC-C driver at a reduced scale: consistency conditions 1-4 hold after a run on
//! Nacre (both transaction kinds) and on RocksDB (with the `rocksdb` feature), and after a
//! power failure in the middle of a run on Nacre's `sim` backend, recovery, and a second run.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use nacre::{Db, Options};
use nacre_bench::tpcc::check::{consistency, lines};
use nacre_bench::tpcc::load::{load, Scale};
use nacre_bench::tpcc::run_mix;
use nacre_bench::tpcc::store::{NacreTxStore, TxStore};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

const SMALL: Scale = Scale {
    items: 2_000,
    districts: 4,
    customers: 60,
    orders: 60,
    new_orders: 18,
};
const WAREHOUSES: u32 = 2;

fn sim_opts() -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = 256 << 20;
    o.zone_size = 1 << 20;
    o.memtable_size = 4 << 20;
    o.recovery_threads = 2;
    o
}

fn all_hold(store: &dyn TxStore, what: &str) {
    let out = consistency(store, WAREHOUSES, SMALL).unwrap_or_else(|e| panic!("{what}: {e}"));
    let l = lines(&out);
    assert!(out.iter().all(Option::is_none), "{what}: {l:#?}");
    assert_eq!(l[0], "consistency 1: ok");
}

/// Runs the mix for `ms` milliseconds; New-Orders committed.
fn mix(store: &dyn TxStore, ms: u64, seed: u64) -> u64 {
    let (rows, _) = run_mix(
        store,
        WAREHOUSES,
        SMALL,
        4,
        Duration::from_millis(ms),
        seed,
        &AtomicBool::new(false),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rows.iter().all(|r| r.done > 0 || r.kind != "New-Order"),
        "{rows:?}"
    );
    rows[0].done
}

#[test]
fn consistency_holds_after_runs_of_both_nacre_transaction_kinds() {
    for pessimistic in [false, true] {
        let db = Db::open(sim_opts()).unwrap_or_else(|e| panic!("{e}"));
        let store = NacreTxStore::on(db, pessimistic).unwrap_or_else(|e| panic!("{e}"));
        load(&store, WAREHOUSES, SMALL, 1).unwrap_or_else(|e| panic!("{e}"));
        all_hold(&store, "after the load");
        assert!(mix(&store, 1500, 7) > 50);
        all_hold(&store, "after the run");
    }
}

#[test]
fn each_consistency_check_catches_what_it_checks() {
    use nacre_bench::tpcc::schema::{District, Key, Table};
    let db = Db::open(sim_opts()).unwrap_or_else(|e| panic!("{e}"));
    let store = NacreTxStore::on(db, false).unwrap_or_else(|e| panic!("{e}"));
    load(&store, WAREHOUSES, SMALL, 3).unwrap_or_else(|e| panic!("{e}"));
    let sub = |t: Table| {
        store
            .db()
            .subtable(t.name())
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let db = store.db();
    let failed = |store: &NacreTxStore| -> Vec<usize> {
        let out = consistency(store, WAREHOUSES, SMALL).unwrap_or_else(|e| panic!("{e}"));
        (0..4)
            .filter(|&i| out[i].is_some())
            .map(|i| i + 1)
            .collect()
    };
    assert!(failed(&store).is_empty());
    // 1: a district's YTD that its warehouse's does not match.
    let dk = Key::of(&[2, 3]);
    let old = db
        .get(&sub(Table::District), &dk)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut d =
        District::dec(&old.unwrap_or_else(|| panic!("district"))).unwrap_or_else(|e| panic!("{e}"));
    d.ytd += 1;
    db.put(&sub(Table::District), &dk, d.enc())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed(&store), vec![1]);
    d.ytd -= 1;
    // 2: a next order id ahead of the orders.
    d.next_o_id += 1;
    db.put(&sub(Table::District), &dk, d.enc())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed(&store), vec![2]);
    d.next_o_id -= 1;
    db.put(&sub(Table::District), &dk, d.enc())
        .unwrap_or_else(|e| panic!("{e}"));
    // 3: a hole in the new orders.
    let hole = Key::of(&[1, 1, SMALL.orders - 5]);
    db.delete(&sub(Table::NewOrder), &hole)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed(&store), vec![3]);
    db.put(&sub(Table::NewOrder), &hole, b"")
        .unwrap_or_else(|e| panic!("{e}"));
    // 4: an order line missing.
    db.delete(&sub(Table::OrderLine), Key::of(&[1, 2, 7, 1]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed(&store), vec![4]);
}

/// Loads, then runs the mix while the power fails at a random fence; recovers from the crash
/// image, checks, runs again and checks again.
fn crash_in_the_middle(seed: u64, pessimistic: bool) {
    let mut rng = SplitMix64::new(seed);
    let db = Db::open(sim_opts()).unwrap_or_else(|e| panic!("{e}"));
    let store = NacreTxStore::on(db, pessimistic).unwrap_or_else(|e| panic!("{e}"));
    load(&store, WAREHOUSES, SMALL, seed).unwrap_or_else(|e| panic!("{e}"));
    let sim = store.db().sim().unwrap_or_else(|| panic!("sim"));
    let start = sim.fence_count();
    sim.stop_at_fence(start + 50 + rng.next_u64() % 2000);
    mix(&store, 800, seed);
    // The mix runs for a time: on a loaded machine it may issue fewer fences than drawn.
    for more in 1..20 {
        if sim.is_stopped() {
            break;
        }
        mix(&store, 800, seed + more);
    }
    assert!(
        sim.is_stopped(),
        "seed {seed}: the power failure came after the run"
    );
    let image = sim.crash(CrashPolicy::KeepRandom {
        seed,
        keep: rng.next_f64(),
    });
    drop(sim);
    drop(store);
    let pool = Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim))
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Db::open_pool(pool, sim_opts()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let store = NacreTxStore::on(db, pessimistic).unwrap_or_else(|e| panic!("{e}"));
    all_hold(&store, &format!("seed {seed}: after recovery"));
    assert!(mix(&store, 500, seed + 1) > 10);
    all_hold(
        &store,
        &format!("seed {seed}: after a run on the recovered database"),
    );
}

#[test]
fn consistency_holds_after_a_power_failure_in_the_middle_of_a_run() {
    for seed in 0..4 {
        crash_in_the_middle(seed, seed % 2 == 1);
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn consistency_holds_after_runs_on_both_rocksdb_transaction_dbs() {
    use nacre_bench::tpcc::rocks::RocksTxStore;
    for pessimistic in [true, false] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = RocksTxStore::create(dir.path().join("db"), pessimistic, false, 2)
            .unwrap_or_else(|e| panic!("{e}"));
        load(&store, WAREHOUSES, SMALL, 1).unwrap_or_else(|e| panic!("{e}"));
        all_hold(&store, "after the load");
        assert!(mix(&store, 1500, 7) > 50);
        all_hold(&store, &store.label());
    }
}
