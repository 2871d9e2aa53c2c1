//! The RocksDB anchor: runs Debian's `db_bench` (RocksDB 7.8.3) `fillrandom` in a directory
//! this run creates and removes, and parses its result line.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io_err, BenchError, Result};

/// What one `db_bench` run reported.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DbBenchResult {
    /// Microseconds per operation (per thread).
    pub micros_per_op: f64,
    /// Operations per second (all threads).
    pub ops_per_sec: f64,
}

/// Parameters of one `fillrandom` run.
#[derive(Clone, Debug)]
pub struct FillArgs<'a> {
    /// The `db_bench` binary.
    pub exe: &'a Path,
    /// Parent directory of the database directory (on disk).
    pub dir: &'a Path,
    /// `--sync`.
    pub sync: bool,
    /// `--threads`.
    pub threads: usize,
    /// `--num` (per thread).
    pub num_per_thread: u64,
    /// `--key_size`.
    pub key_size: usize,
    /// `--value_size`.
    pub value_size: usize,
}

/// A directory this run created; removed with its contents when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Claims `path` for removal on drop.
    pub fn new(path: PathBuf) -> TempDir {
        TempDir(path)
    }

    /// Claims `path` for removal on drop after removing whatever a previous run left there.
    pub fn fresh(path: PathBuf) -> Result<TempDir> {
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io_err("remove stale directory", &path)(e))
            }
            _ => Ok(TempDir(path)),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %self.0.display(), error = %e, "cannot remove"),
        }
    }
}

/// Why `exe` cannot be run, if it cannot.
pub fn unavailable(exe: &Path) -> Option<String> {
    match std::fs::metadata(exe) {
        Ok(m) if m.is_file() => None,
        Ok(_) => Some(format!("{} is not a file", exe.display())),
        Err(e) => Some(format!(
            "{}: {e} (install Debian's rocksdb-tools)",
            exe.display()
        )),
    }
}

/// `db_bench --version`'s answer, e.g. `db_bench version 7.8.3`.
pub fn version(exe: &Path) -> Option<String> {
    let out = Command::new(exe).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.contains("version"))
        .map(|l| l.trim().to_string())
}

impl FillArgs<'_> {
    /// The arguments passed to `db_bench` for a database in `db`.
    pub fn argv(&self, db: &Path) -> Vec<String> {
        vec![
            "--benchmarks=fillrandom".into(),
            format!("--sync={}", u8::from(self.sync)),
            format!("--threads={}", self.threads),
            format!("--key_size={}", self.key_size),
            format!("--value_size={}", self.value_size),
            format!("--num={}", self.num_per_thread),
            format!("--db={}", db.display()),
            "--disable_wal=0".into(),
        ]
    }

    /// The command line, for the report.
    pub fn command_line(&self, db: &str) -> String {
        let mut s = String::from("db_bench");
        for a in self.argv(Path::new(db)) {
            s.push(' ');
            s.push_str(&a);
        }
        s
    }

    /// Runs `db_bench fillrandom` in a fresh directory under `dir` and removes it afterwards.
    pub fn run(&self, tag: &str) -> Result<DbBenchResult> {
        let db = TempDir::fresh(
            self.dir
                .join(format!("nacre-bench-{}-rocksdb-{tag}", std::process::id())),
        )?;
        let out = Command::new(self.exe)
            .args(self.argv(db.path()))
            .output()
            .map_err(io_err("run", self.exe))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let fail = |why: String| BenchError::Process {
            what: format!("{} fillrandom", self.exe.display()),
            why,
        };
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(fail(format!("{}: {}", out.status, err.trim())));
        }
        parse_fillrandom(&text).ok_or_else(|| fail(format!("no result line in {text:?}")))
    }
}

/// Parses `fillrandom   :  X micros/op Y ops/sec ...` from `db_bench` output.
pub fn parse_fillrandom(out: &str) -> Option<DbBenchResult> {
    out.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != "fillrandom" {
            return None;
        }
        let toks: Vec<&str> = rest.split_whitespace().collect();
        let before = |unit: &str| -> Option<f64> {
            let i = toks.iter().position(|t| *t == unit)?;
            toks.get(i.checked_sub(1)?)?.parse().ok()
        };
        Some(DbBenchResult {
            micros_per_op: before("micros/op")?,
            ops_per_sec: before("ops/sec")?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let out = "Keys:       16 bytes each\nDB path: [/x]\n\
                   fillrandom   :       6.789 micros/op 294528 ops/sec 0.679 seconds 200000 \
                   operations;   32.6 MB/s\n";
        let r = parse_fillrandom(out);
        assert_eq!(
            r,
            Some(DbBenchResult {
                micros_per_op: 6.789,
                ops_per_sec: 294528.0
            })
        );
        assert_eq!(parse_fillrandom("fillseq : 1 micros/op 2 ops/sec"), None);
        assert_eq!(parse_fillrandom("fillrandom : garbage"), None);
    }

    #[test]
    fn argv_and_missing_binary() {
        let a = FillArgs {
            exe: Path::new("/nonexistent/db_bench"),
            dir: Path::new("/tmp"),
            sync: true,
            threads: 2,
            num_per_thread: 50,
            key_size: 16,
            value_size: 500,
        };
        assert_eq!(
            a.command_line("D"),
            "db_bench --benchmarks=fillrandom --sync=1 --threads=2 --key_size=16 \
             --value_size=500 --num=50 --db=D --disable_wal=0"
        );
        assert!(unavailable(a.exe).is_some());
        assert!(a.run("t").is_err());
    }
}
