//! Dependency-free SVG charts for the benchmark report pages.
//!
//! The charts are meant to be committed under `docs/img/` and shown by a Markdown page on
//! GitHub, which displays an SVG as an image: every chart is one self-contained document with a
//! fixed `viewBox` (800 units wide), a white background, a title, axis labels and a legend,
//! sans-serif text of 12-16 px, and the colour-blind-friendly [`PALETTE`]. There are no
//! scripts, no stylesheets and no external fonts; every piece of text is XML-escaped.
//!
//! - [`BarChart`] ([`bars`]): grouped vertical bars, one group per category (YCSB workloads A-F,
//!   say) and one bar per series, optionally with the value above each bar.
//! - [`LineChart`] ([`lines`]): [`Series`] of `(x, y)` points on [`Scale::Linear`] or
//!   [`Scale::Log10`] axes chosen independently: latency CDFs, percentile spectra, throughput
//!   over time.
//! - [`axis`]: the "nice" ticks (1, 2 or 5 × 10^k on linear axes, decades on log axes) and the
//!   mapping from data to drawing coordinates; [`format`](mod@format): tick and value labels
//!   (`1.2k`, `3.4M`, `12 µs`, `99.9%`).
//! - [`svg`]: the escaping SVG writer everything above draws with.
//!
//! Rendering never panics on bad input: no data, mismatched lengths and non-finite values are
//! reported as a [`ChartError`] rather than drawn as a broken chart.

pub mod axis;
pub mod bars;
mod error;
pub mod format;
mod layout;
pub mod lines;
pub mod svg;

#[cfg(test)]
mod tests;

pub use axis::Axis;
pub use bars::BarChart;
pub use error::ChartError;
pub use format::TickFormat;
pub use lines::LineChart;

/// Series colours: the Okabe-Ito palette, which stays distinguishable under the common forms
/// of colour blindness, ordered so the first few colours contrast best on white (yellow last).
/// Series past the eighth reuse the colours; lines then also change dash pattern and bars
/// are drawn lighter.
pub const PALETTE: [&str; 8] = [
    "#0072B2", // blue
    "#E69F00", // orange
    "#009E73", // bluish green
    "#D55E00", // vermillion
    "#56B4E9", // sky blue
    "#CC79A7", // reddish purple
    "#000000", // black
    "#F0E442", // yellow
];

/// The colour of series number `i`, cycling through [`PALETTE`].
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// A named line of `(x, y)` points for a [`LineChart`], drawn in the given order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The name shown in the legend.
    pub name: String,
    /// The points, `(x, y)`, joined in this order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name` through `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Equal distances for equal differences; ticks at 1, 2 or 5 × 10^k steps.
    #[default]
    Linear,
    /// Equal distances for equal ratios; ticks at powers of ten. Only positive values can be
    /// placed on it: a [`LineChart`] skips points whose coordinate on a log axis is zero or
    /// negative.
    Log10,
}
