//! Smoke tests: the pmem benchmark with tiny sizes produces positive, finite numbers for every
//! loop, renders, and removes its files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use nacre_bench::json::json_lines;
use nacre_bench::report::markdown;
use nacre_bench::results::{LoopKind, RowResult};
use nacre_bench::{run, PmemConfig, Target};

fn shm_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn tiny(dir: &Path, targets: Vec<Target>) -> PmemConfig {
    PmemConfig {
        region_bytes: 2 << 20,
        sync_region_bytes: 1 << 20,
        seconds: 0.05,
        sync_ops: 16,
        repeats: 1,
        shm_dir: dir.to_path_buf(),
        disk_dir: dir.join("disk"),
        dax_dir: dir.join("disk"),
        targets,
        ..PmemConfig::default()
    }
}

fn assert_positive(row: &RowResult) {
    let ok = |v: &[f64]| v.len() == 1 && v.iter().all(|x| x.is_finite() && *x > 0.0);
    let what = format!("{} on {}", row.loop_label, row.backend);
    assert!(row.unavailable.is_none(), "{what}: {:?}", row.unavailable);
    assert!(ok(&row.seq_gbps), "{what}: seq {:?}", row.seq_gbps);
    assert!(ok(&row.append_mops), "{what}: append {:?}", row.append_mops);
    let copy_only = matches!(
        row.loop_kind,
        LoopKind::PmemCopyPersist | LoopKind::RawStream
    );
    if copy_only {
        assert!(row.latency.is_empty(), "{what}");
    } else {
        assert_eq!(row.latency.len(), 1, "{what}");
        let l = row.latency[0];
        for x in [l.mean_ns, l.p50_ns, l.p99_ns] {
            assert!(x.is_finite() && x > 0.0, "{what}: latency {l:?}");
        }
        assert!(
            l.ops > 0 && l.samples > 0 && l.p50_ns <= l.p99_ns,
            "{what}: {l:?}"
        );
    }
}

fn assert_renders(run: &nacre_bench::PmemRun) {
    let md = markdown(run);
    assert!(md.contains("| loop | backend / durability |"), "{md}");
    let json = json_lines(run).unwrap();
    assert_eq!(json.lines().count(), run.rows.len());
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["bench"], "pmem");
        assert!(v["machine"]["nproc"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn pmem_emulated_sim_and_raw_mmap_with_tiny_sizes() {
    let dir = tempfile::Builder::new()
        .prefix("nacre-bench-smoke")
        .tempdir_in(shm_base())
        .unwrap();
    let cfg = tiny(
        dir.path(),
        vec![Target::Emulated, Target::Sim, Target::RawShm],
    );
    let run = run(&cfg).unwrap();
    let targets: Vec<Target> = run.rows.iter().map(|r| r.target).collect();
    assert_eq!(
        targets,
        [
            Target::Emulated,
            Target::Emulated,
            Target::RawShm,
            Target::RawShm,
            Target::Sim
        ]
    );
    for row in &run.rows {
        assert_positive(row);
        assert!(!row.survives.is_empty());
    }
    assert_renders(&run);
    assert!(markdown(&run).contains("Ratio emulated / raw"));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

#[test]
fn pmem_sync_loops_and_dax_attempt_with_tiny_sizes() {
    let dir = tempfile::Builder::new()
        .prefix("nacre-bench-smoke")
        .tempdir()
        .unwrap();
    let cfg = tiny(
        dir.path(),
        vec![Target::Msync, Target::RawFdatasync, Target::Dax],
    );
    let run = run(&cfg).unwrap();
    for row in &run.rows {
        match row.target {
            Target::Dax if row.unavailable.is_some() => {
                assert!(!row.unavailable.as_deref().unwrap().is_empty());
            }
            _ => assert_positive(row),
        }
    }
    assert!(run.rows.iter().any(|r| r.target == Target::Dax));
    assert_renders(&run);
    assert!(
        !dir.path().join("disk").exists(),
        "the disk directory this run created is removed"
    );
}
