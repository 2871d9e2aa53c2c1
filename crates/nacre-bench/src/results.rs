//! What a `nacre-bench pmem` run measured: one row per loop and subject.

use std::path::PathBuf;

use crate::bench::Latency;
use crate::config::{PmemConfig, Target};
use crate::report::MachineInfo;

/// What one row's loop does per operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopKind {
    /// `pool.write` + `pool.persist`; `pool.persist_u64`.
    PmemPersist,
    /// `pool.copy_persist`.
    PmemCopyPersist,
    /// `memcpy`, a write-back per line, `sfence`.
    RawFlushFence,
    /// Non-temporal stores, `sfence`.
    RawStream,
    /// `pwrite`, `fdatasync`.
    RawPwriteFdatasync,
}

/// The three measured loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Persisted sequential 4 KiB writes (GB/s).
    Seq4K,
    /// Persisted sequential 128-byte appends (Mops/s).
    Append128,
    /// Persisted 8-byte stores at random offsets (ns).
    Random8,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 3] = [Metric::Seq4K, Metric::Append128, Metric::Random8];
}

/// One row of the report: a loop on a subject, with every repeat's result.
#[derive(Clone, Debug, PartialEq)]
pub struct RowResult {
    /// The subject.
    pub target: Target,
    /// The loop.
    pub loop_kind: LoopKind,
    /// Loop description, e.g. `raw memcpy+clwb+sfence`.
    pub loop_label: String,
    /// Backend or durability mechanism, e.g. `emulated`, `write+fdatasync`.
    pub backend: String,
    /// What an acknowledged write survives.
    pub survives: String,
    /// File measured (`<sim>` in memory), if created.
    pub path: Option<PathBuf>,
    /// Why the subject could not run, if it could not.
    pub unavailable: Option<String>,
    /// Region size the loops wrote.
    pub region_bytes: usize,
    /// Operation cap per measurement, if any.
    pub max_ops: Option<u64>,
    /// Metrics this loop measures.
    pub metrics: Vec<&'static str>,
    /// 4 KiB sequential write GB/s, one per repeat.
    pub seq_gbps: Vec<f64>,
    /// 128-byte append Mops/s, one per repeat.
    pub append_mops: Vec<f64>,
    /// Random 8-byte persist latency, one per repeat.
    pub latency: Vec<Latency>,
}

/// Everything a run measured.
#[derive(Clone, Debug)]
pub struct PmemRun {
    /// Where it ran.
    pub machine: MachineInfo,
    /// With what parameters.
    pub config: PmemConfig,
    /// Cost of one clock read pair, included in each latency sample.
    pub clock_overhead_ns: f64,
    /// One row per loop and subject.
    pub rows: Vec<RowResult>,
}
