//! Line charts of `(x, y)` series.

use std::fmt::Write as _;

use super::axis::{Axis, MAX_TICKS};
use super::error::ChartError;
use super::format::TickFormat;
use super::layout::{
    begin, line, plot_left, text_width, x_label, y_axis, Legend, Mark, Plot, AXIS_COLOUR,
    BOTTOM_PAD, GRID_COLOUR, MINOR_GRID_COLOUR, PLOT_HEIGHT, PLOT_TOP, TICK_COLOUR, TICK_SIZE,
    WIDTH,
};
use super::{colour, Scale, Series, PALETTE};

/// Lines through several [`Series`] of `(x, y)` points, each scale chosen independently:
/// latency CDFs (x = latency in µs on [`Scale::Log10`], y = percentile 0..100 linear), the
/// percentile spectrum (x = `1 / (1 - q)` on a log axis shown with [`TickFormat::Nines`],
/// y = latency), throughput over time (x = seconds, y = ops/s).
///
/// Points are joined in the order given. On a log axis, points whose coordinate on it is zero
/// or negative cannot be placed: they are skipped and the line is broken there. Series with
/// at most [`MARKER_LIMIT`] drawable points also get a dot at each point (so a single point
/// shows). A series with no drawable point still has its legend entry. The legend sits below
/// the plot.
///
/// ```
/// use nacre_bench::chart::{LineChart, Scale, Series, TickFormat};
///
/// let chart = LineChart {
///     title: "Read latency CDF".into(),
///     x_label: "latency".into(),
///     y_label: "percentile".into(),
///     x_scale: Scale::Log10,
///     x_format: TickFormat::Micros,
///     series: vec![Series::new("Nacre", vec![(2.0, 0.0), (5.0, 50.0), (40.0, 100.0)])],
///     y_from_zero: true,
///     ..Default::default()
/// };
/// let svg = chart.render()?;
/// assert_eq!(svg.matches("class=\"series\"").count(), 1);
/// # Ok::<(), nacre_bench::chart::ChartError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineChart {
    /// The title above the chart.
    pub title: String,
    /// The x axis' title (with the unit).
    pub x_label: String,
    /// The y axis' title (with the unit).
    pub y_label: String,
    /// The x axis' scale.
    pub x_scale: Scale,
    /// The y axis' scale.
    pub y_scale: Scale,
    /// The lines, drawn in order (later ones on top) and coloured by position.
    pub series: Vec<Series>,
    /// Whether a linear y axis starts at zero (or below, for negative values) rather than
    /// near the smallest value. Ignored on a log y axis.
    pub y_from_zero: bool,
    /// How the x axis' tick labels show numbers.
    pub x_format: TickFormat,
    /// How the y axis' tick labels show numbers.
    pub y_format: TickFormat,
}

/// Series with at most this many drawable points are drawn with a dot at each point.
pub const MARKER_LIMIT: usize = 12;

/// Dash patterns for the first, second, ... round through the palette.
const DASHES: [Option<&str>; 4] = [None, Some("7 4"), Some("2 3"), Some("9 3 2 3")];

fn dash(i: usize) -> Option<&'static str> {
    DASHES[(i / PALETTE.len()) % DASHES.len()]
}

impl LineChart {
    /// The chart as a standalone SVG document.
    ///
    /// # Errors
    ///
    /// [`ChartError::Empty`] without series or without any point; [`ChartError::NonFinite`]
    /// for a NaN or infinite coordinate; [`ChartError::NoPositive`] if a log axis is asked
    /// for and no point has a positive coordinate on it.
    pub fn render(&self) -> Result<String, ChartError> {
        let (x_axis, y_axis_) = self.axes()?;
        let x_labels = x_axis.labels(self.x_format);
        let left = plot_left(&y_axis_.labels(self.y_format));
        let last_half = x_labels
            .last()
            .map_or(0.0, |l| text_width(l, TICK_SIZE) / 2.0);
        let plot = Plot {
            left,
            top: PLOT_TOP,
            width: WIDTH - left - (last_half + 12.0).max(28.0),
            height: PLOT_HEIGHT,
        };
        let legend = Legend::new(
            self.series
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_str(), Mark::Line(colour(i), dash(i)))),
        );
        let axis_title_y = plot.bottom() + 44.0;
        let legend_top = axis_title_y + 12.0;
        let height = legend_top + legend.height() + BOTTOM_PAD;

        let mut w = begin(&self.title, height);
        y_axis(&mut w, &plot, &y_axis_, self.y_format, &self.y_label);
        let x_of = |v: f64| x_axis.map(v, plot.left, plot.right());
        let y_of = |v: f64| y_axis_.map(v, plot.bottom(), plot.top);

        // Vertical grid lines, the x axis and its labels.
        for (ticks, grid) in [
            (&x_axis.minor, MINOR_GRID_COLOUR),
            (&x_axis.ticks, GRID_COLOUR),
        ] {
            w.tag("g")
                .attr("stroke", grid)
                .attr("stroke-width", 1.0)
                .open();
            for &v in ticks.iter() {
                let x = x_of(v);
                w.tag("line")
                    .attr("x1", x)
                    .attr("x2", x)
                    .attr("y1", plot.top)
                    .attr("y2", plot.bottom())
                    .end();
            }
            w.close();
        }
        line(
            &mut w,
            plot.left,
            plot.bottom(),
            plot.right(),
            plot.bottom(),
            AXIS_COLOUR,
        );
        w.tag("g")
            .attr("text-anchor", "middle")
            .attr("fill", TICK_COLOUR)
            .open();
        for i in spaced_labels(&x_axis.ticks, &x_labels, &x_of) {
            w.tag("text")
                .attr("x", x_of(x_axis.ticks[i]))
                .attr("y", plot.bottom() + 18.0)
                .text(&x_labels[i]);
        }
        w.close();
        x_label(&mut w, &plot, axis_title_y, &self.x_label);

        // The series.
        for (i, s) in self.series.iter().enumerate() {
            let pixels: Vec<Option<(f64, f64)>> = s
                .points
                .iter()
                .map(|&(x, y)| {
                    (x_axis.accepts(x) && y_axis_.accepts(y)).then(|| (x_of(x), y_of(y)))
                })
                .collect();
            let d = path_data(&pixels);
            if !d.is_empty() {
                w.tag("path")
                    .attr("class", "series")
                    .attr("d", d)
                    .attr("fill", "none")
                    .attr("stroke", colour(i))
                    .attr("stroke-width", 2.0)
                    .attr("stroke-linejoin", "round")
                    .attr("stroke-linecap", "round")
                    .attr_opt("stroke-dasharray", dash(i))
                    .end();
            }
            let drawable: Vec<(f64, f64)> = pixels.iter().flatten().copied().collect();
            if !drawable.is_empty() && drawable.len() <= MARKER_LIMIT {
                w.tag("g").attr("fill", colour(i)).open();
                for (x, y) in drawable {
                    w.tag("circle")
                        .attr("cx", x)
                        .attr("cy", y)
                        .attr("r", 3.0)
                        .end();
                }
                w.close();
            }
        }

        legend.draw(&mut w, legend_top);
        Ok(w.finish())
    }

    /// Checks the input and builds the two axes over the drawable points.
    fn axes(&self) -> Result<(Axis, Axis), ChartError> {
        if self.series.is_empty() {
            return Err(ChartError::Empty("a line chart without series"));
        }
        for s in &self.series {
            for (index, &(x, y)) in s.points.iter().enumerate() {
                for (what, value) in [("point x", x), ("point y", y)] {
                    if !value.is_finite() {
                        return Err(ChartError::NonFinite {
                            series: s.name.clone(),
                            what,
                            index,
                            value,
                        });
                    }
                }
            }
        }
        let points = || self.series.iter().flat_map(|s| s.points.iter().copied());
        if points().next().is_none() {
            return Err(ChartError::Empty("a line chart without points"));
        }
        let placeable = |v: f64, scale: Scale| scale == Scale::Linear || v > 0.0;
        if !points().any(|(x, _)| placeable(x, self.x_scale)) {
            return Err(ChartError::NoPositive { axis: "x" });
        }
        if !points().any(|(_, y)| placeable(y, self.y_scale)) {
            return Err(ChartError::NoPositive { axis: "y" });
        }
        let drawable =
            || points().filter(|&(x, y)| placeable(x, self.x_scale) && placeable(y, self.y_scale));
        let range = |vs: &mut dyn Iterator<Item = f64>| {
            vs.fold(None, |acc: Option<(f64, f64)>, v| {
                Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
            })
        };
        let (Some((x_lo, x_hi)), Some((mut y_lo, mut y_hi))) = (
            range(&mut drawable().map(|(x, _)| x)),
            range(&mut drawable().map(|(_, y)| y)),
        ) else {
            // Some point is placeable on each axis, but none on both at once.
            let axis = if self.x_scale == Scale::Log10 {
                "x"
            } else {
                "y"
            };
            return Err(ChartError::NoPositive { axis });
        };
        if self.y_from_zero && self.y_scale == Scale::Linear {
            y_lo = y_lo.min(0.0);
            y_hi = y_hi.max(0.0);
        }
        Ok((
            Axis::new(self.x_scale, x_lo, x_hi, MAX_TICKS),
            Axis::new(self.y_scale, y_lo, y_hi, MAX_TICKS),
        ))
    }
}

/// The indices of the x tick labels to draw: left to right, each one skipped that would come
/// closer than a few pixels to the one before.
fn spaced_labels(ticks: &[f64], labels: &[String], x_of: &dyn Fn(f64) -> f64) -> Vec<usize> {
    let mut keep = Vec::new();
    let mut right_edge = f64::NEG_INFINITY;
    for (i, (&v, label)) in ticks.iter().zip(labels).enumerate() {
        let half = text_width(label, TICK_SIZE) / 2.0;
        let x = x_of(v);
        if x - half >= right_edge + 8.0 {
            keep.push(i);
            right_edge = x + half;
        }
    }
    keep
}

/// SVG path data through the pixels, a new subpath after each gap (`None`). A point within
/// half a pixel of the last one written is left out, except where a run ends, so long series
/// stay small without visibly changing the line.
fn path_data(pixels: &[Option<(f64, f64)>]) -> String {
    let mut d = String::new();
    let mut last: Option<(f64, f64)> = None;
    let mut pending: Option<(f64, f64)> = None;
    for p in pixels {
        match *p {
            None => {
                if let Some((x, y)) = pending.take() {
                    let _ = write!(d, "L{} {}", short(x), short(y));
                }
                last = None;
            }
            Some((x, y)) => match last {
                None => {
                    let _ = write!(d, "M{} {}", short(x), short(y));
                    last = Some((x, y));
                }
                Some((lx, ly)) if (x - lx).abs() < 0.5 && (y - ly).abs() < 0.5 => {
                    pending = Some((x, y));
                }
                Some(_) => {
                    let _ = write!(d, "L{} {}", short(x), short(y));
                    last = Some((x, y));
                    pending = None;
                }
            },
        }
    }
    if let Some((x, y)) = pending {
        let _ = write!(d, "L{} {}", short(x), short(y));
    }
    d
}

/// A coordinate with one decimal, trailing zero dropped.
fn short(v: f64) -> String {
    let mut s = format!("{:.1}", v);
    if let Some(stripped) = s.strip_suffix(".0") {
        s = stripped.to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}
