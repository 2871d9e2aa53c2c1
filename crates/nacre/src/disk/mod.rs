//! The disk levels below the Global Index (seed 000 §3.3, DESIGN §4.5): one lsm-tree tree per
//! subtable under `Options::disk_dir`, one shared block cache. When a subtable's Global Index
//! reaches its size limit it is frozen; a disk worker streams it, sorted and with its sequence
//! numbers, into tables; once they are registered (durable), its zones are given back.
//!
//! Invariants:
//! - G2: a frozen Global Index's zones are given back only after the tables holding its
//!   records, and the marker naming its memtables, are registered (durable). A crash before
//!   that leaves the memtables in PM and unregistered tables that reopen deletes; a crash
//!   after it leaves the marker, and recovery gives the named memtables' zones back before
//!   indexing anything (`spilled`).
//! - G3: every version in PM of a key is newer than every version of it on disk (merges go
//!   oldest memtable first, freezes take the whole Global Index, and with disk levels nothing
//!   relocates records), so a read takes the first hit in: memtables, Global Index, frozen
//!   Global Index, disk.
//! - G4: with disk levels the Global Index keeps a key's oldest tombstone (disk may hold
//!   older versions); compaction drops it at the last level.
//! - G5: compaction never drops a version a live reader can read: its threshold is 0 while any
//!   read point is older than the newest spilled sequence number.
//!
//! - G6: a spill that fails with an I/O error writing or registering its tables (a full disk,
//!   a quota, EIO: D5 in tree.rs) leaves the tree as it was and its frozen Global Index
//!   frozen and readable, its zones in PM: G2 and G3 hold as before the spill, so a crash
//!   before a retry succeeds recovers the same contents. The same job (frozen Global Index,
//!   marker sequence number) runs again after a backoff (spiller.rs); no other spill starts
//!   meanwhile. Damage (a record or table failing its checks), a broken invariant, and a
//!   registration after which `current` may name a version the open tree does not hold
//!   poison the database instead: a retry would not be safe.
//!
//! Thread safety: `trees` is a mutex-guarded map of shared trees; the counters are atomics.

pub(crate) mod queue;
pub(crate) mod spill;
pub(crate) mod tree;
mod version;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::options::DiskFault;
pub(crate) use tree::{DiskRange, DiskTree, Marker, StepError};

/// The fault tests inject into the disk levels' spills, if any (`Db::inject_disk_fault`).
#[derive(Default)]
pub(crate) struct Faults(AtomicU8);

impl Faults {
    /// The fault in force.
    pub fn get(&self) -> Option<DiskFault> {
        match self.0.load(Ordering::Acquire) {
            1 => Some(DiskFault::FullWritingTables),
            2 => Some(DiskFault::FullRegistering),
            _ => None,
        }
    }

    /// Sets (or with `None` clears) the fault.
    pub fn set(&self, fault: Option<DiskFault>) {
        let v = match fault {
            None => 0,
            Some(DiskFault::FullWritingTables) => 1,
            Some(DiskFault::FullRegistering) => 2,
        };
        self.0.store(v, Ordering::Release);
    }
}

/// The file naming the disk levels' identity.
const ID_FILE: &str = "NACRE-DISK-ID";

/// Counters of the disk levels.
#[derive(Default)]
pub(crate) struct DiskCounters {
    pub spills: AtomicU64,
    pub spill_nanos: AtomicU64,
    pub spilled_entries: AtomicU64,
    pub spill_bytes: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_bytes: AtomicU64,
    pub spill_failures: AtomicU64,
}

/// The database's disk levels.
pub(crate) struct DiskTier {
    dir: PathBuf,
    cache: Arc<lsm_tree::Cache>,
    trees: Mutex<HashMap<u32, Arc<DiskTree>>>,
    pub counters: DiskCounters,
    /// Spills between the background worker and the disk worker.
    pub queue: queue::Queue,
    /// The compaction worker's stop flag and wake-up.
    stopped: Mutex<bool>,
    compactor: parking_lot::Condvar,
    /// Whether trees' version files are checked (version.rs; off only for a mutation test).
    check_versions: bool,
    /// Faults injected by tests, shared with every tree.
    pub faults: Arc<Faults>,
}

fn io(what: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::disk(what, path, e)
}

/// Writes `id` into `dir`'s identity file, durably (file and directory synced).
fn write_id(dir: &Path, id: u64) -> Result<()> {
    let path = dir.join(ID_FILE);
    let tmp = dir.join(format!("{ID_FILE}.tmp"));
    let mut f =
        std::fs::File::create(&tmp).map_err(|e| io("creating the identity file", dir, e))?;
    f.write_all(format!("{id:016x}\n").as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| io("writing the identity file", dir, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("naming the identity file", dir, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("syncing the disk directory", dir, e))
}

fn read_id(dir: &Path) -> Result<Option<u64>> {
    let path = dir.join(ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) => u64::from_str_radix(s.trim(), 16).map(Some).map_err(|_| {
            Error::corrupt(format!("{} does not hold a disk identity", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading the identity file", dir, e)),
    }
}

/// Whether `dir` holds any subtable's tree.
fn has_trees(dir: &Path) -> Result<bool> {
    let rd = std::fs::read_dir(dir).map_err(|e| io("listing the disk directory", dir, e))?;
    for e in rd {
        let e = e.map_err(|e| io("listing the disk directory", dir, e))?;
        if e.file_name().to_string_lossy().starts_with("subtable-") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A fresh identity below 2^48, never 0.
fn fresh_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x =
        crc32c::crc32c(&[t.to_le_bytes(), u64::from(std::process::id()).to_le_bytes()].concat());
    ((t ^ (u64::from(x) << 16)) & ((1 << 48) - 1)).max(1)
}

impl DiskTier {
    /// Opens the disk levels at `dir` for a database whose engine root records identity
    /// `recorded` (0: none yet). Returns the tier and the identity to record (creating the
    /// directory and its identity file on first use). `check_versions`: check each tree's
    /// version files when it is opened and verified (version.rs).
    pub fn open(
        dir: &Path,
        recorded: u64,
        cache_bytes: u64,
        check_versions: bool,
    ) -> Result<(DiskTier, u64)> {
        std::fs::create_dir_all(dir).map_err(|e| io("creating the disk directory", dir, e))?;
        let found = read_id(dir)?;
        let id = match (recorded, found) {
            (0, None) => {
                let id = fresh_id();
                write_id(dir, id)?;
                id
            }
            // A crash after the file was written and before the engine root recorded it:
            // nothing was spilled yet.
            (0, Some(f)) if !has_trees(dir)? => f,
            (0, Some(f)) => {
                return Err(Error::InvalidOptions(format!(
                    "{} holds the disk levels of another database (identity {f:x})",
                    dir.display()
                )))
            }
            (r, Some(f)) if r == f => r,
            (r, f) => {
                return Err(Error::InvalidOptions(format!(
                    "this database keeps data in disk levels with identity {r:x}, but {} {}",
                    dir.display(),
                    f.map_or("holds none".to_string(), |f| format!(
                        "holds identity {f:x}"
                    ))
                )))
            }
        };
        let tier = DiskTier {
            dir: dir.to_path_buf(),
            cache: Arc::new(lsm_tree::Cache::with_capacity_bytes(cache_bytes)),
            trees: Mutex::new(HashMap::new()),
            counters: DiskCounters::default(),
            queue: queue::Queue::default(),
            stopped: Mutex::new(false),
            compactor: parking_lot::Condvar::new(),
            check_versions,
            faults: Arc::default(),
        };
        Ok((tier, id))
    }

    fn tree_dir(&self, sub: u32) -> PathBuf {
        self.dir.join(format!("subtable-{sub}"))
    }

    /// The tree of subtable `sub`, if it has one: every tree on disk is opened by
    /// [`DiskTier::markers`] when the database opens, and every later one by
    /// [`DiskTier::tree`], so this is a map lookup (reads call it on every miss in PM).
    pub fn existing(&self, sub: u32) -> Option<Arc<DiskTree>> {
        self.trees.lock().get(&sub).cloned()
    }

    /// The tree of subtable `sub`, created on first use.
    pub fn tree(&self, sub: u32) -> Result<Arc<DiskTree>> {
        self.tree_or_step_error(sub).map_err(StepError::into_error)
    }

    /// [`DiskTier::tree`], saying whether a failure is transient (D5 in tree.rs).
    pub fn tree_or_step_error(&self, sub: u32) -> std::result::Result<Arc<DiskTree>, StepError> {
        let mut trees = self.trees.lock();
        if let Some(t) = trees.get(&sub) {
            return Ok(t.clone());
        }
        let t = Arc::new(DiskTree::open(
            &self.tree_dir(sub),
            self.cache.clone(),
            self.check_versions,
            self.faults.clone(),
        )?);
        trees.insert(sub, t.clone());
        Ok(t)
    }

    /// The newest spill marker of every subtable with disk levels, opening every tree. With
    /// `salvage`, a tree that fails to open is left closed and named with the failure in the
    /// second map (its subtable is then lost to this open; nothing in its directory is
    /// touched, since the version checks run before lsm-tree opens it); without, the first
    /// failure is the result.
    #[allow(clippy::type_complexity)]
    pub fn markers(&self, salvage: bool) -> Result<(HashMap<u64, Marker>, HashMap<u64, String>)> {
        let mut out = HashMap::new();
        let mut lost = HashMap::new();
        let rd = std::fs::read_dir(&self.dir)
            .map_err(|e| io("listing the disk directory", &self.dir, e))?;
        for e in rd {
            let e = e.map_err(|e| io("listing the disk directory", &self.dir, e))?;
            let name = e.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("subtable-"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            match self.tree(id).and_then(|t| t.marker()) {
                Ok(Some(m)) => {
                    out.insert(u64::from(id), m);
                }
                Ok(None) => {}
                Err(e) if salvage => {
                    // A tree whose open succeeded but whose marker is unreadable stays out too.
                    self.trees.lock().remove(&id);
                    lost.insert(u64::from(id), e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        Ok((out, lost))
    }

    /// The figures of every tree and of the spills and compactions so far.
    pub fn stats(&self) -> crate::stats::DiskStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = crate::stats::DiskStats {
            level_tables: vec![0; 7],
            level_bytes: vec![0; 7],
            spills: get(&c.spills),
            spill_time: std::time::Duration::from_nanos(get(&c.spill_nanos)),
            spilled_entries: get(&c.spilled_entries),
            spill_bytes_written: get(&c.spill_bytes),
            compactions: get(&c.compactions),
            compaction_bytes_written: get(&c.compaction_bytes),
            failed_spills: get(&c.spill_failures),
            cache_bytes: self.cache.size(),
            ..Default::default()
        };
        let (mut hits, mut n) = (0.0, 0usize);
        for (_, t) in self.trees() {
            let f = t.figures();
            for (i, c) in f.tables.iter().enumerate().take(7) {
                s.level_tables[i] += c;
            }
            for (i, b) in f.level_bytes.iter().enumerate().take(7) {
                s.level_bytes[i] += b;
            }
            s.disk_bytes += f.disk_bytes;
            hits += f.cache_hit_rate;
            n += 1;
        }
        s.cache_hit_rate = if n == 0 { 1.0 } else { hits / n as f64 };
        s
    }

    /// Every open tree, by subtable id.
    pub fn trees(&self) -> Vec<(u32, Arc<DiskTree>)> {
        let mut v: Vec<_> = self
            .trees
            .lock()
            .iter()
            .map(|(k, t)| (*k, t.clone()))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Stops both disk workers.
    pub fn stop(&self) {
        self.queue.stop();
        *self.stopped.lock() = true;
        self.compactor.notify_all();
    }

    /// Wakes the compaction worker (a spill registered tables).
    pub fn wake_compactor(&self) {
        self.compactor.notify_all();
    }

    /// Compaction worker: waits up to `idle` for a wake-up; whether the workers are stopping.
    pub fn compactor_wait(&self, idle: std::time::Duration) -> bool {
        let mut s = self.stopped.lock();
        if !*s {
            self.compactor.wait_for(&mut s, idle);
        }
        *s
    }

    /// Whether the workers are stopping.
    pub fn stopping(&self) -> bool {
        *self.stopped.lock()
    }

    /// Counts one spill.
    pub fn spilled(&self, entries: u64, bytes: u64, took: std::time::Duration) {
        let c = &self.counters;
        c.spills.fetch_add(1, Ordering::Relaxed);
        c.spilled_entries.fetch_add(entries, Ordering::Relaxed);
        c.spill_bytes.fetch_add(bytes, Ordering::Relaxed);
        c.spill_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }
}
