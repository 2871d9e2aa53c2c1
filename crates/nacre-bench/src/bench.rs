//! Measurement harness shared by every benchmark subject: the three persisted loops, the time
//! and operation budgets that bound them, and the statistics reported over repeats.
//!
//! Every loop is generic over [`PersistOps`], so the nacre-pmem loop and its raw anchor compile
//! to the same monomorphised code shape and differ only in how one operation is made durable.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nacre_pmem::SplitMix64;

use crate::error::Result;

/// Size of one sequential write.
pub const BLOCK: usize = 4096;
/// Size of one appended record.
pub const RECORD: usize = 128;
/// Fast loops read the clock once per this many operations.
const CHECK_EVERY: u64 = 64;
/// Share of a latency measurement's budget timed in one batch (for the mean); the rest times
/// each operation (for percentiles).
const BATCH_SHARE: f64 = 0.8;

/// One durable operation, implemented by every subject (nacre-pmem pools and raw loops).
pub trait PersistOps {
    /// Bytes usable by the loops, at offsets `0..region_len()`.
    fn region_len(&self) -> usize;
    /// Writes `data` at `off` and makes it durable before returning.
    fn put(&mut self, off: usize, data: &[u8]) -> Result<()>;
    /// Stores `v` at the 8-aligned `off` and makes it durable before returning.
    fn put_u64(&mut self, off: usize, v: u64) -> Result<()>;
}

/// How long one measurement may run: whichever limit is reached first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Operation cap (syscall-bound loops); `None` for no cap. Capped loops read the clock
    /// after every operation.
    pub max_ops: Option<u64>,
}

impl Budget {
    fn share(self, f: f64) -> Budget {
        Budget {
            seconds: self.seconds * f,
            max_ops: self.max_ops.map(|n| ((n as f64 * f).round() as u64).max(1)),
        }
    }
}

/// Operations completed in a timed loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Operations completed.
    pub ops: u64,
    /// Seconds they took.
    pub secs: f64,
}

/// Result of the random 8-byte persist loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// Mean nanoseconds per operation, from batch timing.
    pub mean_ns: f64,
    /// Median of the per-operation samples (includes one clock read).
    pub p50_ns: f64,
    /// 99th percentile of the per-operation samples.
    pub p99_ns: f64,
    /// Operations in the batch phase.
    pub ops: u64,
    /// Per-operation samples taken.
    pub samples: usize,
}

/// Runs `op(i)` for `i = 0, 1, ...` until `budget` is spent (at least one operation).
pub fn timed<F: FnMut(u64) -> Result<()>>(budget: Budget, mut op: F) -> Result<Throughput> {
    let deadline = Duration::from_secs_f64(budget.seconds.max(0.0));
    let cap = budget.max_ops.unwrap_or(u64::MAX).max(1);
    let step = if budget.max_ops.is_some() {
        1
    } else {
        CHECK_EVERY
    };
    let start = Instant::now();
    let mut i = 0u64;
    loop {
        let end = i.saturating_add(step).min(cap);
        while i < end {
            op(i)?;
            i += 1;
        }
        let elapsed = start.elapsed();
        if i >= cap || elapsed >= deadline {
            return Ok(Throughput {
                ops: i,
                secs: elapsed.as_secs_f64(),
            });
        }
    }
}

/// Writes `size`-byte buffers at consecutive offsets, wrapping at the end of the region, each
/// made durable before the next. Returns bytes-per-op throughput.
pub fn sequential<T: PersistOps>(t: &mut T, size: usize, budget: Budget) -> Result<Throughput> {
    let slots = (t.region_len() / size).max(1);
    let mut buf = vec![0xA5u8; size];
    let mut slot = 0usize;
    timed(budget, |i| {
        buf[0] = i as u8;
        let r = t.put(slot * size, &buf);
        slot += 1;
        if slot == slots {
            slot = 0;
        }
        r
    })
}

/// Uniform random 8-aligned offset in a region of `words` 8-byte words (multiply-shift, no
/// division in the hot loop).
#[inline(always)]
fn random_word(rng: &mut SplitMix64, words: u64) -> usize {
    (((rng.next_u64() as u128) * (words as u128)) >> 64) as usize * 8
}

/// Persists 8-byte stores at random 8-aligned offsets: first a batch-timed phase for the mean,
/// then a phase timing each operation for the percentiles.
pub fn random_u64<T: PersistOps>(t: &mut T, budget: Budget, seed: u64) -> Result<Latency> {
    let words = (t.region_len() / 8).max(1) as u64;
    let mut rng = SplitMix64::new(seed);
    let batch = timed(budget.share(BATCH_SHARE), |i| {
        let off = random_word(&mut rng, words);
        t.put_u64(off, i)
    })?;
    let mut samples: Vec<u64> = Vec::with_capacity(1 << 16);
    timed(budget.share(1.0 - BATCH_SHARE), |i| {
        let off = random_word(&mut rng, words);
        let t0 = Instant::now();
        t.put_u64(off, i)?;
        samples.push(t0.elapsed().as_nanos() as u64);
        Ok(())
    })?;
    samples.sort_unstable();
    Ok(Latency {
        mean_ns: batch.secs * 1e9 / batch.ops as f64,
        p50_ns: percentile(&samples, 50.0),
        p99_ns: percentile(&samples, 99.0),
        ops: batch.ops,
        samples: samples.len(),
    })
}

/// Nearest-rank percentile `p` (0..=100) of ascending `sorted`; NaN when empty.
pub fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

/// Median of `values` (mean of the middle two for even lengths); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Median cost in nanoseconds of one `Instant::now()` + `elapsed()` pair: the overhead included
/// in each per-operation latency sample.
pub fn clock_overhead_ns() -> f64 {
    let mut s: Vec<u64> = (0..1001)
        .map(|_| {
            let t0 = Instant::now();
            t0.elapsed().as_nanos() as u64
        })
        .collect();
    s.sort_unstable();
    percentile(&s, 50.0)
}

/// A file this run created; removed when dropped.
#[derive(Debug)]
pub struct TempFile(PathBuf);

impl TempFile {
    /// Claims `path` for removal on drop.
    pub fn new(path: PathBuf) -> Self {
        TempFile(path)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.0) {
            Ok(()) => tracing::debug!(path = %self.0.display(), "removed benchmark file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.0.display(), error = %e, "cannot remove benchmark file")
            }
        }
    }
}

/// A file name unique to this process and `tag`.
pub fn file_name(tag: &str) -> String {
    format!("nacre-bench-{}-{tag}.pool", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter {
        len: usize,
        puts: Vec<(usize, usize)>,
        words: Vec<usize>,
    }

    impl PersistOps for Counter {
        fn region_len(&self) -> usize {
            self.len
        }
        fn put(&mut self, off: usize, data: &[u8]) -> Result<()> {
            self.puts.push((off, data.len()));
            Ok(())
        }
        fn put_u64(&mut self, off: usize, _v: u64) -> Result<()> {
            self.words.push(off);
            Ok(())
        }
    }

    #[test]
    fn median_and_percentile() {
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        let s: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&s, 50.0), 50.0);
        assert_eq!(percentile(&s, 99.0), 99.0);
        assert_eq!(percentile(&s, 100.0), 100.0);
        assert_eq!(percentile(&s, 0.0), 1.0);
        assert_eq!(percentile(&[7], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn op_cap_stops_loop_and_sequential_wraps() {
        let mut c = Counter {
            len: 3 * BLOCK + 100,
            puts: Vec::new(),
            words: Vec::new(),
        };
        let budget = Budget {
            seconds: 60.0,
            max_ops: Some(7),
        };
        let tp = sequential(&mut c, BLOCK, budget).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tp.ops, 7);
        let offs: Vec<usize> = c.puts.iter().map(|p| p.0 / BLOCK).collect();
        assert_eq!(offs, [0, 1, 2, 0, 1, 2, 0]);
        assert!(c.puts.iter().all(|p| p.1 == BLOCK));
    }

    #[test]
    fn random_offsets_are_aligned_and_in_range() {
        let mut c = Counter {
            len: 4096,
            puts: Vec::new(),
            words: Vec::new(),
        };
        let budget = Budget {
            seconds: 60.0,
            max_ops: Some(1000),
        };
        let l = random_u64(&mut c, budget, 42).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.ops, 800);
        assert_eq!(l.samples, 200);
        assert!(c.words.iter().all(|&o| o % 8 == 0 && o + 8 <= 4096));
        assert!(l.p50_ns <= l.p99_ns);
    }
}
