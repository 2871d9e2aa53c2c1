//! Why a chart could not be drawn.

/// Input a chart refuses to draw, rather than rendering a broken picture.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ChartError {
    /// There is nothing to draw: no categories, no series, no points, or every value missing.
    #[error("nothing to chart: {0}")]
    Empty(&'static str),
    /// A bar series does not have exactly one value per category.
    #[error("bar series {series:?} has {values} values for {categories} categories")]
    LengthMismatch {
        /// The series' name.
        series: String,
        /// How many values it has.
        values: usize,
        /// How many categories the chart has.
        categories: usize,
    },
    /// A value is infinite, or NaN where NaN has no meaning (line charts).
    #[error("series {series:?}, {what} {index}: {value} is not a finite number")]
    NonFinite {
        /// The series' name.
        series: String,
        /// Which value: `"bar"`, `"point x"` or `"point y"`.
        what: &'static str,
        /// The value's index within the series.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A log10 axis was asked for, but no point has a positive coordinate on it.
    #[error("no point has a positive {axis} value, which a log10 {axis} axis needs")]
    NoPositive {
        /// `"x"` or `"y"`.
        axis: &'static str,
    },
}
