//! Number formatting for tick labels and value labels: short, with a unit suffix where it
//! helps (`950`, `1.2k`, `3.4M`; `500 ns`, `12 µs`, `1.5 ms`; `99.9%`).

/// How a chart writes the numbers of an axis and its value labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TickFormat {
    /// Plain numbers with SI suffixes from a thousand up: `0.25`, `950`, `1.2k`, `3.4M`, `5G`,
    /// `2T`; very small ones in exponent form (`1.5e-6`).
    #[default]
    Number,
    /// The value is a duration in microseconds: `500 ns`, `12 µs`, `1.5 ms`, `2 s`.
    Micros,
    /// The value is `1 / (1 - q)` for a quantile `q`, the x coordinate of a "percentile
    /// spectrum" on a log axis; it is shown as the percentile `100 q`: `1` is `0%`, `10` is
    /// `90%`, `100` is `99%`, `1000` is `99.9%`.
    Nines,
}

impl TickFormat {
    /// `v` as a tick label on an axis whose neighbouring ticks are `resolution` apart: with as
    /// many decimals as it takes to tell the ticks apart, trailing zeros dropped.
    pub fn tick(self, v: f64, resolution: f64) -> String {
        match self {
            TickFormat::Number => scaled(v, resolution, &SI),
            TickFormat::Micros => scaled(v, resolution, &TIME),
            TickFormat::Nines => nines(v),
        }
    }

    /// `v` as a value label: three significant digits, trailing zeros dropped.
    pub fn value(self, v: f64) -> String {
        self.tick(v, sig3_resolution(v))
    }
}

/// `v` with three significant digits and an SI suffix: `1234.5` is `1.23k`, `3.4e6` is
/// `3.4M`, `12` is `12`.
pub fn format_number(v: f64) -> String {
    TickFormat::Number.value(v)
}

/// `us` microseconds with three significant digits in the unit that suits it: `0.5` is
/// `500 ns`, `12` is `12 µs`, `1500` is `1.5 ms`, `2.5e6` is `2.5 s`.
pub fn format_micros(us: f64) -> String {
    TickFormat::Micros.value(us)
}

/// Multipliers and suffixes, largest first; the last applies to everything smaller.
type Units = [(f64, &'static str)];

const SI: [(f64, &str); 5] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];

const TIME: [(f64, &str); 4] = [(1e6, " s"), (1e3, " ms"), (1.0, " µs"), (1e-3, " ns")];

/// The place value of the third significant digit of `v` (1 for zero or non-finite `v`).
fn sig3_resolution(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return 1.0;
    }
    10f64.powi(v.abs().log10().floor() as i32 - 2)
}

/// `v` rounded to `resolution`, divided by the largest unit it reaches, with the decimals the
/// resolution needs.
fn scaled(v: f64, resolution: f64, units: &Units) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let res = if resolution.is_finite() && resolution > 0.0 {
        resolution
    } else {
        sig3_resolution(v)
    };
    let v = (v / res).round() * res;
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let Some(&(div, suffix)) = units
        .iter()
        .find(|&&(d, _)| a >= d * (1.0 - 1e-9))
        .or(units.last())
    else {
        return format!("{v}");
    };
    // Very small plain numbers: exponent form rather than a run of zeros.
    if suffix.is_empty() && div == 1.0 && a < 1e-3 {
        return trim_exponent(&format!("{:.2e}", v));
    }
    let r = res / div;
    let decimals = if r >= 1.0 {
        0
    } else {
        ((-r.log10()) - 1e-9).ceil().clamp(0.0, 9.0) as usize
    };
    let mut s = format!("{:.*}", decimals, v / div);
    if s.contains('.') {
        let len = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(len);
    }
    s.push_str(suffix);
    s
}

/// `1.50e-6` → `1.5e-6`.
fn trim_exponent(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => s.to_string(),
    }
}

/// `v = 1 / (1 - q)` shown as the percentile `100 q`, with the decimals that `v` needs.
fn nines(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return format!("{v}");
    }
    let pct = 100.0 * (1.0 - 1.0 / v);
    let decimals = (v.log10() - 2.0 - 1e-9).ceil().clamp(0.0, 9.0) as usize;
    let s = format!("{:.*}", decimals, pct);
    if s == "-0" {
        "0%".into()
    } else {
        s + "%"
    }
}
