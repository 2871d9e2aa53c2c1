//! The recovery part of the report: restart time after SIGKILL per engine, data size and
//! recovery threads, as a table and a bar chart of the time to the first successful read.

use std::fmt::Write as _;

use serde_json::Value;

use super::charts::{median_row, number, ordered, push_chart, text};
use super::Chart;
use crate::chart::{BarChart, TickFormat};
use crate::error::Result;
use crate::report::sig3;

fn engine(r: &Value) -> String {
    match text(r, &["params", "engine"]) {
        "rocksdb" => "RocksDB (WAL, sync=0)".into(),
        "redis" => "Redis (AOF, appendfsync no)".into(),
        _ => {
            let t = &r["params"]["recovery_threads"];
            format!("Nacre (emulated, {t} threads)")
        }
    }
}

/// Renders the recovery rows.
pub fn render(rows: &[&Value], link: &str, md: &mut String, charts: &mut Vec<Chart>) -> Result<()> {
    let rows: Vec<&Value> = rows
        .iter()
        .copied()
        .filter(|r| r["results"]["available"] != false)
        .collect();
    md.push_str("### Recovery after SIGKILL\n\n");
    if let Some(r) = rows.first() {
        let p = &r["params"];
        let _ = writeln!(
            md,
            "A child loads the data ({} writers, {}-byte keys, {}-byte values) and is \
             SIGKILLed; each open runs in a fresh process (RocksDB from a fresh copy of its \
             crashed directory; Redis: a new redis-server on the same AOF, timed from spawn). First read: open plus one get of a key acknowledged before \
             the crash; full service: plus {} gets of random loaded keys, all found; restart: \
             from spawning the process. Milliseconds, median of {} opens. Command: \
             `nacre-bench recovery --json FILE`.\n",
            p["writers"], p["key_size"], p["value_size"], p["sample"], p["repeats"]
        );
    }
    md.push_str("| engine | data MiB | open ms | first read ms | full service ms | restart ms |\n");
    md.push_str("|---|---|---|---|---|---|\n");
    let engines = ordered(rows.iter().map(|r| engine(r)));
    let mut sizes: Vec<u64> = ordered(rows.iter().filter_map(|r| r["params"]["size_mib"].as_u64()));
    sizes.sort_unstable();
    let pick = |e: &str, size: u64| {
        let same: Vec<&Value> = rows
            .iter()
            .copied()
            .filter(|r| engine(r) == e && r["params"]["size_mib"].as_u64() == Some(size))
            .collect();
        median_row(&same, |r| number(r, &["results", "restart_ms_median"]))
    };
    for &size in &sizes {
        for e in &engines {
            let Some(r) = pick(e, size) else { continue };
            let res = &r["results"];
            let _ = writeln!(
                md,
                "| {e} | {size} | {} | {} | {} | {} |",
                sig3(number(res, &["open_ms_median"])),
                sig3(number(res, &["first_get_ms_median"])),
                sig3(number(res, &["full_service_ms_median"])),
                sig3(number(res, &["restart_ms_median"]))
            );
        }
    }
    md.push('\n');
    let chart = BarChart {
        title: "Time to the first successful read after SIGKILL".into(),
        y_label: "milliseconds".into(),
        categories: sizes.iter().map(|s| format!("{s} MiB")).collect(),
        series: engines
            .iter()
            .map(|e| {
                let v = sizes
                    .iter()
                    .map(|&s| {
                        pick(e, s)
                            .map_or(f64::NAN, |r| number(r, &["results", "first_get_ms_median"]))
                    })
                    .collect();
                (e.clone(), v)
            })
            .collect(),
        value_labels: true,
        y_format: TickFormat::Number,
    };
    push_chart(
        md,
        charts,
        link,
        "recovery-first-read.svg".into(),
        "Recovery time after SIGKILL",
        chart.render(),
    )
}
