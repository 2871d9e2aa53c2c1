//! `Db`: the embedded engine's public face.
//!
//! Thread safety: `Db` is `Send + Sync`; share it by reference or `Arc`. Writers go through
//! the commit path (`commit.rs`); readers take a sequence number (`visible` or a snapshot's)
//! and read the lock-free memtable indexes, so readers never block writers.
//!
//! Layers (imports go one way): the shared state (`core.rs`), the commit path (`commit.rs`),
//! the engine that holds both (`engine.rs`) and the background worker that drives it, then
//! this public face.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;

use nacre_pmem::{Backend, Pool};

use crate::art::ArtIndex;
use crate::batch::WriteBatch;
use crate::blob::Blobs;
use crate::commit::CommitPath;
use crate::core::Shared;
use crate::disk::DiskTier;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gi::GlobalIndex;
use crate::iter::{DbIterator, IterOptions};
use crate::memtable::{Memtable, Role};
use crate::options::{CommitMode, Options, RecoveryMutation};
use crate::outcome::WriteFuture;
use crate::recovery::{self, RecoveryReport};
use crate::space::Space;
use crate::store::Store;
use crate::subtable::Subtable;
use crate::txn::{Transaction, TxnOptions};
use crate::view::{MemSource, Snapshot, Snapshots, Tickets, View};

/// Name of the subtable every database has.
pub const DEFAULT_SUBTABLE: &str = "default";

/// The controls of a `sim` pool (see [`Db::sim`]).
#[doc(hidden)]
pub struct SimHandle(Arc<Pool>);

impl std::ops::Deref for SimHandle {
    type Target = nacre_pmem::SimControl;

    fn deref(&self) -> &nacre_pmem::SimControl {
        match self.0.sim() {
            Some(s) => s,
            None => unreachable!("a SimHandle is made only for a sim pool"),
        }
    }
}

/// An open database.
pub struct Db {
    inner: Arc<Engine>,
    worker: Option<std::thread::JoinHandle<()>>,
    disk_workers: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.opts.path)
            .finish()
    }
}

impl Db {
    /// Opens the database at `opts.path`, creating the pool on first use, and recovers it.
    pub fn open(opts: Options) -> Result<Db> {
        opts.validate()?;
        if opts.pool.backend == Backend::Sim {
            let pool = Pool::create_sim(opts.pool_size, &opts.pool)?;
            return Db::open_pool(pool, opts);
        }
        let existed = opts.path.exists();
        let pool = Pool::open_or_create(&opts.path, opts.pool_size, &opts.pool)?;
        let path = opts.path.clone();
        let is_file = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
        Db::open_pool(pool, opts).inspect_err(|e| {
            // A database this call created and could not set up is removed, so a retry
            // with other options starts afresh (the pool was unmapped and unlocked on drop).
            if !existed && is_file {
                match std::fs::remove_file(&path) {
                    Ok(()) => tracing::info!(path = %path.display(), error = %e, "removed the pool this failed open created"),
                    Err(r) => tracing::warn!(path = %path.display(), error = %r, "could not remove the pool this failed open created"),
                }
            }
        })
    }

    /// Opens a database on an already open pool (a `sim` crash image, say).
    pub fn open_pool(pool: Pool, mut opts: Options) -> Result<Db> {
        opts.validate()?;
        if opts.persistent_index && pool.report().active == nacre_pmem::ActiveBackend::Msync {
            // Every persist of the index's PMwCAS is a fence, and a fence on `msync` is an
            // msync(2) of the lines written since the last: on a disk, merging one 64 MiB
            // memtable into the tree took about 70 s, and writers stalled behind it.
            tracing::warn!(
                "the persistent index is off on the msync backend (each of its persists \
                 would be a system call); it needs dax or emulated"
            );
            opts.persistent_index = false;
            opts.persistent_index_reads = false;
        }
        let report = pool.report().to_string();
        let store = Store::open(Arc::new(pool), &opts)?;
        static NEXT_DB: AtomicU64 = AtomicU64::new(1);
        let db_id = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        let tickets = Arc::new(Tickets::default());
        let space = Space::new(store.zones.objects().shape().count, store.mems.slots());
        // Recovery starts the run after the stored one; blobs made from now on carry it.
        let blobs = Blobs::new(store.run() + 1);
        let disk = match (&opts.disk_dir, store.disk_tier()) {
            (None, 0) => None,
            (None, id) => {
                return Err(Error::InvalidOptions(format!(
                    "this database keeps data in disk levels (identity {id:x}): \
                     Options::disk_dir must name their directory"
                )))
            }
            (Some(dir), recorded) => {
                let check_versions =
                    opts.recovery_mutation != Some(RecoveryMutation::SkipDiskVersionCheck);
                let (tier, id) =
                    DiskTier::open(dir, recorded, opts.disk_cache_size, check_versions)?;
                if recorded == 0 {
                    store.set_disk_tier(id)?;
                }
                Some(Arc::new(tier))
            }
        };
        let spilled = match &disk {
            None => None,
            Some(d) => {
                let mut on = recovery::OnDisk::default();
                let (markers, lost) = d.markers(opts.salvage)?;
                for (id, m) in markers {
                    on.max_seq = on.max_seq.max(m.max_seq);
                    on.births.insert(id, m.births.into_iter().collect());
                }
                on.lost = lost;
                Some(on)
            }
        };
        let index_ready = Arc::new(crate::gi::pending::IndexReady::default());
        if opts.hold_rebuild {
            index_ready.hold();
        }
        let how = recovery::How {
            threads: opts.recovery_threads,
            mutation: opts.recovery_mutation,
            salvage: opts.salvage,
            spilled,
            ready: index_ready.clone(),
        };
        let (subs, rec, deferred) =
            recovery::recover(&store, how, db_id, &tickets, &space, &blobs)?;
        if deferred.is_none() {
            index_ready.set(Ok(()));
        }
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
        // New subtables never take a lost one's id.
        if let Some(max) = rec.lost.iter().filter_map(|l| l.id).max() {
            if by_id.len() <= max as usize {
                by_id.resize(max as usize + 1, None);
            }
        }
        let commit_id = rec.commit_id;
        tracing::info!(
            path = %opts.path.display(), backend = %report,
            commit_mode = ?opts.commit_mode.resolve(store.pool.backend()),
            pipelined = opts.pipelining.resolve(store.pool.backend()),
            micros = rec.elapsed.as_micros() as u64, memtables = rec.memtables,
            records = rec.records, bytes = rec.bytes_scanned, rolled_back = rec.rolled_back,
            created = rec.created, scan_micros = rec.scan_elapsed.as_micros() as u64,
            gi_micros = rec.gi_elapsed.as_micros() as u64,
            reconcile_micros = rec.reconcile_elapsed.as_micros() as u64,
            "opened database"
        );
        let inner = Arc::new(Engine {
            commit: CommitPath::new(&opts, store.pool.backend(), commit_id, rec.run),
            sh: Shared {
                visible: AtomicU64::new(commit_id),
                poisoned: AtomicBool::new(false),
                poison_reason: parking_lot::Mutex::new(String::new()),
                id: db_id,
                subtables: RwLock::new(by_name),
                by_id: ArcSwap::from_pointee(by_id),
                create_lock: Mutex::new(()),
                snapshots: Arc::new(Snapshots::default()),
                tickets,
                space,
                blobs,
                stop: AtomicBool::new(false),
                pause: parking_lot::Mutex::new(()),
                disk,
                spill_all: AtomicBool::new(false),
                retired_trees: parking_lot::Mutex::new(Vec::new()),
                index_ready,
                deferred: parking_lot::Mutex::new(deferred),
                store,
                opts,
            },
            recovery: rec,
            closed: AtomicBool::new(false),
            writes: crate::write::Committer::default(),
            locks: crate::txn::LockTable::new(1024),
        });
        let worker = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name("nacre-background".into())
                .spawn(move || crate::background::run(inner))
                .map_err(|e| Error::Background {
                    worker: "spawn",
                    reason: e.to_string(),
                })?
        };
        let mut disk_workers = Vec::new();
        if inner.disk.is_some() {
            type Body = fn(Arc<Engine>);
            let workers: [(&str, Body); 2] = [
                ("nacre-spill", crate::spiller::run_spills),
                ("nacre-compact", crate::spiller::run_compactions),
            ];
            for (name, body) in workers {
                let inner = inner.clone();
                disk_workers.push(
                    std::thread::Builder::new()
                        .name(name.into())
                        .spawn(move || body(inner))
                        .map_err(|e| Error::Background {
                            worker: "spawn",
                            reason: e.to_string(),
                        })?,
                );
            }
        }
        let db = Db {
            inner,
            worker: Some(worker),
            disk_workers,
        };
        db.subtable(DEFAULT_SUBTABLE)?;
        Ok(db)
    }

    /// How this database commits groups: [`CommitMode::Auto`] resolved against the pool's
    /// backend.
    pub fn commit_mode(&self) -> CommitMode {
        self.inner.commit.commit_mode
    }

    /// What recovery did when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The durability backend in use and how it was chosen.
    pub fn backend_report(&self) -> &nacre_pmem::BackendReport {
        self.inner.store.pool.report()
    }

    /// The simulator's controls, on the `sim` backend (tests). The handle keeps the pool's
    /// memory alive after the database closes, and gives no access to its bytes.
    #[doc(hidden)]
    pub fn sim(&self) -> Option<SimHandle> {
        self.inner
            .store
            .pool
            .sim()
            .is_some()
            .then(|| SimHandle(self.inner.store.pool.clone()))
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
        if !nacre_halloc::SubtablePool::valid_name(name) {
            return Err(Error::BadSubtableName {
                name: name.into(),
                max: nacre_halloc::SubtablePool::NAME_MAX,
            });
        }
        if let Some(l) = self
            .inner
            .recovery
            .lost
            .iter()
            .find(|l| l.name.as_deref() == Some(name))
        {
            return Err(Error::corrupt(format!(
                "subtable {name:?} was left out by a salvage open: {}",
                l.reason
            )));
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
        if u64::from(id) >= store.max_subtables {
            return Err(Error::TooManySubtables {
                max: store.max_subtables,
            });
        }
        let memtable = Arc::new(Memtable::create(
            store,
            u64::from(id),
            nacre_pmem::PmOffset::NULL,
            Role::User,
        )?);
        // Until the subtable object commits, nothing names the memtable: give it back on
        // failure rather than leave it for the next open's sweep.
        let made = store
            .subs
            .get(u64::from(id), name)
            .map_err(Error::from_alloc)
            .and_then(|obj| {
                let linked = store
                    .subs
                    .set_memlist(obj, memtable.offset(store))
                    .and_then(|_| store.subs.commit(obj));
                if linked.is_err() {
                    let _ = store.subs.objects().abort(obj);
                }
                linked.map(|_| obj).map_err(Error::from)
            });
        let obj = match made {
            Ok(obj) => obj,
            Err(e) => {
                if let Err(r) = store.mems.release(memtable.obj) {
                    tracing::warn!(error = %r, "giving back the memtable of a failed subtable creation failed");
                }
                return Err(e);
            }
        };
        let view = View {
            active: Some(MemSource {
                mem: memtable.clone(),
                index: Arc::new(ArtIndex::default()),
            }),
            immutables: Vec::new(),
            gi: Arc::new(GlobalIndex::mirrored(
                store
                    .gi_forest
                    .as_ref()
                    .and_then(|f| f.for_new_subtable(id)),
            )),
            frozen: None,
            _ticket: self
                .inner
                .tickets
                .issue(self.inner.visible.load(Ordering::Acquire)),
        };
        let s = Subtable::new(
            self.inner.id,
            id,
            name.to_string(),
            obj,
            vec![memtable],
            view,
        );
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

    /// Applies `batch` atomically and durably: when this returns `Ok`, every operation in it
    /// survives what the backend survives; after a crash, all or none of it is present.
    /// Values longer than an eighth of a zone are stored out of line, in zones of their own;
    /// values up to 512 MiB are accepted.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// [`Db::write`] without blocking the caller: the batch joins a queue that one committer
    /// thread drains in order, merging queued batches into shared group commits, and the
    /// returned future completes once its batch is durable (or failed). Batches submitted in
    /// order commit in that order. For servers whose threads must not park on a commit; the
    /// future also has a blocking [`WriteFuture::wait`].
    pub fn write_async(&self, batch: WriteBatch) -> WriteFuture {
        self.inner.write_async(&self.inner, batch)
    }

    /// [`Db::write_async`] of several batches at once, queued in order behind one lock and
    /// one wake of the committer: a future per batch, in the same order. Each batch is still
    /// checked, and fails, on its own.
    pub fn write_async_many(&self, batches: Vec<WriteBatch>) -> Vec<WriteFuture> {
        self.inner.write_async_many(&self.inner, batches)
    }

    /// [`Db::write_async_many`] that commits on the calling thread what it can without
    /// waiting: runs of batches are merged and committed here, in order, while none has to
    /// wait for room, for the background worker or behind batches already queued; the rest
    /// are queued for the committer thread in order. The futures of batches committed here
    /// are complete on return. For backends whose fence costs nanoseconds (`dax`,
    /// `emulated`), where a hand-off to the committer thread costs more than the commit.
    pub fn write_now(&self, batches: Vec<WriteBatch>) -> Vec<WriteFuture> {
        self.inner.write_now(&self.inner, batches)
    }

    /// [`Db::write_now`] in two steps, so that several threads commit at once: this call
    /// gives runs of `batches` their places in the commit order on the calling thread (in
    /// order, while none has to wait); [`NowGrants::finish`] then writes and commits their
    /// records, on any thread, concurrently with other callers' grants (each commits after
    /// those granted before it). A batch may depend on one granted before it. Returns a
    /// future per batch, how many of the first ones the grants complete (the rest are queued
    /// for the committer thread, in order), and the grants.
    pub fn write_now_begin(
        &self,
        batches: Vec<WriteBatch>,
    ) -> (Vec<WriteFuture>, usize, crate::NowGrants) {
        self.inner.write_now_begin(&self.inner, batches)
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

    /// Seals every subtable's active memtable and waits until the background worker has
    /// merged them into the Global Index, without spilling anything to the disk levels.
    /// A record deleted in the memtable that wrote it then no longer takes room in the pool
    /// (the merge drops both), so a caller that deleted much can give that room back now
    /// instead of when the memtable fills.
    pub fn merge_memtables(&self) -> Result<()> {
        let inner = &self.inner;
        for sub in inner.all_subtables() {
            inner.seal(sub.id());
        }
        inner.space.kick();
        self.wait_background("merging the sealed memtables", |db| {
            db.all_subtables()
                .iter()
                .all(|s| s.inner.view.load().immutables.is_empty())
        })
    }

    /// Reclaims space that deletes and overwrites left dead in the Global Index's zones now,
    /// although the pool is not short of zones (the background cleaner otherwise runs only
    /// when free zones run low), and waits until the background worker is done: it moves the
    /// live records of zones worth moving (the cleaner's thresholds when no writer waits, and
    /// a nearly empty zone even if moving it gains no zone), gives the zones back, and drops
    /// the tombstones that waited for the records they deleted to leave PM. Records still in
    /// memtables are not touched: call [`Db::merge_memtables`] first to include them.
    /// Versions that snapshots, iterators or transactions can still read stay, and so do
    /// zones they hold. Crash-safe like the cleaner: a relocation is durable or absent as a
    /// whole. With disk levels, PM is reclaimed by spilling ([`Db::flush`]) and this only
    /// drops what the current read points no longer need. Writes may go on meanwhile.
    pub fn compact_pm(&self) -> Result<()> {
        let n = self.inner.space.ask_compaction();
        self.wait_background("compacting the Global Index's zones", |db| {
            db.space.compacted(n)
        })
    }

    /// [`Db::merge_memtables`]; with disk levels, also spills every Global Index
    /// and waits until its tables are durable and its zones given back (RocksDB's `Flush`).
    /// Writes may go on meanwhile; what they add may stay in PM. A spill that failed and
    /// waits for its retry (a full disk) makes this return [`Error::SpillFailed`].
    pub fn flush(&self) -> Result<()> {
        self.merge_memtables()?;
        let inner = &self.inner;
        let Some(disk) = &inner.disk else {
            return Ok(());
        };
        inner.spill_all.store(true, Ordering::Release);
        inner.space.kick();
        let done = self.wait_background("spilling every Global Index", |db| {
            if crate::spiller::parked_error(disk).is_some() {
                return true;
            }
            let zones = db.space.zones.lock();
            !disk.queue.busy()
                && zones.is_empty()
                && db
                    .all_subtables()
                    .iter()
                    .all(|s| s.inner.view.load().frozen.is_none())
        });
        inner.spill_all.store(false, Ordering::Release);
        done?;
        // A spill that failed and waits for its retry: what is frozen stays in PM for now.
        match crate::spiller::parked_error(disk) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Injects an I/O failure into the disk levels' spills, or with `None` clears it (tests
    /// of a full disk). Without disk levels it does nothing.
    #[doc(hidden)]
    pub fn inject_disk_fault(&self, fault: Option<crate::options::DiskFault>) {
        if let Some(d) = &self.inner.disk {
            d.faults.set(fault);
        }
    }

    /// Waits until `cond` holds, the database is poisoned (its cause), or 10 minutes pass.
    fn wait_background(&self, what: &'static str, cond: impl Fn(&Engine) -> bool) -> Result<()> {
        let start = std::time::Instant::now();
        loop {
            if let Some(why) = self.inner.poisoned() {
                return Err(Error::Poisoned(why));
            }
            if cond(&self.inner) {
                return Ok(());
            }
            if start.elapsed() > std::time::Duration::from_secs(600) {
                return Err(Error::Background {
                    worker: "flush",
                    reason: format!("{what} did not finish in 10 minutes"),
                });
            }
            self.inner.space.kick();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A snapshot of everything acknowledged so far.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// Begins an optimistic transaction: it takes no locks, reads at a snapshot taken now,
    /// and its commit fails with [`Error::Conflict`] if a key it wrote or read for update was
    /// written by anyone after that snapshot. See [`Transaction`].
    pub fn begin_optimistic(&self) -> Transaction<'_> {
        self.inner.begin(None)
    }

    /// Begins a pessimistic transaction: it reads at a snapshot taken now, locks each key it
    /// writes or reads for update (waiting, failing with [`Error::LockTimeout`] or
    /// [`Error::Deadlock`] as `opts` say) and holds the locks until it ends. See
    /// [`Transaction`].
    pub fn begin_pessimistic(&self, opts: TxnOptions) -> Transaction<'_> {
        self.inner.begin(Some(opts))
    }

    /// The latest value of `key`, if any.
    pub fn get(&self, subtable: &Subtable, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        Ok(self
            .inner
            .lookup(subtable, key.as_ref(), None)?
            .map(|(_, v)| v))
    }

    /// The value of `key` as of `snapshot`.
    pub fn get_at(
        &self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
        snapshot: &Snapshot,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self
            .inner
            .lookup(subtable, key.as_ref(), Some(snapshot.sequence()))?
            .map(|(_, v)| v))
    }

    /// The latest value of `key` with the sequence number of the write that set it.
    pub fn get_with_seq(
        &self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        self.inner.lookup(subtable, key.as_ref(), None)
    }

    /// The sequence number of the last acknowledged write.
    pub fn latest_sequence(&self) -> u64 {
        self.inner.visible.load(Ordering::Acquire)
    }

    /// Scrubs the whole database: re-checks the engine root, every subtable and memtable
    /// object, every item and record up to each memtable's commit point, and every value
    /// stored out of line, and reports what it read and every problem it found
    /// ([`VerifyReport::problems`], empty when the database is whole). Changes nothing;
    /// background cleaning pauses while it runs, writes and reads go on.
    pub fn verify(&self) -> crate::VerifyReport {
        self.inner.verify()
    }

    /// Lets a Global Index rebuild held back by `Options::hold_rebuild` go (tests).
    #[doc(hidden)]
    pub fn release_rebuild(&self) {
        self.inner.index_ready.release();
    }

    /// Whether open left the Global Index's rebuild to the background
    /// (`Options::background_index_rebuild`) and it is not done yet: until then iterators,
    /// `Db::check` and reads of keys too long for the persistent index wait
    /// for it.
    pub fn rebuilding(&self) -> bool {
        !self.inner.index_ready.is_ready()
    }

    /// Whether [`Db::get`] of `key` in `subtable` may wait for the background rebuild now
    /// (see [`Db::rebuilding`]: a key the persistent index cannot hold, or a subtable whose
    /// tree cannot answer), so that a caller serving many clients on one thread can run the
    /// read later instead. False once the rebuild is done; may be true for a key a
    /// memtable would answer without waiting.
    pub fn get_may_wait(&self, subtable: &Subtable, key: impl AsRef<[u8]>) -> bool {
        if !self.rebuilding() {
            return false;
        }
        let view = subtable.inner.view.load();
        let key = key.as_ref();
        view.gi.would_wait(key) || view.frozen.as_ref().is_some_and(|f| f.gi.would_wait(key))
    }

    /// Checks what the engine holds for consistency (zone ownership, Global Index order and
    /// accounting), pausing background work; the first violation found. For tests.
    #[doc(hidden)]
    pub fn check(&self) -> std::result::Result<(), String> {
        self.inner.check()
    }

    /// What the database holds and has done (a consistent reading of each figure, not of all
    /// of them at one instant).
    pub fn stats(&self) -> crate::Stats {
        use std::sync::atomic::Ordering::Relaxed;
        let inner = &self.inner;
        // Taken first: figures read after the rebuild is installed include it.
        let rebuilding = !inner.index_ready.is_ready();
        let space = &inner.space;
        let mut subs = Vec::new();
        {
            let zones = space.zones.lock();
            for sub in inner.all_subtables() {
                let view = sub.inner.view.load();
                let mem = |m: &crate::memtable::Memtable| m.committed();
                let (gi_zones, gi_live) = zones
                    .values()
                    .filter(|z| z.sub == sub.id())
                    .fold((0, 0), |(n, b), z| (n + 1, b + z.live));
                subs.push(crate::SubtableStats {
                    name: sub.name().to_string(),
                    gi_keys: view.gi.keys() as u64,
                    gi_versions: view.gi.version_count(),
                    gi_live_bytes: gi_live,
                    gi_zones,
                    memtable_bytes: view.active.iter().map(|a| mem(&a.mem)).sum::<u64>()
                        + view.immutables.iter().map(|s| mem(&s.src.mem)).sum::<u64>(),
                    active_memtables: u64::from(view.active.is_some()),
                    immutable_memtables: view.immutables.len() as u64,
                });
            }
        }
        subs.sort_by(|a, b| a.name.cmp(&b.name));
        let held = inner.snapshots.held();
        let zones_free = inner.store.zones.free_zones();
        let blob_zones = inner.blobs.zone_count();
        crate::Stats {
            rebuilding,
            live_bytes: subs
                .iter()
                .map(|s| s.gi_live_bytes + s.memtable_bytes)
                .sum::<u64>()
                + blob_zones * inner.store.zone_size,
            blob_zones,
            blob_bytes_written: inner.blobs.written.load(Relaxed),
            subtables: subs,
            zones: inner.store.zones.objects().shape().count,
            zones_free,
            zone_size: inner.store.zone_size,
            zones_kept: space.keep,
            cleaner_moved_bytes: space.moved_bytes.load(Relaxed),
            cleaner_zones_freed: space.zones_freed.load(Relaxed),
            pm_bytes_written: space.pm_bytes.load(Relaxed),
            user_bytes_written: space.user_bytes.load(Relaxed),
            commit_groups: inner.commit.groups.load(Relaxed),
            stalls: space.stalls.load(Relaxed),
            damaged_zones: space.damaged.lock().len() as u64,
            stall_time: std::time::Duration::from_nanos(space.stall_nanos.load(Relaxed)),
            slowing_writers: zones_free < space.slow_below,
            snapshots: held.iter().map(|(_, n)| *n as u64).sum(),
            oldest_snapshot: held.first().map(|(s, _)| *s),
            locked_keys: inner.locks.held() as u64,
            disk: inner.disk.as_ref().map(|d| d.stats()),
            persistent_index: inner
                .store
                .gi_forest
                .as_ref()
                .map(|f| crate::PersistentIndexStats {
                    stale: f.is_stale(),
                    long_versions: f.long_versions(),
                }),
        }
    }

    /// An iterator over `subtable` with the bounds and direction in `opts`, at `opts`'
    /// snapshot or at the latest acknowledged write.
    pub fn iter(&self, subtable: &Subtable, opts: IterOptions<'_>) -> Result<DbIterator> {
        self.inner.iter_at(subtable, opts)
    }

    /// Closes the database, recording a clean shutdown so the next open skips rollback
    /// checks. Dropping the `Db` does the same, logging instead of returning errors.
    ///
    /// With snapshots or iterators alive the database still closes, and this returns
    /// [`Error::StillOpen`] saying how many: an iterator keeps the pool mapped and its file
    /// locked until it is dropped, so a reopen meanwhile fails with "locked".
    pub fn close(mut self) -> Result<()> {
        self.stop_worker();
        self.close_inner()?;
        match self.inner.snapshots.live() {
            (0, 0) => Ok(()),
            (snapshots, iterators) => Err(Error::StillOpen {
                snapshots,
                iterators,
            }),
        }
    }

    /// Stops the background worker and waits for it.
    fn stop_worker(&mut self) {
        self.inner.index_ready.release();
        self.inner.writes.stop();
        self.inner.stop.store(true, Ordering::Release);
        self.inner.space.kick();
        if let Some(w) = self.worker.take() {
            if w.join().is_err() {
                tracing::error!("background worker panicked");
            }
        }
        if let Some(d) = &self.inner.disk {
            d.stop();
        }
        for w in self.disk_workers.drain(..) {
            if w.join().is_err() {
                tracing::error!("disk worker panicked");
            }
        }
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
        self.stop_worker();
        if let Err(e) = self.close_inner() {
            tracing::error!(error = %e, "recording a clean close failed");
        }
    }
}
