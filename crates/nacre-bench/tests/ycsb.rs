//! `nacre-bench ycsb` end to end with tiny sizes: every store this machine can run loads,
//! runs A-F with no lost records, and renders its tables and JSON lines; the RESP store runs
//! against a live redis-server and, when one is present, a live nacre-server.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use nacre_bench::resp::{RedisServer, DEFAULT_REDIS_SERVER};
use nacre_bench::ycsb::bench::{self, TargetKind, YcsbConfig};
use nacre_bench::ycsb::runner::{self, RunOptions};
use nacre_bench::ycsb::targets::resp::RespStore;
use nacre_bench::ycsb::{PhaseResult, Workload};

type TestResult = Result<(), Box<dyn Error>>;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    cfg: YcsbConfig,
}

fn config(targets: &[TargetKind], dir: &Path) -> YcsbConfig {
    let mut cfg = Cli::parse_from(["ycsb"]).cfg;
    cfg.targets = targets.to_vec();
    cfg.records = 2000;
    cfg.operations = 3000;
    cfg.sync_records = 100;
    cfg.sync_operations = 200;
    cfg.field_count = 4;
    cfg.field_length = 50;
    cfg.memtable_mib = 4;
    cfg.warmup_ops = 100;
    cfg.progress_secs = 0;
    cfg.shm_dir = Some(dir.to_path_buf());
    cfg.disk_dir = dir.join("disk");
    cfg
}

fn check_rows(cfg: &YcsbConfig, rows: &[bench::YcsbRow]) {
    assert_eq!(rows.len(), cfg.targets.len() * (1 + cfg.workloads.len()));
    for r in rows {
        let p = &r.result;
        assert!(p.ops_per_sec.is_finite() && p.ops_per_sec > 0.0, "{r:?}");
        assert!(
            p.per_op.iter().all(|o| o.not_found == 0 || o.op == "SCAN"),
            "{r:?}"
        );
        assert_eq!(p.per_second.iter().sum::<u64>(), p.ops);
    }
}

#[test]
fn embedded_stores_run_every_workload() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut targets = vec![
        TargetKind::NacreEmulated,
        TargetKind::NacreEmulatedIndexed,
        TargetKind::NacreEmulatedTreeReads,
        TargetKind::NacreMsync,
    ];
    if cfg!(feature = "rocksdb") {
        targets.extend([TargetKind::RocksdbSync0, TargetKind::RocksdbSync1]);
    }
    let cfg = config(&targets, dir.path());
    let rows = bench::run(&cfg)?;
    check_rows(&cfg, &rows);
    let machine = nacre_bench::report::MachineInfo::collect();
    let md = bench::markdown(&cfg, &machine, &rows);
    assert!(md.contains("| A | Nacre (emulated) |"), "{md}");
    assert!(
        md.contains("| A | Nacre (emulated, persistent index) |"),
        "{md}"
    );
    if cfg!(feature = "rocksdb") {
        assert!(md.contains("| C | RocksDB (sync=1) |"), "{md}");
    }
    let json = bench::json_rows(&cfg, &machine, &rows);
    assert_eq!(json.len(), rows.len());
    assert_eq!(json[1]["results"]["workload"], "a");
    // Every pool and database was removed.
    let left: Vec<PathBuf> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    assert!(left.is_empty(), "left behind: {left:?}");
    Ok(())
}

#[test]
fn rocksdb_without_the_feature_is_a_clear_error() -> TestResult {
    if cfg!(feature = "rocksdb") {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let cfg = config(&[TargetKind::RocksdbSync0], dir.path());
    let e = bench::run(&cfg).err().ok_or("ran without RocksDB")?;
    assert!(e.to_string().contains("--features rocksdb"), "{e}");
    Ok(())
}

fn small_run(store: &RespStore) -> Result<Vec<PhaseResult>, Box<dyn Error>> {
    let o = RunOptions {
        threads: 2,
        pipeline: 4,
        progress_secs: 0,
        ..RunOptions::default()
    };
    let shape = |mut w: Workload| {
        w.field_count = 3;
        w.field_length = 20;
        w
    };
    let mut out = vec![runner::load(store, &shape(Workload::a(300, 0)), &o)?];
    let mut present = 300;
    for (name, w) in [
        ("a", Workload::a(0, 600)),
        ("e", Workload::e(0, 200)),
        ("d", Workload::d(0, 600)),
    ] {
        let mut w = shape(w);
        w.record_count = present;
        let (r, now) = runner::run(store, &w, name, &o)?;
        present = now;
        out.push(r);
    }
    Ok(out)
}

fn check_resp(results: &[PhaseResult]) {
    for r in results {
        assert!(r.ops > 0 && r.ops_per_sec > 0.0, "{r:?}");
        for o in &r.per_op {
            assert_eq!(o.not_found, 0, "{}: {o:?}", r.workload);
        }
    }
}

#[test]
fn resp_store_runs_against_redis_server() -> TestResult {
    if !Path::new(DEFAULT_REDIS_SERVER).exists() {
        eprintln!("skipped: {DEFAULT_REDIS_SERVER} is not installed");
        return Ok(());
    }
    let server = RedisServer::start(DEFAULT_REDIS_SERVER, &[])?;
    let mut check = server.connect(Duration::from_secs(5))?;
    let store = RespStore::connect(server.addr(), "Redis", "none", "none")?;
    check_resp(&small_run(&store)?);
    // Loaded and inserted records are hashes with every field, indexed for scans.
    let n = check
        .command(&[b"ZCARD", b"_indices"])?
        .as_int()
        .ok_or("ZCARD")?;
    assert!(n >= 300, "{n}");
    let key = nacre_bench::ycsb::key_name(0, false);
    let fields = check.command(&[b"HLEN", key.as_bytes()])?.as_int();
    assert_eq!(fields, Some(3));
    drop(store);
    drop(server);
    // An address nothing listens on is a clear error.
    let e = RespStore::connect("127.0.0.1:1", "nobody", "-", "-")
        .err()
        .ok_or("connected to port 1")?;
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    Ok(())
}

/// A live nacre-server, when one is running: its address in `NACRE_SERVER_ADDR`.
#[test]
fn resp_store_runs_against_nacre_server_when_present() -> TestResult {
    let Ok(addr) = std::env::var("NACRE_SERVER_ADDR") else {
        eprintln!("skipped: set NACRE_SERVER_ADDR=host:port to run against a nacre-server");
        return Ok(());
    };
    let store = RespStore::connect(&addr, "nacre-server", "-", "-")?;
    check_resp(&small_run(&store)?);
    Ok(())
}
