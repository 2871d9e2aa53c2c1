//! Rendering a run as Markdown for stdout: the results table, what each backend survives, and
//! the ratios against the anchors measured in the same run. JSON lines are in [`crate::json`].

use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::median;
use crate::config::Target;
use crate::raw::LineFlush;
use crate::results::{LoopKind, PmemRun, RowResult};

/// The machine a run measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MachineInfo {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs available to this process.
    pub nproc: usize,
    /// Kernel release.
    pub kernel: String,
    /// Kernel clock source (affects the cost of reading the clock).
    pub clocksource: String,
    /// Best cache-line write-back instruction, per CPUID.
    pub line_flush: Option<&'static str>,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl MachineInfo {
    /// Reads the machine description from /proc, /sys and CPUID.
    pub fn collect() -> MachineInfo {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        MachineInfo {
            cpu_model,
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            clocksource: read_trimmed(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            line_flush: LineFlush::detect().map(LineFlush::name),
        }
    }
}

/// `x` with three significant digits (no exponent); `-` for NaN or infinity.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{x:.decimals$}")
}

/// The per-repeat values a row reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stat {
    Seq,
    Append,
    LatMean,
    LatP99,
}

impl RowResult {
    fn values(&self, s: Stat) -> Vec<f64> {
        match s {
            Stat::Seq => self.seq_gbps.clone(),
            Stat::Append => self.append_mops.clone(),
            Stat::LatMean => self.latency.iter().map(|l| l.mean_ns).collect(),
            Stat::LatP99 => self.latency.iter().map(|l| l.p99_ns).collect(),
        }
    }

    /// Median over repeats, if measured.
    fn stat(&self, s: Stat) -> Option<f64> {
        let v = self.values(s);
        (!v.is_empty()).then(|| median(&v))
    }

    /// The part of `survives` before its explanation, e.g. `power loss`.
    fn survives_short(&self) -> &str {
        self.survives.split(" (").next().unwrap_or_default()
    }
}

fn cell(row: &RowResult, s: Stat) -> String {
    if row.unavailable.is_some() {
        return "unavailable".into();
    }
    row.stat(s).map_or_else(|| "-".into(), sig3)
}

fn find(run: &PmemRun, target: Target, kind: LoopKind) -> Option<&RowResult> {
    run.rows
        .iter()
        .find(|r| r.target == target && r.loop_kind == kind && r.unavailable.is_none())
}

/// One line of a ratio table: `(label, subject, anchor, stat)`.
type Pair = (&'static str, (Target, LoopKind), (Target, LoopKind), Stat);

fn ratio_table(out: &mut String, run: &PmemRun, heads: [&str; 3], pairs: &[Pair], tol: bool) {
    let mut lines = Vec::new();
    for &(label, a, b, s) in pairs {
        let (Some(ra), Some(rb)) = (find(run, a.0, a.1), find(run, b.0, b.1)) else {
            continue;
        };
        let (Some(va), Some(vb)) = (ra.stat(s), rb.stat(s)) else {
            continue;
        };
        let r = va / vb;
        let mut line = format!("| {label} | {} | {} | {} |", sig3(va), sig3(vb), sig3(r));
        if tol {
            // Tail percentiles of one shared-machine run are too noisy to hold to 10%.
            let ok = (r - 1.0).abs() <= 0.10;
            line.push_str(match (s, ok) {
                (Stat::LatP99, _) => " (tail, not checked) |",
                (_, true) => " yes |",
                (_, false) => " no |",
            });
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return;
    }
    let extra = if tol { " within 10% |" } else { "" };
    let _ = writeln!(
        out,
        "| measure | {} | {} | {} |{extra}",
        heads[0], heads[1], heads[2]
    );
    let _ = writeln!(out, "|---|---|---|---|{}", if tol { "---|" } else { "" });
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    out.push('\n');
}

/// The report printed to stdout.
pub fn markdown(run: &PmemRun) -> String {
    let (m, c) = (&run.machine, &run.config);
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let mut out = String::from("## nacre-bench pmem\n\n");
    let _ = writeln!(
        out,
        "Machine: {} ({} CPUs), Linux {}, clock source {}, cache write-back {}.",
        m.cpu_model,
        m.nproc,
        m.kernel,
        m.clocksource,
        m.line_flush.unwrap_or("none")
    );
    let _ = writeln!(
        out,
        "Parameters: region {} MiB (emulated, raw mmap in {}; sim in memory), {} MiB (msync, \
         fdatasync in {}); {} s per measurement, at most {} ops for msync and fdatasync; median \
         of {} repeats. Latency mean from batch timing; p99 from per-operation samples, each \
         including ~{} ns of clock reads.\n",
        sig3(mib(c.region_bytes)),
        c.shm_dir.display(),
        sig3(mib(c.sync_region_bytes)),
        c.disk_dir.display(),
        c.seconds,
        c.sync_ops,
        c.repeats,
        sig3(run.clock_overhead_ns)
    );
    out.push_str(
        "| loop | backend / durability | 4 KiB seq write GB/s | 128 B append Mops/s | \
         8 B random persist latency ns (mean / p99) |\n|---|---|---|---|---|\n",
    );
    for r in &run.rows {
        let lat = if r.unavailable.is_some() || r.latency.is_empty() {
            cell(r, Stat::LatMean)
        } else {
            format!("{} / {}", cell(r, Stat::LatMean), cell(r, Stat::LatP99))
        };
        let durability = if r.unavailable.is_some() {
            "-"
        } else {
            r.survives_short()
        };
        let _ = writeln!(
            out,
            "| {} | {}: {} | {} | {} | {} |",
            r.loop_label,
            r.backend,
            durability,
            cell(r, Stat::Seq),
            cell(r, Stat::Append),
            lat
        );
    }
    out.push('\n');
    for r in run.rows.iter().filter(|r| r.unavailable.is_some()) {
        let why = r.unavailable.as_deref().unwrap_or_default();
        let _ = writeln!(out, "- {} unavailable: {why}", r.backend);
    }
    out.push_str("\nWhat an acknowledged write survives:\n\n");
    let mut seen = Vec::new();
    for r in run.rows.iter().filter(|r| r.unavailable.is_none()) {
        if !seen.contains(&r.backend) {
            let _ = writeln!(out, "- {}: {}", r.backend, r.survives);
            seen.push(r.backend.clone());
        }
    }
    out.push('\n');
    use LoopKind::*;
    use Target::*;
    let emu = [
        (
            "4 KiB seq write GB/s",
            (Emulated, PmemPersist),
            (RawShm, RawFlushFence),
            Stat::Seq,
        ),
        (
            "4 KiB seq write GB/s, non-temporal",
            (Emulated, PmemCopyPersist),
            (RawShm, RawStream),
            Stat::Seq,
        ),
        (
            "128 B append Mops/s",
            (Emulated, PmemPersist),
            (RawShm, RawFlushFence),
            Stat::Append,
        ),
        (
            "128 B append Mops/s, non-temporal",
            (Emulated, PmemCopyPersist),
            (RawShm, RawStream),
            Stat::Append,
        ),
        (
            "8 B random persist ns, mean",
            (Emulated, PmemPersist),
            (RawShm, RawFlushFence),
            Stat::LatMean,
        ),
        (
            "8 B random persist ns, p99",
            (Emulated, PmemPersist),
            (RawShm, RawFlushFence),
            Stat::LatP99,
        ),
    ];
    let sync = emu.map(|(l, _, _, s)| {
        (
            l,
            (Msync, PmemPersist),
            (RawFdatasync, RawPwriteFdatasync),
            s,
        )
    });
    let sync: Vec<Pair> = sync
        .into_iter()
        .filter(|p| !p.0.contains("non-temporal"))
        .collect();
    if find(run, Emulated, PmemPersist).is_some() && find(run, RawShm, RawFlushFence).is_some() {
        out.push_str("Ratio emulated / raw (same run; 1.00 = identical):\n\n");
        ratio_table(
            &mut out,
            run,
            ["nacre-pmem emulated", "raw mmap", "emulated/raw"],
            &emu,
            true,
        );
    }
    if find(run, Msync, PmemPersist).is_some()
        && find(run, RawFdatasync, RawPwriteFdatasync).is_some()
    {
        out.push_str("Ratio msync / write+fdatasync (same run):\n\n");
        ratio_table(
            &mut out,
            run,
            ["nacre-pmem msync", "write+fdatasync", "msync/fdatasync"],
            &sync,
            false,
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::Latency;
    use crate::config::PmemConfig;

    fn row(target: Target, kind: LoopKind, backend: &str, seq: f64, lat: f64) -> RowResult {
        RowResult {
            target,
            loop_kind: kind,
            loop_label: format!("{kind:?}"),
            backend: backend.into(),
            survives: "power loss (because)".into(),
            path: None,
            unavailable: None,
            region_bytes: 1 << 20,
            max_ops: None,
            metrics: vec!["seq-4k", "append-128", "random-8"],
            seq_gbps: vec![seq, seq * 3.0, seq / 3.0],
            append_mops: vec![2.0],
            latency: vec![Latency {
                mean_ns: lat,
                p50_ns: lat,
                p99_ns: 2.0 * lat,
                ops: 10,
                samples: 3,
            }],
        }
    }

    pub(crate) fn sample_run() -> PmemRun {
        let mut dax = row(Target::Dax, LoopKind::PmemPersist, "dax", 0.0, 0.0);
        dax.unavailable = Some("MAP_SYNC refused".into());
        PmemRun {
            machine: MachineInfo {
                cpu_model: "Test CPU".into(),
                nproc: 2,
                kernel: "6.0".into(),
                clocksource: "tsc".into(),
                line_flush: Some("clwb"),
            },
            config: PmemConfig::default(),
            clock_overhead_ns: 20.0,
            rows: vec![
                row(
                    Target::Emulated,
                    LoopKind::PmemPersist,
                    "emulated (clwb)",
                    3.0,
                    190.0,
                ),
                row(
                    Target::RawShm,
                    LoopKind::RawFlushFence,
                    "raw mmap",
                    4.0,
                    180.0,
                ),
                dax,
            ],
        }
    }

    #[test]
    fn sig3_keeps_three_significant_digits() {
        assert_eq!(sig3(12345.6), "12346");
        assert_eq!(sig3(123.4), "123");
        assert_eq!(sig3(12.34), "12.3");
        assert_eq!(sig3(1.234), "1.23");
        assert_eq!(sig3(0.01234), "0.0123");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(sig3(f64::NAN), "-");
    }

    #[test]
    fn table_shows_medians_durability_unavailability_and_ratios() {
        let md = markdown(&sample_run());
        assert!(md.contains("Machine: Test CPU (2 CPUs)"), "{md}");
        let emu = "| PmemPersist | emulated (clwb): power loss | 3.00 | 2.00 | 190 / 380 |";
        assert!(md.contains(emu), "{md}");
        let dax = "| PmemPersist | dax: - | unavailable | unavailable | unavailable |";
        assert!(md.contains(dax), "{md}");
        assert!(md.contains("- dax unavailable: MAP_SYNC refused"), "{md}");
        assert!(
            md.contains("- emulated (clwb): power loss (because)"),
            "{md}"
        );
        assert!(
            md.contains("| 4 KiB seq write GB/s | 3.00 | 4.00 | 0.750 | no |"),
            "{md}"
        );
        assert!(
            md.contains("| 8 B random persist ns, mean | 190 | 180 | 1.06 | yes |"),
            "{md}"
        );
        assert!(!md.contains("msync / write+fdatasync"), "{md}");
    }
}
