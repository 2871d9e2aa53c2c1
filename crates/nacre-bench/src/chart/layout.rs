//! What both chart kinds share: the page geometry, text width estimates, the document's
//! frame (background, title), the y axis and the legend.

use super::axis::Axis;
use super::format::TickFormat;
use super::svg::{SvgWriter, SVG_NS};

/// The width of every chart, in `viewBox` units (pixels at 100%).
pub(crate) const WIDTH: f64 = 800.0;
/// The top of the plot area, below the title.
pub(crate) const PLOT_TOP: f64 = 48.0;
/// The height of the plot area.
pub(crate) const PLOT_HEIGHT: f64 = 300.0;
/// Space left below the legend.
pub(crate) const BOTTOM_PAD: f64 = 14.0;

pub(crate) const FONT_FAMILY: &str = "Helvetica, Arial, sans-serif";
pub(crate) const TITLE_SIZE: f64 = 16.0;
pub(crate) const LABEL_SIZE: f64 = 13.0;
pub(crate) const TICK_SIZE: f64 = 12.0;

pub(crate) const TEXT_COLOUR: &str = "#222222";
pub(crate) const TICK_COLOUR: &str = "#444444";
pub(crate) const AXIS_COLOUR: &str = "#666666";
pub(crate) const GRID_COLOUR: &str = "#e3e3e3";
pub(crate) const MINOR_GRID_COLOUR: &str = "#f2f2f2";

/// Legend geometry: row height, swatch width, gap between swatch and text, gap between
/// entries.
const LEGEND_ROW: f64 = 20.0;
const LEGEND_SWATCH: f64 = 24.0;
const LEGEND_GAP: f64 = 6.0;
const LEGEND_SPACING: f64 = 22.0;
const LEGEND_MARGIN: f64 = 20.0;

/// The plot area: where data is drawn, inside the axes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plot {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

impl Plot {
    pub fn right(&self) -> f64 {
        self.left + self.width
    }

    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// An estimate of the width of `s` set in a sans-serif font of `size` px, on the generous
/// side (it allows for DejaVu Sans, which is wider than Helvetica or Arial) so that text
/// placed by it does not collide.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    let em: f64 =
        s.chars()
            .map(|c| match c {
                ' ' => 0.3,
                'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | '(' | ')' | '['
                | ']' => 0.3,
                'f' | 't' | 'r' | 'I' | '-' | '/' => 0.4,
                'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.9,
                'A'..='Z' => 0.72,
                '0'..='9' => 0.64,
                c if c.is_ascii() => 0.62,
                c if (c as u32) >= 0x2E80 => 1.0,
                _ => 0.65,
            })
            .sum();
    em * size
}

/// `s`, cut short with an ellipsis if it is wider than `max_width` at `size` px.
pub(crate) fn fit(s: &str, size: f64, max_width: f64) -> String {
    if text_width(s, size) <= max_width {
        return s.to_string();
    }
    let mut out: String = s.to_string();
    while !out.is_empty() && text_width(&out, size) + text_width("…", size) > max_width {
        out.pop();
    }
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// Starts a chart document `height` units tall: root element, accessible title, white
/// background and the visible title.
pub(crate) fn begin(title: &str, height: f64) -> SvgWriter {
    let mut w = SvgWriter::new();
    w.tag("svg")
        .attr("xmlns", SVG_NS)
        .attr("viewBox", format!("0 0 {} {}", WIDTH, height.ceil()))
        .attr("width", WIDTH)
        .attr("height", height.ceil())
        .attr("role", "img")
        .attr("font-family", FONT_FAMILY)
        .attr("font-size", TICK_SIZE)
        .attr("fill", TEXT_COLOUR)
        .open();
    w.tag("title").text(title);
    w.tag("rect")
        .attr("width", WIDTH)
        .attr("height", height.ceil())
        .attr("fill", "#ffffff")
        .end();
    w.tag("text")
        .attr("x", WIDTH / 2.0)
        .attr("y", 28.0)
        .attr("text-anchor", "middle")
        .attr("font-size", TITLE_SIZE)
        .attr("font-weight", "bold")
        .text(&fit(title, TITLE_SIZE, WIDTH - 2.0 * LEGEND_MARGIN));
    w
}

/// The left edge of the plot area that leaves room for the y axis' `labels` and its title.
pub(crate) fn plot_left(labels: &[String]) -> f64 {
    let widest = labels
        .iter()
        .map(|l| text_width(l, TICK_SIZE))
        .fold(0.0, f64::max);
    (widest + 44.0).max(64.0)
}

/// The y axis: horizontal grid lines at the ticks (minor ones lighter), tick labels to the
/// left of the plot, the axis line, and `label` rotated along the left edge.
pub(crate) fn y_axis(w: &mut SvgWriter, plot: &Plot, axis: &Axis, format: TickFormat, label: &str) {
    let y_of = |v: f64| axis.map(v, plot.bottom(), plot.top);
    for (values, colour) in [(&axis.minor, MINOR_GRID_COLOUR), (&axis.ticks, GRID_COLOUR)] {
        w.tag("g")
            .attr("stroke", colour)
            .attr("stroke-width", 1.0)
            .open();
        for &v in values {
            let y = y_of(v);
            w.tag("line")
                .attr("x1", plot.left)
                .attr("x2", plot.right())
                .attr("y1", y)
                .attr("y2", y)
                .end();
        }
        w.close();
    }
    w.tag("g")
        .attr("text-anchor", "end")
        .attr("fill", TICK_COLOUR)
        .open();
    for (&v, text) in axis.ticks.iter().zip(axis.labels(format)) {
        w.tag("text")
            .attr("x", plot.left - 8.0)
            .attr("y", y_of(v) + 4.0)
            .text(&text);
    }
    w.close();
    line(
        w,
        plot.left,
        plot.top,
        plot.left,
        plot.bottom(),
        AXIS_COLOUR,
    );
    let cy = plot.top + plot.height / 2.0;
    w.tag("text")
        .attr("x", 22.0)
        .attr("y", cy)
        .attr(
            "transform",
            format!("rotate(-90 22 {})", super::svg::num(cy)),
        )
        .attr("text-anchor", "middle")
        .attr("font-size", LABEL_SIZE)
        .text(&fit(label, LABEL_SIZE, plot.height + 40.0));
}

/// A centred axis title below the plot, with its baseline at `y`.
pub(crate) fn x_label(w: &mut SvgWriter, plot: &Plot, y: f64, label: &str) {
    if label.is_empty() {
        return;
    }
    w.tag("text")
        .attr("x", plot.left + plot.width / 2.0)
        .attr("y", y)
        .attr("text-anchor", "middle")
        .attr("font-size", LABEL_SIZE)
        .text(&fit(label, LABEL_SIZE, WIDTH - 2.0 * LEGEND_MARGIN));
}

/// A one-pixel line.
pub(crate) fn line(w: &mut SvgWriter, x1: f64, y1: f64, x2: f64, y2: f64, colour: &str) {
    w.tag("line")
        .attr("x1", x1)
        .attr("y1", y1)
        .attr("x2", x2)
        .attr("y2", y2)
        .attr("stroke", colour)
        .attr("stroke-width", 1.0)
        .end();
}

/// How a legend entry shows its series.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mark<'a> {
    /// A filled square, for bars; the second field is the fill opacity.
    Box(&'a str, f64),
    /// A short line, for line series; the second field is the dash pattern, if any.
    Line(&'a str, Option<&'a str>),
}

/// A legend laid out in rows that fit the chart's width, entries in order, each row
/// centred. Names too long for a row of their own are cut short with an ellipsis.
#[derive(Debug)]
pub(crate) struct Legend<'a> {
    /// Per row: its entries as (x of the swatch, name as shown, mark).
    rows: Vec<Vec<(f64, String, Mark<'a>)>>,
}

impl<'a> Legend<'a> {
    pub fn new(entries: impl IntoIterator<Item = (&'a str, Mark<'a>)>) -> Legend<'a> {
        let avail = WIDTH - 2.0 * LEGEND_MARGIN;
        let max_text = avail - LEGEND_SWATCH - LEGEND_GAP;
        let mut rows: Vec<Vec<(f64, String, Mark<'a>)>> = Vec::new();
        let mut widths: Vec<f64> = Vec::new();
        let mut row: Vec<(f64, String, Mark<'a>)> = Vec::new();
        let mut x = 0.0;
        for (name, mark) in entries {
            let name = fit(name, LABEL_SIZE, max_text);
            let w = LEGEND_SWATCH + LEGEND_GAP + text_width(&name, LABEL_SIZE);
            if !row.is_empty() && x + w > avail {
                rows.push(std::mem::take(&mut row));
                widths.push(x - LEGEND_SPACING);
                x = 0.0;
            }
            row.push((x, name, mark));
            x += w + LEGEND_SPACING;
        }
        if !row.is_empty() {
            rows.push(row);
            widths.push(x - LEGEND_SPACING);
        }
        for (row, width) in rows.iter_mut().zip(widths) {
            let start = (WIDTH - width) / 2.0;
            for entry in row.iter_mut() {
                entry.0 += start;
            }
        }
        Legend { rows }
    }

    /// The height the legend takes.
    pub fn height(&self) -> f64 {
        self.rows.len() as f64 * LEGEND_ROW
    }

    /// Draws the legend with its first row's top at `top`.
    pub fn draw(&self, w: &mut SvgWriter, top: f64) {
        w.tag("g").attr("font-size", LABEL_SIZE).open();
        for (r, row) in self.rows.iter().enumerate() {
            let cy = top + r as f64 * LEGEND_ROW + LEGEND_ROW / 2.0;
            for (x, name, mark) in row {
                match *mark {
                    Mark::Box(colour, opacity) => {
                        w.tag("rect")
                            .attr("x", x + 5.0)
                            .attr("y", cy - 7.0)
                            .attr("width", 14.0)
                            .attr("height", 14.0)
                            .attr("fill", colour)
                            .attr_opt("fill-opacity", (opacity < 1.0).then_some(opacity))
                            .end();
                    }
                    Mark::Line(colour, dash) => {
                        w.tag("line")
                            .attr("x1", *x)
                            .attr("x2", x + LEGEND_SWATCH)
                            .attr("y1", cy)
                            .attr("y2", cy)
                            .attr("stroke", colour)
                            .attr("stroke-width", 2.5)
                            .attr_opt("stroke-dasharray", dash)
                            .end();
                    }
                }
                w.tag("text")
                    .attr("x", x + LEGEND_SWATCH + LEGEND_GAP)
                    .attr("y", cy + 4.5)
                    .text(name);
            }
        }
        w.close();
    }
}
