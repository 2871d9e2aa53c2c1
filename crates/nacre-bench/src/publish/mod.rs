//! `nacre-bench report`: turns the JSON lines of `nacre-bench ycsb` and `nacre-bench
//! recovery` runs into Markdown tables and SVG charts: throughput bars per workload and
//! durability pairing, latency CDFs per workload, throughput over time, restart time per data
//! size. The Markdown goes to stdout, or replaces the block between [`BEGIN`] and [`END`] in
//! a page (docs/benchmarks.md), appended if the page has none; charts go to an image directory
//! (docs/img/) and the Markdown links them relative to the page.
//!
//! Rows measured more than once (the same store, workload and parameters in several runs)
//! are reduced to the run with the median throughput (median restart time for recovery).

mod charts;
mod recovery;
mod ycsb;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{io_err, BenchError, Result};

/// Start marker of the generated block in a page.
pub const BEGIN: &str = "<!-- nacre-bench report: begin (generated; edit the runs, not this) -->";
/// End marker of the generated block.
pub const END: &str = "<!-- nacre-bench report: end -->";

/// Parameters of `nacre-bench report`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct ReportConfig {
    /// JSON-lines files written by `--json` of `nacre-bench ycsb` and `recovery`.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Page whose generated block is replaced (default: print the Markdown).
    #[arg(long)]
    pub doc: Option<PathBuf>,
    /// Directory for the SVG charts.
    #[arg(long, default_value = "docs/img")]
    pub img_dir: PathBuf,
}

/// Reads every JSON line of `paths`.
pub fn read_rows(paths: &[PathBuf]) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(io_err("read", p))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                BenchError::InvalidParams(format!("{}:{}: not a JSON row: {e}", p.display(), i + 1))
            })?;
            if !v["bench"].is_string() {
                return Err(BenchError::InvalidParams(format!(
                    "{}:{}: no \"bench\" field: not written by nacre-bench",
                    p.display(),
                    i + 1
                )));
            }
            rows.push(v);
        }
    }
    Ok(rows)
}

/// A chart to write: file name and SVG text.
pub struct Chart {
    /// File name within the image directory.
    pub file: String,
    /// The SVG document.
    pub svg: String,
}

/// The Markdown (image links relative to `link_dir`) and the charts for `rows`.
pub fn render(rows: &[Value], link_dir: &str) -> Result<(String, Vec<Chart>)> {
    let mut md = String::new();
    let mut charts = Vec::new();
    let ycsb: Vec<&Value> = rows.iter().filter(|r| r["bench"] == "ycsb").collect();
    let rec: Vec<&Value> = rows.iter().filter(|r| r["bench"] == "recovery").collect();
    if ycsb.is_empty() && rec.is_empty() {
        return Err(BenchError::InvalidParams(
            "no ycsb or recovery rows in the inputs".into(),
        ));
    }
    if !ycsb.is_empty() {
        ycsb::render(&ycsb, link_dir, &mut md, &mut charts)?;
    }
    if !rec.is_empty() {
        recovery::render(&rec, link_dir, &mut md, &mut charts)?;
    }
    Ok((md, charts))
}

/// `text` with the block between [`BEGIN`] and [`END`] replaced by `block` (appended if the
/// markers are missing).
pub fn splice(text: &str, block: &str) -> Result<String> {
    let body = format!("{BEGIN}\n{block}{END}\n");
    match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if b < e => {
            let after = &text[e + END.len()..];
            let after = after.strip_prefix('\n').unwrap_or(after);
            Ok(format!("{}{body}{after}", &text[..b]))
        }
        (None, None) => {
            let sep = if text.ends_with('\n') || text.is_empty() {
                ""
            } else {
                "\n"
            };
            Ok(format!("{text}{sep}\n{body}"))
        }
        _ => Err(BenchError::InvalidParams(
            "the page has one report marker without the other, or them out of order".into(),
        )),
    }
}

/// Relative path from the directory of `doc` to `img_dir` (both relative to the working
/// directory or both absolute), for image links.
fn link_dir(doc: Option<&Path>, img_dir: &Path) -> String {
    let base = doc.and_then(Path::parent).unwrap_or(Path::new(""));
    match img_dir.strip_prefix(base) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => img_dir.display().to_string(),
    }
}

/// `nacre-bench report`.
pub fn main(cfg: &ReportConfig) -> Result<()> {
    let rows = read_rows(&cfg.inputs)?;
    let (md, charts) = render(&rows, &link_dir(cfg.doc.as_deref(), &cfg.img_dir))?;
    std::fs::create_dir_all(&cfg.img_dir).map_err(io_err("create", &cfg.img_dir))?;
    for c in &charts {
        let p = cfg.img_dir.join(&c.file);
        std::fs::write(&p, &c.svg).map_err(io_err("write", &p))?;
    }
    tracing::info!(charts = charts.len(), dir = %cfg.img_dir.display(), "wrote charts");
    match &cfg.doc {
        Some(doc) => {
            let text = match std::fs::read_to_string(doc) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(io_err("read", doc)(e)),
            };
            std::fs::write(doc, splice(&text, &md)?).map_err(io_err("write", doc))?;
            tracing::info!(doc = %doc.display(), "replaced the report block");
        }
        None => print!("{md}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
