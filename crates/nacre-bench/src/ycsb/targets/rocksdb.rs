//! Embedded RocksDB (Debian's librocksdb, through [`crate::rocksdb`]) as a YCSB store, with
//! the mapping of [`super::kv`] (that of YCSB's own RocksDB binding).

use std::path::PathBuf;

use super::super::target::{Session, Store};
use super::kv::{Kv, KvSession};
use crate::engine::dbbench::TempDir;
use crate::error::Result;
use crate::rocksdb::RocksDb;

/// A RocksDB database in a directory this run created (removed when the store drops).
pub struct RocksStore {
    db: RocksDb,
    sync: bool,
    field_count: usize,
    _dir: TempDir,
}

impl RocksStore {
    /// Creates a fresh database in `dir` (removed first if it exists), syncing the WAL on
    /// every write if `sync`, for records of `field_count` fields.
    pub fn create(dir: PathBuf, sync: bool, threads: usize, field_count: usize) -> Result<Self> {
        let guard = TempDir::fresh(dir.clone())?;
        let db = RocksDb::open(&dir, sync, threads)?;
        Ok(RocksStore {
            db,
            sync,
            field_count,
            _dir: guard,
        })
    }
}

impl Kv for RocksStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(key)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(key, value)
    }
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<usize> {
        self.db.scan(start, count, |_, v| f(v))
    }
}

impl Store for RocksStore {
    fn label(&self) -> String {
        format!("RocksDB ({})", self.backend())
    }
    fn backend(&self) -> String {
        format!("sync={}", u8::from(self.sync))
    }
    fn durability(&self) -> String {
        if self.sync {
            crate::engine::MSYNC_SURVIVES.into()
        } else {
            crate::engine::EMULATED_SURVIVES.into()
        }
    }
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(KvSession::new(self, self.field_count)))
    }
}
