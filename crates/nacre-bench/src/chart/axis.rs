//! Axis domains, "nice" ticks and the mapping from data values to drawing coordinates.
//!
//! A linear axis ends on multiples of its tick step, which is 1, 2 or 5 × 10^k, the smallest
//! such step that keeps the ticks at or below the requested count (so 4 to 8 ticks for the
//! default of [`MAX_TICKS`]). A log10 axis ends on powers of ten and puts its ticks at
//! decades (every second, fifth, tenth ... decade over very wide ranges), with 2× and 5×
//! ticks labelled too when it spans only one or two decades and unlabelled minor ticks at
//! 2..9 × 10^k when it spans a few.

use super::{Scale, TickFormat};

/// The default upper bound on an axis' labelled ticks.
pub const MAX_TICKS: usize = 8;

/// A chart axis: its scale, its domain and its ticks.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// How values map to positions.
    pub scale: Scale,
    /// The value at the start of the axis (the first tick).
    pub min: f64,
    /// The value at the end of the axis (the last tick).
    pub max: f64,
    /// Labelled ticks, ascending, from `min` to `max`.
    pub ticks: Vec<f64>,
    /// Unlabelled minor ticks, ascending, strictly between `min` and `max` (log axes only).
    pub minor: Vec<f64>,
    /// Linear axes: the distance between neighbouring ticks. Log axes: the number of decades
    /// between neighbouring powers of ten among the ticks.
    pub step: f64,
}

impl Axis {
    /// A `scale` axis covering `lo..=hi` with at most `max_ticks` labelled ticks; see
    /// [`Axis::linear`] and [`Axis::log10`].
    pub fn new(scale: Scale, lo: f64, hi: f64, max_ticks: usize) -> Axis {
        match scale {
            Scale::Linear => Axis::linear(lo, hi, max_ticks),
            Scale::Log10 => Axis::log10(lo, hi, max_ticks),
        }
    }

    /// A linear axis covering `lo..=hi` (in either order), extended to multiples of a nice
    /// step (1, 2 or 5 × 10^k) with at most `max_ticks` ticks (at least 2). A zero-width range
    /// is widened: to `0..1` around zero, by 10% either side otherwise. Non-finite bounds are
    /// replaced by `0` and `1`.
    pub fn linear(lo: f64, hi: f64, max_ticks: usize) -> Axis {
        let (mut lo, mut hi) = ordered(
            if lo.is_finite() { lo } else { 0.0 },
            if hi.is_finite() { hi } else { 1.0 },
        );
        if hi - lo <= 4.0 * f64::EPSILON * lo.abs().max(hi.abs()) {
            if lo == 0.0 {
                hi = 1.0;
            } else {
                let pad = lo.abs() * 0.1;
                (lo, hi) = (lo - pad, hi + pad);
            }
        }
        let max_ticks = max_ticks.max(2);
        if !(hi - lo).is_finite() {
            return Axis {
                scale: Scale::Linear,
                min: lo,
                max: hi,
                ticks: vec![lo, hi],
                minor: Vec::new(),
                step: hi / 2.0 - lo / 2.0,
            };
        }
        let mut nice = Nice::at_least((hi - lo) / (max_ticks - 1) as f64);
        let (i0, i1) = loop {
            let step = nice.value();
            let i0 = (lo / step + 1e-9).floor();
            let i1 = (hi / step - 1e-9).ceil().max(i0 + 1.0);
            if i1 - i0 < max_ticks as f64 {
                break (i0 as i64, i1 as i64);
            }
            nice = nice.next();
        };
        let ticks: Vec<f64> = (i0..=i1).map(|i| nice.times(i)).collect();
        Axis {
            scale: Scale::Linear,
            min: nice.times(i0),
            max: nice.times(i1),
            ticks,
            minor: Vec::new(),
            step: nice.value(),
        }
    }

    /// A log10 axis covering `lo..=hi` (in either order), extended to powers of ten, with at
    /// most `max_ticks` labelled ticks (at least 2). A range within one power of ten is
    /// widened to the decade around it (a single power of ten: one decade either side). Both
    /// bounds must be positive and finite; otherwise the axis is built from the positive
    /// finite one (one decade below it) or is `1..10`.
    pub fn log10(lo: f64, hi: f64, max_ticks: usize) -> Axis {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        let (lo, hi) = match (ok(lo), ok(hi)) {
            (true, true) => ordered(lo, hi),
            (true, false) => (lo, lo),
            (false, true) => (hi, hi),
            (false, false) => (1.0, 10.0),
        };
        let mut e0 = ((lo.log10() + 1e-9).floor() as i32).clamp(-300, 300);
        let mut e1 = ((hi.log10() - 1e-9).ceil() as i32).clamp(-300, 300);
        if e1 <= e0 {
            // A single power of ten: a decade either side.
            (e0, e1) = (e0 - 1, e0 + 1);
        }
        let max_ticks = max_ticks.max(2) as i32;
        let mut every = Nice { m: 1.0, k: 0 };
        let (a0, a1, every) = loop {
            let n = every.value().round() as i32;
            let a0 = e0.div_euclid(n) * n;
            let a1 = -((-e1).div_euclid(n) * n);
            if (a1 - a0) / n < max_ticks {
                break (a0, a1, n);
            }
            every = every.next();
        };
        let decades = a1 - a0;
        // With at most two decades, 2× and 5× ticks are labelled too (if that fits).
        let mut ticks = Vec::new();
        let mut minor = Vec::new();
        let mut e = a0;
        while e <= a1 {
            ticks.push(pow10(e));
            if every == 1 && e < a1 && decades <= 5 {
                for m in 2..=9 {
                    let v = f64::from(m) * pow10(e);
                    if 3 * decades < max_ticks && (m == 2 || m == 5) {
                        ticks.push(v);
                    } else {
                        minor.push(v);
                    }
                }
            }
            e += every;
        }
        Axis {
            scale: Scale::Log10,
            min: pow10(a0),
            max: pow10(a1),
            ticks,
            minor,
            step: f64::from(every),
        }
    }

    /// Where `v` falls along the axis: 0 at [`Axis::min`], 1 at [`Axis::max`], outside
    /// `0..=1` beyond them; increasing with `v`. NaN for `v <= 0` on a log axis.
    pub fn fraction(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log10 => {
                if v <= 0.0 {
                    return f64::NAN;
                }
                let (l0, l1) = (self.min.log10(), self.max.log10());
                (v.log10() - l0) / (l1 - l0)
            }
        }
    }

    /// `v` mapped onto the drawing coordinates `start..end` (which may run downwards, as a
    /// y axis does: `start` is where [`Axis::min`] is drawn).
    pub fn map(&self, v: f64, start: f64, end: f64) -> f64 {
        start + self.fraction(v) * (end - start)
    }

    /// Whether `v` can be drawn on this axis (finite, and positive on a log axis).
    pub fn accepts(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }

    /// The labels of [`Axis::ticks`] in `format`: as many decimals as the step needs on a
    /// linear axis, three significant digits on a log axis.
    pub fn labels(&self, format: TickFormat) -> Vec<String> {
        self.ticks
            .iter()
            .map(|&v| match self.scale {
                Scale::Linear => format.tick(v, self.step),
                Scale::Log10 => format.value(v),
            })
            .collect()
    }
}

/// The smallest 1, 2 or 5 × 10^k that is at least `raw` (`1` for a non-positive or non-finite
/// `raw`).
pub fn nice_step(raw: f64) -> f64 {
    Nice::at_least(raw).value()
}

/// `m × 10^k` with `m` one of 1, 2, 5.
#[derive(Clone, Copy, Debug)]
struct Nice {
    m: f64,
    k: i32,
}

impl Nice {
    fn at_least(raw: f64) -> Nice {
        if !(raw.is_finite() && raw > 0.0) {
            return Nice { m: 1.0, k: 0 };
        }
        let k = (raw.log10().floor() as i32).clamp(-300, 300);
        let f = raw / pow10(k);
        match [1.0, 2.0, 5.0].into_iter().find(|&m| f <= m * (1.0 + 1e-9)) {
            Some(m) => Nice { m, k },
            None => Nice { m: 1.0, k: k + 1 },
        }
    }

    fn next(self) -> Nice {
        match self.m as u32 {
            1 => Nice { m: 2.0, ..self },
            2 => Nice { m: 5.0, ..self },
            _ => Nice {
                m: 1.0,
                k: self.k + 1,
            },
        }
    }

    fn value(self) -> f64 {
        self.times(1)
    }

    /// `i × m × 10^k`, computed so that decimal steps come out as the nearest double (a
    /// negative power of ten divides rather than multiplying by an inexact 10^-k).
    fn times(self, i: i64) -> f64 {
        let n = i as f64 * self.m;
        if self.k >= 0 {
            n * 10f64.powi(self.k)
        } else {
            n / 10f64.powi(-self.k)
        }
    }
}

/// 10^e, exact as a double for `0 <= e <= 22` and the nearest double for negative `e` down
/// to -22.
fn pow10(e: i32) -> f64 {
    if e >= 0 {
        10f64.powi(e)
    } else {
        1.0 / 10f64.powi(-e)
    }
}

fn ordered(a: f64, b: f64) -> (f64, f64) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}
