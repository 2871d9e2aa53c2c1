//! The YCSB part of the report: per durability pairing, a throughput table with the
//! Nacre/RocksDB ratio and a bar chart, latency tables and CDF charts per workload, and the
//! per-second throughput of workload A over time.

use std::fmt::Write as _;

use serde_json::Value;

use super::charts::{median_row, number, ordered, push_chart, slug, text};
use super::Chart;
use crate::chart::{BarChart, LineChart, Scale, Series, TickFormat};
use crate::error::Result;
use crate::report::sig3;

/// Runs shorter than this get no throughput-over-time chart.
const MIN_TIMELINE_SECS: f64 = 4.0;

const WORKLOAD_ORDER: [&str; 7] = ["load", "a", "b", "c", "d", "e", "f"];

fn workload_name(w: &str) -> String {
    if w == "load" {
        "load".into()
    } else {
        w.to_uppercase()
    }
}

/// The median run of each (store, workload) in one pairing.
struct Pairing<'a> {
    durability: String,
    stores: Vec<String>,
    workloads: Vec<String>,
    runs: Vec<(String, String, &'a Value)>,
}

impl<'a> Pairing<'a> {
    fn get(&self, store: &str, workload: &str) -> Option<&'a Value> {
        self.runs
            .iter()
            .find(|(s, w, _)| s == store && w == workload)
            .map(|r| r.2)
    }

    fn ops(&self, store: &str, workload: &str) -> f64 {
        self.get(store, workload)
            .map_or(f64::NAN, |r| number(r, &["results", "ops_per_sec"]))
    }

    /// The Nacre and RocksDB stores of the pairing, if it has one of each.
    fn ratio_pair(&self) -> Option<(&str, &str)> {
        let n = self.stores.iter().find(|s| s.starts_with("Nacre"))?;
        let r = self.stores.iter().find(|s| s.starts_with("RocksDB"))?;
        Some((n, r))
    }
}

/// The pairing a row belongs to: what its writes survive, and the record and operation
/// counts it ran with (runs of other sizes are other pairings).
fn pairing_of(r: &Value) -> String {
    let p = &r["params"];
    format!(
        "{}, {} records, {} operations",
        text(r, &["durability"]),
        p["run_records"],
        p["run_operations"]
    )
}

fn pairings<'a>(rows: &[&'a Value]) -> Vec<Pairing<'a>> {
    let durabilities = ordered(rows.iter().map(|r| pairing_of(r)));
    durabilities
        .into_iter()
        .map(|d| {
            let mine: Vec<&Value> = rows
                .iter()
                .copied()
                .filter(|r| pairing_of(r) == d)
                .collect();
            let stores = ordered(
                mine.iter()
                    .map(|r| text(r, &["params", "label"]).to_string()),
            );
            let mut workloads = ordered(
                mine.iter()
                    .map(|r| text(r, &["results", "workload"]).to_string()),
            );
            workloads.sort_by_key(|w| WORKLOAD_ORDER.iter().position(|x| x == w).unwrap_or(99));
            let mut runs = Vec::new();
            for s in &stores {
                for w in &workloads {
                    let same: Vec<&Value> = mine
                        .iter()
                        .copied()
                        .filter(|r| {
                            text(r, &["params", "label"]) == s
                                && text(r, &["results", "workload"]) == w
                        })
                        .collect();
                    if let Some(r) = median_row(&same, |r| number(r, &["results", "ops_per_sec"])) {
                        runs.push((s.clone(), w.clone(), r));
                    }
                }
            }
            Pairing {
                durability: d,
                stores,
                workloads,
                runs,
            }
        })
        .collect()
}

fn describe(md: &mut String, rows: &[&Value]) {
    let Some(r) = rows.first() else { return };
    let p = &r["params"];
    let m = &r["machine"];
    let workloads = p["workloads"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_uppercase)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "Machine: {} ({} CPUs), Linux {}. YCSB core workloads, {} fields x {} B per record, \
         {} client threads, zipfian constant {}, warm-up {} operations per run, pipeline {}; \
         process-crash pairing {} records / {} operations per workload, power-loss pairing \
         {} / {}. Each store is loaded, then runs the workloads in the order {}. Command: \
         `nacre-bench ycsb --records {} --operations {} --sync-records {} --sync-operations {} \
         --threads {} --workloads {} --json FILE`, then `nacre-bench report FILE --doc \
         docs/benchmarks.md`.\n",
        text(m, &["cpu_model"]),
        m["nproc"],
        text(m, &["kernel"]),
        p["field_count"],
        p["field_length"],
        p["threads"],
        p["zipfian_constant"],
        p["warmup_ops"],
        p["pipeline"],
        p["records"],
        p["operations"],
        p["sync_records"],
        p["sync_operations"],
        workloads.join(", "),
        p["records"],
        p["operations"],
        p["sync_records"],
        p["sync_operations"],
        p["threads"],
        workloads.join(",").to_lowercase(),
    );
}

/// The durability part of a pairing's name, for chart titles.
fn short(pairing: &str) -> &str {
    pairing.split(',').next().unwrap_or(pairing)
}

fn throughput(md: &mut String, charts: &mut Vec<Chart>, link: &str, p: &Pairing) -> Result<()> {
    let _ = writeln!(
        md,
        "#### YCSB throughput, writes survive: {}\n",
        p.durability
    );
    md.push_str("| workload |");
    for s in &p.stores {
        let _ = write!(md, " {s} ops/s |");
    }
    let pair = p.ratio_pair();
    if let Some((n, r)) = pair {
        let _ = write!(md, " {n} / {r} |");
    }
    md.push('\n');
    md.push_str(&"|---".repeat(1 + p.stores.len() + usize::from(pair.is_some())));
    md.push_str("|\n");
    for w in &p.workloads {
        let _ = write!(md, "| {} |", workload_name(w));
        for s in &p.stores {
            let _ = write!(md, " {} |", sig3(p.ops(s, w)));
        }
        if let Some((n, r)) = pair {
            let x = p.ops(n, w) / p.ops(r, w);
            let cell = if x.is_finite() {
                format!("{}x", sig3(x))
            } else {
                "-".into()
            };
            let _ = write!(md, " {cell} |");
        }
        md.push('\n');
    }
    md.push('\n');
    let chart = BarChart {
        title: format!("YCSB throughput ({})", short(&p.durability)),
        y_label: "operations per second".into(),
        categories: p.workloads.iter().map(|w| workload_name(w)).collect(),
        series: p
            .stores
            .iter()
            .map(|s| (s.clone(), p.workloads.iter().map(|w| p.ops(s, w)).collect()))
            .collect(),
        value_labels: true,
        y_format: TickFormat::Number,
    };
    let file = format!("ycsb-throughput-{}.svg", slug(&p.durability));
    push_chart(
        md,
        charts,
        link,
        file,
        "YCSB throughput per workload",
        chart.render(),
    )
}

fn latency(md: &mut String, charts: &mut Vec<Chart>, link: &str, p: &Pairing) -> Result<()> {
    let _ = writeln!(md, "#### YCSB latency ({}), microseconds\n", p.durability);
    md.push_str("| workload | store | op | count | avg | p50 | p99 | p99.9 | max |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for w in &p.workloads {
        for s in &p.stores {
            let Some(r) = p.get(s, w) else { continue };
            for o in r["results"]["per_op"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    md,
                    "| {} | {s} | {} | {} | {} | {} | {} | {} | {} |",
                    workload_name(w),
                    text(o, &["op"]),
                    o["count"],
                    sig3(number(o, &["avg_us"])),
                    sig3(number(o, &["p50_us"])),
                    sig3(number(o, &["p99_us"])),
                    sig3(number(o, &["p999_us"])),
                    sig3(number(o, &["max_us"]))
                );
            }
        }
    }
    md.push('\n');
    for w in p.workloads.iter().filter(|w| *w != "load") {
        let mut series = Vec::new();
        for s in &p.stores {
            let Some(r) = p.get(s, w) else { continue };
            for o in r["results"]["per_op"].as_array().into_iter().flatten() {
                let points: Vec<(f64, f64)> = o["cdf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|pt| Some((pt[1].as_f64()?, pt[0].as_f64()?)))
                    .collect();
                series.push(Series::new(format!("{s} {}", text(o, &["op"])), points));
            }
        }
        let chart = LineChart {
            title: format!(
                "YCSB {} latency CDF ({})",
                workload_name(w),
                short(&p.durability)
            ),
            x_label: "latency".into(),
            y_label: "percentile".into(),
            x_scale: Scale::Log10,
            y_scale: Scale::Linear,
            series,
            y_from_zero: true,
            x_format: TickFormat::Micros,
            y_format: TickFormat::Number,
        };
        let file = format!("ycsb-latency-{w}-{}.svg", slug(&p.durability));
        let alt = format!("YCSB {} latency CDF", workload_name(w));
        push_chart(md, charts, link, file, &alt, chart.render())?;
    }
    Ok(())
}

fn timeline(md: &mut String, charts: &mut Vec<Chart>, link: &str, p: &Pairing) -> Result<()> {
    // The longest run of the pairing; a run shorter than a few seconds shows no jitter.
    let secs = |w: &String| {
        p.stores
            .iter()
            .filter_map(|s| p.get(s, w))
            .map(|r| number(r, &["results", "secs"]))
            .fold(f64::NAN, f64::max)
    };
    let Some(w) = p
        .workloads
        .iter()
        .filter(|w| *w != "load")
        .max_by(|a, b| secs(a).total_cmp(&secs(b)))
    else {
        return Ok(());
    };
    if secs(w).is_nan() || secs(w) < MIN_TIMELINE_SECS {
        return Ok(());
    }
    let mut series = Vec::new();
    for s in &p.stores {
        let Some(r) = p.get(s, w) else { continue };
        let per: Vec<f64> = r["results"]["per_second"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_f64)
            .collect();
        // The last second is partial: leave it out unless it is all there is.
        let full = if per.len() > 1 {
            per.len() - 1
        } else {
            per.len()
        };
        let points = per[..full]
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as f64 + 1.0, n))
            .collect();
        series.push(Series::new(s.clone(), points));
    }
    let chart = LineChart {
        title: format!(
            "YCSB {} throughput over time ({})",
            workload_name(w),
            short(&p.durability)
        ),
        x_label: "seconds since the run began".into(),
        y_label: "operations per second".into(),
        series,
        y_from_zero: true,
        ..LineChart::default()
    };
    let file = format!("ycsb-timeline-{w}-{}.svg", slug(&p.durability));
    let alt = format!("YCSB {} throughput per second", workload_name(w));
    push_chart(md, charts, link, file, &alt, chart.render())
}

/// One chart of every pairing's Nacre/RocksDB throughput ratio per workload: bars of very
/// different heights (reads against synced writes) hide each other on one linear axis.
fn ratios(md: &mut String, charts: &mut Vec<Chart>, link: &str, ps: &[Pairing]) -> Result<()> {
    let with: Vec<&Pairing> = ps.iter().filter(|p| p.ratio_pair().is_some()).collect();
    if with.is_empty() {
        return Ok(());
    }
    let mut workloads: Vec<String> = ordered(with.iter().flat_map(|p| p.workloads.clone()));
    workloads.sort_by_key(|w| WORKLOAD_ORDER.iter().position(|x| x == w).unwrap_or(99));
    let series = with
        .iter()
        .filter_map(|p| {
            let (n, r) = p.ratio_pair()?;
            let v = workloads
                .iter()
                .map(|w| p.ops(n, w) / p.ops(r, w))
                .collect();
            Some((p.durability.clone(), v))
        })
        .collect();
    let chart = BarChart {
        title: "YCSB throughput, Nacre / RocksDB (1 = parity)".into(),
        y_label: "ratio".into(),
        categories: workloads.iter().map(|w| workload_name(w)).collect(),
        series,
        value_labels: true,
        y_format: TickFormat::Number,
    };
    push_chart(
        md,
        charts,
        link,
        "ycsb-ratio.svg".into(),
        "Nacre / RocksDB throughput per workload and pairing",
        chart.render(),
    )
}

/// Renders the YCSB rows.
pub fn render(rows: &[&Value], link: &str, md: &mut String, charts: &mut Vec<Chart>) -> Result<()> {
    md.push_str("### YCSB\n\n");
    describe(md, rows);
    let ps = pairings(rows);
    ratios(md, charts, link, &ps)?;
    for p in &ps {
        throughput(md, charts, link, p)?;
    }
    for p in &ps {
        timeline(md, charts, link, p)?;
    }
    for p in &ps {
        latency(md, charts, link, p)?;
    }
    Ok(())
}
