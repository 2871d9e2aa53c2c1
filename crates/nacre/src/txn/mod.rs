//! Transactions (seed 000 §3.2.2): optimistic (validated at commit) and pessimistic (a lock
//! table, two-phase locking, lock timeouts and deadlock detection), both reading at a
//! snapshot, buffering their writes, and committing them through the Reorder Ring as one
//! atomic group.
//!
//! Isolation is snapshot isolation. A transaction reads the database as of its snapshot
//! (taken at begin) with its own writes over it. At commit, every key it wrote or read for
//! update is checked, in the commit path's serial stage (C5 in commit.rs), for a version
//! newer than the key's read point: optimistic transactions use their snapshot
//! (first committer wins), pessimistic ones the moment they locked the key. A failed check is
//! [`Error::Conflict`] and nothing of the transaction is applied.
//!
//! Invariants:
//! - X1: a committed transaction is one batch: all of its writes or none survive a crash,
//!   and no reader sees part of it (C3, C4 in commit.rs).
//! - X2: a pessimistic transaction holds every lock it took until it commits or rolls back
//!   (strict two-phase locking), except those a rollback to a savepoint undoes.
//! - X3: locks are volatile (L4 in locks.rs): a crash releases them all.

mod buffer;
mod iter;
mod locks;

use std::sync::atomic::Ordering;
use std::time::Duration;

pub use iter::TxnIterator;
pub(crate) use locks::LockTable;

use crate::batch::Op;
use crate::blob::MAX_VALUE;
use crate::commit::Check;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::iter::IterOptions;
use crate::record::Kind;
use crate::subtable::Subtable;
use crate::view::Snapshot;
use buffer::{Buffer, Tracked};
use locks::{Granted, LockFail, LockKey, Mode, TxnId};

/// Options of a pessimistic transaction.
#[derive(Clone, Debug)]
pub struct TxnOptions {
    /// How long an operation waits for a lock another transaction holds before it fails with
    /// [`Error::LockTimeout`] (zero: it does not wait; `None`: it waits forever). Default 1 s,
    /// as RocksDB's `TransactionOptions::lock_timeout`.
    pub lock_timeout: Option<Duration>,
    /// Whether an operation that would wait in a cycle of transactions fails at once with
    /// [`Error::Deadlock`] (default) instead of waiting for its lock timeout.
    pub deadlock_detect: bool,
}

impl Default for TxnOptions {
    fn default() -> Self {
        TxnOptions {
            lock_timeout: Some(Duration::from_secs(1)),
            deadlock_detect: true,
        }
    }
}

/// How a transaction guards what it reads and writes: checks at commit, or locks.
enum Guard {
    Optimistic,
    Pessimistic(TxnOptions),
}

/// A transaction: see the module documentation. Dropping it rolls it back. It borrows its
/// `Db`, which therefore cannot close while the transaction lives.
pub struct Transaction<'db> {
    engine: &'db Engine,
    snapshot: Snapshot,
    kind: Guard,
    id: TxnId,
    buf: Buffer,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("snapshot", &self.snapshot.sequence())
            .field("pessimistic", &matches!(self.kind, Guard::Pessimistic(_)))
            .field("writes", &self.buf.writes.len())
            .finish()
    }
}

impl<'db> Transaction<'db> {
    pub(crate) fn begin(engine: &'db Engine, snapshot: Snapshot, opts: Option<TxnOptions>) -> Self {
        let id = engine.locks.next_id();
        Transaction {
            engine,
            snapshot,
            kind: match opts {
                None => Guard::Optimistic,
                Some(o) => Guard::Pessimistic(o),
            },
            id,
            buf: Buffer::default(),
        }
    }

    /// The sequence number of the snapshot the transaction reads at.
    pub fn snapshot_sequence(&self) -> u64 {
        self.snapshot.sequence()
    }

    /// Whether the transaction is pessimistic.
    pub fn is_pessimistic(&self) -> bool {
        matches!(self.kind, Guard::Pessimistic(_))
    }

    /// Keys the transaction has written (the last write of each counts once).
    pub fn write_count(&self) -> usize {
        self.buf.writes.len()
    }

    fn key(&self, subtable: &Subtable, key: &[u8]) -> Result<LockKey> {
        self.engine.check_subtable(subtable)?;
        Ok((subtable.id(), key.to_vec()))
    }

    /// `key`'s value as the transaction sees it: its own last write of it, else the value
    /// at its snapshot. Takes no lock and is not checked at commit.
    pub fn get(&self, subtable: &Subtable, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let k = self.key(subtable, key.as_ref())?;
        match self.buf.own(&k) {
            Some(v) => Ok(v.map(<[u8]>::to_vec)),
            None => self
                .engine
                .read(subtable, &k.1, Some(self.snapshot.sequence())),
        }
    }

    /// Reads `key` for an update: the commit fails with [`Error::Conflict`] if anyone else
    /// writes it meanwhile, which closes the write-skew gap of snapshot isolation for the
    /// keys read this way. Optimistic: the value at the snapshot (or the transaction's own
    /// write), checked at commit. Pessimistic: takes an exclusive lock first (waiting as
    /// [`TxnOptions`] say), then returns the newest committed value, which the lock keeps
    /// the newest until the transaction ends.
    pub fn get_for_update(
        &mut self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.locking_read(subtable, key.as_ref(), Mode::Exclusive)
    }

    /// [`Transaction::get_for_update`] with a shared lock in a pessimistic transaction:
    /// other transactions may read the key for share too, none may write it until this one
    /// ends. Optimistic: the same as `get_for_update`.
    pub fn get_for_share(
        &mut self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.locking_read(subtable, key.as_ref(), Mode::Shared)
    }

    fn locking_read(
        &mut self,
        subtable: &Subtable,
        key: &[u8],
        mode: Mode,
    ) -> Result<Option<Vec<u8>>> {
        let k = self.key(subtable, key)?;
        let since = self.guard(subtable, &k, mode)?;
        // Pessimistic: the newest value (the lock keeps it the newest; a write that took no
        // lock fails the commit's check).
        let at = (!self.is_pessimistic()).then_some(since);
        match self.buf.own(&k) {
            Some(v) => Ok(v.map(<[u8]>::to_vec)),
            None => self.engine.read(subtable, key, at),
        }
    }

    /// Tracks `k` for the commit check, locking it in `mode` first in a pessimistic
    /// transaction; the key's read point.
    fn guard(&mut self, subtable: &Subtable, k: &LockKey, mode: Mode) -> Result<u64> {
        let held = self.buf.tracked.get(k).copied();
        let opts = match &self.kind {
            Guard::Optimistic => {
                let since = self.snapshot.sequence();
                if held.is_none() {
                    self.buf.track(k, Tracked { since, lock: None });
                }
                return Ok(since);
            }
            Guard::Pessimistic(o) => o,
        };
        let granted = self
            .engine
            .locks
            .lock(self.id, k, mode, opts.lock_timeout, opts.deadlock_detect)
            .map_err(|e| match e {
                LockFail::Timeout(waited) => Error::LockTimeout {
                    subtable: subtable.name().to_string(),
                    key: k.1.clone(),
                    waited,
                },
                LockFail::Deadlock(cycle) => Error::Deadlock {
                    subtable: subtable.name().to_string(),
                    key: k.1.clone(),
                    cycle,
                },
            })?;
        let since = match (granted, held) {
            (Granted::Held, Some(t)) => return Ok(t.since),
            // Newly locked: everything committed so far is what the lock now protects.
            (_, None) => self.engine.visible.load(Ordering::Acquire),
            (_, Some(t)) => t.since,
        };
        let lock = match (granted, held.and_then(|t| t.lock)) {
            (Granted::Held, l) => l,
            _ => Some(mode),
        };
        self.buf.track(k, Tracked { since, lock });
        Ok(since)
    }

    /// Buffers a put of `key` in `subtable`; pessimistic: locks the key exclusively first.
    pub fn put(
        &mut self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let value = value.as_ref();
        if value.len() > MAX_VALUE {
            return Err(Error::TooLarge {
                what: "value",
                len: value.len(),
                max: MAX_VALUE,
            });
        }
        let k = self.key(subtable, key.as_ref())?;
        self.guard(subtable, &k, Mode::Exclusive)?;
        self.buf.write(k, Some(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete of `key` in `subtable`; pessimistic: locks the key exclusively first.
    pub fn delete(&mut self, subtable: &Subtable, key: impl AsRef<[u8]>) -> Result<()> {
        let k = self.key(subtable, key.as_ref())?;
        self.guard(subtable, &k, Mode::Exclusive)?;
        self.buf.write(k, None);
        Ok(())
    }

    /// An iterator over `subtable` as the transaction sees it: the database at the
    /// transaction's snapshot with the transaction's writes so far over it. `opts.snapshot`
    /// must be `None` (the transaction's own is used).
    pub fn iter(&self, subtable: &Subtable, opts: IterOptions<'_>) -> Result<TxnIterator> {
        if opts.snapshot.is_some() {
            return Err(Error::InvalidOptions(
                "a transaction's iterator reads at the transaction's snapshot".into(),
            ));
        }
        let (lower, upper) = opts.bounds();
        let reverse = opts.reverse;
        let sub = subtable.id();
        let from = (sub, lower.unwrap_or_default());
        let mut own: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .buf
            .writes
            .range(from..)
            .take_while(|((s, k), _)| *s == sub && upper.as_ref().is_none_or(|u| k < u))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        if reverse {
            own.reverse();
        }
        let base = self.engine.iter_at(
            subtable,
            IterOptions {
                snapshot: Some(&self.snapshot),
                ..opts
            },
        )?;
        Ok(TxnIterator::new(base, own, reverse))
    }

    /// Sets a savepoint: [`Transaction::rollback_to_savepoint`] undoes everything done
    /// after it. Savepoints nest.
    pub fn set_savepoint(&mut self) {
        self.buf.set_savepoint();
    }

    /// Undoes the writes and reads for update made since the newest savepoint, releases the
    /// locks taken since (and undoes upgrades), and forgets the savepoint.
    /// [`Error::NoSavepoint`] if none is set.
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        let (locks, id) = (&self.engine.locks, self.id);
        let done = self.buf.rollback_to_savepoint(|k, _, before| match before {
            None => locks.unlock(id, k),
            Some(Mode::Shared) => locks.downgrade(id, k),
            Some(Mode::Exclusive) => {}
        });
        if done {
            Ok(())
        } else {
            Err(Error::NoSavepoint)
        }
    }

    /// Forgets the newest savepoint, keeping everything done since it.
    /// [`Error::NoSavepoint`] if none is set.
    pub fn pop_savepoint(&mut self) -> Result<()> {
        if self.buf.pop_savepoint() {
            Ok(())
        } else {
            Err(Error::NoSavepoint)
        }
    }

    /// Commits: checks every key written or read for update (see the module documentation),
    /// then applies every write as one atomic, durable batch. On [`Error::Conflict`] (or any
    /// other error) nothing is applied. Locks are released either way.
    pub fn commit(mut self) -> Result<()> {
        let db = self.engine.id;
        let buf = std::mem::take(&mut self.buf);
        let check = Check {
            keys: buf
                .tracked
                .iter()
                .map(|((s, k), t)| (*s, k.clone(), t.since))
                .collect(),
        };
        let mut batch = crate::batch::WriteBatch::new();
        batch.ops = buf
            .writes
            .into_iter()
            .map(|((subtable, key), v)| Op {
                db,
                subtable,
                kind: if v.is_some() { Kind::Put } else { Kind::Delete },
                key,
                value: v.unwrap_or_default(),
            })
            .collect();
        let r = self.engine.write_checked_batch(batch, check);
        self.release(buf.tracked.keys());
        r
    }

    /// Discards the transaction's writes and releases its locks (what dropping it does).
    pub fn rollback(self) {}

    fn release<'a>(&self, keys: impl Iterator<Item = &'a LockKey>) {
        if self.is_pessimistic() {
            for k in keys {
                self.engine.locks.unlock(self.id, k);
            }
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.release(self.buf.tracked.keys());
    }
}
