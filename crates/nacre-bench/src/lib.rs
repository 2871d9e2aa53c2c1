//! `nacre-bench`: Nacre's benchmarks. Every figure is measured beside an anchor in the same
//! run on the same machine, with the backend and what it survives stated next to it
//! (DESIGN.md §7).
//!
//! - [`suite`]: `nacre-bench pmem`, persisted writes through every nacre-pmem backend beside
//!   raw clwb+sfence and write+fdatasync loops.
//! - [`anchors`]: `nacre-bench anchors`, every anchor in one command: raw clwb+sfence and
//!   fdatasync loops, db_bench fillrandom, redis-benchmark with each appendfsync setting.
//! - [`alloc`]: `nacre-bench alloc`, Halloc allocation latency beside PMDK's pmemobj_alloc.
//! - [`engine`]: `nacre-bench ror | memtable | fillrandom | recovery`, the engine's Reorder
//!   Ring, memtable, durable fill (against RocksDB's db_bench) and crash recovery.
//! - [`publish`]: `nacre-bench report`, YCSB and recovery JSON lines into Markdown tables and
//!   SVG charts for docs/benchmarks.md and docs/img/.
//! - [`chart`]: dependency-free SVG bar and line charts for the report pages (`docs/img/`).
//! - [`mod@bench`]: the timed loops and statistics; [`pmem`] and [`raw`]: the subjects they
//!   run on.
//! - [`features`]: which optional parts this build has; targets are checked against them
//!   before anything runs.
//! - [`config`], [`results`]: parameters and measured rows; [`report`], [`json`]: Markdown
//!   table and JSON lines.
//! - [`ycsb`]: `nacre-bench ycsb`, YCSB workloads A-F (generators, runner, stores) against
//!   embedded Nacre, RESP servers and, with the `rocksdb` feature, embedded RocksDB
//!   ([`rocksdb`]).
//! - [`tpcc`]: `nacre-bench tpcc`, TPC-C on Nacre's transactions against RocksDB's
//!   TransactionDB and OptimisticTransactionDB.
//! - [`resp`]: a RESP2/RESP3 client with pipelining, and a throwaway `redis-server` to run
//!   it against.
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

pub mod alloc;
pub mod anchors;
pub mod bench;
pub mod chart;
pub mod config;
pub mod engine;
pub mod error;
pub mod features;
pub mod json;
#[cfg(feature = "pmdk")]
pub mod pmdk;
pub mod pmem;
pub mod publish;
pub mod raw;
pub mod report;
pub mod resp;
pub mod results;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod server;
pub mod suite;
pub mod tpcc;
pub mod ycsb;

pub use config::{PmemConfig, Target};
pub use error::{BenchError, Result};
pub use results::PmemRun;
pub use suite::run;
