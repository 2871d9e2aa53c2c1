//! YCSB core workload generators, rewritten from the definitions in YCSB's Java core
//! (`site.ycsb.generator` and `site.ycsb.workloads.CoreWorkload`).
//!
//! - [`generators`]: [`Uniform`], [`Zipfian`] (Gray et al.'s method, zeta extended as the
//!   item count grows), [`ScrambledZipfian`] (YCSB's 10^10-item zipfian hashed with FNV-1a
//!   onto the key range), [`SkewedLatest`], [`Hotspot`], the insert [`Counter`] and
//!   [`AcknowledgedCounter`], [`fnvhash64`] and [`key_name`].
//! - [`workload`]: [`Workload`] with the core workloads A-F ([`Workload::a`] ..
//!   [`Workload::f`]), the [`OperationChooser`] drawing [`Op`]s, the [`KeyChooser`] drawing
//!   key numbers per [`RequestDistribution`], scan lengths and field values.
//!
//! - [`target`]: the [`Store`] and [`Session`] traits the runner drives, and [`targets`]: the
//!   embedded Nacre and RocksDB stores; [`record`]: how embedded stores hold a record.
//! - [`runner`]: load and run phases (threads, target throughput, warm-up, time limit,
//!   pipelining, progress); [`measure`]: HdrHistogram latencies and per-second throughput.
//!
//! Every draw takes a [`nacre_pmem::SplitMix64`], so a run with a fixed seed is reproducible.

pub mod bench;
pub mod generators;
pub mod measure;
pub mod record;
pub mod runner;
pub mod target;
pub mod targets;
pub mod workload;

#[cfg(test)]
mod runner_tests;
#[cfg(test)]
mod tests;

pub use generators::{
    fnvhash64, key_name, zeta, AcknowledgedCounter, Counter, Hotspot, LastValue, NumberGenerator,
    ScrambledZipfian, SkewedLatest, Uniform, Zipfian, ZIPFIAN_CONSTANT,
};
pub use measure::{OpSummary, PhaseResult};
pub use runner::RunOptions;
pub use target::{Outcome, Request, Session, Store};
pub use workload::{
    KeyChooser, Op, OperationChooser, RequestDistribution, ScanLength, ScanLengthDistribution,
    Workload,
};
