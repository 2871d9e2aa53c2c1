//! Tests of the SVG writer, the axes, the number formats and both chart kinds. Every rendered
//! chart goes through a small XML checker written here (balanced tags, quoted attributes,
//! nothing unescaped), so no XML library is needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use super::axis::{nice_step, MAX_TICKS};
use super::format::{format_micros, format_number};
use super::layout::{text_width, PLOT_HEIGHT, PLOT_TOP, TICK_SIZE, WIDTH};
use super::svg::{escape, num, SvgWriter};
use super::*;

// ---------------------------------------------------------------------------------------------
// A minimal XML checker.

/// One element of a checked document.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: HashMap<String, String>,
    /// The text directly inside the element, entities left as written.
    text: String,
}

impl Element {
    fn num(&self, key: &str) -> f64 {
        self.attrs[key].parse().unwrap()
    }
}

/// Parses `doc` as far as this module's output needs, failing on anything that is not
/// well-formed XML: unbalanced or crossed tags, unquoted or repeated attributes, a raw `<` in
/// an attribute value, a `&` that does not start an entity, text outside the root element,
/// more than one root.
fn parse(doc: &str) -> Result<Vec<Element>, String> {
    let mut elements: Vec<Element> = Vec::new();
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("<!--") {
            let end = after.find("-->").ok_or("unterminated comment")?;
            rest = &after[end + 3..];
        } else if let Some(after) = rest.strip_prefix("<?") {
            let end = after.find("?>").ok_or("unterminated declaration")?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix("</") {
            let end = after.find('>').ok_or("unterminated end tag")?;
            let name = after[..end].trim();
            match stack.pop() {
                Some((open, _)) if open == name => {}
                Some((open, _)) => return Err(format!("</{name}> closes <{open}>")),
                None => return Err(format!("</{name}> closes nothing")),
            }
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix('<') {
            let (element, len, empty) = start_tag(after)?;
            if stack.is_empty() {
                roots += 1;
            }
            if !empty {
                stack.push((element.name.clone(), elements.len()));
            }
            elements.push(element);
            rest = &after[len..];
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let text = &rest[..end];
            check_entities(text)?;
            if text.contains('>') {
                return Err(format!("unescaped '>' in text {text:?}"));
            }
            match stack.last() {
                Some(&(_, index)) => elements[index].text.push_str(text),
                None if text.trim().is_empty() => {}
                None => return Err(format!("text outside the root: {text:?}")),
            }
            rest = &rest[end..];
        }
    }
    if let Some((open, _)) = stack.last() {
        return Err(format!("<{open}> is never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(elements)
}

/// Parses a start tag after its `<`: the element, the bytes up to and including its `>`, and
/// whether it was empty (`/>`).
fn start_tag(s: &str) -> Result<(Element, usize, bool), String> {
    let name_len = s
        .find(|c: char| c.is_whitespace() || c == '/' || c == '>')
        .ok_or("unterminated start tag")?;
    let name = &s[..name_len];
    if !is_xml_name(name) {
        return Err(format!("bad element name {name:?}"));
    }
    let mut element = Element {
        name: name.to_string(),
        attrs: HashMap::new(),
        text: String::new(),
    };
    let mut i = name_len;
    loop {
        let ws = s[i..].len() - s[i..].trim_start().len();
        i += ws;
        let rest = &s[i..];
        if let Some(after) = rest.strip_prefix("/>") {
            return Ok((element, s.len() - after.len(), true));
        }
        if let Some(after) = rest.strip_prefix('>') {
            return Ok((element, s.len() - after.len(), false));
        }
        if ws == 0 {
            return Err(format!(
                "<{name}>: no space before attribute at {rest:.20?}"
            ));
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("<{name}>: attribute without value at {rest:.20?}"))?;
        let key = &rest[..eq];
        if !is_xml_name(key) {
            return Err(format!("<{name}>: bad attribute name {key:?}"));
        }
        let after_eq = &rest[eq + 1..];
        let quote = after_eq
            .chars()
            .next()
            .filter(|&c| c == '"' || c == '\'')
            .ok_or_else(|| format!("<{name}>: attribute {key} is not quoted"))?;
        let close = after_eq[1..]
            .find(quote)
            .ok_or_else(|| format!("<{name}>: attribute {key} never ends"))?;
        let value = &after_eq[1..1 + close];
        if value.contains('<') {
            return Err(format!("<{name}>: raw '<' in attribute {key}"));
        }
        check_entities(value)?;
        if element
            .attrs
            .insert(key.to_string(), value.to_string())
            .is_some()
        {
            return Err(format!("<{name}>: attribute {key} repeated"));
        }
        i += eq + 1 + close + 2;
    }
}

fn is_xml_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

/// Every `&` in `s` must start one of XML's five entities or a character reference.
fn check_entities(s: &str) -> Result<(), String> {
    for (i, _) in s.match_indices('&') {
        let rest = &s[i + 1..];
        let end = rest.find(';').ok_or_else(|| format!("raw '&' in {s:?}"))?;
        let entity = &rest[..end];
        let ok = matches!(entity, "amp" | "lt" | "gt" | "quot" | "apos")
            || entity
                .strip_prefix("#x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || entity
                .strip_prefix('#')
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        if !ok {
            return Err(format!("raw '&' or unknown entity &{entity}; in {s:?}"));
        }
    }
    Ok(())
}

/// Parses `doc`, panicking with the reason if it is not well formed, and checks what every
/// chart must have: an `svg` root with a viewBox, no non-finite numbers, no scripts or
/// external references.
fn checked(doc: &str) -> Vec<Element> {
    let elements = parse(doc).unwrap_or_else(|e| panic!("not well-formed: {e}\n{doc}"));
    let root = &elements[0];
    assert_eq!(root.name, "svg");
    assert_eq!(root.attrs["xmlns"], "http://www.w3.org/2000/svg");
    assert!(root.attrs["viewBox"].starts_with("0 0 800 "));
    for bad in ["NaN", "inf", "<script", "href", "<style", "@import", "url("] {
        assert!(!doc.contains(bad), "{bad:?} in the document");
    }
    elements
}

fn with_class<'e>(elements: &'e [Element], class: &str) -> Vec<&'e Element> {
    elements
        .iter()
        .filter(|e| e.attrs.get("class").is_some_and(|c| c == class))
        .collect()
}

fn texts(elements: &[Element]) -> Vec<&str> {
    elements
        .iter()
        .filter(|e| e.name == "text")
        .map(|e| e.text.as_str())
        .collect()
}

#[test]
fn checker_rejects_malformed_documents() {
    assert!(parse("<svg><g></g></svg>").is_ok());
    assert!(parse("<svg a=\"1\" b='2'/>").is_ok());
    for bad in [
        "<svg><g></svg>",
        "<svg>",
        "<svg></g>",
        "<svg a=1/>",
        "<svg a=\"1\" a=\"2\"/>",
        "<svg a=\"x<y\"/>",
        "<svg>a & b</svg>",
        "<svg>a &bogus; b</svg>",
        "<svg/><svg/>",
        "text<svg/>",
        "<svg a=\"1\"b=\"2\"/>",
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The SVG writer.

#[test]
fn escape_replaces_markup_characters() {
    assert_eq!(escape(r#"<&>"'"#), "&lt;&amp;&gt;&quot;&apos;");
    assert_eq!(escape("plain µs text"), "plain µs text");
    assert_eq!(escape("a\u{1}b\tc"), "a\u{FFFD}b\tc");
}

#[test]
fn writer_output_is_balanced_and_escaped() {
    let mut w = SvgWriter::new();
    w.tag("svg")
        .attr("xmlns", "http://www.w3.org/2000/svg")
        .open();
    w.tag("g").attr("fill", "#000").open();
    w.tag("rect").attr("x", 1.5).attr("class", "a\"b").end();
    w.tag("text").attr("x", 2.0).text("1 < 2 & 3 > 'x'");
    assert_eq!(w.depth(), 2);
    // Dropping a tag ends it as an empty element.
    drop(w.tag("circle").attr("r", 3.0));
    w.tag("g").open();
    let doc = w.finish();
    let elements = parse(&doc).unwrap();
    assert_eq!(elements.len(), 6);
    assert_eq!(elements[2].attrs["class"], "a&quot;b");
    assert_eq!(elements[3].text, "1 &lt; 2 &amp; 3 &gt; &apos;x&apos;");
}

#[test]
fn coordinates_are_short_and_finite() {
    assert_eq!(num(1.0), "1");
    assert_eq!(num(1.25), "1.25");
    assert_eq!(num(1.2049), "1.2");
    assert_eq!(num(-0.001), "0");
    assert_eq!(num(f64::NAN), "0");
    assert_eq!(num(f64::INFINITY), "0");
}

// ---------------------------------------------------------------------------------------------
// Axes.

fn mantissa(step: f64) -> f64 {
    step / 10f64.powf(step.log10().floor())
}

#[test]
fn nice_steps_are_1_2_5_times_a_power_of_ten() {
    for (raw, want) in [
        (1.0, 1.0),
        (1.01, 2.0),
        (2.0, 2.0),
        (2.5, 5.0),
        (7.0, 10.0),
        (11.0, 20.0),
        (45.0, 50.0),
        (51.0, 100.0),
        (0.13, 0.2),
        (0.0007, 0.001),
        (3.0e9, 5.0e9),
        (0.0, 1.0),
        (f64::NAN, 1.0),
    ] {
        assert_eq!(nice_step(raw), want, "nice_step({raw})");
    }
}

/// Ranges of every size and sign, including a very wide one and very narrow ones.
fn sample_ranges() -> Vec<(f64, f64)> {
    let mut ranges = vec![
        (0.0, 1.0),
        (0.0, 100.0),
        (0.0, 97.3),
        (3.0, 4.0),
        (-1.0, 1.0),
        (-37.5, 12.25),
        (0.001, 1e12),
        (123_456_789.123, 987_654_321.987),
        (1_000_000.0, 1_000_001.0),
        (0.000_123, 0.000_456),
        (-5e-9, -1e-9),
    ];
    let mut x = 0.123_456_7f64;
    for k in -6..10 {
        for span in [0.1, 0.37, 1.0, 2.9, 7.7] {
            x = (x * 9301.0 + 0.4929).fract();
            let lo = (x - 0.5) * 10f64.powi(k);
            ranges.push((lo, lo + span * 10f64.powi(k)));
        }
    }
    ranges
}

#[test]
fn linear_ticks_are_nice_evenly_spaced_and_cover_the_range() {
    for (lo, hi) in sample_ranges() {
        let a = Axis::linear(lo, hi, MAX_TICKS);
        let n = a.ticks.len();
        assert!((4..=MAX_TICKS).contains(&n), "{lo}..{hi}: {n} ticks {a:?}");
        let m = mantissa(a.step);
        assert!(
            [1.0, 2.0, 5.0].iter().any(|&want| (m - want).abs() < 1e-9),
            "{lo}..{hi}: step {}",
            a.step
        );
        assert!(a.min <= lo && a.max >= hi, "{lo}..{hi}: axis {a:?}");
        assert_eq!(a.min, a.ticks[0]);
        assert_eq!(a.max, a.ticks[n - 1]);
        for (i, &t) in a.ticks.iter().enumerate() {
            let k = t / a.step;
            assert!(
                (k - k.round()).abs() < 1e-6,
                "{t} is not a multiple of {}",
                a.step
            );
            let expect = a.min + i as f64 * a.step;
            assert!(
                (t - expect).abs() <= a.step * 1e-6,
                "{lo}..{hi}: tick {i} is {t}"
            );
        }
        // The labels tell the ticks apart.
        let labels = a.labels(TickFormat::Number);
        for pair in labels.windows(2) {
            assert_ne!(pair[0], pair[1], "{lo}..{hi}: {labels:?}");
        }
    }
}

#[test]
fn linear_ticks_come_out_exact_for_decimal_steps() {
    let a = Axis::linear(0.0, 0.7, MAX_TICKS);
    assert_eq!(a.ticks, vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
    assert_eq!(
        Axis::linear(0.0, 100.0, MAX_TICKS).ticks,
        vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    );
}

#[test]
fn degenerate_linear_ranges_are_widened() {
    assert_eq!(Axis::linear(0.0, 0.0, MAX_TICKS).ticks.last(), Some(&1.0));
    let a = Axis::linear(5.0, 5.0, MAX_TICKS);
    assert!(a.min < 5.0 && a.max > 5.0, "{a:?}");
    let a = Axis::linear(f64::NAN, f64::INFINITY, MAX_TICKS);
    assert_eq!((a.min, a.max), (0.0, 1.0));
    // Reversed bounds are accepted.
    assert_eq!(Axis::linear(10.0, 0.0, MAX_TICKS).max, 10.0);
}

fn is_power_of_ten(v: f64) -> bool {
    let e = v.log10();
    (e - e.round()).abs() < 1e-9
}

#[test]
fn log_ticks_sit_on_decades() {
    let a = Axis::log10(3.0, 4500.0, MAX_TICKS);
    assert_eq!(a.ticks, vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
    assert_eq!((a.min, a.max), (1.0, 10000.0));
    assert_eq!(a.minor.len(), 4 * 8);
    assert!(a.minor.contains(&200.0) && a.minor.contains(&9000.0));

    // Huge ranges label every few decades.
    for (lo, hi) in [(1e-3, 1e12), (1.0, 1e30), (1e-200, 1e200), (0.5, 2e9)] {
        let a = Axis::log10(lo, hi, MAX_TICKS);
        assert!(a.ticks.len() <= MAX_TICKS, "{lo}..{hi}: {:?}", a.ticks);
        assert!(a.ticks.len() >= 3, "{lo}..{hi}: {:?}", a.ticks);
        assert!(a.min <= lo * 1.000_001 && a.max >= hi / 1.000_001);
        let every = a.step as i32;
        for &t in &a.ticks {
            assert!(is_power_of_ten(t), "{t}");
            assert_eq!(t.log10().round() as i32 % every, 0, "{t} every {every}");
        }
    }

    // One or two decades: 1, 2, 5 labelled.
    assert_eq!(
        Axis::log10(2.0, 8.0, MAX_TICKS).ticks,
        vec![1.0, 2.0, 5.0, 10.0]
    );
    assert_eq!(Axis::log10(15.0, 900.0, MAX_TICKS).ticks.len(), 7);
    // A single value: a decade either side of a power of ten, its decade otherwise.
    assert_eq!(
        Axis::log10(100.0, 100.0, MAX_TICKS).ticks,
        vec![10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
    );
    let a = Axis::log10(50.0, 50.0, MAX_TICKS);
    assert_eq!((a.min, a.max), (10.0, 100.0));
    // Bad bounds fall back to what can be drawn.
    let a = Axis::log10(-1.0, 0.0, MAX_TICKS);
    assert_eq!((a.min, a.max), (1.0, 10.0));
}

#[test]
fn mapping_is_monotone_and_hits_the_ends() {
    let axes = [
        Axis::linear(-3.0, 17.0, MAX_TICKS),
        Axis::log10(0.02, 3e7, MAX_TICKS),
    ];
    for a in &axes {
        assert_eq!(a.map(a.min, 10.0, 110.0), 10.0);
        assert!((a.map(a.max, 10.0, 110.0) - 110.0).abs() < 1e-9);
        // Drawing downwards (a y axis) reverses the order.
        assert!((a.map(a.max, 300.0, 50.0) - 50.0).abs() < 1e-9);
        let values: Vec<f64> = (0..=200)
            .map(|i| a.min + (a.max - a.min) * (i as f64 / 200.0).powi(3))
            .filter(|&v| a.accepts(v))
            .collect();
        for pair in values.windows(2) {
            if pair[0] < pair[1] {
                assert!(a.map(pair[0], 0.0, 700.0) < a.map(pair[1], 0.0, 700.0));
                assert!(a.map(pair[0], 300.0, 0.0) > a.map(pair[1], 300.0, 0.0));
            }
        }
    }
    let log = &axes[1];
    assert!(!log.accepts(0.0) && !log.accepts(-1.0) && log.accepts(1e-9));
    assert!(log.fraction(0.0).is_nan());
    // Equal ratios, equal distances.
    let d1 = log.map(10.0, 0.0, 1.0) - log.map(1.0, 0.0, 1.0);
    let d2 = log.map(1e4, 0.0, 1.0) - log.map(1e3, 0.0, 1.0);
    assert!((d1 - d2).abs() < 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Number formats.

#[test]
fn numbers_get_short_labels() {
    assert_eq!(format_number(0.0), "0");
    assert_eq!(format_number(12.0), "12");
    assert_eq!(format_number(0.5), "0.5");
    assert_eq!(format_number(1200.0), "1.2k");
    assert_eq!(format_number(1234.5), "1.23k");
    assert_eq!(format_number(3.4e6), "3.4M");
    assert_eq!(format_number(-1500.0), "-1.5k");
    assert_eq!(format_number(999.96), "1k");
    assert_eq!(format_number(7.25e9), "7.25G");
    assert_eq!(format_number(2e12), "2T");
    assert_eq!(format_number(1.5e-6), "1.5e-6");

    assert_eq!(format_micros(12.0), "12 µs");
    assert_eq!(format_micros(0.5), "500 ns");
    assert_eq!(format_micros(1500.0), "1.5 ms");
    assert_eq!(format_micros(2.5e6), "2.5 s");
    assert_eq!(format_micros(0.0), "0");

    let nines = |v| TickFormat::Nines.value(v);
    assert_eq!(nines(1.0), "0%");
    assert_eq!(nines(2.0), "50%");
    assert_eq!(nines(10.0), "90%");
    assert_eq!(nines(100.0), "99%");
    assert_eq!(nines(1000.0), "99.9%");
    assert_eq!(nines(1e6), "99.9999%");
}

#[test]
fn tick_labels_use_the_step_for_their_decimals() {
    let tick = |v, step| TickFormat::Number.tick(v, step);
    assert_eq!(tick(250_000.0, 50_000.0), "250k");
    assert_eq!(tick(1.5, 0.5), "1.5");
    assert_eq!(tick(2.0, 0.5), "2");
    assert_eq!(tick(0.3, 0.1), "0.3");
    assert_eq!(tick(1_000_000.2, 0.2), "1.0000002M");
    assert_eq!(TickFormat::Micros.tick(10_050.0, 50.0), "10.05 ms");
}

#[test]
fn many_digit_tick_labels_fit_side_by_side() {
    for (lo, hi) in sample_ranges() {
        let a = Axis::linear(lo, hi, MAX_TICKS);
        let widths: f64 = a
            .labels(TickFormat::Number)
            .iter()
            .map(|l| text_width(l, TICK_SIZE) + 8.0)
            .sum();
        assert!(widths < WIDTH - 120.0, "{lo}..{hi}: labels {widths} wide");
    }
}

// ---------------------------------------------------------------------------------------------
// Bar charts.

fn ycsb_bars() -> BarChart {
    BarChart {
        title: "YCSB throughput <&> \"quoted\"".into(),
        y_label: "operations/s".into(),
        categories: ["A", "B", "C", "D", "E", "F"].map(String::from).to_vec(),
        series: vec![
            (
                "Nacre (emulated)".into(),
                vec![1.25e6, 2.5e6, 3.1e6, 2.9e6, 4.1e5, 1.1e6],
            ),
            (
                "RocksDB sync=0".into(),
                vec![4.0e5, 9.5e5, 1.2e6, f64::NAN, 1.5e5, 3.3e5],
            ),
        ],
        value_labels: true,
        y_format: TickFormat::Number,
    }
}

#[test]
fn bar_chart_has_one_rect_per_bar_and_escaped_text() {
    let chart = ycsb_bars();
    let doc = chart.render().unwrap();
    let elements = checked(&doc);
    let bars = with_class(&elements, "bar");
    assert_eq!(bars.len(), 11, "one rect per non-NaN value");
    assert!(doc.contains("YCSB throughput &lt;&amp;&gt; &quot;quoted&quot;"));
    assert!(!doc.contains("<&>"));
    let texts = texts(&elements);
    for want in [
        "A",
        "F",
        "Nacre (emulated)",
        "RocksDB sync=0",
        "operations/s",
        "n/a",
    ] {
        assert!(texts.contains(&want), "no text {want:?} in {texts:?}");
    }
    assert!(texts.contains(&"1.25M") && texts.contains(&"150k"));
    // Bars stay inside the plot, taller for larger values.
    for bar in &bars {
        let (y, h) = (bar.num("y"), bar.num("height"));
        assert!(y >= PLOT_TOP - 0.01 && y + h <= PLOT_TOP + PLOT_HEIGHT + 0.01);
    }
    let height = |i: usize| bars[i].num("height");
    assert!(height(2) > height(1) && height(1) > height(0));
    // Value labels fit under the title.
    for t in elements.iter().filter(|e| e.name == "text") {
        if let Some(y) = t.attrs.get("y") {
            assert!(y.parse::<f64>().unwrap() > 28.0 || t.attrs.contains_key("font-weight"));
        }
    }
}

#[test]
fn bar_chart_without_value_labels_has_none() {
    let chart = BarChart {
        value_labels: false,
        ..ycsb_bars()
    };
    let elements = checked(&chart.render().unwrap());
    let texts = texts(&elements);
    assert!(!texts.contains(&"1.25M") && !texts.contains(&"n/a"));
}

#[test]
fn bar_chart_edge_cases_render() {
    let single = BarChart {
        title: "one".into(),
        y_label: "v".into(),
        categories: vec!["only".into()],
        series: vec![("s".into(), vec![42.0])],
        value_labels: true,
        ..Default::default()
    };
    let elements = checked(&single.render().unwrap());
    assert_eq!(with_class(&elements, "bar").len(), 1);

    let zeros = BarChart {
        series: vec![("a".into(), vec![0.0, 0.0]), ("b".into(), vec![0.0, 0.0])],
        categories: vec!["x".into(), "y".into()],
        ..single.clone()
    };
    let elements = checked(&zeros.render().unwrap());
    let bars = with_class(&elements, "bar");
    assert_eq!(bars.len(), 4);
    assert!(bars.iter().all(|b| b.num("height") == 0.0));

    let mixed = BarChart {
        series: vec![("delta".into(), vec![-3.5, 7.25, 0.0])],
        categories: vec!["p".into(), "q".into(), "r".into()],
        ..single.clone()
    };
    let elements = checked(&mixed.render().unwrap());
    let bars = with_class(&elements, "bar");
    assert_eq!(bars.len(), 3);
    // The negative bar hangs from the zero line where the positive one stands.
    assert!((bars[0].num("y") - (bars[1].num("y") + bars[1].num("height"))).abs() < 0.01);

    let huge = BarChart {
        series: vec![("s".into(), vec![1.0, 1e12, 123_456_789.123])],
        y_format: TickFormat::Micros,
        ..mixed.clone()
    };
    checked(&huge.render().unwrap());

    // Many series and long category names: colours repeat lighter, labels turn.
    let crowded = BarChart {
        categories: (0..6)
            .map(|i| format!("workload {i} with a rather long name"))
            .collect(),
        series: (0..10)
            .map(|j| {
                (
                    format!("series {j}"),
                    (0..6).map(|i| (i * j) as f64).collect(),
                )
            })
            .collect(),
        ..single.clone()
    };
    let doc = crowded.render().unwrap();
    let elements = checked(&doc);
    assert_eq!(with_class(&elements, "bar").len(), 60);
    assert!(doc.contains("fill-opacity"));
    assert!(doc.contains("rotate(-35"));
}

#[test]
fn bar_chart_errors() {
    let base = ycsb_bars();
    let err = |c: BarChart| c.render().unwrap_err();
    assert!(matches!(
        err(BarChart {
            categories: vec![],
            ..base.clone()
        }),
        ChartError::Empty(_)
    ));
    assert!(matches!(
        err(BarChart {
            series: vec![],
            ..base.clone()
        }),
        ChartError::Empty(_)
    ));
    assert!(matches!(
        err(BarChart {
            series: vec![("short".into(), vec![1.0])],
            ..base.clone()
        }),
        ChartError::LengthMismatch {
            values: 1,
            categories: 6,
            ..
        }
    ));
    let mut inf = base.clone();
    inf.series[1].1[2] = f64::INFINITY;
    assert!(matches!(
        err(inf),
        ChartError::NonFinite {
            what: "bar",
            index: 2,
            ..
        }
    ));
    let nan_only = BarChart {
        series: vec![
            ("a".into(), vec![f64::NAN; 6]),
            ("b".into(), vec![f64::NAN; 6]),
        ],
        ..base.clone()
    };
    let e = err(nan_only);
    assert!(matches!(e, ChartError::Empty(_)));
    assert!(e.to_string().contains("NaN"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Line charts.

/// A latency CDF: `n` latencies spread log-uniformly over 1 µs .. 10 ms, percentile on y.
fn cdf(name: &str, n: usize, scale: f64) -> Series {
    let points = (0..n)
        .map(|i| {
            let q = i as f64 / (n - 1) as f64;
            (scale * 10f64.powf(4.0 * q * q), 100.0 * q)
        })
        .collect();
    Series::new(name, points)
}

fn cdf_chart() -> LineChart {
    LineChart {
        title: "Read latency <CDF> & more".into(),
        x_label: "latency".into(),
        y_label: "percentile".into(),
        x_scale: Scale::Log10,
        y_scale: Scale::Linear,
        series: vec![cdf("Nacre", 500, 1.0), cdf("RocksDB", 500, 3.0)],
        y_from_zero: true,
        x_format: TickFormat::Micros,
        y_format: TickFormat::Number,
    }
}

#[test]
fn line_chart_has_one_path_per_series() {
    let doc = cdf_chart().render().unwrap();
    let elements = checked(&doc);
    let paths = with_class(&elements, "series");
    assert_eq!(paths.len(), 2);
    assert!(paths.iter().all(|p| p.name == "path"));
    assert!(paths[0].attrs["d"].starts_with('M'));
    assert!(doc.contains("Read latency &lt;CDF&gt; &amp; more"));
    let texts = texts(&elements);
    for want in [
        "1 µs", "10 µs", "1 ms", "10 ms", "0", "100", "Nacre", "RocksDB",
    ] {
        assert!(texts.contains(&want), "no text {want:?} in {texts:?}");
    }
    // Many points, no markers.
    assert!(!doc.contains("<circle"));
}

#[test]
fn line_chart_paths_follow_the_data() {
    // A rising series: x coordinates grow, y coordinates (drawn downwards) shrink.
    let chart = LineChart {
        series: vec![Series::new(
            "up",
            (0..50).map(|i| (i as f64, (i * i) as f64)).collect(),
        )],
        x_scale: Scale::Linear,
        ..cdf_chart()
    };
    let elements = checked(&chart.render().unwrap());
    let d = &with_class(&elements, "series")[0].attrs["d"];
    let coords: Vec<(f64, f64)> = d
        .split(['M', 'L'])
        .filter(|s| !s.is_empty())
        .map(|p| {
            let (x, y) = p.split_once(' ').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert!(coords.len() > 10);
    for pair in coords.windows(2) {
        assert!(pair[1].0 > pair[0].0 && pair[1].1 <= pair[0].1, "{pair:?}");
    }
}

#[test]
fn line_chart_edge_cases_render() {
    // A single point: a path and a dot.
    let single = LineChart {
        series: vec![Series::new("one", vec![(5.0, 7.0)])],
        ..cdf_chart()
    };
    let doc = single.render().unwrap();
    let elements = checked(&doc);
    assert_eq!(with_class(&elements, "series").len(), 1);
    assert_eq!(doc.matches("<circle").count(), 1);

    // All-zero y values, linear axes.
    let flat = LineChart {
        x_scale: Scale::Linear,
        y_from_zero: false,
        series: vec![Series::new(
            "idle",
            (0..10).map(|i| (i as f64, 0.0)).collect(),
        )],
        ..cdf_chart()
    };
    checked(&flat.render().unwrap());

    // Huge ranges on both log axes, with a percentile-spectrum x axis.
    let spectrum = LineChart {
        x_scale: Scale::Log10,
        y_scale: Scale::Log10,
        x_format: TickFormat::Nines,
        y_format: TickFormat::Micros,
        series: vec![Series::new(
            "spectrum",
            (0..60)
                .map(|i| {
                    (
                        10f64.powf(i as f64 / 10.0),
                        10f64.powf(i as f64 / 4.0 - 3.0),
                    )
                })
                .collect(),
        )],
        ..cdf_chart()
    };
    let doc = spectrum.render().unwrap();
    let elements = checked(&doc);
    let texts = texts(&elements);
    assert!(texts.contains(&"99.9%"), "{texts:?}");

    // Non-positive coordinates on a log axis are skipped and break the line.
    let gappy = LineChart {
        series: vec![Series::new(
            "gappy",
            vec![
                (0.0, 1.0),
                (1.0, 2.0),
                (2.0, 3.0),
                (-1.0, 4.0),
                (4.0, 5.0),
                (8.0, 6.0),
            ],
        )],
        ..cdf_chart()
    };
    let doc = gappy.render().unwrap();
    let elements = checked(&doc);
    let d = &with_class(&elements, "series")[0].attrs["d"];
    assert_eq!(d.matches('M').count(), 2, "{d}");
    assert_eq!(doc.matches("<circle").count(), 4);

    // An empty series keeps its legend entry but draws nothing.
    let with_empty = LineChart {
        series: vec![cdf("full", 20, 1.0), Series::new("empty", vec![])],
        ..cdf_chart()
    };
    let doc = with_empty.render().unwrap();
    let elements = checked(&doc);
    assert_eq!(with_class(&elements, "series").len(), 1);
    assert!(texts_of(&elements).contains(&"empty"));

    // Throughput over time: plain linear axes, big numbers.
    let throughput = LineChart {
        title: "fillrandom".into(),
        x_label: "seconds".into(),
        y_label: "ops/s".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        series: vec![Series::new(
            "Nacre",
            (0..120)
                .map(|s| (s as f64, 1.234_567e6 + 1e5 * (s as f64 / 7.0).sin()))
                .collect(),
        )],
        y_from_zero: true,
        ..Default::default()
    };
    let elements = checked(&throughput.render().unwrap());
    assert!(
        texts_of(&elements).contains(&"1.2M"),
        "{:?}",
        texts_of(&elements)
    );
}

fn texts_of(elements: &[Element]) -> Vec<&str> {
    texts(elements)
}

#[test]
fn long_series_names_wrap_the_legend() {
    let short = cdf_chart();
    let long = LineChart {
        series: (0..5)
            .map(|i| {
                cdf(
                    &format!("series {i} with a long descriptive name, sync=1, 16 threads"),
                    20,
                    1.0 + i as f64,
                )
            })
            .chain([cdf(&"x".repeat(300), 20, 9.0)])
            .collect(),
        ..cdf_chart()
    };
    let height = |c: &LineChart| {
        let doc = c.render().unwrap();
        checked(&doc)[0].attrs["height"].parse::<f64>().unwrap()
    };
    assert!(height(&long) >= height(&short) + 3.0 * 20.0);
    let doc = long.render().unwrap();
    let elements = checked(&doc);
    assert!(texts(&elements).iter().any(|t| t.ends_with('…')));
    // Every legend text ends inside the chart.
    let legend = elements
        .iter()
        .filter(|e| e.name == "text" && (e.text.starts_with("series") || e.text.starts_with('x')));
    assert_eq!(legend.clone().count(), 6);
    for t in legend {
        {
            let right = t.num("x") + text_width(&t.text, 13.0);
            assert!(right <= WIDTH, "{} ends at {right}", t.text);
        }
    }
}

#[test]
fn line_chart_errors() {
    let base = cdf_chart();
    let err = |c: LineChart| c.render().unwrap_err();
    assert!(matches!(
        err(LineChart {
            series: vec![],
            ..base.clone()
        }),
        ChartError::Empty(_)
    ));
    assert!(matches!(
        err(LineChart {
            series: vec![Series::new("a", vec![]), Series::new("b", vec![])],
            ..base.clone()
        }),
        ChartError::Empty(_)
    ));
    assert!(matches!(
        err(LineChart {
            series: vec![Series::new("nan", vec![(1.0, f64::NAN)])],
            ..base.clone()
        }),
        ChartError::NonFinite {
            what: "point y",
            index: 0,
            ..
        }
    ));
    assert!(matches!(
        err(LineChart {
            series: vec![Series::new("inf", vec![(1.0, 1.0), (f64::INFINITY, 2.0)])],
            ..base.clone()
        }),
        ChartError::NonFinite {
            what: "point x",
            index: 1,
            ..
        }
    ));
    assert_eq!(
        err(LineChart {
            series: vec![Series::new("zero", vec![(0.0, 1.0), (-2.0, 3.0)])],
            ..base.clone()
        }),
        ChartError::NoPositive { axis: "x" }
    );
    assert_eq!(
        err(LineChart {
            y_scale: Scale::Log10,
            series: vec![Series::new("neg", vec![(1.0, -1.0)])],
            ..base.clone()
        }),
        ChartError::NoPositive { axis: "y" }
    );
    // No single point is positive on both log axes.
    assert!(matches!(
        err(LineChart {
            y_scale: Scale::Log10,
            series: vec![Series::new("apart", vec![(1.0, -1.0), (-1.0, 1.0)])],
            ..base.clone()
        }),
        ChartError::NoPositive { .. }
    ));
}

// ---------------------------------------------------------------------------------------------
// Files.

/// Writes a sample of each chart kind to a temporary directory (and to the directory named by
/// `NACRE_CHART_SAMPLES`, if set, for looking at them) and checks their sizes.
#[test]
fn sample_files_are_small() {
    let dir = tempfile::tempdir().unwrap();
    let big_cdf = LineChart {
        series: vec![cdf("Nacre", 20_000, 1.0), cdf("RocksDB", 20_000, 2.5)],
        ..cdf_chart()
    };
    let spectrum = LineChart {
        title: "Update latency by percentile".into(),
        x_label: "percentile".into(),
        y_label: "latency".into(),
        x_scale: Scale::Log10,
        y_scale: Scale::Log10,
        x_format: TickFormat::Nines,
        y_format: TickFormat::Micros,
        series: (0..3)
            .map(|j| {
                Series::new(
                    format!("engine {j}"),
                    (0..400)
                        .map(|i| {
                            let v = 10f64.powf(i as f64 / 100.0);
                            (v, (2.0 + j as f64) * v.powf(0.6 + 0.1 * j as f64))
                        })
                        .collect(),
                )
            })
            .collect(),
        y_from_zero: false,
    };
    let throughput = LineChart {
        title: "fillrandom throughput over time".into(),
        x_label: "time (s)".into(),
        y_label: "ops/s".into(),
        series: (0..2)
            .map(|j| {
                Series::new(
                    ["Nacre (emulated), batch_wait=20 µs", "RocksDB sync=1"][j],
                    (0..=120)
                        .map(|s| {
                            let t = s as f64;
                            (t, (1.0 - 0.6 * j as f64) * 1.234e6 + 8e4 * (t / 7.0).sin())
                        })
                        .collect(),
                )
            })
            .collect(),
        y_from_zero: true,
        ..Default::default()
    };
    let crowded = BarChart {
        title: "Many series".into(),
        y_label: "latency".into(),
        categories: (0..6).map(|i| format!("workload {i}, zipfian")).collect(),
        series: (0..10)
            .map(|j| {
                (
                    format!("configuration {j}"),
                    (0..6).map(|i| 1.5 * ((i + 1) * (j + 1)) as f64).collect(),
                )
            })
            .collect(),
        value_labels: true,
        y_format: TickFormat::Micros,
    };
    let samples = [
        ("bars.svg", ycsb_bars().render().unwrap()),
        ("bars-crowded.svg", crowded.render().unwrap()),
        ("cdf.svg", cdf_chart().render().unwrap()),
        ("cdf-20k-points.svg", big_cdf.render().unwrap()),
        ("spectrum.svg", spectrum.render().unwrap()),
        ("throughput.svg", throughput.render().unwrap()),
    ];
    let keep = std::env::var_os("NACRE_CHART_SAMPLES");
    for (name, doc) in &samples {
        let path = dir.path().join(name);
        std::fs::write(&path, doc).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!((1_000..100_000).contains(&size), "{name}: {size} bytes");
        checked(&std::fs::read_to_string(&path).unwrap());
        if let Some(keep) = &keep {
            std::fs::write(std::path::Path::new(keep).join(name), doc).unwrap();
        }
    }
}
