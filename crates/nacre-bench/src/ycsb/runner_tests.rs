//! Tests of the YCSB runner, the record mapping and the embedded Nacre store, against an
//! in-memory model store that also checks what it is asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nacre_pmem::Backend;

use super::generators::key_name;
use super::record;
use super::runner::{self, RunOptions};
use super::target::{Session, Store};
use super::targets::kv::{Kv, KvSession};
use super::targets::nacre::NacreStore;
use super::workload::Workload;
use crate::engine::BenchDb;
use crate::error::Result;

/// A BTreeMap store.
#[derive(Default)]
struct MapStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    field_count: usize,
}

impl Kv for MapStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.lock().unwrap().get(key).cloned())
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map
            .lock()
            .unwrap()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<usize> {
        let m = self.map.lock().unwrap();
        let mut n = 0;
        for (_, v) in m.range(start.to_vec()..).take(count) {
            f(v)?;
            n += 1;
        }
        Ok(n)
    }
}

impl Store for MapStore {
    fn label(&self) -> String {
        "map".into()
    }
    fn backend(&self) -> String {
        "dram".into()
    }
    fn durability(&self) -> String {
        "none".into()
    }
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(KvSession::new(self, self.field_count)))
    }
}

fn map_store(field_count: usize) -> MapStore {
    MapStore {
        field_count,
        ..MapStore::default()
    }
}

fn small(mut w: Workload) -> Workload {
    w.field_count = 4;
    w.field_length = 16;
    w
}

fn opts(threads: usize) -> RunOptions {
    RunOptions {
        threads,
        progress_secs: 0,
        seed: 7,
        ..RunOptions::default()
    }
}

fn count(r: &super::PhaseResult, op: &str) -> u64 {
    r.per_op.iter().find(|o| o.op == op).map_or(0, |o| o.count)
}

#[test]
fn records_roundtrip_merge_and_reject_damage() {
    let f: record::Fields = vec![(0, b"aa".to_vec()), (2, b"".to_vec()), (3, vec![7; 300])];
    let enc = record::encode(&f);
    assert_eq!(record::decode(&enc).unwrap(), f);
    let merged = record::merge(f.clone(), &[(1, b"new".to_vec()), (3, b"x".to_vec())]);
    assert_eq!(
        merged,
        vec![
            (0, b"aa".to_vec()),
            (1, b"new".to_vec()),
            (2, b"".to_vec()),
            (3, b"x".to_vec())
        ]
    );
    assert_eq!(record::select(merged, Some(&[1])).len(), 1);
    assert!(record::decode(&enc[..enc.len() - 1]).is_err());
    assert!(record::decode(&enc[..3]).is_err());
    assert_eq!(record::field_name(9), "field9");
}

#[test]
fn load_inserts_every_record_once_with_all_fields() {
    let store = map_store(4);
    let w = small(Workload::a(1000, 0));
    let r = runner::load(&store, &w, &opts(3)).unwrap();
    assert_eq!(
        (r.phase.as_str(), r.ops, r.measured_ops),
        ("load", 1000, 1000)
    );
    assert_eq!(count(&r, "INSERT"), 1000);
    assert_eq!(r.per_second.iter().sum::<u64>(), 1000);
    let m = store.map.lock().unwrap();
    assert_eq!(m.len(), 1000);
    for n in [0, 499, 999] {
        let v = m.get(key_name(n, false).as_bytes()).expect("loaded key");
        let fields = record::decode(v).unwrap();
        assert_eq!(fields.len(), 4);
        assert!(fields.iter().all(|(_, f)| f.len() == 16));
    }
}

#[test]
fn workload_mixes_match_their_proportions_and_find_every_key() {
    let store = map_store(4);
    let o = opts(2);
    runner::load(&store, &small(Workload::a(2000, 0)), &o).unwrap();
    let (a, present) = runner::run(&store, &small(Workload::a(2000, 20_000)), "a", &o).unwrap();
    assert_eq!(present, 2000);
    assert_eq!(a.ops, 20_000);
    let reads = count(&a, "READ") as f64 / 20_000.0;
    assert!((reads - 0.5).abs() < 0.03, "read share {reads}");
    assert!(a.per_op.iter().all(|o| o.not_found == 0));
    let (f, _) = runner::run(&store, &small(Workload::f(2000, 10_000)), "f", &o).unwrap();
    assert!(count(&f, "READ-MODIFY-WRITE") > 4000);
    // D inserts about 5%: the store and the returned record count grow by the inserts.
    let (d, present) = runner::run(&store, &small(Workload::d(2000, 10_000)), "d", &o).unwrap();
    let inserts = count(&d, "INSERT");
    assert!((350..650).contains(&inserts), "inserts {inserts}");
    assert_eq!(present, 2000 + inserts);
    assert_eq!(store.map.lock().unwrap().len() as u64, present);
    assert!(d.per_op.iter().all(|o| o.not_found == 0));
    // E: scans return records.
    let (e, _) = runner::run(&store, &small(Workload::e(present, 2000)), "e", &o).unwrap();
    let scans = e.per_op.iter().find(|o| o.op == "SCAN").unwrap();
    assert!(scans.count > 1800 && scans.not_found == 0);
    // Latency summaries are ordered.
    for o in &a.per_op {
        assert!(o.p50_us <= o.p99_us && o.p99_us <= o.p999_us && o.p999_us <= o.max_us);
        assert_eq!(o.cdf.len(), super::measure::CDF_PERCENTILES.len());
        assert!(o.cdf.windows(2).all(|w| w[0].1 <= w[1].1));
    }
}

#[test]
fn warmup_is_left_out_and_pipelining_keeps_counts() {
    let store = map_store(4);
    let mut o = opts(1);
    runner::load(&store, &small(Workload::c(500, 0)), &o).unwrap();
    o.warmup_ops = 300;
    o.pipeline = 8;
    let (r, _) = runner::run(&store, &small(Workload::c(500, 3000)), "c", &o).unwrap();
    assert_eq!(r.ops, 3000);
    // One thread: batches of 8 start measuring at the first batch that begins at or after
    // operation 300.
    assert_eq!(r.measured_ops, 3000 - 304);
    assert_eq!(r.warmup_ops, 300);
    assert!(r.warmup_secs > 0.0 && r.warmup_secs < r.secs);
    assert!(r.ops_per_sec.is_finite());
}

#[test]
fn target_throughput_paces_and_time_limit_stops() {
    let store = map_store(4);
    let mut o = opts(2);
    runner::load(&store, &small(Workload::c(100, 0)), &o).unwrap();
    o.target_ops_per_sec = Some(2000.0);
    let t = Instant::now();
    let (r, _) = runner::run(&store, &small(Workload::c(100, 400)), "c", &o).unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert!(secs > 0.18, "400 ops at 2000/s took {secs} s");
    assert!(r.ops_per_sec < 2300.0, "{}", r.ops_per_sec);
    o.target_ops_per_sec = Some(1000.0);
    o.max_time = Some(Duration::from_millis(200));
    let (r, _) = runner::run(&store, &small(Workload::c(100, 100_000)), "c", &o).unwrap();
    assert!(r.ops < 400, "time limit ignored: {} ops", r.ops);
}

#[test]
fn bad_parameters_are_errors() {
    let store = map_store(4);
    let w = small(Workload::a(10, 10));
    assert!(runner::run(&store, &w, "a", &opts(0)).is_err());
    let mut o = opts(1);
    o.target_ops_per_sec = Some(-1.0);
    assert!(runner::run(&store, &w, "a", &o).is_err());
    let mut empty = w.clone();
    empty.record_count = 0;
    assert!(runner::load(&store, &empty, &opts(1)).is_err());
}

#[test]
fn nacre_store_runs_every_workload() {
    let dir = tempfile::tempdir().unwrap();
    let bench = BenchDb::create(dir.path(), "ycsb-test", Backend::Emulated, 64 << 20, |o| {
        o.memtable_size = 8 << 20;
    })
    .unwrap();
    let store = NacreStore::new(bench, "emulated", "process crash only", 4);
    let o = opts(2);
    runner::load(&store, &small(Workload::a(1000, 0)), &o).unwrap();
    let mut present = 1000;
    for (name, w) in [
        ("a", Workload::a(0, 2000)),
        ("e", Workload::e(0, 500)),
        ("d", Workload::d(0, 2000)),
    ] {
        let mut w = small(w);
        w.record_count = present;
        let (r, now) = runner::run(&store, &w, name, &o).unwrap();
        assert!(r.per_op.iter().all(|o| o.not_found == 0), "{name}: {r:?}");
        present = now;
    }
    // Every record is whole; updates of one field kept the others.
    let table = store.db().subtable(nacre::DEFAULT_SUBTABLE).unwrap();
    let n = store
        .db()
        .iter(&table, nacre::IterOptions::default())
        .unwrap()
        .count();
    assert_eq!(n as u64, present);
    let v = store.db().get(&table, key_name(5, false)).unwrap().unwrap();
    assert_eq!(record::decode(&v).unwrap().len(), 4);
}
