//! Loading an RDB file into the keyspace. One thread reads and decodes the file (the
//! `rdb::file` reader), the caller's writes batches of keys through the keyspace transaction,
//! each batch one commit awaited before the next: keys counted as written are durable, and
//! a failure leaves the keys of every earlier batch in place (the import stops there and
//! says so; it is never reported complete).
//!
//! Merge rules: a key in the file replaces a key of the same name (as `RESTORE ... REPLACE`),
//! other keys stay; keys whose expiry time has passed and empty collections are skipped and
//! counted (as Redis skips them on load); function libraries replace libraries of their
//! name (`FUNCTION RESTORE ... REPLACE`), after the keys.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{printable, OfflinePool, TransferError};
use crate::rdb::file::{Entry, Item, RdbReader};
use crate::shared::now_ms;
use crate::types::whole;

/// Keys per commit.
const BATCH_KEYS: usize = 1024;
/// File bytes per commit (a batch ends at whichever comes first).
const BATCH_BYTES: u64 = 8 << 20;
/// Decoded batches waiting for the writer.
const QUEUED_BATCHES: usize = 4;

/// Where an import stands (for progress lines).
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Keys written (durable).
    pub keys: u64,
    /// File bytes read up to the last batch written.
    pub bytes: u64,
    /// The file's size (0 if unknown).
    pub total: u64,
}

/// What an import did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Keys written per database.
    pub per_db: Vec<u64>,
    /// Keys skipped because their expiry time had passed.
    pub expired: u64,
    /// Empty collections skipped.
    pub empty: u64,
    /// Function libraries loaded.
    pub functions: usize,
    /// The file's RDB version.
    pub version: u32,
    /// Whether the file's checksum was checked (false: it has none, or it is zero).
    pub checked: bool,
    /// File bytes.
    pub bytes: u64,
    /// Time taken.
    pub elapsed: Duration,
}

impl Summary {
    /// Keys written in all.
    pub fn keys(&self) -> u64 {
        self.per_db.iter().sum()
    }
}

/// A failed import: why, and how many keys were written (durably) before it failed.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Failure {
    /// Why.
    pub error: TransferError,
    /// Keys written before the failure.
    pub written: u64,
}

/// What the reading thread hands the writer.
enum Msg {
    /// Keys, and the file offset after the last of them.
    Keys(Vec<Entry>, u64),
    Function(Vec<u8>),
    /// A database's size hint (RESIZEDB).
    KeysHint(u64),
    End {
        checked: bool,
        offset: u64,
    },
    Failed(TransferError),
}

/// Reads `path`, sending batches of keys to `tx`; stops at the end, an error, or when the
/// writer is gone.
fn read_file(path: &Path, version: &mut u32, tx: &mpsc::SyncSender<Msg>) {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(source) => {
            let _ = tx.send(Msg::Failed(TransferError::Io {
                path: path.to_path_buf(),
                source,
            }));
            return;
        }
    };
    let mut r = match RdbReader::new(file) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Msg::Failed(e.into()));
            return;
        }
    };
    *version = r.version();
    let mut batch = Vec::with_capacity(BATCH_KEYS);
    let mut batch_start = r.offset();
    loop {
        let msg = match r.next_item() {
            Ok(Item::Key(e)) => {
                batch.push(e);
                if batch.len() < BATCH_KEYS && r.offset() - batch_start < BATCH_BYTES {
                    continue;
                }
                batch_start = r.offset();
                Msg::Keys(
                    std::mem::replace(&mut batch, Vec::with_capacity(BATCH_KEYS)),
                    r.offset(),
                )
            }
            Ok(Item::Function(code)) => Msg::Function(code),
            Ok(Item::Aux(k, v)) => {
                tracing::debug!(
                    field = %String::from_utf8_lossy(&k),
                    value = %String::from_utf8_lossy(&v),
                    "RDB AUX field"
                );
                continue;
            }
            Ok(Item::ResizeDb { keys, .. }) => Msg::KeysHint(keys),
            Ok(Item::SelectDb(_)) => continue,
            Ok(Item::Eof { checked }) => {
                if !batch.is_empty()
                    && tx
                        .send(Msg::Keys(std::mem::take(&mut batch), r.offset()))
                        .is_err()
                {
                    return;
                }
                let _ = tx.send(Msg::End {
                    checked,
                    offset: r.offset(),
                });
                return;
            }
            Err(e) => {
                // What was read before the error is written first: the count of keys written
                // then says how far the file was good.
                if !batch.is_empty()
                    && tx
                        .send(Msg::Keys(std::mem::take(&mut batch), r.offset()))
                        .is_err()
                {
                    return;
                }
                let _ = tx.send(Msg::Failed(e.into()));
                return;
            }
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}

/// Imports `path` into the open pool `pool`; `progress` is called as batches become
/// durable.
pub fn import(
    pool: &OfflinePool,
    path: &Path,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Summary, Failure> {
    let t0 = Instant::now();
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let store = &pool.store;
    let mut functions: Vec<Vec<u8>> = Vec::new();
    let mut version = 0;
    let (tx, rx) = mpsc::sync_channel(QUEUED_BATCHES);
    let (commit_tx, commit_rx) = mpsc::sync_channel::<Queued>(1);
    let (done_tx, done_rx) = mpsc::channel();
    let mut w = Writer {
        pool,
        // Into a keyspace with no keys, a key not seen yet in the file needs no lookup.
        seen: (0..store.databases())
            .all(|db| store.dbsize(db) == 0)
            .then(Seen::default),
        sum: Summary {
            per_db: vec![0; store.databases()],
            ..Default::default()
        },
        commits: commit_tx,
        done: done_rx,
        in_flight: 0,
        total,
        progress,
    };
    let outcome = std::thread::scope(|s| {
        let reader = s.spawn(|| read_file(path, &mut version, &tx));
        let committer = s.spawn(move || {
            for q in commit_rx.iter() {
                let r = store
                    .commits
                    .wait_blocking(store, q.ticket)
                    .map(|()| (q.offset, q.added))
                    .map_err(|source| TransferError::Commit {
                        offset: q.offset,
                        source,
                    });
                if done_tx.send(r).is_err() {
                    return;
                }
            }
        });
        let r = (|| -> Result<(), TransferError> {
            for msg in rx.iter() {
                match msg {
                    Msg::Keys(batch, offset) => w.batch(batch, offset)?,
                    Msg::Function(code) => functions.push(code),
                    Msg::KeysHint(n) => {
                        // A hint, trusted only as far as the file could hold that many keys.
                        if let Some(seen) = &mut w.seen {
                            seen.0
                                .reserve(usize::try_from(n.min(total / 4)).unwrap_or(0));
                        }
                    }
                    Msg::End { checked, offset } => {
                        w.settle()?;
                        w.sum.checked = checked;
                        w.sum.bytes = offset;
                        return Ok(());
                    }
                    Msg::Failed(e) => return Err(e),
                }
            }
            Err(TransferError::Runtime("the file's reader stopped".into()))
        })();
        // Whatever happened, the keys counted as written are those whose commits are
        // durable: every queued commit is waited for.
        let settled = w.settle();
        let sum = std::mem::take(&mut w.sum);
        // The committing thread ends with the writer's channel, the reader with its own.
        drop(w);
        drop(rx);
        let _ = reader.join();
        let _ = committer.join();
        (r.and(settled), sum)
    });
    let (outcome, mut sum) = outcome;
    sum.version = version;
    let fail = |error, sum: &Summary| Failure {
        error,
        written: sum.keys(),
    };
    outcome.map_err(|e| fail(e, &sum))?;
    if !functions.is_empty() {
        sum.functions = import_functions(pool, &functions).map_err(|e| fail(e, &sum))?;
    }
    sum.elapsed = t0.elapsed();
    Ok(sum)
}

/// A commit handed to the committing thread: its ticket, the file offset after its last
/// key, and the keys it adds per database.
struct Queued {
    ticket: u64,
    offset: u64,
    added: Vec<u64>,
}

/// The writing side: builds each batch's transaction on this thread while the committing
/// thread waits for the previous commit (the engine writes it there), one commit ahead at
/// most.
///
/// A batch that reads a key (one seen before in the file, or any key when the keyspace was
/// not empty) waits first until every queued commit is durable: offline txns leave no
/// pending entries (`Txn::offline`), so what they read must be in the engine.
struct Writer<'a> {
    pool: &'a OfflinePool,
    seen: Option<Seen>,
    sum: Summary,
    commits: mpsc::SyncSender<Queued>,
    done: mpsc::Receiver<Result<(u64, Vec<u64>), TransferError>>,
    in_flight: usize,
    total: u64,
    progress: &'a mut dyn FnMut(&Progress),
}

impl Writer<'_> {
    /// Counts one durable commit.
    fn finished(&mut self, r: Result<(u64, Vec<u64>), TransferError>) -> Result<(), TransferError> {
        self.in_flight -= 1;
        let (offset, added) = r?;
        for (db, n) in added.into_iter().enumerate() {
            self.sum.per_db[db] += n;
        }
        (self.progress)(&Progress {
            keys: self.sum.keys(),
            bytes: offset,
            total: self.total,
        });
        Ok(())
    }

    /// Waits until at most `left` commits are queued.
    fn wait_until(&mut self, left: usize) -> Result<(), TransferError> {
        while self.in_flight > left {
            let r = self
                .done
                .recv()
                .map_err(|_| TransferError::Runtime("the committing thread stopped".into()))?;
            self.finished(r)?;
        }
        Ok(())
    }

    /// Waits for every queued commit.
    fn settle(&mut self) -> Result<(), TransferError> {
        let mut first = Ok(());
        while self.in_flight > 0 {
            if let Err(e) = self.wait_until(self.in_flight - 1) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Writes `batch` (whose last key ends at `offset`) in one commit.
    fn batch(&mut self, batch: Vec<Entry>, offset: u64) -> Result<(), TransferError> {
        let store = &self.pool.store;
        let now = now_ms();
        let mut live = Vec::with_capacity(batch.len());
        for e in batch {
            let db = usize::try_from(e.db)
                .ok()
                .filter(|&d| d < store.databases())
                .ok_or(TransferError::Database {
                    db: e.db,
                    offset: e.offset,
                    databases: store.databases(),
                })?;
            if e.expire_ms.is_some_and(|t| t <= now as i64) {
                self.sum.expired += 1;
            } else if whole::is_empty(&e.value) {
                self.sum.empty += 1;
            } else {
                let fresh = self.seen.as_mut().is_some_and(|s| s.first(db, &e.key));
                live.push((db, fresh, e));
            }
        }
        if live.is_empty() {
            return Ok(());
        }
        if live.iter().all(|(_, fresh, _)| *fresh) {
            self.wait_until(1)?;
        } else {
            self.wait_until(0)?;
        }
        let keys: Vec<(usize, &[u8])> = live.iter().map(|(db, _, e)| (*db, &e.key[..])).collect();
        let mut txn = crate::store::Txn::offline(store, &keys, now);
        drop(keys);
        let mut added = vec![0u64; store.databases()];
        for (db, fresh, e) in live {
            let Entry {
                key,
                value,
                expire_ms,
                offset,
                ..
            } = e;
            let wrap = |source| TransferError::Write {
                key: printable(&key),
                offset,
                source,
            };
            if fresh {
                txn.known_absent(db, &key).map_err(|s| wrap(s.into()))?;
            } else if txn.get(db, &key).map_err(|s| wrap(s.into()))?.is_some() {
                // As RESTORE REPLACE: the old key goes first.
                txn.set(db, &key, None).map_err(|s| wrap(s.into()))?;
            }
            let at = expire_ms.map_or(0, |t| t as u64);
            whole::write(&mut txn, db, &key, value, at).map_err(wrap)?;
            added[db] += 1;
        }
        let ticket = txn.commit().0;
        self.commits
            .send(Queued {
                ticket,
                offset,
                added,
            })
            .map_err(|_| TransferError::Runtime("the committing thread stopped".into()))?;
        self.in_flight += 1;
        Ok(())
    }
}

/// Loads the file's function libraries through the server's function machinery.
fn import_functions(pool: &OfflinePool, codes: &[Vec<u8>]) -> Result<usize, TransferError> {
    let shared =
        crate::shared::Shared::new(pool.store.clone(), pool.cfg.clone(), pool.report.clone())
            .into_arc();
    let f = &shared.functions;
    f.restore(&shared).map_err(TransferError::Functions)?;
    f.import(&shared, codes).map_err(TransferError::Functions)
}

/// Keys an import into an empty keyspace has written, by hash: a key whose hash is not
/// here is certainly not in the keyspace (a hash seen before, even another key's, means
/// a lookup).
#[derive(Default)]
struct Seen(std::collections::HashSet<u64, std::hash::BuildHasherDefault<Prehashed>>);

impl Seen {
    /// Whether `key` of database `db` is seen for the first time (and notes it).
    fn first(&mut self, db: usize, key: &[u8]) -> bool {
        let h =
            crate::store::encoding::hash63(key) ^ (db as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0.insert(h)
    }
}

/// The hasher of a set of hashes: each value is its own hash.
#[derive(Default)]
struct Prehashed(u64);

impl std::hash::Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}
