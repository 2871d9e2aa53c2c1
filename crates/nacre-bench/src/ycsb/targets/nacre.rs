//! Embedded Nacre as a YCSB store: records in the default subtable with the mapping of
//! [`super::kv`].

use nacre::{Db, IterOptions};

use super::super::target::{Session, Store};
use super::kv::{Kv, KvSession};
use crate::engine::BenchDb;
use crate::error::Result;

/// A Nacre database in a pool file this run created (removed when the store drops).
pub struct NacreStore {
    bench: BenchDb,
    backend: String,
    durability: String,
    field_count: usize,
}

impl NacreStore {
    /// Wraps `bench` (backend `backend`, surviving `durability`) for records of
    /// `field_count` fields.
    pub fn new(bench: BenchDb, backend: &str, durability: &str, field_count: usize) -> Self {
        NacreStore {
            bench,
            backend: backend.into(),
            durability: durability.into(),
            field_count,
        }
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.bench.db
    }
}

impl Kv for NacreStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.bench.db.get(&self.bench.table, key)?)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.bench.db.put(&self.bench.table, key, value)?)
    }
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<usize> {
        let opts = IterOptions {
            lower: Some(start.to_vec()),
            ..IterOptions::default()
        };
        let mut n = 0;
        for item in self.bench.db.iter(&self.bench.table, opts)?.take(count) {
            f(&item?.1)?;
            n += 1;
        }
        Ok(n)
    }
}

impl Store for NacreStore {
    fn label(&self) -> String {
        format!("Nacre ({})", self.backend)
    }
    fn backend(&self) -> String {
        self.backend.clone()
    }
    fn durability(&self) -> String {
        self.durability.clone()
    }
    fn pm_written(&self) -> Option<u64> {
        Some(self.bench.db.stats().pm_bytes_written)
    }
    fn commits(&self) -> Option<u64> {
        Some(self.bench.db.stats().commit_groups)
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(KvSession::new(self, self.field_count)))
    }
}
