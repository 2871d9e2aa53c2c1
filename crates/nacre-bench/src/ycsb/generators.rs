//! YCSB's number generators (`site.ycsb.generator`), rewritten from their definitions.
//!
//! Every generator draws from a caller-supplied [`SplitMix64`], so a run with a fixed seed
//! is reproducible. Ranges are inclusive `[lb, ub]` as in YCSB unless stated otherwise.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nacre_pmem::SplitMix64;

/// YCSB's default zipfian constant (`ZipfianGenerator.ZIPFIAN_CONSTANT`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Size of the item space [`ScrambledZipfian`] draws ranks from (YCSB's `ITEM_COUNT`).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// YCSB's precomputed `zeta(ITEM_COUNT, 0.99)` (`ScrambledZipfianGenerator.ZETAN`).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// A generator of integers.
pub trait NumberGenerator {
    /// The next value.
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64;
}

/// FNV-1a style 64-bit hash of `val`'s eight bytes, low byte first, as YCSB's
/// `Utils.fnvhash64` computes it (including its final `Math.abs`).
pub fn fnvhash64(val: u64) -> u64 {
    const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
    const FNV_PRIME_64: u64 = 1_099_511_628_211;
    let mut v = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    // Java's Math.abs on a long; Long.MIN_VALUE stays 2^63 here.
    (hash as i64).unsigned_abs()
}

/// `zeta(n, theta) = sum_{i=1..n} 1 / i^theta`, summed exactly.
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_extend(0, n, theta, 0.0)
}

/// Extends `initial = zeta(st, theta)` to `zeta(n, theta)` by adding the terms `st+1..=n`
/// (YCSB's incremental `zeta(st, n, theta, initialsum)`).
pub fn zeta_extend(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// `zeta(n, theta)` for item counts too large to sum: the first terms exactly, the tail by
/// Euler-Maclaurin. Used for a [`ScrambledZipfian`] with a constant other than 0.99.
pub fn zeta_approx(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 100_000;
    if n <= EXACT {
        return zeta(n, theta);
    }
    let head = zeta(EXACT, theta);
    let (m, nf) = (EXACT as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (nf / m).ln()
    } else {
        (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta)
    };
    // sum_{m..=n} f = integral + (f(m) + f(n))/2 + (f'(n) - f'(m))/12; drop f(m) (in head).
    head + integral + (f(nf) - f(m)) / 2.0 + (df(nf) - df(m)) / 12.0
}

/// Uniform integers in `[lb, ub]` (YCSB's `UniformLongGenerator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uniform {
    /// Smallest value.
    pub lb: u64,
    /// Largest value.
    pub ub: u64,
}

impl Uniform {
    /// Uniform over `[lb, ub]`.
    ///
    /// # Panics
    /// If `lb > ub`.
    pub fn new(lb: u64, ub: u64) -> Self {
        assert!(lb <= ub, "Uniform: lb {lb} > ub {ub}");
        Uniform { lb, ub }
    }
}

impl NumberGenerator for Uniform {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        match (self.ub - self.lb).checked_add(1) {
            Some(interval) => self.lb + rng.next_u64() % interval,
            None => rng.next_u64(),
        }
    }
}

/// Zipfian-distributed integers over `[base, base + items)`: `base` is the most popular
/// item, `base + 1` the next, and so on (YCSB's `ZipfianGenerator`, after Gray et al.,
/// "Quickly generating billion-record synthetic databases", SIGMOD 1994).
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Zipfian over `[base, base + items)` with YCSB's constant 0.99.
    pub fn new(base: u64, items: u64) -> Self {
        Self::with_theta(base, items, ZIPFIAN_CONSTANT)
    }

    /// Zipfian over `[base, base + items)` with constant `theta`; computes `zeta(items)`.
    pub fn with_theta(base: u64, items: u64, theta: f64) -> Self {
        Self::with_zetan(base, items, theta, zeta(items, theta))
    }

    /// Zipfian over `[base, base + items)` with a precomputed `zetan = zeta(items, theta)`.
    ///
    /// # Panics
    /// If `items` is 0 or `theta` is not in `(0, 1)`.
    pub fn with_zetan(base: u64, items: u64, theta: f64, zetan: f64) -> Self {
        assert!(items > 0, "Zipfian: no items");
        assert!(
            theta > 0.0 && theta < 1.0,
            "Zipfian: theta {theta} not in (0, 1)"
        );
        let zeta2theta = zeta(2, theta);
        let mut z = Zipfian {
            base,
            items,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The zipfian constant.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// `zeta(n, theta)` for the item count last drawn over.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// The item count fixed at construction.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A draw over `[base, base + item_count)` (YCSB's `nextLong(itemcount)`). A larger count
    /// than last time extends zeta incrementally; a smaller one recomputes it.
    pub fn next_with_items(&mut self, rng: &mut SplitMix64, item_count: u64) -> u64 {
        if item_count == 0 {
            return self.base;
        }
        if item_count != self.count_for_zeta {
            self.zetan = if item_count > self.count_for_zeta {
                zeta_extend(self.count_for_zeta, item_count, self.theta, self.zetan)
            } else {
                zeta(item_count, self.theta)
            };
            self.count_for_zeta = item_count;
            self.eta = self.eta_for(item_count);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let rank = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + rank.min(item_count - 1)
    }
}

impl NumberGenerator for Zipfian {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        let items = self.items;
        self.next_with_items(rng, items)
    }
}

/// Zipfian popularity with the popular items scattered over `[lb, ub]` (YCSB's
/// `ScrambledZipfianGenerator`): a rank drawn from a zipfian over 10^10 items, FNV-hashed,
/// modulo the item count.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    lb: u64,
    item_count: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Scrambled zipfian over `[lb, ub]` with constant 0.99 and YCSB's precomputed zeta.
    pub fn new(lb: u64, ub: u64) -> Self {
        Self::with_theta(lb, ub, ZIPFIAN_CONSTANT)
    }

    /// Scrambled zipfian over `[lb, ub]` with constant `theta` (zeta approximated unless 0.99).
    ///
    /// # Panics
    /// If `lb > ub` or `theta` is not in `(0, 1)`.
    pub fn with_theta(lb: u64, ub: u64, theta: f64) -> Self {
        assert!(lb <= ub, "ScrambledZipfian: lb {lb} > ub {ub}");
        let zetan = if theta == ZIPFIAN_CONSTANT {
            SCRAMBLED_ZETAN
        } else {
            zeta_approx(SCRAMBLED_ITEM_COUNT, theta)
        };
        // YCSB builds `new ZipfianGenerator(0, ITEM_COUNT, ...)`: inclusive, ITEM_COUNT + 1 items.
        let gen = Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT + 1, theta, zetan);
        ScrambledZipfian {
            lb,
            item_count: ub - lb + 1,
            gen,
        }
    }
}

impl NumberGenerator for ScrambledZipfian {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        let rank = self.gen.next_value(rng);
        self.lb + fnvhash64(rank) % self.item_count
    }
}

/// A source of "the largest key inserted so far".
pub trait LastValue {
    /// The largest value handed out (and, for [`AcknowledgedCounter`], acknowledged), if any.
    fn last_value(&self) -> Option<u64>;
}

/// A shared counter handing out consecutive integers (YCSB's `CounterGenerator`).
#[derive(Debug)]
pub struct Counter {
    next: AtomicU64,
}

impl Counter {
    /// A counter whose first value is `start`.
    pub fn new(start: u64) -> Self {
        Counter {
            next: AtomicU64::new(start),
        }
    }

    /// The next value.
    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

impl LastValue for Counter {
    fn last_value(&self) -> Option<u64> {
        self.next.load(Ordering::Relaxed).checked_sub(1)
    }
}

/// A counter whose [`LastValue`] only advances over values acknowledged without gaps, so
/// readers never pick a key whose insert is still in flight (YCSB's
/// `AcknowledgedCounterGenerator`).
#[derive(Debug)]
pub struct AcknowledgedCounter {
    counter: Counter,
    /// (limit, acknowledged values above limit + 1 not yet contiguous). `limit` is the last
    /// contiguous acknowledged value plus one (0 = none).
    acked: Mutex<(u64, BTreeSet<u64>)>,
}

impl AcknowledgedCounter {
    /// A counter whose first value is `start`; values below `start` count as acknowledged.
    pub fn new(start: u64) -> Self {
        AcknowledgedCounter {
            counter: Counter::new(start),
            acked: Mutex::new((start, BTreeSet::new())),
        }
    }

    /// The next value to insert.
    pub fn next(&self) -> u64 {
        self.counter.next()
    }

    /// Marks `value`'s insert complete.
    pub fn acknowledge(&self, value: u64) {
        let mut guard = match self.acked.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (limit, pending) = &mut *guard;
        if value < *limit {
            return;
        }
        pending.insert(value);
        while pending.remove(limit) {
            *limit += 1;
        }
    }
}

impl LastValue for AcknowledgedCounter {
    fn last_value(&self) -> Option<u64> {
        let guard = match self.acked.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.0.checked_sub(1)
    }
}

/// YCSB's "latest" distribution (`SkewedLatestGenerator`): `max - zipfian(max)` where `max`
/// is the largest inserted key, so the newest keys are the most popular.
#[derive(Debug)]
pub struct SkewedLatest<C: LastValue> {
    basis: Arc<C>,
    zipfian: Zipfian,
}

impl<C: LastValue> SkewedLatest<C> {
    /// Latest over the keys `basis` has handed out.
    pub fn new(basis: Arc<C>) -> Self {
        let items = basis.last_value().unwrap_or(0).max(1);
        SkewedLatest {
            basis,
            zipfian: Zipfian::new(0, items),
        }
    }
}

impl<C: LastValue> NumberGenerator for SkewedLatest<C> {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        let max = self.basis.last_value().unwrap_or(0);
        if max == 0 {
            return 0;
        }
        max - self.zipfian.next_with_items(rng, max)
    }
}

/// `hot_op_fraction` of the draws go uniformly to the first `hot_set_fraction` of `[lb, ub]`,
/// the rest uniformly to the remainder (YCSB's `HotspotIntegerGenerator`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hotspot {
    /// Smallest value.
    pub lb: u64,
    /// Largest value.
    pub ub: u64,
    /// Fraction of `[lb, ub]` that is hot, in `[0, 1]`.
    pub hot_set_fraction: f64,
    /// Fraction of draws that go to the hot set, in `[0, 1]`.
    pub hot_op_fraction: f64,
}

impl Hotspot {
    /// Hotspot over `[lb, ub]`; fractions outside `[0, 1]` are clamped (YCSB resets them).
    ///
    /// # Panics
    /// If `lb > ub`.
    pub fn new(lb: u64, ub: u64, hot_set_fraction: f64, hot_op_fraction: f64) -> Self {
        assert!(lb <= ub, "Hotspot: lb {lb} > ub {ub}");
        Hotspot {
            lb,
            ub,
            hot_set_fraction: hot_set_fraction.clamp(0.0, 1.0),
            hot_op_fraction: hot_op_fraction.clamp(0.0, 1.0),
        }
    }

    /// Number of values in the hot set, `[lb, lb + hot_interval())`.
    pub fn hot_interval(&self) -> u64 {
        ((self.ub - self.lb + 1) as f64 * self.hot_set_fraction) as u64
    }
}

impl NumberGenerator for Hotspot {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        let interval = self.ub - self.lb + 1;
        let hot = self.hot_interval().min(interval);
        let cold = interval - hot;
        let to_hot = rng.next_f64() < self.hot_op_fraction;
        if hot > 0 && (to_hot || cold == 0) {
            self.lb + rng.next_u64() % hot
        } else {
            self.lb + hot + rng.next_u64() % cold
        }
    }
}

/// YCSB's `CoreWorkload.buildKeyName`: `"user"` followed by `n` (ordered inserts) or
/// `fnvhash64(n)` (hashed inserts), without zero padding.
pub fn key_name(n: u64, ordered: bool) -> String {
    let v = if ordered { n } else { fnvhash64(n) };
    format!("user{v}")
}
