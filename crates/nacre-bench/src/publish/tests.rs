//! Tests of the report: splicing into a page, rendering YCSB and recovery rows into tables
//! and well-formed charts, and clear errors for inputs that are not benchmark rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn ycsb_row(label: &str, durability: &str, workload: &str, ops: f64) -> Value {
    json!({
        "bench": "ycsb", "backend": "b", "durability": durability,
        "machine": {"cpu_model": "cpu", "nproc": 2, "kernel": "k"},
        "params": {"label": label, "records": 10, "operations": 20, "sync_records": 1,
                   "sync_operations": 2, "threads": 2, "field_count": 10, "field_length": 100,
                   "zipfian_constant": 0.99, "warmup_ops": 1, "pipeline": 1,
                   "workloads": ["a"], "run_records": 10, "run_operations": 20},
        "results": {"workload": workload, "ops_per_sec": ops, "secs": 5.5,
                    "per_second": [5, 7, 3, 4, 6, 2],
                    "per_op": [{"op": "READ", "count": 10, "avg_us": 1.5, "p50_us": 1.0,
                                "p99_us": 4.0, "p999_us": 9.0, "max_us": 12.0,
                                "cdf": [[0.0, 0.5], [50.0, 1.0], [99.0, 4.0], [100.0, 12.0]]}]}
    })
}

#[test]
fn splice_replaces_appends_and_rejects_broken_markers() {
    let page = format!("# Title\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n");
    let out = splice(&page, "new\n").unwrap();
    assert_eq!(
        out,
        format!("# Title\n\nbefore\n{BEGIN}\nnew\n{END}\nafter\n")
    );
    assert_eq!(splice(&out, "new\n").unwrap(), out, "idempotent");
    let appended = splice("# T\ntext", "x\n").unwrap();
    assert!(appended.starts_with("# T\ntext\n\n") && appended.ends_with(&format!("x\n{END}\n")));
    assert!(splice(&format!("{END}\n{BEGIN}\n"), "x").is_err());
    assert!(splice(&format!("{BEGIN}\n"), "x").is_err());
}

#[test]
fn ycsb_rows_become_tables_ratios_and_charts() {
    let crash = "process crash only";
    let rows = vec![
        ycsb_row("Nacre (emulated)", crash, "a", 300.0),
        ycsb_row("Nacre (emulated)", crash, "a", 100.0),
        ycsb_row("Nacre (emulated)", crash, "a", 200.0),
        ycsb_row("RocksDB (sync=0)", crash, "a", 50.0),
        ycsb_row("Nacre (emulated)", crash, "load", 10.0),
        ycsb_row("Nacre (msync)", "power loss", "a", 7.0),
    ];
    let (md, charts) = render(&rows, "img").unwrap();
    // A run shorter than a few seconds gets no timeline.
    let mut short = ycsb_row("Nacre (emulated)", crash, "a", 1.0);
    short["results"]["secs"] = json!(0.5);
    let (_, few) = render(&[short], "img").unwrap();
    assert!(few.iter().all(|c| !c.file.contains("timeline")));
    // The median of three runs, the ratio against RocksDB, both pairings.
    assert!(md.contains("| A | 200 | 50.0 | 4.00x |"), "{md}");
    assert!(md.contains("| load | 10.0 | - | - |"), "{md}");
    assert!(
        md.contains("writes survive: power loss, 10 records, 20 operations"),
        "{md}"
    );
    let crash_slug = "process-crash-only-10-records-20-operations";
    assert!(md.contains(&format!(
        "![YCSB throughput per workload](img/ycsb-throughput-{crash_slug}.svg)"
    )));
    let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
    for f in [
        format!("ycsb-throughput-{crash_slug}.svg"),
        "ycsb-throughput-power-loss-10-records-20-operations.svg".to_string(),
        format!("ycsb-latency-a-{crash_slug}.svg"),
        format!("ycsb-timeline-a-{crash_slug}.svg"),
        "ycsb-ratio.svg".to_string(),
    ] {
        let f = f.as_str();
        assert!(files.contains(&f), "{files:?}");
    }
    for c in &charts {
        assert!(
            c.svg.starts_with("<svg") && c.svg.trim_end().ends_with("</svg>"),
            "{}",
            c.file
        );
    }
}

#[test]
fn recovery_rows_become_a_table_and_a_chart() {
    let row = |engine: &str, threads: u64, size: u64, ms: f64| {
        json!({"bench": "recovery", "params": {"engine": engine, "recovery_threads": threads,
               "size_mib": size, "writers": 4, "key_size": 16, "value_size": 1024,
               "sample": 100, "repeats": 1},
               "results": {"available": true, "open_ms_median": ms, "first_get_ms_median": ms,
                           "full_service_ms_median": ms + 1.0, "restart_ms_median": ms + 10.0}})
    };
    let rows = vec![
        row("nacre", 2, 64, 50.0),
        row("rocksdb", 0, 64, 600.0),
        row("nacre", 2, 1024, 350.0),
        json!({"bench": "recovery", "params": {"engine": "rocksdb", "size_mib": 1024},
               "results": {"available": false}}),
    ];
    let (md, charts) = render(&rows, "").unwrap();
    assert!(
        md.contains("| Nacre (emulated, 2 threads) | 64 | 50.0 | 50.0 | 51.0 | 60.0 |"),
        "{md}"
    );
    assert!(md.contains("| RocksDB (WAL, sync=0) | 64 | 600 |"), "{md}");
    assert_eq!(charts.len(), 1);
    assert!(md.contains("(recovery-first-read.svg)"));
}

#[test]
fn inputs_that_are_not_rows_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.jsonl");
    std::fs::write(&p, "{\"a\": 1}\n").unwrap();
    assert!(read_rows(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string()
        .contains("no \"bench\""));
    std::fs::write(&p, "not json\n").unwrap();
    assert!(read_rows(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string()
        .contains("x.jsonl:1"));
    assert!(read_rows(&[dir.path().join("missing")]).is_err());
    assert!(render(&[json!({"bench": "pmem"})], "").is_err());
}

#[test]
fn image_links_are_relative_to_the_page() {
    let l = link_dir(Some(Path::new("docs/benchmarks.md")), Path::new("docs/img"));
    assert_eq!(l, "img");
    assert_eq!(link_dir(None, Path::new("out/img")), "out/img");
}
