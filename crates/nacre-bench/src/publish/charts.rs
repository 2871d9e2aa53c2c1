//! Helpers the report renderers share: grouping rows, medians, slugs, chart plumbing.

use serde_json::Value;

use super::Chart;
use crate::chart::ChartError;
use crate::error::{BenchError, Result};

/// A file-name-safe version of `s`: lowercase letters and digits, runs of anything else as
/// one `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Values in first-appearance order without repeats.
pub fn ordered<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The row of `rows` whose `key` value is the median (the lower middle for an even count).
pub fn median_row<'a>(rows: &[&'a Value], key: impl Fn(&Value) -> f64) -> Option<&'a Value> {
    let mut v: Vec<(f64, &Value)> = rows
        .iter()
        .map(|r| (key(r), *r))
        .filter(|(x, _)| x.is_finite())
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.get(v.len().saturating_sub(1) / 2).map(|&(_, r)| r)
}

/// A string field, or "".
pub fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter().fold(v, |v, k| &v[*k]).as_str().unwrap_or("")
}

/// A number field, or NaN.
pub fn number(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// Adds a rendered chart and its Markdown image link.
pub fn push_chart(
    md: &mut String,
    charts: &mut Vec<Chart>,
    link_dir: &str,
    file: String,
    alt: &str,
    svg: std::result::Result<String, ChartError>,
) -> Result<()> {
    let svg = svg.map_err(|e| BenchError::InvalidParams(format!("chart {file}: {e}")))?;
    let link = if link_dir.is_empty() {
        file.clone()
    } else {
        format!("{link_dir}/{file}")
    };
    md.push_str(&format!("![{alt}]({link})\n\n"));
    charts.push(Chart { file, svg });
    Ok(())
}
