//! `nacre-server --import-rdb FILE` and `--export-rdb FILE`: open the pool at `--dir`, move
//! the data, print progress on stderr about once a second and a summary line at the end,
//! close the pool cleanly. A failure is printed with how many keys were written before it,
//! and the import called incomplete; the caller exits non-zero.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{mib, thousands, OfflinePool};
use crate::config::Config;

/// Keys per database, as `db0=12,345 db3=2` (databases with keys only).
fn per_db(counts: &[u64]) -> String {
    let parts: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(db, n)| format!("db{db}={}", thousands(*n)))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" ")
    }
}

/// Imports `file` into the pool of `cfg`; false if it failed (the message is printed).
pub fn import(cfg: &Config, file: &Path) -> bool {
    let pool = match OfflinePool::open(cfg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "import of {} failed: cannot open the pool: {e}",
                file.display()
            );
            return false;
        }
    };
    let t0 = Instant::now();
    let mut last = Instant::now();
    let mut report = |p: &super::import::Progress| {
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        last = Instant::now();
        let pct = if p.total > 0 {
            format!(" ({:.0}%)", p.bytes as f64 * 100.0 / p.total as f64)
        } else {
            String::new()
        };
        eprintln!(
            "importing {}: {} keys, {} of {}{pct}, {:.0} s",
            file.display(),
            thousands(p.keys),
            mib(p.bytes),
            mib(p.total),
            t0.elapsed().as_secs_f64()
        );
    };
    let r = super::import::import(&pool, file, &mut report);
    let closed = pool.close();
    match (r, closed) {
        (Ok(s), Ok(())) => {
            eprintln!(
                "imported {} keys from {} ({}, RDB version {}, checksum {}) in {:.2} s: {}; skipped {} expired and {} empty; {} function libraries",
                thousands(s.keys()),
                file.display(),
                mib(s.bytes),
                s.version,
                if s.checked { "verified" } else { "absent" },
                s.elapsed.as_secs_f64(),
                per_db(&s.per_db),
                thousands(s.expired),
                thousands(s.empty),
                s.functions
            );
            tracing::info!(
                keys = s.keys(),
                expired = s.expired,
                empty = s.empty,
                secs = s.elapsed.as_secs_f64(),
                "RDB import complete"
            );
            true
        }
        (Ok(s), Err(e)) => {
            eprintln!(
                "import of {}: {} keys written and durable, but the pool did not close cleanly: {e}",
                file.display(),
                thousands(s.keys())
            );
            false
        }
        (Err(f), closed) => {
            eprintln!(
                "import of {} FAILED: {}\n{} key{} written before the error: the import is INCOMPLETE",
                file.display(),
                f.error,
                thousands(f.written),
                if f.written == 1 { " was" } else { "s were" }
            );
            if let Err(e) = closed {
                eprintln!("and the pool did not close cleanly: {e}");
            }
            tracing::error!(error = %f.error, written = f.written, "RDB import failed");
            false
        }
    }
}

/// Exports the pool of `cfg` to `file`; false if it failed (the message is printed).
pub fn export(cfg: &Config, file: &Path) -> bool {
    let pool = match OfflinePool::open(cfg) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "export to {} failed: cannot open the pool: {e}",
                file.display()
            );
            return false;
        }
    };
    let t0 = Instant::now();
    let mut report = |keys: u64, bytes: u64| {
        eprintln!(
            "exporting to {}: {} keys, {}, {:.0} s",
            file.display(),
            thousands(keys),
            mib(bytes),
            t0.elapsed().as_secs_f64()
        );
    };
    let r = super::export::export(&pool.store, file, &mut report);
    let closed = pool.close();
    match r {
        Ok(s) => {
            eprintln!(
                "exported {} keys to {} ({}) in {:.2} s: {}; {} function libraries",
                thousands(s.keys()),
                file.display(),
                mib(s.bytes),
                s.elapsed.as_secs_f64(),
                per_db(&s.per_db),
                s.functions
            );
            if let Err(e) = closed {
                eprintln!("the pool did not close cleanly: {e}");
                return false;
            }
            true
        }
        Err(e) => {
            eprintln!(
                "export to {} FAILED: {e}; no file was written (any earlier one is unchanged)",
                file.display()
            );
            false
        }
    }
}
