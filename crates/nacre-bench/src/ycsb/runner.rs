//! Runs YCSB phases against a [`Store`]: the load phase inserts `record_count` records (each
//! thread a contiguous range of key numbers, as YCSB's `insertstart`/`insertcount`), the run
//! phase draws `operation_count` operations from a workload's mix. Threads start together;
//! each has its own session, random stream and [`Recorder`].
//!
//! Options: a target throughput (each thread paced to its share; latency is measured from
//! when an operation is sent, as YCSB does by default), a warm-up left out of the results, a
//! time limit (YCSB's `maxexecutiontime`), pipelining (several operations handed to the
//! session at once; each is charged the batch's time), and a progress line on stderr.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre_pmem::SplitMix64;

use super::generators::{key_name, AcknowledgedCounter, LastValue, NumberGenerator};
use super::measure::{merge, PhaseResult, Recorder};
use super::record::Fields;
use super::target::{Outcome, Request, Store};
use super::workload::{Op, Workload};
use crate::engine::{mix64, run_threads};
use crate::error::{BenchError, Result};

/// How a phase is driven.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// Client threads.
    pub threads: usize,
    /// Operations per second over all threads (`None`: as fast as possible).
    pub target_ops_per_sec: Option<f64>,
    /// Operations (over all threads) at the start of a run left out of latencies and
    /// throughput (run phase only).
    pub warmup_ops: u64,
    /// Stop the phase after this long.
    pub max_time: Option<Duration>,
    /// Operations handed to a session at once.
    pub pipeline: usize,
    /// Seconds between progress lines (0: none).
    pub progress_secs: u64,
    /// Seed of every random stream.
    pub seed: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 1,
            target_ops_per_sec: None,
            warmup_ops: 0,
            max_time: None,
            pipeline: 1,
            progress_secs: 10,
            seed: 1,
        }
    }
}

/// Which operations a thread does.
#[derive(Clone, Copy)]
enum Plan {
    /// Insert key numbers `start..end`.
    Load { start: u64, end: u64 },
    /// Draw `count` operations from the workload.
    Run { count: u64 },
}

/// Loads `w.record_count` records into `store`. Latencies are all kept (no warm-up).
pub fn load(store: &dyn Store, w: &Workload, o: &RunOptions) -> Result<PhaseResult> {
    check(w, o)?;
    let t = o.threads as u64;
    let plans: Vec<Plan> = (0..t)
        .map(|i| Plan::Load {
            start: w.record_count * i / t,
            end: w.record_count * (i + 1) / t,
        })
        .collect();
    let no_warmup = RunOptions {
        warmup_ops: 0,
        ..o.clone()
    };
    phase(
        store,
        w,
        &no_warmup,
        "load",
        "load",
        &plans,
        w.record_count,
        None,
    )
}

/// Runs `w`'s operation mix (`w.operation_count` operations) on `store`, which holds keys
/// `0..w.record_count`. Inserts continue from `w.record_count`; returns the result and how
/// many records the store holds afterwards.
pub fn run(
    store: &dyn Store,
    w: &Workload,
    name: &str,
    o: &RunOptions,
) -> Result<(PhaseResult, u64)> {
    check(w, o)?;
    let t = o.threads as u64;
    let plans: Vec<Plan> = (0..t)
        .map(|i| Plan::Run {
            count: w.operation_count * (i + 1) / t - w.operation_count * i / t,
        })
        .collect();
    let inserted = w.insert_sequence();
    let r = phase(
        store,
        w,
        o,
        "run",
        name,
        &plans,
        w.operation_count,
        Some(Arc::clone(&inserted)),
    )?;
    let present = inserted.last_value().map_or(0, |v| v + 1);
    Ok((r, present))
}

fn check(w: &Workload, o: &RunOptions) -> Result<()> {
    let bad = |what: &str| Err(BenchError::InvalidParams(what.into()));
    if o.threads == 0 || o.pipeline == 0 {
        return bad("threads and pipeline must be at least 1");
    }
    if w.record_count == 0 {
        return bad("record count must be at least 1");
    }
    if w.field_count == 0 || w.field_count > u16::MAX as usize {
        return bad("field count must be 1..=65535");
    }
    if let Some(t) = o.target_ops_per_sec {
        if !(t > 0.0 && t.is_finite()) {
            return bad("target throughput must be a positive number");
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn phase(
    store: &dyn Store,
    w: &Workload,
    o: &RunOptions,
    phase: &str,
    name: &str,
    plans: &[Plan],
    total: u64,
    inserted: Option<Arc<AcknowledgedCounter>>,
) -> Result<PhaseResult> {
    let done = AtomicU64::new(0);
    let warm_end = AtomicU64::new(if o.warmup_ops == 0 { 0 } else { u64::MAX });
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let label = store.label();
    let (secs, recorders) = std::thread::scope(|s| {
        let progress = (o.progress_secs > 0).then(|| {
            let (done, stop, label) = (&done, &stop, &label);
            s.spawn(move || progress_lines(label, phase, name, total, done, stop, o.progress_secs))
        });
        let r = run_threads(plans.len(), |t| {
            let ctx = ThreadCtx {
                store,
                w,
                o,
                plan: plans[t],
                thread: t,
                inserted: inserted.clone(),
                done: &done,
                warm_end: &warm_end,
            };
            ctx.work(start)
        });
        stop.store(true, Ordering::Relaxed);
        if let Some(h) = progress {
            let _ = h.join();
        }
        r
    })?;
    let warm_end = warm_end.load(Ordering::Relaxed);
    let warmup_secs = if warm_end == u64::MAX {
        secs
    } else {
        Duration::from_nanos(warm_end).as_secs_f64()
    };
    merge(phase, name, recorders, secs, o.warmup_ops, warmup_secs)
}

fn progress_lines(
    label: &str,
    phase: &str,
    name: &str,
    total: u64,
    done: &AtomicU64,
    stop: &AtomicBool,
    every: u64,
) {
    let t0 = Instant::now();
    let mut last = (t0, 0u64);
    let mut next = t0 + Duration::from_secs(every);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if now < next {
            continue;
        }
        let d = done.load(Ordering::Relaxed);
        let rate = (d - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
        eprintln!(
            "ycsb {label} {phase} {name}: {:.0} s, {d}/{total} ops, {rate:.0} ops/s",
            now.duration_since(t0).as_secs_f64()
        );
        last = (now, d);
        next = now + Duration::from_secs(every);
    }
}

struct ThreadCtx<'a> {
    store: &'a dyn Store,
    w: &'a Workload,
    o: &'a RunOptions,
    plan: Plan,
    thread: usize,
    inserted: Option<Arc<AcknowledgedCounter>>,
    done: &'a AtomicU64,
    /// Nanoseconds from the start to the end of the warm-up (`u64::MAX`: not over yet).
    warm_end: &'a AtomicU64,
}

impl ThreadCtx<'_> {
    fn work(&self, start: Instant) -> Result<Recorder> {
        let w = self.w;
        let mut session = self.store.session()?;
        let salt = match self.plan {
            Plan::Load { .. } => 0x10AD,
            Plan::Run { .. } => 0x4E,
        };
        let mut rng = SplitMix64::new(self.o.seed ^ mix64(salt + self.thread as u64));
        let chooser = w.operation_chooser();
        let mut keys = self
            .inserted
            .as_ref()
            .map(|ins| w.key_chooser(Arc::clone(ins)));
        let mut scan_len = (w.scan_proportion > 0.0).then(|| w.scan_length_chooser());
        let (mut next_load, count) = match self.plan {
            Plan::Load { start, end } => (start, end - start),
            Plan::Run { count } => (0, count),
        };
        let interval = self
            .o
            .target_ops_per_sec
            .map(|t| Duration::from_secs_f64(self.o.threads as f64 / t));
        let deadline = self.o.max_time.map(|d| start + d);
        let mut rec = Recorder::new(start);
        let mut requests: Vec<Request> = Vec::new();
        let mut ops: Vec<(Op, usize, Option<u64>)> = Vec::new(); // (op, requests, insert key)
        let mut outcomes = Vec::new();
        let mut issued = 0u64;
        while issued < count {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if let Some(iv) = interval {
                let due = start + iv.mul_f64(issued as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            requests.clear();
            ops.clear();
            outcomes.clear();
            let batch = (self.o.pipeline as u64).min(count - issued);
            for _ in 0..batch {
                let op = match self.plan {
                    Plan::Load { .. } => Op::Insert,
                    Plan::Run { .. } => chooser.next_op(&mut rng),
                };
                let before = requests.len();
                let mut insert_key = None;
                let key = |n: u64| key_name(n, w.ordered_inserts).into_bytes();
                let mut pick = |rng: &mut SplitMix64| match keys.as_mut() {
                    Some(k) => k.next_key(rng),
                    None => 0,
                };
                match op {
                    Op::Read => {
                        let k = key(pick(&mut rng));
                        requests.push(read(w, k, &mut rng));
                    }
                    Op::Update => {
                        let k = key(pick(&mut rng));
                        requests.push(update(w, k, &mut rng));
                    }
                    Op::ReadModifyWrite => {
                        let k = key(pick(&mut rng));
                        requests.push(read(w, k.clone(), &mut rng));
                        requests.push(update(w, k, &mut rng));
                    }
                    Op::Scan => {
                        let k = key(pick(&mut rng));
                        let count = scan_len.as_mut().map_or(1, |g| g.next_value(&mut rng));
                        let fields = (!w.read_all_fields).then(|| w.fields(false, &mut rng));
                        requests.push(Request::Scan {
                            start: k,
                            count: count as usize,
                            fields,
                        });
                    }
                    Op::Insert => {
                        let n = match (&self.plan, &self.inserted) {
                            (Plan::Load { .. }, _) | (_, None) => {
                                next_load += 1;
                                next_load - 1
                            }
                            (Plan::Run { .. }, Some(ins)) => ins.next(),
                        };
                        insert_key = Some(n);
                        requests.push(Request::Insert {
                            key: key(n),
                            values: all_fields(w, &mut rng),
                        });
                    }
                }
                ops.push((op, requests.len() - before, insert_key));
            }
            let measured = self.done.load(Ordering::Relaxed) >= self.o.warmup_ops;
            let t = Instant::now();
            session.execute(&requests, &mut outcomes)?;
            let end = Instant::now();
            if outcomes.len() != requests.len() {
                return Err(BenchError::Process {
                    what: self.store.label(),
                    why: format!("answered {} of {} requests", outcomes.len(), requests.len()),
                });
            }
            let mut at = 0;
            for &(op, n, insert_key) in &ops {
                let missed = outcomes[at..at + n]
                    .iter()
                    .any(|o| matches!(o, Outcome::NotFound));
                at += n;
                rec.record(op, end, end - t, missed, measured)?;
                if let (Some(k), Some(ins)) = (insert_key, &self.inserted) {
                    ins.acknowledge(k);
                }
            }
            issued += batch;
            let before = self.done.fetch_add(batch, Ordering::Relaxed);
            if before < self.o.warmup_ops && before + batch >= self.o.warmup_ops {
                let ns =
                    u64::try_from(end.duration_since(start).as_nanos()).unwrap_or(u64::MAX - 1);
                self.warm_end.store(ns, Ordering::Relaxed);
            }
        }
        Ok(rec)
    }
}

fn read(w: &Workload, key: Vec<u8>, rng: &mut SplitMix64) -> Request {
    Request::Read {
        key,
        fields: (!w.read_all_fields).then(|| w.fields(false, rng)),
    }
}

fn update(w: &Workload, key: Vec<u8>, rng: &mut SplitMix64) -> Request {
    let values: Fields = w
        .fields(w.write_all_fields, rng)
        .into_iter()
        .map(|i| (i, w.field_value(rng)))
        .collect();
    Request::Update { key, values }
}

fn all_fields(w: &Workload, rng: &mut SplitMix64) -> Fields {
    (0..w.field_count)
        .map(|i| (i, w.field_value(rng)))
        .collect()
}
