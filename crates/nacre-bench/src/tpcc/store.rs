//! What the TPC-C driver runs its transactions on: a transactional store, here Nacre
//! (optimistic or pessimistic transactions, one subtable per table); RocksDB's are in
//! `rocks.rs`.

use nacre::{Db, Error as NacreError, IterOptions, Subtable, Transaction, TxnOptions};

use super::schema::Table;
use crate::engine::BenchDb;
use crate::error::{BenchError, Result};

/// Why a transaction did not commit.
#[derive(Debug)]
pub enum TxFail {
    /// A conflict, deadlock or lock timeout: run the transaction again.
    Retry(String),
    /// Anything else: the benchmark stops.
    Fatal(BenchError),
}

impl From<BenchError> for TxFail {
    fn from(e: BenchError) -> Self {
        TxFail::Fatal(e)
    }
}

/// Result of a transaction's step.
pub type TxResult<T> = std::result::Result<T, TxFail>;

/// Rows of a scan: (key, value).
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// One transaction.
pub trait Tx {
    /// `key`'s value as the transaction sees it.
    fn get(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>>;
    /// `key`'s value, locked or checked for update.
    fn get_for_update(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>>;
    /// Buffers a put.
    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> TxResult<()>;
    /// Buffers a delete.
    fn delete(&mut self, t: Table, key: &[u8]) -> TxResult<()>;
    /// Rows with keys in `[lo, hi)`, ascending (descending if `reverse`), at most `limit`.
    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        reverse: bool,
        limit: usize,
    ) -> TxResult<Rows>;
    /// Commits.
    fn commit(self: Box<Self>) -> TxResult<()>;
    /// Rolls back.
    fn rollback(self: Box<Self>);
}

/// A store the driver loads and runs transactions on.
pub trait TxStore: Sync {
    /// Begins a transaction.
    fn begin(&self) -> Box<dyn Tx + '_>;
    /// Writes `rows` as one atomic batch (the initial population).
    fn load(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<()>;
    /// E.g. `Nacre optimistic (emulated)`.
    fn label(&self) -> String;
    /// What an acknowledged commit survives.
    fn durability(&self) -> String;
    /// Durable commits (device flushes the engine issued) so far, where it counts them.
    fn commits(&self) -> Option<u64>;
}

/// The database under a Nacre store.
enum Holder {
    Bench(BenchDb),
    Plain(Db),
}

/// Nacre with one subtable per table.
pub struct NacreTxStore {
    holder: Holder,
    subs: Vec<Subtable>,
    pessimistic: bool,
    label: String,
    durability: String,
}

impl NacreTxStore {
    fn with(holder: Holder, pessimistic: bool, backend: &str, durability: &str) -> Result<Self> {
        let db = match &holder {
            Holder::Bench(b) => &b.db,
            Holder::Plain(d) => d,
        };
        let subs = Table::ALL
            .iter()
            .map(|t| db.subtable(t.name()))
            .collect::<nacre::Result<Vec<_>>>()?;
        let kind = if pessimistic {
            "pessimistic"
        } else {
            "optimistic"
        };
        Ok(NacreTxStore {
            holder,
            subs,
            pessimistic,
            label: format!("Nacre {kind} ({backend})"),
            durability: durability.to_string(),
        })
    }

    /// A store on a benchmark database (removed with the store).
    pub fn bench(b: BenchDb, pessimistic: bool, backend: &str, durability: &str) -> Result<Self> {
        Self::with(Holder::Bench(b), pessimistic, backend, durability)
    }

    /// A store on `db` (tests: a `sim` database).
    pub fn on(db: Db, pessimistic: bool) -> Result<Self> {
        Self::with(
            Holder::Plain(db),
            pessimistic,
            "sim",
            "as the backend survives",
        )
    }

    /// The database.
    pub fn db(&self) -> &Db {
        match &self.holder {
            Holder::Bench(b) => &b.db,
            Holder::Plain(d) => d,
        }
    }

    /// The store's database, handed back (tests crash and reopen it).
    pub fn into_db(self) -> Option<Db> {
        drop(self.subs);
        match self.holder {
            Holder::Plain(d) => Some(d),
            Holder::Bench(_) => None,
        }
    }
}

fn fail(e: NacreError) -> TxFail {
    match e {
        NacreError::Conflict { .. }
        | NacreError::Deadlock { .. }
        | NacreError::LockTimeout { .. } => TxFail::Retry(e.to_string()),
        other => TxFail::Fatal(other.into()),
    }
}

struct NacreTx<'a> {
    txn: Transaction<'a>,
    subs: &'a [Subtable],
}

impl Tx for NacreTx<'_> {
    fn get(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>> {
        self.txn.get(&self.subs[t.index()], key).map_err(fail)
    }

    fn get_for_update(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>> {
        self.txn
            .get_for_update(&self.subs[t.index()], key)
            .map_err(fail)
    }

    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> TxResult<()> {
        self.txn
            .put(&self.subs[t.index()], key, value)
            .map_err(fail)
    }

    fn delete(&mut self, t: Table, key: &[u8]) -> TxResult<()> {
        self.txn.delete(&self.subs[t.index()], key).map_err(fail)
    }

    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        reverse: bool,
        limit: usize,
    ) -> TxResult<Rows> {
        let o = IterOptions {
            lower: Some(lo.to_vec()),
            upper: Some(hi.to_vec()),
            reverse,
            ..Default::default()
        };
        self.txn
            .iter(&self.subs[t.index()], o)
            .map_err(fail)?
            .take(limit)
            .map(|r| r.map_err(fail))
            .collect()
    }

    fn commit(self: Box<Self>) -> TxResult<()> {
        self.txn.commit().map_err(fail)
    }

    fn rollback(self: Box<Self>) {
        self.txn.rollback();
    }
}

impl TxStore for NacreTxStore {
    fn begin(&self) -> Box<dyn Tx + '_> {
        let txn = if self.pessimistic {
            self.db().begin_pessimistic(TxnOptions::default())
        } else {
            self.db().begin_optimistic()
        };
        Box::new(NacreTx {
            txn,
            subs: &self.subs,
        })
    }

    fn load(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut b = nacre::WriteBatch::new();
        for (t, k, v) in rows {
            b.put(&self.subs[t.index()], k, v);
        }
        Ok(self.db().write(b)?)
    }

    fn label(&self) -> String {
        self.label.clone()
    }

    fn durability(&self) -> String {
        self.durability.clone()
    }

    fn commits(&self) -> Option<u64> {
        Some(self.db().stats().commit_groups)
    }
}
