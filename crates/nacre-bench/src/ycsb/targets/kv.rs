//! The record mapping shared by the embedded targets (YCSB's RocksDB binding's): one key per
//! record, every field in one value ([`super::super::record`]); an update of some fields
//! reads, merges and rewrites the record. A [`Kv`] supplies get, put and scan; [`KvSession`]
//! turns requests into them.

use super::super::record::{self, Fields};
use super::super::target::{Outcome, Request, Session};
use crate::error::Result;

/// An ordered key-value store with point reads and writes and forward scans.
pub trait Kv: Sync {
    /// The value of `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Writes `key` = `value`; durable as the store's setting says when it returns.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Calls `f(value)` for up to `count` entries from the first key at or after `start`, in
    /// key order; returns how many it visited.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<usize>;
}

/// A client thread's session on a [`Kv`] holding records of `field_count` fields.
pub struct KvSession<'a, K: Kv> {
    kv: &'a K,
    field_count: usize,
}

impl<'a, K: Kv> KvSession<'a, K> {
    /// A session on `kv`.
    pub fn new(kv: &'a K, field_count: usize) -> Self {
        KvSession { kv, field_count }
    }

    fn read(&self, key: &[u8]) -> Result<Option<Fields>> {
        match self.kv.get(key)? {
            Some(v) => Ok(Some(record::decode(&v)?)),
            None => Ok(None),
        }
    }

    fn update(&self, key: &[u8], values: &Fields) -> Result<Outcome> {
        let value = if values.len() == self.field_count {
            record::encode(values)
        } else {
            match self.read(key)? {
                Some(old) => record::encode(&record::merge(old, values)),
                None => return Ok(Outcome::NotFound),
            }
        };
        self.kv.put(key, &value)?;
        Ok(Outcome::Written)
    }
}

impl<K: Kv> Session for KvSession<'_, K> {
    fn execute(&mut self, requests: &[Request], out: &mut Vec<Outcome>) -> Result<()> {
        for r in requests {
            let outcome = match r {
                Request::Read { key, fields } => match self.read(key)? {
                    Some(all) => Outcome::Found(record::select(all, fields.as_deref()).len()),
                    None => Outcome::NotFound,
                },
                Request::Update { key, values } => self.update(key, values)?,
                Request::Insert { key, values } => {
                    self.kv.put(key, &record::encode(values))?;
                    Outcome::Written
                }
                Request::Scan {
                    start,
                    count,
                    fields,
                } => {
                    let n = self.kv.scan(start, *count, &mut |v| {
                        let all = record::decode(v)?;
                        std::hint::black_box(record::select(all, fields.as_deref()));
                        Ok(())
                    })?;
                    Outcome::Found(n)
                }
            };
            out.push(outcome);
        }
        Ok(())
    }
}
