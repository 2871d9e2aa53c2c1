//! Typed errors for the benchmark runner.

use std::path::PathBuf;

/// Result alias used throughout `nacre-bench`.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Everything that can stop a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A pool operation failed.
    #[error(transparent)]
    Pmem(#[from] nacre_pmem::PmemError),
    /// An allocator operation failed.
    #[error(transparent)]
    Halloc(#[from] nacre_halloc::HallocError),
    /// An engine operation failed.
    #[error(transparent)]
    Engine(#[from] nacre::Error),
    /// A helper process (a benchmark child, an anchor's binary) failed or misbehaved.
    #[error("{what}: {why}")]
    Process {
        /// The process.
        what: String,
        /// What went wrong.
        why: String,
    },
    /// A system call on a benchmark file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// Serialising results failed.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A target needs an optional part this build was compiled without.
    #[error("{target} needs nacre-bench built with the `{feature}` feature (cargo build -p nacre-bench --features {feature}; it needs {needs}), or leave it out of {option}")]
    MissingFeature {
        /// The target asked for.
        target: String,
        /// The option that named it.
        option: &'static str,
        /// The cargo feature it needs.
        feature: &'static str,
        /// What building with that feature needs.
        needs: &'static str,
    },
    /// The parameters cannot produce a meaningful run.
    #[error("invalid benchmark parameters: {0}")]
    InvalidParams(String),
}

/// Wraps an `io::Error` with the operation and path, for `map_err`.
pub fn io_err(
    op: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io { op, path, source }
}
