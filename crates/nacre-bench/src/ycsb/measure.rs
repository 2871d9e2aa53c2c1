//! Latency and throughput measurement of a YCSB phase: an HdrHistogram per operation type
//! (nanoseconds, 3 significant digits), not-found counts, and operations completed per
//! second since the phase started (for jitter over time).
//!
//! Each client thread fills its own [`Recorder`]; the runner merges them into a
//! [`PhaseResult`] at the end, so recording takes no lock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::workload::Op;
use crate::error::{BenchError, Result};

/// The percentiles kept for latency CDF charts.
pub const CDF_PERCENTILES: [f64; 17] = [
    0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99, 100.0,
];

/// YCSB's name for an operation type.
pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::Read => "READ",
        Op::Update => "UPDATE",
        Op::Insert => "INSERT",
        Op::Scan => "SCAN",
        Op::ReadModifyWrite => "READ-MODIFY-WRITE",
    }
}

fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new(3).map_err(|e| BenchError::InvalidParams(format!("histogram: {e}")))
}

/// One thread's measurements.
pub struct Recorder {
    start: Instant,
    hists: BTreeMap<&'static str, Histogram<u64>>,
    not_found: BTreeMap<&'static str, u64>,
    per_second: Vec<u64>,
}

impl Recorder {
    /// A recorder for a phase that started at `start`.
    pub fn new(start: Instant) -> Recorder {
        Recorder {
            start,
            hists: BTreeMap::new(),
            not_found: BTreeMap::new(),
            per_second: Vec::new(),
        }
    }

    /// Records `op` finishing at `end` after `latency`, having found nothing if `not_found`;
    /// its latency is kept only if `measured` (the warm-up is over).
    pub fn record(
        &mut self,
        op: Op,
        end: Instant,
        latency: Duration,
        not_found: bool,
        measured: bool,
    ) -> Result<()> {
        let sec = end.saturating_duration_since(self.start).as_secs() as usize;
        if self.per_second.len() <= sec {
            self.per_second.resize(sec + 1, 0);
        }
        self.per_second[sec] += 1;
        if !measured {
            return Ok(());
        }
        let name = op_name(op);
        let h = match self.hists.get_mut(name) {
            Some(h) => h,
            None => self.hists.entry(name).or_insert(new_histogram()?),
        };
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
        h.record(ns)
            .map_err(|e| BenchError::InvalidParams(format!("histogram: {e}")))?;
        if not_found {
            *self.not_found.entry(name).or_insert(0) += 1;
        }
        Ok(())
    }
}

/// Latency summary of one operation type, in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpSummary {
    /// YCSB's name of the operation (`READ`, `UPDATE`, ...).
    pub op: String,
    /// Operations measured (after the warm-up).
    pub count: u64,
    /// Reads and updates that found no record, scans that found none.
    pub not_found: u64,
    /// Mean latency.
    pub avg_us: f64,
    /// Median latency.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest latency.
    pub max_us: f64,
    /// (percentile, latency) at [`CDF_PERCENTILES`].
    pub cdf: Vec<(f64, f64)>,
}

/// What one phase (a load or a workload's run) measured on one store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// `load` or `run`.
    pub phase: String,
    /// The workload's letter (`a`..`f`), or `load`.
    pub workload: String,
    /// Client threads.
    pub threads: usize,
    /// Operations done, warm-up included.
    pub ops: u64,
    /// Operations measured (after the warm-up).
    pub measured_ops: u64,
    /// Wall seconds of the whole phase.
    pub secs: f64,
    /// Operations of warm-up left out of the latencies and the throughput.
    pub warmup_ops: u64,
    /// Seconds the warm-up took.
    pub warmup_secs: f64,
    /// Measured operations per second of measured time.
    pub ops_per_sec: f64,
    /// Per operation type.
    pub per_op: Vec<OpSummary>,
    /// Operations completed in each second since the phase began (warm-up included).
    pub per_second: Vec<u64>,
}

/// Merges the threads' recorders of a phase that ran `secs` seconds, of which the first
/// `warmup_secs` (`warmup_ops` operations) are left out.
pub fn merge(
    phase: &str,
    workload: &str,
    recorders: Vec<Recorder>,
    secs: f64,
    warmup_ops: u64,
    warmup_secs: f64,
) -> Result<PhaseResult> {
    let threads = recorders.len();
    let mut hists: BTreeMap<&'static str, Histogram<u64>> = BTreeMap::new();
    let mut not_found: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut per_second: Vec<u64> = Vec::new();
    for r in recorders {
        for (name, h) in r.hists {
            match hists.get_mut(name) {
                Some(all) => all
                    .add(&h)
                    .map_err(|e| BenchError::InvalidParams(format!("histogram: {e}")))?,
                None => {
                    hists.insert(name, h);
                }
            }
        }
        for (name, n) in r.not_found {
            *not_found.entry(name).or_insert(0) += n;
        }
        if per_second.len() < r.per_second.len() {
            per_second.resize(r.per_second.len(), 0);
        }
        for (i, n) in r.per_second.iter().enumerate() {
            per_second[i] += n;
        }
    }
    let measured: u64 = hists.values().map(Histogram::len).sum();
    let warmup_secs = warmup_secs.min(secs);
    let measured_secs = secs - warmup_secs;
    let us = |ns: u64| ns as f64 / 1000.0;
    let per_op = hists
        .iter()
        .map(|(name, h)| OpSummary {
            op: (*name).to_string(),
            count: h.len(),
            not_found: not_found.get(name).copied().unwrap_or(0),
            avg_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            cdf: CDF_PERCENTILES
                .iter()
                .map(|&p| (p, us(h.value_at_quantile(p / 100.0))))
                .collect(),
        })
        .collect();
    Ok(PhaseResult {
        phase: phase.into(),
        workload: workload.into(),
        threads,
        ops: per_second.iter().sum(),
        measured_ops: measured,
        secs,
        warmup_ops,
        warmup_secs,
        ops_per_sec: if measured_secs > 0.0 {
            measured as f64 / measured_secs
        } else {
            f64::NAN
        },
        per_op,
        per_second,
    })
}
