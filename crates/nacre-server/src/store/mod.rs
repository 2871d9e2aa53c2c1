//! The keyspace: Redis keys on the engine (layout in [`encoding`]), with the rules that make
//! every command atomic, isolated and durable before it is answered.
//!
//! Invariants:
//! - K1 (isolation): a command locks the stripes of every key it names, in stripe order,
//!   and holds them from its first read until its batch is queued; commands that touch a
//!   whole database (`FLUSHDB`, `SWAPDB`) hold the namespace table exclusively.
//! - K2 (order): a command's batch gets its ticket while its locks are held, and batches reach
//!   the engine in ticket order (staged, then handed over together by `Commits::flush`, which
//!   anyone waiting for a ticket calls first), so two commands on one key commit in the order
//!   they ran.
//! - K3 (read what is queued): until a queued batch is durable, its records stay in its keys'
//!   stripes as *pending* entries, and commands read them before the engine (which shows only
//!   durable writes).
//! - K4 (answer only what is durable): a command that read a pending entry, or wrote, gets
//!   the ticket it must wait for; its reply is sent only once that ticket is durable. Tickets
//!   are handed out in queue order, and batches commit in queue order, so "durable up to t"
//!   is one number.
//! - K6 (resolve in order): on backends whose fence costs nanoseconds, a flush commits the
//!   staged batches on its own thread, and only once every commit handed to the engine's
//!   committer thread before is resolved: under one lock it takes them and has the engine
//!   give them their places in its commit order (`Db::write_now_begin`); after it lets go
//!   it writes their records (so several flushes write at once, and the engine commits
//!   them in the order of their places) and leaves them to be resolved in their turn:
//!   tickets are resolved one after another (`Commits::turn`), by one thread at a time
//!   (the one whose run is next, or the one resolving the run before it, which takes the
//!   later runs left meanwhile), each commit's failure recorded and its pending entries
//!   dropped before it is published durable. A batch the engine cannot
//!   commit without waiting goes to the committer, and every later one with it, and the
//!   completer resolves them in order, in turn.
//!   A flush takes the staged batches, and a resolver the runs in turn, at most
//!   [`commits::FLUSH_ROUNDS`] times; if more are left after its last take, it hands on to
//!   a connection waiting for a ticket (`Commits::wait` flushes and resolves when handed
//!   it), so its own connection's replies never wait behind other connections' commits
//!   for more than those rounds, and nothing is left staged or unresolved.
//! - K7 (a failure spreads only to what read it): a command's batch depends on the commits
//!   whose pending entries it read (`WriteBatch::after`, which fails it if one of them
//!   failed, and commits it only after they did or with them); a read-only reply that read
//!   from several waits for a ticket of its own that fails the same way. Other clients'
//!   writes are never refused because a commit failed.
//! - K8 (a record answers only for its key): a key longer than `encoding::LONG_KEY` is named
//!   in `meta` by its digest and its record holds the key; every load checks that the
//!   record it found holds the key asked for (a short key's record holds none), so a
//!   collision or a damaged byte is an error, never another key's data.
//! - I1 (walks do not block a serving thread): while the engine rebuilds its Global Index
//!   in the background after a start (`persistent-index yes`), its iterators wait for the
//!   rebuild, and so do point reads of keys too long for the persistent index that no
//!   memtable answers (`Db::get_may_wait`). A command's walk, or such a read, is refused
//!   then (`Txn::may_iterate`, `Txn::may_read`), the command's txn is
//!   dropped with nothing kept, and the connection waits asynchronously and runs it again
//!   once the rebuild is done; EXEC and scripts wait before they start; parked clients are
//!   served once it is done; the expire cycle, the cleaner and the key count check start
//!   after it.
//! - K5 (versions are never reused): a batch that uses a collection version at or above the
//!   recorded high-water mark carries a new mark, and batches are queued in ticket order, so
//!   the mark that survives a crash is above every version that did.

pub mod access;
pub mod background;
pub mod checkpoint;
pub mod commits;
pub mod counts;
pub mod encoding;
pub mod open;
pub mod repl_log;
pub mod repl_mark;
pub mod txn;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use nacre::{Db, Subtable};
use parking_lot::{Mutex, RwLock};

pub use commits::Commits;
pub use encoding::{Kind, Meta};
pub use txn::Txn;

/// What can go wrong in the keyspace.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine failed.
    #[error("{0}")]
    Engine(#[from] nacre::Error),
    /// A record is malformed: damaged media or a bug, never returned as data.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// A queued commit failed.
    #[error("{0}")]
    Commit(String),
    /// A walk over records while the engine still rebuilds its Global Index after a start
    /// (iterators wait for it): the command runs again once it is done (I1 in txn.rs).
    #[error("the index is still being rebuilt after a restart")]
    Rebuilding,
}

/// Shorthand.
pub type Result<T> = std::result::Result<T, StoreError>;

/// A recovery rule switched off, for the torture test's mutation checks (0: none); only
/// with the `testing` feature.
#[cfg(feature = "testing")]
pub static MUTATION: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
/// `MUTATION`: queue batches without the version mark (K5).
pub const MUTATE_NO_VERSION_MARK: u8 = 1;
/// `MUTATION`: FLUSHDB without the namespace record.
pub const MUTATE_NO_NAMESPACE_RECORD: u8 = 2;
/// `MUTATION`: a stream delivery records the group's pending entry without the consumer's
/// (breaks G1, which the torture test checks after every recovery).
pub const MUTATE_STREAM_NO_OWNER: u8 = 3;
/// `MUTATION`: batches that add or remove keys carry no key count record (C1 in counts.rs).
pub const MUTATE_NO_COUNT_RECORD: u8 = 5;
/// `MUTATION`: a flush that stops with batches staged does not hand the flush on (breaks
/// K6: a batch can be left staged with nobody to flush it).
pub const MUTATE_NO_FLUSH_HANDOFF: u8 = 4;

/// Whether the torture test switched rule `m` off (never without the `testing` feature).
#[inline]
pub(crate) fn mutated(m: u8) -> bool {
    #[cfg(feature = "testing")]
    {
        MUTATION.load(std::sync::atomic::Ordering::Relaxed) == m
    }
    #[cfg(not(feature = "testing"))]
    {
        let _ = m;
        false
    }
}

/// Stripes of key locks.
pub const STRIPES: usize = 1024;

/// The subtables the keyspace uses.
pub struct Subtables {
    /// One record per key.
    pub meta: Subtable,
    /// Members of collections.
    pub sub: Subtable,
    /// The expiry index.
    pub expire: Subtable,
    /// Versions and namespaces left for the cleaner.
    pub gc: Subtable,
    /// The server's own records.
    pub sys: Subtable,
}

/// The namespace of each logical database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespaces {
    /// Namespace of database i.
    pub gens: Vec<u32>,
    /// The next namespace to hand out.
    pub next: u32,
    /// Ticket of the last whole-database change: every command waits for it (K4).
    pub barrier: u64,
}

impl Namespaces {
    /// The `sys` record.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 + 4 * self.gens.len());
        v.extend_from_slice(&self.next.to_le_bytes());
        v.extend_from_slice(&(self.gens.len() as u32).to_le_bytes());
        for g in &self.gens {
            v.extend_from_slice(&g.to_le_bytes());
        }
        v
    }

    /// Decodes the `sys` record.
    pub fn decode(b: &[u8]) -> Result<Namespaces> {
        let bad = || StoreError::Corrupt("namespace table".into());
        let word = |i: usize| -> Result<u32> {
            let s = b.get(i * 4..i * 4 + 4).ok_or_else(bad)?;
            Ok(u32::from_le_bytes(s.try_into().map_err(|_| bad())?))
        };
        let next = word(0)?;
        let n = word(1)? as usize;
        if b.len() != 8 + 4 * n {
            return Err(bad());
        }
        let gens = (0..n).map(|i| word(2 + i)).collect::<Result<Vec<_>>>()?;
        if gens.iter().any(|&g| g == 0 || g >= next) {
            return Err(bad());
        }
        Ok(Namespaces {
            gens,
            next,
            barrier: 0,
        })
    }
}

/// Records queued but not yet durable, for one key (K3).
#[derive(Default)]
pub struct Pending {
    /// The key's metadata record as queued (`Some(None)`: deleted), if a queued batch wrote it.
    pub meta: Option<Option<Vec<u8>>>,
    /// `sub` records queued (`None`: deleted).
    pub subs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The newest ticket that wrote any of it.
    pub ticket: u64,
}

/// A watched key's state.
pub struct Watch {
    /// Clients watching it.
    pub refs: u32,
    /// Bumped by every change.
    pub epoch: u64,
}

/// The state guarded by one stripe lock.
#[derive(Default)]
pub struct Stripe {
    /// Pending entries by `meta` key.
    pub pending: HashMap<Vec<u8>, Pending>,
    /// Watched keys by (database, key).
    pub watched: HashMap<(usize, Vec<u8>), Watch>,
}

/// The keyspace.
pub struct Store {
    /// The engine.
    pub db: Db,
    /// Its subtables.
    pub subs: Subtables,
    /// Database → namespace (K1: exclusive for whole-database commands).
    pub ns: RwLock<Namespaces>,
    /// Keys per database (including expired keys not yet deleted, as Redis counts them).
    /// After a crash the start does not count keys: these hold the changes since, and the
    /// count of what was there is added once a background pass over a snapshot finishes
    /// ([`Store::counted`]).
    pub counts: Vec<AtomicI64>,
    /// Whether `counts` are whole (false while the background count runs).
    pub counted: tokio::sync::watch::Sender<bool>,
    /// Next collection version.
    pub versions: AtomicU64,
    /// Key locks and pending entries.
    pub stripes: Box<[Mutex<Stripe>]>,
    /// Queued commits and their tickets.
    pub commits: Commits,
    /// Expired keys deleted (for INFO).
    pub expired_keys: AtomicU64,
    /// Keys deleted by the cleaner's passes over old versions (for INFO).
    pub gc_records: AtomicU64,
    /// When keys were last used, and how often.
    pub access: access::AccessClock,
    /// The replication stream and its backlog.
    pub repl: repl_log::ReplLog,
    /// Whether this server replicates another (its keys then expire only when told).
    pub replica: std::sync::atomic::AtomicBool,
    /// Freezes asked for (see [`Store::freeze`]): writes wait while there is one.
    pub frozen: std::sync::atomic::AtomicU32,
    /// Writes running (see [`Store::enter_write`]).
    pub writers: std::sync::atomic::AtomicUsize,
    /// Dropped collections and namespaces the cleaner has not finished, as its last look
    /// found them (INFO's `lazyfree_pending_objects`; at most 4096).
    pub gc_pending: AtomicU64,
    /// Dropped collections whose records the cleaner has deleted (INFO's
    /// `lazyfreed_objects`).
    pub gc_objects: AtomicU64,
    /// The background count after a crash (C4 in counts.rs): 0 none or not done, 1 done and
    /// agreed with the count records, 2 done and corrected them, 3 done without records to
    /// check (it wrote them) (INFO's `key_counts_checked`).
    pub counts_checked: std::sync::atomic::AtomicU8,
}

/// A write entered (see [`Store::enter_write`]).
///
/// F1: a writer counts itself in `writers` before it reads `frozen`, and a freeze sets
/// `frozen` before it reads `writers` (both sequentially consistent): either the writer sees
/// the freeze and waits, or the freeze sees the writer and waits for it.
pub struct WriteGuard<'a>(&'a Store);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0
            .writers
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A freeze (see [`Store::freeze`]).
pub struct FreezeGuard<'a>(&'a Store);

impl Drop for FreezeGuard<'_> {
    fn drop(&mut self) {
        self.0
            .frozen
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Store {
    /// Logical databases.
    pub fn databases(&self) -> usize {
        self.counts.len()
    }

    /// Enters a write (a command that may change the keyspace, from its dispatch to its
    /// commit being queued): `None` while a freeze holds, and the caller waits and tries
    /// again (F1).
    pub fn enter_write(&self) -> Option<WriteGuard<'_>> {
        use std::sync::atomic::Ordering::SeqCst;
        self.writers.fetch_add(1, SeqCst);
        if self.frozen.load(SeqCst) > 0 {
            self.writers.fetch_sub(1, SeqCst);
            return None;
        }
        Some(WriteGuard(self))
    }

    /// Stops writes until the guard is dropped: once it returns, every write entered before
    /// has been queued and is durable, and no other can start (F1). For a consistent cut of
    /// the keyspace and the replication stream (a full synchronization's snapshot). Blocks
    /// the calling thread for as long as the writes running need to finish.
    pub fn freeze(&self) -> FreezeGuard<'_> {
        use std::sync::atomic::Ordering::SeqCst;
        self.frozen.fetch_add(1, SeqCst);
        let guard = FreezeGuard(self);
        while self.writers.load(SeqCst) > 0 {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        let last = self.commits.last();
        let _ = self.commits.wait_blocking(self, last);
        guard
    }

    /// The hash of `key` in database `db`: its stripe and its access clock slot.
    pub fn key_hash(db: usize, key: &[u8]) -> u64 {
        encoding::hash63(key) ^ (db as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// The stripe of `key` in database `db`.
    pub fn stripe_of(db: usize, key: &[u8]) -> usize {
        Self::key_hash(db, key) as usize % STRIPES
    }

    /// Whether key counts are whole.
    pub fn is_counted(&self) -> bool {
        *self.counted.borrow()
    }

    /// Waits until the engine has rebuilt its Global Index after the start (I1 in
    /// txn.rs), without holding up the runtime thread.
    pub async fn wait_rebuilt(&self) {
        while self.db.rebuilding() {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Waits until key counts are whole.
    pub async fn wait_counted(&self) {
        let mut rx = self.counted.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Keys in database `db`.
    pub fn dbsize(&self, db: usize) -> i64 {
        self.counts[db].load(Ordering::Relaxed).max(0)
    }

    /// Starts a command on `keys` (K1).
    pub fn txn<'s>(&'s self, keys: &[(usize, &[u8])], now_ms: u64) -> Txn<'s> {
        Txn::new(self, keys, now_ms)
    }

    /// Starts watching `key`; its epoch now.
    pub fn watch(&self, db: usize, key: &[u8]) -> u64 {
        let mut s = self.stripes[Self::stripe_of(db, key)].lock();
        let w = s
            .watched
            .entry((db, key.to_vec()))
            .or_insert(Watch { refs: 0, epoch: 0 });
        w.refs += 1;
        w.epoch
    }

    /// Stops watching `key`.
    pub fn unwatch(&self, db: usize, key: &[u8]) {
        let mut s = self.stripes[Self::stripe_of(db, key)].lock();
        let k = (db, key.to_vec());
        if let Some(w) = s.watched.get_mut(&k) {
            w.refs -= 1;
            if w.refs == 0 {
                s.watched.remove(&k);
            }
        }
    }
}
