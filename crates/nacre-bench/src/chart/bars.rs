//! Grouped vertical bar charts.

use super::axis::{Axis, MAX_TICKS};
use super::error::ChartError;
use super::format::TickFormat;
use super::layout::{
    begin, fit, line, plot_left, text_width, y_axis, Legend, Mark, Plot, AXIS_COLOUR, BOTTOM_PAD,
    LABEL_SIZE, PLOT_HEIGHT, PLOT_TOP, TICK_COLOUR, WIDTH,
};
use super::{colour, PALETTE};

/// Grouped vertical bars: one group per category (YCSB workloads A-F, say), one bar per
/// series within each group (say "Nacre (emulated)" and "RocksDB sync=0"), in the series'
/// order and colour. The y axis is linear and always includes zero; bars grow up from zero
/// for positive values and down for negative ones. The legend sits below the plot.
///
/// ```
/// use nacre_bench::chart::BarChart;
///
/// let chart = BarChart {
///     title: "YCSB throughput".into(),
///     y_label: "ops/s".into(),
///     categories: vec!["A".into(), "B".into()],
///     series: vec![
///         ("Nacre".into(), vec![1.2e6, 2.5e6]),
///         ("RocksDB".into(), vec![4.0e5, f64::NAN]),
///     ],
///     value_labels: true,
///     ..Default::default()
/// };
/// let svg = chart.render()?;
/// assert_eq!(svg.matches("class=\"bar\"").count(), 3);
/// # Ok::<(), nacre_bench::chart::ChartError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BarChart {
    /// The title above the chart.
    pub title: String,
    /// The y axis' title (what the bars measure, with the unit).
    pub y_label: String,
    /// The groups, left to right, labelled below the x axis.
    pub categories: Vec<String>,
    /// Each series' name (for the legend) and its value for each category, in category
    /// order. NaN marks a missing bar: nothing is drawn there (with value labels on, `n/a`).
    pub series: Vec<(String, Vec<f64>)>,
    /// Whether to write each bar's value above it (below it for negative values). Labels
    /// too wide for their bar are turned upright; they are left out if the bars are too
    /// narrow even for that.
    pub value_labels: bool,
    /// How the y axis and the value labels show numbers.
    pub y_format: TickFormat,
}

/// Value label font size, and the narrowest bar that takes an upright label.
const VALUE_SIZE: f64 = 12.0;
const MIN_LABELLED_BAR: f64 = 10.0;
/// The angle category labels are turned by when they do not fit under their group.
const CATEGORY_ANGLE: f64 = 35.0;
const MAX_CATEGORY_WIDTH: f64 = 150.0;

impl BarChart {
    /// The chart as a standalone SVG document.
    ///
    /// # Errors
    ///
    /// [`ChartError::Empty`] without categories, without series, or with every value NaN;
    /// [`ChartError::LengthMismatch`] if a series does not have one value per category;
    /// [`ChartError::NonFinite`] for an infinite value.
    pub fn render(&self) -> Result<String, ChartError> {
        let (lo, hi) = self.value_range()?;
        let n_cat = self.categories.len();
        let n_series = self.series.len();

        // The plot's left edge depends on the y labels, which depend on the headroom the
        // value labels need, which depends on the bar width: settle it in a few rounds.
        let mut left = 80.0;
        let mut axis = Axis::linear(lo, hi, MAX_TICKS);
        for _ in 0..3 {
            let geometry = Geometry::new(left, n_cat, n_series);
            axis = self.y_axis(lo, hi, &geometry);
            let new_left = plot_left(&axis.labels(self.y_format));
            if new_left == left {
                break;
            }
            left = new_left;
        }
        let g = Geometry::new(left, n_cat, n_series);
        let plot = g.plot;

        // Category labels: level if they fit under their group, else turned.
        let cat_labels: Vec<String> = self
            .categories
            .iter()
            .map(|c| fit(c, LABEL_SIZE, MAX_CATEGORY_WIDTH))
            .collect();
        let widest = cat_labels
            .iter()
            .map(|c| text_width(c, LABEL_SIZE))
            .fold(0.0, f64::max);
        let turned = widest > g.band - 6.0;
        let tick_area = if turned {
            22.0 + widest * CATEGORY_ANGLE.to_radians().sin()
        } else {
            28.0
        };

        let legend = Legend::new(
            self.series
                .iter()
                .enumerate()
                .map(|(j, (name, _))| (name.as_str(), Mark::Box(colour(j), opacity(j)))),
        );
        let height = plot.bottom() + tick_area + 8.0 + legend.height() + BOTTOM_PAD;

        let mut w = begin(&self.title, height);
        y_axis(&mut w, &plot, &axis, self.y_format, &self.y_label);
        let y_of = |v: f64| axis.map(v, plot.bottom(), plot.top);
        let zero = y_of(0.0);

        for (j, (_, values)) in self.series.iter().enumerate() {
            w.tag("g")
                .attr("fill", colour(j))
                .attr_opt("fill-opacity", (opacity(j) < 1.0).then_some(opacity(j)))
                .open();
            for (i, &v) in values.iter().enumerate() {
                if v.is_nan() {
                    continue;
                }
                let (x, width) = g.bar(i, j);
                let y = y_of(v);
                w.tag("rect")
                    .attr("class", "bar")
                    .attr("x", x)
                    .attr("y", y.min(zero))
                    .attr("width", width)
                    .attr("height", (y - zero).abs())
                    .end();
            }
            w.close();
        }
        line(&mut w, plot.left, zero, plot.right(), zero, AXIS_COLOUR);

        if self.value_labels && g.bar_width >= MIN_LABELLED_BAR {
            w.tag("g")
                .attr("font-size", VALUE_SIZE)
                .attr("fill", TICK_COLOUR)
                .open();
            for (j, (_, values)) in self.series.iter().enumerate() {
                for (i, &v) in values.iter().enumerate() {
                    let (x, width) = g.bar(i, j);
                    let cx = x + width / 2.0;
                    let (text, at) = if v.is_nan() {
                        ("n/a".to_string(), 0.0)
                    } else {
                        (self.y_format.value(v), v)
                    };
                    let up = at >= 0.0;
                    let y = y_of(at);
                    if text_width(&text, VALUE_SIZE) <= g.bar_width + 2.0 {
                        w.tag("text")
                            .attr("x", cx)
                            .attr("y", if up { y - 4.0 } else { y + 14.0 })
                            .attr("text-anchor", "middle")
                            .text(&text);
                    } else {
                        let (tx, ty) = (cx + 4.0, if up { y - 4.0 } else { y + 4.0 });
                        w.tag("text")
                            .attr("x", tx)
                            .attr("y", ty)
                            .attr(
                                "transform",
                                format!(
                                    "rotate(-90 {} {})",
                                    super::svg::num(tx),
                                    super::svg::num(ty)
                                ),
                            )
                            .attr("text-anchor", if up { "start" } else { "end" })
                            .text(&text);
                    }
                }
            }
            w.close();
        }

        w.tag("g").attr("font-size", LABEL_SIZE).open();
        for (i, label) in cat_labels.iter().enumerate() {
            let cx = plot.left + g.band * (i as f64 + 0.5);
            if turned {
                let y = plot.bottom() + 16.0;
                w.tag("text")
                    .attr("x", cx)
                    .attr("y", y)
                    .attr("text-anchor", "end")
                    .attr(
                        "transform",
                        format!(
                            "rotate(-{} {} {})",
                            CATEGORY_ANGLE,
                            super::svg::num(cx),
                            super::svg::num(y)
                        ),
                    )
                    .text(label);
            } else {
                w.tag("text")
                    .attr("x", cx)
                    .attr("y", plot.bottom() + 20.0)
                    .attr("text-anchor", "middle")
                    .text(label);
            }
        }
        w.close();

        legend.draw(&mut w, plot.bottom() + tick_area + 8.0);
        Ok(w.finish())
    }

    /// Checks the input; the smallest and largest values, zero included.
    fn value_range(&self) -> Result<(f64, f64), ChartError> {
        if self.categories.is_empty() {
            return Err(ChartError::Empty("a bar chart without categories"));
        }
        if self.series.is_empty() {
            return Err(ChartError::Empty("a bar chart without series"));
        }
        let (mut lo, mut hi, mut any) = (0.0f64, 0.0f64, false);
        for (name, values) in &self.series {
            if values.len() != self.categories.len() {
                return Err(ChartError::LengthMismatch {
                    series: name.clone(),
                    values: values.len(),
                    categories: self.categories.len(),
                });
            }
            for (index, &v) in values.iter().enumerate() {
                if v.is_nan() {
                    continue;
                }
                if v.is_infinite() {
                    return Err(ChartError::NonFinite {
                        series: name.clone(),
                        what: "bar",
                        index,
                        value: v,
                    });
                }
                lo = lo.min(v);
                hi = hi.max(v);
                any = true;
            }
        }
        if !any {
            return Err(ChartError::Empty("every bar value is missing (NaN)"));
        }
        Ok((lo, hi))
    }

    /// A y axis from `lo` to `hi` with room above the highest bar (below the lowest) for its
    /// value label.
    fn y_axis(&self, lo: f64, hi: f64, g: &Geometry) -> Axis {
        let mut axis = Axis::linear(lo, hi, MAX_TICKS);
        if !self.value_labels || g.bar_width < MIN_LABELLED_BAR {
            return axis;
        }
        let extent = self
            .series
            .iter()
            .flat_map(|(_, values)| values.iter())
            .map(|&v| {
                let text = if v.is_nan() {
                    "n/a".to_string()
                } else {
                    self.y_format.value(v)
                };
                let w = text_width(&text, VALUE_SIZE);
                if w <= g.bar_width + 2.0 {
                    VALUE_SIZE + 6.0
                } else {
                    w + 8.0
                }
            })
            .fold(0.0, f64::max);
        let room = (extent / PLOT_HEIGHT).min(0.5);
        for _ in 0..10 {
            let (mut want_lo, mut want_hi) = (axis.min, axis.max);
            if hi > 0.0 && axis.fraction(hi) > 1.0 - room {
                want_hi = axis.min + (hi - axis.min) / (1.0 - room);
            }
            if lo < 0.0 && axis.fraction(lo) < room {
                want_lo = axis.max - (axis.max - lo) / (1.0 - room);
            }
            if want_lo == axis.min && want_hi == axis.max {
                break;
            }
            axis = Axis::linear(want_lo, want_hi, MAX_TICKS);
        }
        axis
    }
}

/// Series past the palette's length are drawn lighter.
fn opacity(j: usize) -> f64 {
    if (j / PALETTE.len()) % 2 == 1 {
        0.55
    } else {
        1.0
    }
}

/// Where the groups and bars go.
struct Geometry {
    plot: Plot,
    /// The width given to each category.
    band: f64,
    /// The space of one bar within a group (the drawn bar is a little narrower).
    bar_width: f64,
    /// The offset of a group's first bar from the start of its band.
    inset: f64,
}

impl Geometry {
    fn new(left: f64, n_cat: usize, n_series: usize) -> Geometry {
        let plot = Plot {
            left,
            top: PLOT_TOP,
            width: WIDTH - left - 24.0,
            height: PLOT_HEIGHT,
        };
        let band = plot.width / n_cat.max(1) as f64;
        let fill = if n_series == 1 { 0.6 } else { 0.8 };
        let group = (band * fill).min(n_series as f64 * 90.0);
        Geometry {
            plot,
            band,
            bar_width: group / n_series.max(1) as f64,
            inset: (band - group) / 2.0,
        }
    }

    /// The x and width of the bar of series `j` in category `i`.
    fn bar(&self, i: usize, j: usize) -> (f64, f64) {
        let gap = (self.bar_width * 0.12).min(3.0);
        let x = self.plot.left + self.band * i as f64 + self.inset + self.bar_width * j as f64;
        (x + gap / 2.0, self.bar_width - gap)
    }
}
