//! `Db`: the embedded engine's public face.
//!
//! Thread safety: `Db` is `Send + Sync`; share it by reference or `Arc`. Writers go through
//! the commit path (`commit.rs`); readers take a sequence number (`visible` or a snapshot's)
//! and read the lock-free memtable indexes, so readers never block writers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;

use nacre_pmem::{Backend, Pool};

use crate::batch::WriteBatch;
use crate::commit::{Bucket, Group};
use crate::error::{Error, Result};
use crate::iter::{DbIterator, IterOptions};
use crate::memtable::Memtable;
use crate::options::{CommitMode, Options};
use crate::record::{read_value, record_size, ITEM_HEADER};
use crate::recovery::{self, RecoveryReport};
use crate::ring::Ring;
use crate::store::Store;
use crate::subtable::Subtable;

/// Name of the subtable every database has.
pub const DEFAULT_SUBTABLE: &str = "default";

pub(crate) struct DbInner {
    pub opts: Options,
    pub store: Store,
    pub ring: Ring<Arc<Group>>,
    pub buckets: Vec<Bucket>,
    /// The last sequence number granted (stage 2 only).
    pub next_seq: AtomicU64,
    pub visible: AtomicU64,
    /// The engine run this instance writes (stamped on every item).
    pub run: u64,
    /// How stage 4 fences (resolved: never `Auto`).
    pub commit_mode: CommitMode,
    /// Whether buckets pass leadership on at take (resolved [`Options::pipelining`]).
    pub pipelined: bool,
    /// How long a writer waiting for its group yields before blocking. None on `msync`, where
    /// the wait is a file sync and a yielding thread delays the kernel threads completing it.
    /// Long elsewhere, where a commit takes microseconds: a wait that long means the committer
    /// lost its core, and a blocked writer woken by the committer is moved to the committer's
    /// core by the scheduler, after which the two share one core and keep waking each other.
    pub patience: std::time::Duration,
    pub poisoned: AtomicBool,
    pub poison_reason: parking_lot::Mutex<String>,
    /// This instance's identity, stamped on its subtable handles.
    id: u64,
    subtables: RwLock<HashMap<String, Subtable>>,
    by_id: ArcSwap<Vec<Option<Subtable>>>,
    create_lock: Mutex<()>,
    snapshots: Mutex<BTreeMap<u64, usize>>,
    recovery: RecoveryReport,
    closed: AtomicBool,
}

/// An open database.
pub struct Db {
    inner: Arc<DbInner>,
}

/// A consistent read view: every read through it sees exactly the writes acknowledged before
/// it was taken. Released on drop.
pub struct Snapshot {
    seq: u64,
    db: Arc<DbInner>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut s = self.db.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = s.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seq);
            }
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.opts.path)
            .finish()
    }
}

impl DbInner {
    /// Runs `f` on subtable `id`, if it exists, without taking a counted reference (a
    /// clone's reference count would be a cache line every writer shares).
    pub(crate) fn with_subtable<R>(&self, id: u32, f: impl FnOnce(&Subtable) -> R) -> Option<R> {
        self.by_id.load().get(id as usize)?.as_ref().map(f)
    }
}

impl Db {
    /// Opens the database at `opts.path`, creating the pool on first use, and recovers it.
    pub fn open(opts: Options) -> Result<Db> {
        opts.validate()?;
        let pool = if opts.pool.backend == Backend::Sim {
            Pool::create_sim(opts.pool_size, &opts.pool)?
        } else {
            Pool::open_or_create(&opts.path, opts.pool_size, &opts.pool)?
        };
        Db::open_pool(pool, opts)
    }

    /// Opens a database on an already open pool (a `sim` crash image, say).
    pub fn open_pool(pool: Pool, opts: Options) -> Result<Db> {
        opts.validate()?;
        let report = pool.report().to_string();
        let store = Store::open(Arc::new(pool), &opts)?;
        static NEXT_DB: AtomicU64 = AtomicU64::new(1);
        let db_id = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        let (subs, rec) =
            recovery::recover(&store, opts.recovery_threads, opts.recovery_mutation, db_id)?;
        store.set_clean(false)?;
        let mut by_name = HashMap::new();
        let mut by_id: Vec<Option<Subtable>> = Vec::new();
        for s in subs {
            let id = s.id() as usize;
            if by_id.len() <= id {
                by_id.resize(id + 1, None);
            }
            by_id[id] = Some(s.clone());
            by_name.insert(s.name().to_string(), s);
        }
        let commit_id = rec.commit_id;
        let commit_mode = opts.commit_mode.resolve(store.pool.backend());
        let pipelined = opts.pipelining.resolve(store.pool.backend());
        tracing::info!(
            path = %opts.path.display(), backend = %report, commit_mode = ?commit_mode,
            pipelined,
            micros = rec.elapsed.as_micros() as u64, memtables = rec.memtables,
            records = rec.records, bytes = rec.bytes_scanned, rolled_back = rec.rolled_back,
            "opened database"
        );
        let inner = Arc::new(DbInner {
            ring: Ring::new(opts.ring_capacity),
            // Unpipelined, every writer queues in one bucket: one group in flight at a time.
            buckets: (0..if pipelined { opts.commit_buckets } else { 1 })
                .map(|_| Bucket::default())
                .collect(),
            next_seq: AtomicU64::new(commit_id),
            visible: AtomicU64::new(commit_id),
            run: rec.run,
            commit_mode,
            pipelined,
            patience: if store.pool.backend() == nacre_pmem::ActiveBackend::Msync {
                std::time::Duration::ZERO
            } else {
                std::time::Duration::from_micros(1000)
            },
            poisoned: AtomicBool::new(false),
            poison_reason: parking_lot::Mutex::new(String::new()),
            id: db_id,
            subtables: RwLock::new(by_name),
            by_id: ArcSwap::from_pointee(by_id),
            create_lock: Mutex::new(()),
            snapshots: Mutex::new(BTreeMap::new()),
            recovery: rec,
            closed: AtomicBool::new(false),
            store,
            opts,
        });
        let db = Db { inner };
        db.subtable(DEFAULT_SUBTABLE)?;
        Ok(db)
    }

    /// How this database commits groups: [`CommitMode::Auto`] resolved against the pool's
    /// backend.
    pub fn commit_mode(&self) -> CommitMode {
        self.inner.commit_mode
    }

    /// What recovery did when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The pool underneath (backend report, simulator controls).
    pub fn pool(&self) -> &Arc<Pool> {
        &self.inner.store.pool
    }

    fn known_subtable(&self, name: &str) -> Option<Subtable> {
        let map = self
            .inner
            .subtables
            .read()
            .unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned()
    }

    /// The subtable `name`, created (durably) on first use.
    pub fn subtable(&self, name: &str) -> Result<Subtable> {
        if let Some(s) = self.known_subtable(name) {
            return Ok(s);
        }
        let max = nacre_halloc::SubtablePool::NAME_MAX;
        if name.is_empty() || name.len() > max {
            return Err(Error::BadSubtableName {
                name: name.into(),
                max,
            });
        }
        let _g = self
            .inner
            .create_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.known_subtable(name) {
            return Ok(s);
        }
        let store = &self.inner.store;
        let id = self.inner.by_id.load().len() as u32;
        let memtable = Arc::new(Memtable::create(
            store,
            u64::from(id),
            nacre_pmem::PmOffset::NULL,
        )?);
        let obj = store
            .subs
            .get(u64::from(id), name)
            .map_err(Error::from_alloc)?;
        store.subs.set_memlist(obj, memtable.offset(store))?;
        store.subs.commit(obj)?;
        let s = Subtable::new(self.inner.id, id, name.to_string(), obj, vec![memtable]);
        let mut by_id = self.inner.by_id.load_full().to_vec();
        by_id.push(Some(s.clone()));
        self.inner.by_id.store(Arc::new(by_id));
        self.inner
            .subtables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), s.clone());
        tracing::info!(subtable = name, id, "created subtable");
        Ok(s)
    }

    /// Names of every subtable.
    pub fn subtables(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .inner
            .subtables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    fn check_subtable(&self, s: &Subtable) -> Result<()> {
        if s.inner.db == self.inner.id {
            return Ok(());
        }
        Err(Error::InvalidOptions(format!(
            "subtable {:?} does not belong to this database",
            s.name()
        )))
    }

    /// Applies `batch` atomically and durably: when this returns `Ok`, every operation in it
    /// survives what the backend survives; after a crash, all or none of it is present.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let max = self.inner.store.zone_size as usize - ITEM_HEADER;
        for op in &batch.ops {
            if op.db != self.inner.id || self.inner.with_subtable(op.subtable, |_| ()).is_none() {
                return Err(Error::InvalidOptions(format!(
                    "batch names subtable {} of another database",
                    op.subtable
                )));
            }
            let n = record_size(op.key.len(), op.value.len());
            if n > max {
                return Err(Error::TooLarge {
                    what: "record",
                    len: n,
                    max,
                });
            }
        }
        let bytes = batch.bytes_per_subtable();
        if let Some(&(_, b)) = bytes.iter().find(|(_, b)| *b > max) {
            return Err(Error::TooLarge {
                what: "batch records for one subtable",
                len: b,
                max,
            });
        }
        self.inner.write_batch(batch, bytes)
    }

    /// Sets `key` to `value` in `subtable`, durably.
    pub fn put(
        &self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(subtable, key, value);
        self.write(b)
    }

    /// Deletes `key` from `subtable`, durably.
    pub fn delete(&self, subtable: &Subtable, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(subtable, key);
        self.write(b)
    }

    /// A snapshot of everything acknowledged so far.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self
            .inner
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let seq = self.inner.visible.load(Ordering::Acquire);
        *s.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            db: self.inner.clone(),
        }
    }

    /// The latest value of `key`, if any.
    pub fn get(&self, subtable: &Subtable, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_at_seq(
            subtable,
            key.as_ref(),
            self.inner.visible.load(Ordering::Acquire),
        )
    }

    /// The value of `key` as of `snapshot`.
    pub fn get_at(
        &self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
        snapshot: &Snapshot,
    ) -> Result<Option<Vec<u8>>> {
        self.get_at_seq(subtable, key.as_ref(), snapshot.seq)
    }

    fn get_at_seq(&self, subtable: &Subtable, key: &[u8], seq: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.lookup(subtable, key, seq)?.map(|(_, v)| v))
    }

    /// The latest value of `key` with the sequence number of the write that set it.
    pub fn get_with_seq(
        &self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        self.lookup(
            subtable,
            key.as_ref(),
            self.inner.visible.load(Ordering::Acquire),
        )
    }

    /// The sequence number of the last acknowledged write.
    pub fn latest_sequence(&self) -> u64 {
        self.inner.visible.load(Ordering::Acquire)
    }

    fn lookup(&self, subtable: &Subtable, key: &[u8], seq: u64) -> Result<Option<(u64, Vec<u8>)>> {
        self.check_subtable(subtable)?;
        for m in subtable.memtables_guard().iter() {
            if let Some((s, at)) = crate::index::MemIndex::get(&m.index, key, seq) {
                return Ok(read_value(&self.inner.store.pool, at)?.map(|v| (s, v)));
            }
        }
        Ok(None)
    }

    /// An iterator over `subtable` with the bounds and direction in `opts`, at `opts`'
    /// snapshot or at the latest acknowledged write.
    pub fn iter(&self, subtable: &Subtable, opts: IterOptions<'_>) -> Result<DbIterator> {
        self.check_subtable(subtable)?;
        let seq = opts
            .snapshot
            .map_or_else(|| self.inner.visible.load(Ordering::Acquire), |s| s.seq);
        Ok(DbIterator::new(
            self.inner.store.pool.clone(),
            subtable.memtables(),
            seq,
            opts,
        ))
    }

    /// Closes the database, recording a clean shutdown so the next open skips rollback
    /// checks. Dropping the `Db` does the same, logging instead of returning errors.
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&self) -> Result<()> {
        if self.inner.poisoned.load(Ordering::Acquire)
            || self.inner.closed.swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        self.inner.store.set_clean(true)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.close_inner() {
            tracing::error!(error = %e, "recording a clean close failed");
        }
    }
}
