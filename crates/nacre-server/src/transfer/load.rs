//! Loading an RDB file into the RUNNING server's keyspace (a replica's full synchronization;
//! `import` is the offline load). The caller has emptied the keyspace and keeps clients
//! off it while this runs (a replica answers `-LOADING`); each batch of keys is one commit
//! through ordinary keyspace transactions, one commit in flight at most.
//!
//! As a Redis replica loads its master's file: keys whose expiry time has passed are kept
//! (the master's `DEL` removes them; reads already see them gone); empty collections are
//! skipped; function libraries replace the server's, after the keys.

use std::fs::File;
use std::path::Path;
use std::time::Instant;

use super::{printable, TransferError};
use crate::rdb::file::{Entry, Item, RdbReader};
use crate::shared::{now_ms, Shared};
use crate::types::whole;

/// Keys per commit.
const BATCH_KEYS: usize = 512;

/// What a load did.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// Keys written.
    pub keys: u64,
    /// Function libraries loaded.
    pub functions: usize,
    /// File bytes.
    pub bytes: u64,
    /// Time taken (ms).
    pub millis: u128,
}

/// Loads `path` into the keyspace of the running server. Blocks (call it off the runtime's
/// workers). On an error, keys of the batches before it are in the keyspace: the caller
/// must not serve the data set as complete.
pub fn load(shared: &Shared, path: &Path) -> Result<Loaded, TransferError> {
    let t0 = Instant::now();
    let file = File::open(path).map_err(|source| TransferError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = RdbReader::new(std::io::BufReader::with_capacity(1 << 20, file))?;
    let mut out = Loaded::default();
    let mut batch = Vec::with_capacity(BATCH_KEYS);
    let mut functions = Vec::new();
    let mut pending = 0u64;
    loop {
        match r.next_item()? {
            Item::Key(e) => {
                batch.push(e);
                if batch.len() >= BATCH_KEYS {
                    pending = write_batch(shared, std::mem::take(&mut batch), pending, &mut out)?;
                }
            }
            Item::Function(code) => functions.push(code),
            Item::Eof { .. } => break,
            Item::Aux(..) | Item::SelectDb(_) | Item::ResizeDb { .. } => {}
        }
    }
    pending = write_batch(shared, batch, pending, &mut out)?;
    settle(shared, pending, r.offset())?;
    out.bytes = r.offset();
    if !functions.is_empty() {
        out.functions = shared
            .functions
            .import(shared, &functions)
            .map_err(TransferError::Functions)?;
    }
    out.millis = t0.elapsed().as_millis();
    Ok(out)
}

/// Waits until commit `ticket` is durable.
fn settle(shared: &Shared, ticket: u64, offset: u64) -> Result<(), TransferError> {
    let store = &shared.store;
    store
        .commits
        .wait_blocking(store, ticket)
        .map_err(|source| TransferError::Commit { offset, source })
}

/// Writes `batch` in one commit, after commit `pending` (the one before) is durable; the
/// new commit's ticket.
fn write_batch(
    shared: &Shared,
    batch: Vec<Entry>,
    pending: u64,
    out: &mut Loaded,
) -> Result<u64, TransferError> {
    let store = &shared.store;
    let live: Vec<Entry> = batch
        .into_iter()
        .filter(|e| !whole::is_empty(&e.value))
        .collect();
    let Some(last) = live.last() else {
        return Ok(pending);
    };
    settle(shared, pending, last.offset)?;
    for e in &live {
        if usize::try_from(e.db).map_or(true, |d| d >= store.databases()) {
            return Err(TransferError::Database {
                db: e.db,
                offset: e.offset,
                databases: store.databases(),
            });
        }
    }
    // A write waits while a freeze holds (F1 in store/mod.rs).
    let _writing = loop {
        match store.enter_write() {
            Some(g) => break g,
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    };
    let keys: Vec<(usize, &[u8])> = live.iter().map(|e| (e.db as usize, &e.key[..])).collect();
    let mut txn = store.txn(&keys, now_ms());
    drop(keys);
    let n = live.len() as u64;
    for e in live {
        let Entry {
            db,
            key,
            value,
            expire_ms,
            offset,
        } = e;
        let db = db as usize;
        let wrap = |source| TransferError::Write {
            key: printable(&key),
            offset,
            source,
        };
        if txn.get(db, &key).map_err(|s| wrap(s.into()))?.is_some() {
            txn.set(db, &key, None).map_err(|s| wrap(s.into()))?;
        }
        // A past expiry stays (the master deletes the key); a negative one is long past.
        let at = expire_ms.map_or(0, |t| t.max(1) as u64);
        whole::write(&mut txn, db, &key, value, at).map_err(wrap)?;
    }
    out.keys += n;
    Ok(txn.commit().0)
}
