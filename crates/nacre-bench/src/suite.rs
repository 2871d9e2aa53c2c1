//! `nacre-bench pmem`: the persisted-write micro-benchmark of every nacre-pmem backend beside
//! its raw anchor, in one run.
//!
//! Repeats are interleaved (repeat → metric → case) so that a backend and its anchor are
//! measured close together in time on a noisy shared machine; reports take the median.

use std::path::PathBuf;

use nacre_pmem::{Backend, PmemError};

use crate::bench::{self, Budget, PersistOps, BLOCK, RECORD};
use crate::config::{PmemConfig, Target};
use crate::error::{io_err, BenchError, Result};
use crate::pmem::{PoolMode, PoolSubject};
use crate::raw::{LineFlush, RawMap, RawMode, RawSync};
use crate::report::MachineInfo;
use crate::results::{LoopKind, Metric, PmemRun, RowResult};

enum Subject {
    Pool(Box<PoolSubject>),
    Map(RawMap),
    Sync(RawSync),
}

struct Case {
    row: RowResult,
    subject: Option<Subject>,
    budget: Budget,
}

impl Case {
    fn new(target: Target, kind: LoopKind, label: String, backend: &str, cfg: &PmemConfig) -> Case {
        let sync = target.syscall_bound();
        let metrics = match kind {
            LoopKind::PmemCopyPersist | LoopKind::RawStream => vec!["seq-4k", "append-128"],
            _ => vec!["seq-4k", "append-128", "random-8"],
        };
        Case {
            row: RowResult {
                target,
                loop_kind: kind,
                loop_label: label,
                backend: backend.to_string(),
                survives: String::new(),
                path: None,
                unavailable: None,
                region_bytes: if sync {
                    cfg.sync_region_bytes
                } else {
                    cfg.region_bytes
                },
                max_ops: sync.then_some(cfg.sync_ops),
                metrics,
                seq_gbps: Vec::new(),
                append_mops: Vec::new(),
                latency: Vec::new(),
            },
            subject: None,
            budget: Budget {
                seconds: cfg.seconds,
                max_ops: sync.then_some(cfg.sync_ops),
            },
        }
    }

    /// Attaches the subject `make` creates, or records why it could not be created.
    fn with(mut self, make: impl FnOnce(usize) -> Result<Subject>) -> Case {
        match make(self.row.region_bytes) {
            Ok(s) => {
                match &s {
                    Subject::Pool(p) => {
                        let rep = p.report();
                        if rep.active.uses_cache_flush() {
                            self.row.backend =
                                format!("{} ({})", self.row.backend, rep.flush_instr);
                        }
                        self.row.survives = rep.active.survives().to_string();
                        self.row.path = Some(p.path().to_path_buf());
                    }
                    Subject::Map(m) => self.row.path = Some(m.path().to_path_buf()),
                    Subject::Sync(f) => self.row.path = Some(f.path().to_path_buf()),
                }
                self.subject = Some(s);
            }
            Err(e) => {
                let reason = match e {
                    BenchError::Pmem(PmemError::BackendUnavailable { reason, .. }) => reason,
                    e => e.to_string(),
                };
                tracing::warn!(loop_ = %self.row.loop_label, backend = %self.row.backend, %reason, "unavailable");
                self.row.unavailable = Some(reason);
            }
        }
        self
    }

    fn survives(mut self, s: &str) -> Case {
        if self.row.survives.is_empty() {
            self.row.survives = s.to_string();
        }
        self
    }

    fn measure(&mut self, metric: Metric, seed: u64) -> Result<()> {
        let Some(subject) = self.subject.as_mut() else {
            return Ok(());
        };
        let copy_only = matches!(
            self.row.loop_kind,
            LoopKind::PmemCopyPersist | LoopKind::RawStream
        );
        if copy_only && metric == Metric::Random8 {
            return Ok(());
        }
        match subject {
            Subject::Pool(s) => measure_on(&mut **s, &mut self.row, metric, self.budget, seed),
            Subject::Map(s) => measure_on(s, &mut self.row, metric, self.budget, seed),
            Subject::Sync(s) => measure_on(s, &mut self.row, metric, self.budget, seed),
        }
    }
}

fn measure_on<T: PersistOps>(
    t: &mut T,
    row: &mut RowResult,
    metric: Metric,
    budget: Budget,
    seed: u64,
) -> Result<()> {
    match metric {
        Metric::Seq4K => {
            let tp = bench::sequential(t, BLOCK, budget)?;
            let gbps = tp.ops as f64 * BLOCK as f64 / tp.secs / 1e9;
            tracing::debug!(loop_ = %row.loop_label, backend = %row.backend, ops = tp.ops, gbps, "4 KiB seq");
            row.seq_gbps.push(gbps);
        }
        Metric::Append128 => {
            let tp = bench::sequential(t, RECORD, budget)?;
            let mops = tp.ops as f64 / tp.secs / 1e6;
            tracing::debug!(loop_ = %row.loop_label, backend = %row.backend, ops = tp.ops, mops, "128 B append");
            row.append_mops.push(mops);
        }
        Metric::Random8 => {
            let l = bench::random_u64(t, budget, seed)?;
            tracing::debug!(loop_ = %row.loop_label, backend = %row.backend, ?l, "8 B random");
            row.latency.push(l);
        }
    }
    Ok(())
}

fn pool_at(
    path: PathBuf,
    backend: Backend,
    mode: PoolMode,
) -> impl FnOnce(usize) -> Result<Subject> {
    move |len| {
        PoolSubject::create_file(&path, len, backend, mode).map(|p| Subject::Pool(Box::new(p)))
    }
}

fn raw_map_at(path: PathBuf, mode: Option<RawMode>) -> impl FnOnce(usize) -> Result<Subject> {
    move |len| match mode {
        Some(m) => RawMap::create(&path, len, m).map(Subject::Map),
        None => Err(BenchError::InvalidParams(
            "this CPU has no cache-line write-back instruction".into(),
        )),
    }
}

/// The cases of the selected targets, in report order: each nacre-pmem loop next to its anchor.
fn build_cases(cfg: &PmemConfig) -> Vec<Case> {
    use LoopKind::*;
    let shm = |tag: &str| cfg.shm_dir.join(bench::file_name(tag));
    let disk = |tag: &str| cfg.disk_dir.join(bench::file_name(tag));
    let dax = |tag: &str| cfg.dax_dir.join(bench::file_name(tag));
    let flush = LineFlush::detect();
    let flush_label = format!(
        "raw memcpy+{}+sfence",
        flush.map_or("clwb", LineFlush::name)
    );
    let (p, c) = ("nacre-pmem write+persist", "nacre-pmem copy_persist");
    let page_cache = "process crash only (data sits in the page cache; power loss loses it)";
    let mut cases = Vec::new();
    for target in Target::ALL.into_iter().filter(|t| cfg.targets.contains(t)) {
        let case = |kind, label: &str, backend| Case::new(target, kind, label.into(), backend, cfg);
        match target {
            Target::Emulated => {
                let emu = |tag, m| pool_at(shm(tag), Backend::Emulated, m);
                cases.push(case(PmemPersist, p, "emulated").with(emu("emu", PoolMode::Persist)));
                cases.push(
                    case(PmemCopyPersist, c, "emulated").with(emu("emu-nt", PoolMode::CopyPersist)),
                );
            }
            Target::RawShm => {
                let fence = raw_map_at(shm("raw"), flush.map(RawMode::FlushFence));
                cases.push(
                    case(RawFlushFence, &flush_label, "raw mmap")
                        .with(fence)
                        .survives(page_cache),
                );
                let stream = raw_map_at(shm("raw-nt"), flush.map(|_| RawMode::Stream));
                cases.push(
                    case(RawStream, "raw movntdq+sfence", "raw mmap")
                        .with(stream)
                        .survives(page_cache),
                );
            }
            Target::Msync => {
                let msync = pool_at(disk("msync"), Backend::Msync, PoolMode::Persist);
                cases.push(case(PmemPersist, p, "msync").with(msync));
            }
            Target::RawFdatasync => {
                let path = disk("fdatasync");
                let sync = move |len| RawSync::create(&path, len).map(Subject::Sync);
                let survives = "power loss (each write waits for fdatasync to reach the device)";
                cases.push(
                    case(
                        RawPwriteFdatasync,
                        "raw pwrite+fdatasync",
                        "write+fdatasync",
                    )
                    .with(sync)
                    .survives(survives),
                );
            }
            Target::Dax => {
                let first = case(PmemPersist, p, "dax").with(pool_at(
                    dax("dax"),
                    Backend::Dax,
                    PoolMode::Persist,
                ));
                let available = first.subject.is_some();
                cases.push(first);
                if available {
                    let nt = pool_at(dax("dax-nt"), Backend::Dax, PoolMode::CopyPersist);
                    cases.push(case(PmemCopyPersist, c, "dax").with(nt));
                }
            }
            Target::Sim => {
                let sim = |len| {
                    PoolSubject::create_sim(len, PoolMode::Persist)
                        .map(|p| Subject::Pool(Box::new(p)))
                };
                cases.push(case(PmemPersist, p, "sim").with(sim));
            }
        }
    }
    cases
}

/// Runs the benchmark. Files it creates are removed before it returns, and so is the disk
/// directory if this call created it and it is empty.
pub fn run(cfg: &PmemConfig) -> Result<PmemRun> {
    cfg.validate()?;
    let needs_disk = cfg
        .targets
        .iter()
        .any(|&t| t.syscall_bound() || (t == Target::Dax && cfg.dax_dir == cfg.disk_dir));
    let created = needs_disk && !cfg.disk_dir.exists();
    if created {
        std::fs::create_dir_all(&cfg.disk_dir)
            .map_err(io_err("create directory", &cfg.disk_dir))?;
    }
    let result = run_cases(cfg);
    if created {
        // Only succeeds when empty: never removes results the user put there.
        let _ = std::fs::remove_dir(&cfg.disk_dir);
    }
    result
}

fn run_cases(cfg: &PmemConfig) -> Result<PmemRun> {
    let clock_overhead_ns = bench::clock_overhead_ns();
    let mut cases = build_cases(cfg);
    for rep in 0..cfg.repeats {
        tracing::info!(repeat = rep + 1, of = cfg.repeats, "measuring");
        for metric in Metric::ALL {
            for case in &mut cases {
                case.measure(metric, cfg.seed.wrapping_add(rep as u64))?;
            }
        }
    }
    // Dropping the cases closes the pools and removes their files.
    let rows = cases.into_iter().map(|c| c.row).collect();
    Ok(PmemRun {
        machine: MachineInfo::collect(),
        config: cfg.clone(),
        clock_overhead_ns,
        rows,
    })
}
