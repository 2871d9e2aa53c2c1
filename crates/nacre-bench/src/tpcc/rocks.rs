//! RocksDB 7.8.3's TransactionDB (pessimistic: lock table, 1 s lock timeout, deadlock
//! detection) and OptimisticTransactionDB as TPC-C stores, through its C API. One keyspace:
//! each table's keys carry its index as a one-byte prefix. Transactions use RocksDB's
//! defaults (no snapshot set: reads and conflict checks are at the time each key is read).

use std::ffi::{c_char, c_int, c_uchar, CStr, CString};
use std::path::PathBuf;

use super::schema::Table;
use super::store::{Rows, Tx, TxFail, TxResult, TxStore};
use crate::engine::dbbench::TempDir;
use crate::error::{BenchError, Result};
use crate::rocksdb::{
    check, rocksdb_free, rocksdb_iter_destroy, rocksdb_iter_get_error, rocksdb_iter_key,
    rocksdb_iter_next, rocksdb_iter_seek, rocksdb_iter_valid, rocksdb_iter_value,
    rocksdb_options_create, rocksdb_options_destroy, rocksdb_options_increase_parallelism,
    rocksdb_options_set_create_if_missing, rocksdb_readoptions_create, rocksdb_readoptions_destroy,
    rocksdb_writeoptions_create, rocksdb_writeoptions_destroy, rocksdb_writeoptions_set_sync,
    take_value, RdbIterator, RdbOptions, RdbReadOptions, RdbWriteOptions,
};

#[repr(C)]
struct TxnDb {
    _private: [u8; 0],
}
#[repr(C)]
struct OptTxnDb {
    _private: [u8; 0],
}
#[repr(C)]
struct TxnDbOptions {
    _private: [u8; 0],
}
#[repr(C)]
struct TxnOptions {
    _private: [u8; 0],
}
#[repr(C)]
struct OptTxnOptions {
    _private: [u8; 0],
}
#[repr(C)]
struct Txn {
    _private: [u8; 0],
}
#[repr(C)]
struct Batch {
    _private: [u8; 0],
}

#[link(name = "rocksdb")]
extern "C" {
    fn rocksdb_options_enable_statistics(o: *mut RdbOptions);
    fn rocksdb_options_statistics_get_string(o: *mut RdbOptions) -> *mut c_char;
    fn rocksdb_transactiondb_options_create() -> *mut TxnDbOptions;
    fn rocksdb_transactiondb_options_destroy(o: *mut TxnDbOptions);
    fn rocksdb_transactiondb_open(
        o: *const RdbOptions,
        t: *const TxnDbOptions,
        name: *const c_char,
        err: *mut *mut c_char,
    ) -> *mut TxnDb;
    fn rocksdb_transactiondb_close(db: *mut TxnDb);
    fn rocksdb_transaction_options_create() -> *mut TxnOptions;
    fn rocksdb_transaction_options_destroy(o: *mut TxnOptions);
    fn rocksdb_transaction_options_set_deadlock_detect(o: *mut TxnOptions, v: c_uchar);
    fn rocksdb_transaction_options_set_lock_timeout(o: *mut TxnOptions, ms: i64);
    fn rocksdb_transaction_begin(
        db: *mut TxnDb,
        w: *const RdbWriteOptions,
        t: *const TxnOptions,
        old: *mut Txn,
    ) -> *mut Txn;
    fn rocksdb_transactiondb_write(
        db: *mut TxnDb,
        w: *const RdbWriteOptions,
        b: *mut Batch,
        err: *mut *mut c_char,
    );
    fn rocksdb_optimistictransactiondb_open(
        o: *const RdbOptions,
        name: *const c_char,
        err: *mut *mut c_char,
    ) -> *mut OptTxnDb;
    fn rocksdb_optimistictransactiondb_close(db: *mut OptTxnDb);
    fn rocksdb_optimistictransaction_options_create() -> *mut OptTxnOptions;
    fn rocksdb_optimistictransaction_options_destroy(o: *mut OptTxnOptions);
    fn rocksdb_optimistictransaction_begin(
        db: *mut OptTxnDb,
        w: *const RdbWriteOptions,
        t: *const OptTxnOptions,
        old: *mut Txn,
    ) -> *mut Txn;
    fn rocksdb_optimistictransactiondb_write(
        db: *mut OptTxnDb,
        w: *const RdbWriteOptions,
        b: *mut Batch,
        err: *mut *mut c_char,
    );
    fn rocksdb_transaction_get(
        t: *mut Txn,
        r: *const RdbReadOptions,
        k: *const c_char,
        klen: usize,
        vlen: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn rocksdb_transaction_get_for_update(
        t: *mut Txn,
        r: *const RdbReadOptions,
        k: *const c_char,
        klen: usize,
        vlen: *mut usize,
        exclusive: c_uchar,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    fn rocksdb_transaction_put(
        t: *mut Txn,
        k: *const c_char,
        klen: usize,
        v: *const c_char,
        vlen: usize,
        err: *mut *mut c_char,
    );
    fn rocksdb_transaction_delete(
        t: *mut Txn,
        k: *const c_char,
        klen: usize,
        err: *mut *mut c_char,
    );
    fn rocksdb_transaction_create_iterator(
        t: *mut Txn,
        r: *const RdbReadOptions,
    ) -> *mut RdbIterator;
    fn rocksdb_transaction_commit(t: *mut Txn, err: *mut *mut c_char);
    fn rocksdb_transaction_rollback(t: *mut Txn, err: *mut *mut c_char);
    fn rocksdb_transaction_destroy(t: *mut Txn);
    fn rocksdb_iter_seek_for_prev(it: *mut RdbIterator, k: *const c_char, klen: usize);
    fn rocksdb_iter_prev(it: *mut RdbIterator);
    fn rocksdb_writebatch_create() -> *mut Batch;
    fn rocksdb_writebatch_destroy(b: *mut Batch);
    fn rocksdb_writebatch_put(
        b: *mut Batch,
        k: *const c_char,
        klen: usize,
        v: *const c_char,
        vlen: usize,
    );
}

/// The database: pessimistic or optimistic.
enum Handle {
    Pessimistic(*mut TxnDb, *mut TxnOptions),
    Optimistic(*mut OptTxnDb, *mut OptTxnOptions),
}

/// A RocksDB transactional database in a directory this run created.
pub struct RocksTxStore {
    db: Handle,
    opts: *mut RdbOptions,
    write: *mut RdbWriteOptions,
    read: *mut RdbReadOptions,
    sync: bool,
    _dir: TempDir,
}

// SAFETY: RocksDB's TransactionDB and OptimisticTransactionDB are documented safe for
// concurrent use; the option objects are only read after creation; each transaction object
// is used by one thread at a time (it lives in one `RocksTx`).
unsafe impl Send for RocksTxStore {}
// SAFETY: as above.
unsafe impl Sync for RocksTxStore {}

fn prefixed(t: Table, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(t.index() as u8);
    k.extend_from_slice(key);
    k
}

/// A RocksDB error string turned into a retry (busy, timed out, try again) or a failure.
fn classify(err: *mut c_char, what: &str) -> TxResult<()> {
    match check(err, what) {
        Ok(()) => Ok(()),
        Err(BenchError::Process { why, .. })
            if why.starts_with("Resource busy")
                || why.starts_with("Operation timed out")
                || why.starts_with("Operation failed. Try again") =>
        {
            Err(TxFail::Retry(why))
        }
        Err(e) => Err(TxFail::Fatal(e)),
    }
}

impl RocksTxStore {
    /// Creates a fresh database in `dir` (removed first if it exists; removed on drop).
    pub fn create(dir: PathBuf, pessimistic: bool, sync: bool, threads: usize) -> Result<Self> {
        let guard = TempDir::fresh(dir.clone())?;
        let name = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| {
            BenchError::InvalidParams(format!("RocksDB path {} holds a NUL", dir.display()))
        })?;
        // SAFETY: constructors and setters on objects we own; `name` outlives the open;
        // `err` is written only on failure, and every object is destroyed once (on failure
        // here, else in drop).
        unsafe {
            let opts = rocksdb_options_create();
            rocksdb_options_set_create_if_missing(opts, 1);
            rocksdb_options_increase_parallelism(opts, threads.clamp(1, 64) as c_int);
            rocksdb_options_enable_statistics(opts);
            let mut err = std::ptr::null_mut();
            let db = if pessimistic {
                let t = rocksdb_transactiondb_options_create();
                let db = rocksdb_transactiondb_open(opts, t, name.as_ptr(), &mut err);
                rocksdb_transactiondb_options_destroy(t);
                let to = rocksdb_transaction_options_create();
                rocksdb_transaction_options_set_deadlock_detect(to, 1);
                rocksdb_transaction_options_set_lock_timeout(to, 1000);
                Handle::Pessimistic(db, to)
            } else {
                let db = rocksdb_optimistictransactiondb_open(opts, name.as_ptr(), &mut err);
                Handle::Optimistic(db, rocksdb_optimistictransaction_options_create())
            };
            if let Err(e) = check(err, &format!("open {}", dir.display())) {
                match db {
                    Handle::Pessimistic(_, to) => rocksdb_transaction_options_destroy(to),
                    Handle::Optimistic(_, to) => rocksdb_optimistictransaction_options_destroy(to),
                }
                rocksdb_options_destroy(opts);
                return Err(e);
            }
            let write = rocksdb_writeoptions_create();
            rocksdb_writeoptions_set_sync(write, u8::from(sync));
            Ok(RocksTxStore {
                db,
                opts,
                write,
                read: rocksdb_readoptions_create(),
                sync,
                _dir: guard,
            })
        }
    }

    /// A ticker of RocksDB's statistics, e.g. `rocksdb.wal.synced`.
    fn ticker(&self, name: &str) -> Option<u64> {
        // SAFETY: `opts` is live; the returned string is malloc'd by RocksDB, copied and
        // freed once.
        let text = unsafe {
            let p = rocksdb_options_statistics_get_string(self.opts);
            if p.is_null() {
                return None;
            }
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            rocksdb_free(p.cast());
            s
        };
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(" COUNT : "))
            .and_then(|n| n.trim().parse().ok())
    }
}

impl Drop for RocksTxStore {
    fn drop(&mut self) {
        // SAFETY: every object was created in `create` and is destroyed once, the database
        // first; no transaction outlives the store (they borrow it).
        unsafe {
            match self.db {
                Handle::Pessimistic(db, to) => {
                    rocksdb_transactiondb_close(db);
                    rocksdb_transaction_options_destroy(to);
                }
                Handle::Optimistic(db, to) => {
                    rocksdb_optimistictransactiondb_close(db);
                    rocksdb_optimistictransaction_options_destroy(to);
                }
            }
            rocksdb_writeoptions_destroy(self.write);
            rocksdb_readoptions_destroy(self.read);
            rocksdb_options_destroy(self.opts);
        }
    }
}

struct RocksTx<'a> {
    txn: *mut Txn,
    store: &'a RocksTxStore,
}

impl RocksTx<'_> {
    /// A value RocksDB returned, after its error (if any).
    fn value(
        &self,
        p: *mut c_char,
        len: usize,
        err: *mut c_char,
        what: &str,
    ) -> TxResult<Option<Vec<u8>>> {
        classify(err, what)?;
        // SAFETY: RocksDB returned `p` (null or `len` bytes it allocated) to this call alone.
        Ok(unsafe { take_value(p, len) })
    }
}

impl Tx for RocksTx<'_> {
    fn get(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let k = prefixed(t, key);
        let (mut len, mut err) = (0usize, std::ptr::null_mut());
        // SAFETY: `txn` and `read` are live; `k` outlives the call.
        let p = unsafe {
            rocksdb_transaction_get(
                self.txn,
                self.store.read,
                k.as_ptr().cast(),
                k.len(),
                &mut len,
                &mut err,
            )
        };
        self.value(p, len, err, "get")
    }

    fn get_for_update(&mut self, t: Table, key: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let k = prefixed(t, key);
        let (mut len, mut err) = (0usize, std::ptr::null_mut());
        // SAFETY: as in `get`.
        let p = unsafe {
            rocksdb_transaction_get_for_update(
                self.txn,
                self.store.read,
                k.as_ptr().cast(),
                k.len(),
                &mut len,
                1,
                &mut err,
            )
        };
        self.value(p, len, err, "get for update")
    }

    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> TxResult<()> {
        let k = prefixed(t, key);
        let mut err = std::ptr::null_mut();
        // SAFETY: `txn` is live; the slices outlive the call, which copies them.
        unsafe {
            rocksdb_transaction_put(
                self.txn,
                k.as_ptr().cast(),
                k.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        classify(err, "put")
    }

    fn delete(&mut self, t: Table, key: &[u8]) -> TxResult<()> {
        let k = prefixed(t, key);
        let mut err = std::ptr::null_mut();
        // SAFETY: as in `put`.
        unsafe { rocksdb_transaction_delete(self.txn, k.as_ptr().cast(), k.len(), &mut err) };
        classify(err, "delete")
    }

    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        reverse: bool,
        limit: usize,
    ) -> TxResult<Rows> {
        let (lo, hi) = (prefixed(t, lo), prefixed(t, hi));
        let mut rows = Vec::new();
        // SAFETY: the iterator is made from the live transaction, used only here and
        // destroyed before returning; key and value pointers are copied before each move.
        unsafe {
            let it = rocksdb_transaction_create_iterator(self.txn, self.store.read);
            let cur = |it: *mut RdbIterator| {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = rocksdb_iter_key(it, &mut kl);
                let v = rocksdb_iter_value(it, &mut vl);
                (
                    std::slice::from_raw_parts(k.cast::<u8>(), kl).to_vec(),
                    std::slice::from_raw_parts(v.cast::<u8>(), vl).to_vec(),
                )
            };
            if reverse {
                rocksdb_iter_seek_for_prev(it, hi.as_ptr().cast(), hi.len());
                if rocksdb_iter_valid(it) != 0 && cur(it).0 >= hi {
                    rocksdb_iter_prev(it);
                }
            } else {
                rocksdb_iter_seek(it, lo.as_ptr().cast(), lo.len());
            }
            while rows.len() < limit && rocksdb_iter_valid(it) != 0 {
                let (k, v) = cur(it);
                if (!reverse && k >= hi) || (reverse && k < lo) {
                    break;
                }
                rows.push((k[1..].to_vec(), v));
                if reverse {
                    rocksdb_iter_prev(it);
                } else {
                    rocksdb_iter_next(it);
                }
            }
            let mut err = std::ptr::null_mut();
            rocksdb_iter_get_error(it, &mut err);
            rocksdb_iter_destroy(it);
            classify(err, "scan")?;
        }
        Ok(rows)
    }

    fn commit(self: Box<Self>) -> TxResult<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: `txn` is live; it is destroyed in drop.
        unsafe { rocksdb_transaction_commit(self.txn, &mut err) };
        classify(err, "commit")
    }

    fn rollback(self: Box<Self>) {
        let mut err = std::ptr::null_mut();
        // SAFETY: as in `commit`.
        unsafe { rocksdb_transaction_rollback(self.txn, &mut err) };
        if let Err(e) = check(err, "rollback") {
            tracing::warn!(error = %e, "RocksDB rollback failed");
        }
    }
}

impl Drop for RocksTx<'_> {
    fn drop(&mut self) {
        // SAFETY: created in `begin`, destroyed once (an uncommitted one rolls back).
        unsafe { rocksdb_transaction_destroy(self.txn) };
    }
}

impl TxStore for RocksTxStore {
    fn begin(&self) -> Box<dyn Tx + '_> {
        // SAFETY: the database and option objects are live for the store's lifetime, which
        // the transaction borrows.
        let txn = unsafe {
            match self.db {
                Handle::Pessimistic(db, to) => {
                    rocksdb_transaction_begin(db, self.write, to, std::ptr::null_mut())
                }
                Handle::Optimistic(db, to) => {
                    rocksdb_optimistictransaction_begin(db, self.write, to, std::ptr::null_mut())
                }
            }
        };
        Box::new(RocksTx { txn, store: self })
    }

    fn load(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the batch is created, filled (RocksDB copies the slices), written and
        // destroyed here; the database and write options are live.
        unsafe {
            let b = rocksdb_writebatch_create();
            for (t, k, v) in rows {
                let k = prefixed(*t, k);
                rocksdb_writebatch_put(b, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len());
            }
            match self.db {
                Handle::Pessimistic(db, _) => {
                    rocksdb_transactiondb_write(db, self.write, b, &mut err)
                }
                Handle::Optimistic(db, _) => {
                    rocksdb_optimistictransactiondb_write(db, self.write, b, &mut err)
                }
            }
            rocksdb_writebatch_destroy(b);
        }
        check(err, "load")
    }

    fn label(&self) -> String {
        let kind = match self.db {
            Handle::Pessimistic(..) => "TransactionDB",
            Handle::Optimistic(..) => "OptimisticTransactionDB",
        };
        format!("RocksDB {kind} (sync={})", u8::from(self.sync))
    }

    fn durability(&self) -> String {
        if self.sync {
            crate::engine::MSYNC_SURVIVES.into()
        } else {
            crate::engine::EMULATED_SURVIVES.into()
        }
    }

    fn commits(&self) -> Option<u64> {
        // WAL syncs: each is one device flush (none without sync).
        self.ticker("rocksdb.wal.synced")
    }
}
