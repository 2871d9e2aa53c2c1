//! JSON lines for `nacre-bench pmem`: one object per row, with the machine, the backend and
//! what it survives, the parameters, and every repeat's result.

use serde::Serialize;

use crate::bench::{median, BLOCK, RECORD};
use crate::error::Result;
use crate::results::PmemRun;

#[derive(Serialize)]
struct Series {
    median: f64,
    values: Vec<f64>,
}

#[derive(Serialize)]
struct LatencySeries {
    mean_ns: f64,
    p50_ns: f64,
    p99_ns: f64,
    per_repeat: Vec<serde_json::Value>,
}

fn series(v: &[f64]) -> Option<Series> {
    (!v.is_empty()).then(|| Series {
        median: median(v),
        values: v.to_vec(),
    })
}

/// One JSON object per row, newline-terminated.
pub fn json_lines(run: &PmemRun) -> Result<String> {
    let unix_time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = String::new();
    for r in &run.rows {
        let lat = &r.latency;
        let latency = (!lat.is_empty()).then(|| LatencySeries {
            mean_ns: median(&lat.iter().map(|l| l.mean_ns).collect::<Vec<_>>()),
            p50_ns: median(&lat.iter().map(|l| l.p50_ns).collect::<Vec<_>>()),
            p99_ns: median(&lat.iter().map(|l| l.p99_ns).collect::<Vec<_>>()),
            per_repeat: lat
                .iter()
                .map(|l| {
                    serde_json::json!({"mean_ns": l.mean_ns, "p50_ns": l.p50_ns, "p99_ns": l.p99_ns,
                        "ops": l.ops, "samples": l.samples})
                })
                .collect(),
        });
        let obj = serde_json::json!({
            "bench": "pmem",
            "unix_time": unix_time,
            "machine": run.machine,
            "loop": r.loop_label,
            "loop_kind": r.loop_kind,
            "target": r.target,
            "backend": r.backend,
            "durability": r.survives,
            "metrics": r.metrics,
            "available": r.unavailable.is_none(),
            "unavailable_reason": r.unavailable,
            "path": r.path.as_ref().map(|p| p.display().to_string()),
            "params": {
                "region_bytes": r.region_bytes,
                "seconds": run.config.seconds,
                "max_ops": r.max_ops,
                "repeats": run.config.repeats,
                "block_bytes": BLOCK,
                "record_bytes": RECORD,
                "seed": run.config.seed,
                "clock_overhead_ns": run.clock_overhead_ns,
            },
            "results": {
                "seq_write_4k_gbps": series(&r.seq_gbps),
                "append_128b_mops": series(&r.append_mops),
                "persist_8b_random": latency,
            },
        });
        out.push_str(&serde_json::to_string(&obj)?);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_run;

    #[test]
    fn json_has_one_object_per_row() {
        let run = sample_run();
        let text = json_lines(&run).unwrap_or_else(|e| panic!("{e}"));
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["backend"], "emulated (clwb)");
        assert_eq!(rows[0]["results"]["seq_write_4k_gbps"]["median"], 3.0);
        assert_eq!(rows[0]["machine"]["cpu_model"], "Test CPU");
        assert_eq!(rows[2]["available"], false);
        assert_eq!(rows[2]["unavailable_reason"], "MAP_SYNC refused");
    }
}
