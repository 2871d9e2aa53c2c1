//! Moving a data set in and out as Redis RDB files (Redis 7.0, version 10):
//!
//! - [`import`]: `nacre-server --import-rdb FILE` loads a file into the pool at `--dir`,
//!   merging: a key in the file replaces a key of the same name, other keys stay (as
//!   `RESTORE ... REPLACE`). Keys are written many to a commit; the reply to each commit is
//!   awaited (durable) before the next, so the keys counted as written are in the pool.
//! - [`export`]: a consistent snapshot of the keyspace written as a `dump.rdb` that Redis
//!   loads, either offline (`nacre-server --export-rdb FILE`) or from a running server
//!   (`BGSAVE RDB`, into `dir`/`dbfilename`) while clients go on writing.
//!
//! Both open the pool as the server does ([`OfflinePool`]); the pool's lock keeps them off a
//! pool a running server holds.

pub mod cli;
pub mod export;
pub mod import;
pub mod load;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::rdb::file::RdbFileError;
use crate::store::commits::CommitError;
use crate::store::open::StartReport;
use crate::store::{Store, StoreError};

/// Why an import or export failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The RDB file is malformed, truncated, or holds what Nacre does not load.
    #[error("{0}")]
    File(#[from] RdbFileError),
    /// A file could not be opened, written or renamed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The keyspace failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The engine failed.
    #[error("{0}")]
    Engine(#[from] nacre::Error),
    /// A key could not be written.
    #[error("key '{key}' (at offset {offset}) could not be written: {source}")]
    Write {
        /// The key, printable.
        key: String,
        /// Offset of its item in the file.
        offset: u64,
        /// Why.
        source: crate::types::Error,
    },
    /// A commit failed (the pool is full, say).
    #[error("a commit of the keys before offset {offset} failed: {source}")]
    Commit {
        /// Offset in the file after the last key of the batch.
        offset: u64,
        /// Why.
        source: CommitError,
    },
    /// A key is in a database the server does not have.
    #[error("database {db} (selected at offset {offset}) does not exist: the server has {databases} (set `databases` higher)")]
    Database {
        /// The database.
        db: u64,
        /// Offset of the key that uses it.
        offset: u64,
        /// Databases the server has.
        databases: usize,
    },
    /// The function libraries could not be loaded.
    #[error("the function libraries could not be loaded: {0}")]
    Functions(String),
    /// A thread or runtime could not be started.
    #[error("{0}")]
    Runtime(String),
}

/// A key, printable in a message (lossy, at most 64 bytes shown).
pub(crate) fn printable(key: &[u8]) -> String {
    let shown = String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned();
    if key.len() > 64 {
        format!("{shown}...")
    } else {
        shown
    }
}

/// `n` with thousands separators.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` bytes in MiB, one decimal.
pub(crate) fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

/// The pool at `cfg.dir`, opened as the server opens it but without serving: a runtime
/// thread resolves commits (`Commits::run_completer`), nothing else runs. [`OfflinePool::close`]
/// closes it cleanly (the next start reads its key counts).
pub struct OfflinePool {
    /// The keyspace.
    pub store: Arc<Store>,
    /// What opening found.
    pub report: StartReport,
    /// The configuration it was opened with.
    pub cfg: Config,
    rt: tokio::runtime::Runtime,
    completer: tokio::task::JoinHandle<()>,
}

impl OfflinePool {
    /// Opens (or creates) the pool of `cfg`.
    pub fn open(cfg: &Config) -> Result<OfflinePool, TransferError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| TransferError::Runtime(format!("cannot start the runtime: {e}")))?;
        let (store, report, snapshot) = crate::store::open::open(cfg)?;
        let store = Arc::new(store);
        let completer = rt.spawn(crate::store::Commits::run_completer(store.clone()));
        if let Some(snap) = snapshot {
            // After a crash the key counts are counted (or checked) before the import adds
            // to them, so that the clean close records whole counts; with the completer
            // running, as the count may correct the count records.
            store.count_keys(snap)?;
        }
        Ok(OfflinePool {
            store,
            report,
            cfg: cfg.clone(),
            rt,
            completer,
        })
    }

    /// Closes the pool cleanly once every commit is done.
    pub fn close(self) -> Result<(), TransferError> {
        let OfflinePool {
            store,
            rt,
            completer,
            ..
        } = self;
        store.close_ref(true)?;
        completer.abort();
        let _ = rt.block_on(completer);
        drop(rt);
        match Arc::try_unwrap(store) {
            Ok(s) => s.close_engine()?,
            Err(_) => tracing::warn!(
                "the keyspace is still referenced; the engine closes when it is dropped"
            ),
        }
        Ok(())
    }
}

/// A temporary name beside `path` (`.NAME.tmp-PID`), renamed over it when complete.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "dump.rdb".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}
