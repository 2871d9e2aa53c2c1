//! One subtable's disk levels: an lsm-tree tree, through the only module that touches
//! lsm-tree's API. The version is pinned (`=3.1.10`) because `InternalValue` and `Table`,
//! which writing our own sorted stream needs, are hidden API.
//!
//! Invariants (lsm-tree 3.1.10's rules, DESIGN §4.5):
//! - D1: a spill's stream is sorted by key ascending, then sequence number descending, with no
//!   two entries of one key and sequence number (lsm-tree checks nothing; debug builds and the
//!   tests check it here).
//! - D2: every entry carries Nacre's sequence number; a read at Nacre sequence `s` asks
//!   lsm-tree for `s + 1` (its reads are exclusive).
//! - D3: the tree's own version counter (which stamps its versions; a read picks the newest
//!   version stamped below the read's sequence number) is private and set to 0 right before
//!   every spill and compaction. One spill and one compaction may run at once, so a stamp is
//!   0 or 1, and every read at Nacre sequence `s >= 1` (asking `s + 1 >= 2`) sees the tree's
//!   newest version and filters entries by sequence number alone. A read at 0 (an empty
//!   database's snapshot) finds nothing on disk without asking the tree.
//! - D4: user keys are stored behind the tag byte [`DATA`]; the spill marker is the one key
//!   behind [`META`], written in the same tables as the entries it describes, so both are
//!   registered (made durable) by one version change. Each marker's sequence number is above
//!   every earlier one's, so a read of the marker key answers the newest spill's.
//!
//! - D5: a spill or compaction step that fails with an I/O error while writing its tables, or
//!   while registering them before `current` changes, leaves the tree as it was, on disk and
//!   in memory: it is [`StepError::Transient`], and its table files are removed (every file
//!   in `tables/` numbered from the step's first table id that is neither in the current
//!   version nor in `registered`, found with both locks held so that no step is writing).
//!   Any other failure, and a registration that failed after `current` may have changed
//!   (`current` on disk names another version than the tree holds), is
//!   [`StepError::Fatal`]: its files are left for the next open to sort out.
//! - D6: L0 never holds more than [`L0_RUNS_MAX`] runs. lsm-tree 3.1.10 writes a level's run
//!   count into the version file as one byte (a 256th run wraps it, and the file, whose
//!   checksum `current` records, no longer decodes: the open fails with
//!   `InvalidTag("ChecksumType", ..)`), and every spill is an L0 run of its own (its tables
//!   hold the marker key, so they overlap every other spill's). A spill that finds L0 at the
//!   limit first runs compaction steps (threshold 0, through its gate) until L0 is below it,
//!   so spills wait for a compaction worker that fell behind (or whose steps a crash keeps
//!   cutting short); a registration that would still reach lsm-tree's limit is refused.
//!
//! Thread safety: reads are lock-free (lsm-tree's versions); spills run one at a time
//! (`spills`), as do compactions (`compactions`); a spill and a compaction may overlap
//! (lsm-tree serialises their version changes). `verify`, the removal of a failed step's
//! files, and a spill's compaction steps (D6, before it takes `spills`) take `compactions`,
//! then `spills` or nothing; nothing else holds both.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsm_tree::{AbstractTree, AnyTree, InternalValue, SequenceNumberCounter, ValueType};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{version, Faults};
use crate::error::{Error, Result};
use crate::options::DiskFault;

/// Tag byte in front of user keys.
const DATA: u8 = 1;
/// Tag byte of the spill marker's key.
const META: u8 = 0;
/// Keys lsm-tree takes are shorter than this (with the tag byte).
const KEY_MAX: usize = 65535;
/// The spill marker's key.
const MARKER_KEY: &[u8] = &[META, b's', b'p', b'i', b'l', b'l'];
/// The most runs L0 holds once a spill is registered (D6): a spill that finds this many
/// compacts first. lsm-tree's leveled compaction merges L0 from 4 tables on, so only a
/// compaction worker that fell behind lets L0 grow this far.
const L0_RUNS_MAX: usize = 32;
/// The most runs lsm-tree 3.1.10 can record in a level (its version file holds the count as
/// one byte).
const LSM_RUNS_LIMIT: usize = 255;
/// Compaction steps a spill runs at most to bring L0 below [`L0_RUNS_MAX`] (one step merges
/// all of L0 unless a fuller level scores higher).
const ROOM_STEPS: usize = 8;

/// One entry of a spill: a key's version (a value, or `None` for a tombstone).
pub(crate) struct Entry {
    pub key: Vec<u8>,
    pub seq: u64,
    pub value: Option<Vec<u8>>,
}

/// What the newest spill recorded: the memtables whose records it holds (by birth number) and
/// the highest sequence number of a record it holds; `seq` is the marker's own sequence
/// number (D4), not stored in its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marker {
    pub seq: u64,
    pub max_seq: u64,
    pub births: Vec<u64>,
}

impl Marker {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(12 + 8 * self.births.len());
        v.extend_from_slice(&self.max_seq.to_le_bytes());
        v.extend_from_slice(&(self.births.len() as u32).to_le_bytes());
        for b in &self.births {
            v.extend_from_slice(&b.to_le_bytes());
        }
        v
    }

    fn decode(seq: u64, b: &[u8]) -> Option<Marker> {
        let max_seq = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let n = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?) as usize;
        if b.len() != 12 + 8 * n {
            return None;
        }
        let births = b[12..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        Some(Marker {
            seq,
            max_seq,
            births,
        })
    }
}

/// How a spill or compaction step failed (D5).
#[derive(Debug)]
pub(crate) enum StepError {
    /// An I/O error writing or registering new tables; the tree is as it was and the step's
    /// table files are removed: the step may run again.
    Transient {
        error: Error,
        kind: std::io::ErrorKind,
    },
    /// Damage, a broken invariant, or a tree whose state on disk is not known: trying again
    /// is not safe.
    Fatal(Error),
}

impl From<Error> for StepError {
    fn from(e: Error) -> StepError {
        StepError::Fatal(e)
    }
}

impl StepError {
    /// The error itself.
    pub fn into_error(self) -> Error {
        match self {
            StepError::Transient { error, .. } | StepError::Fatal(error) => error,
        }
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Transient { error, .. } | StepError::Fatal(error) => error.fmt(f),
        }
    }
}

/// The I/O error kind of an lsm-tree error, if it is one.
fn io_kind(e: &lsm_tree::Error) -> Option<std::io::ErrorKind> {
    match e {
        lsm_tree::Error::Io(e) => Some(e.kind()),
        _ => None,
    }
}

/// The error an injected fault stands for.
fn injected(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::StorageFull,
        format!("no space left on device (injected while {what})"),
    )
}

/// Figures of one tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct TreeFigures {
    /// Tables per level (L1 first: lsm-tree's level 0 is Nacre's L1).
    pub tables: Vec<u64>,
    /// Bytes per level, as `tables`.
    pub level_bytes: Vec<u64>,
    pub disk_bytes: u64,
    pub cache_hit_rate: f64,
}

/// A subtable's disk levels.
pub(crate) struct DiskTree {
    tree: AnyTree,
    path: PathBuf,
    /// The private version counter (D3).
    counter: SequenceNumberCounter,
    spills: Mutex<()>,
    compactions: Mutex<()>,
    /// The newest spilled sequence number (the marker's).
    newest: AtomicU64,
    /// A spill registered tables since compaction last found nothing to do.
    dirty: AtomicBool,
    /// Whether the version files are checked (V1-V3 in version.rs; off only for a
    /// mutation test).
    check_versions: bool,
    /// Ids of tables that reached a version while a step was in flight (D5): never taken for
    /// a failed step's files. Ids below every step in flight are dropped.
    registered: Mutex<std::collections::BTreeSet<u64>>,
    /// The first table id of the spill and of the compaction step in flight (`u64::MAX`:
    /// none).
    spill_from: AtomicU64,
    compact_from: AtomicU64,
    /// Faults injected by tests.
    faults: Arc<Faults>,
}

fn tagged(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(DATA);
    k.extend_from_slice(key);
    k
}

impl DiskTree {
    /// Opens (or creates) the tree at `path`, sharing `cache`. With `check_versions`, its
    /// version files are checked first (V1, V2 in version.rs: lsm-tree does not check them,
    /// and its open deletes the tables a damaged version does not name), and its tables'
    /// global sequence numbers after (V3). An I/O error of lsm-tree's open is transient (the
    /// tree's version is unchanged), anything else fatal.
    pub fn open(
        path: &Path,
        cache: Arc<lsm_tree::Cache>,
        check_versions: bool,
        faults: Arc<Faults>,
    ) -> std::result::Result<DiskTree, StepError> {
        if check_versions {
            version::check_files(path)?;
        }
        let counter = SequenceNumberCounter::new(0);
        let tree = lsm_tree::Config::new(path, counter.clone(), SequenceNumberCounter::new(0))
            .use_cache(cache)
            .open()
            .map_err(|e| {
                let kind = io_kind(&e);
                let error = Error::disk("opening the disk levels", path, e);
                match kind {
                    // Creating a tree (or deleting an open's orphan tables) failed: nothing
                    // it holds changed, the open may run again.
                    Some(kind) => StepError::Transient { error, kind },
                    None => StepError::Fatal(error),
                }
            })?;
        let t = DiskTree {
            tree,
            path: path.to_path_buf(),
            counter,
            spills: Mutex::new(()),
            compactions: Mutex::new(()),
            newest: AtomicU64::new(0),
            dirty: AtomicBool::new(true),
            check_versions,
            registered: Mutex::new(std::collections::BTreeSet::new()),
            spill_from: AtomicU64::new(u64::MAX),
            compact_from: AtomicU64::new(u64::MAX),
            faults,
        };
        if let Some(bad) = t.version_problems().into_iter().next() {
            return Err(StepError::Fatal(Error::corrupt(bad)));
        }
        let newest = t.marker()?.map_or(0, |m| m.seq);
        t.newest.store(newest, Ordering::Release);
        Ok(t)
    }

    /// The newest spilled sequence number.
    pub fn newest(&self) -> u64 {
        self.newest.load(Ordering::Acquire)
    }

    /// Whether a spill registered tables since compaction last had nothing to do; clears it.
    pub fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::AcqRel)
    }

    /// Marks the tree for compaction again (a step changed it).
    pub fn set_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// What the newest spill recorded, if any spill was registered.
    pub fn marker(&self) -> Result<Option<Marker>> {
        match self.get_tagged(MARKER_KEY, u64::MAX >> 2)? {
            None => Ok(None),
            Some((seq, b)) => Marker::decode(seq, &b).map(Some).ok_or_else(|| {
                Error::corrupt(format!(
                    "disk levels at {}: the spill marker does not decode",
                    self.path.display()
                ))
            }),
        }
    }

    fn err(&self, what: &'static str, e: impl std::fmt::Debug) -> Error {
        Error::disk(what, &self.path, e)
    }

    /// Writes `entries` (sorted, D1) and `marker` as new tables, then registers them through
    /// `gate` (which runs the registration, or refuses it: a simulated power failure): when
    /// this returns `Ok`, they are durable (tables, version file and their directories
    /// synced). Returns the bytes of the new tables. A failure is transient or fatal as D5
    /// says; after a transient one the tree is as before and the spill may run again with
    /// the same marker.
    pub fn spill(
        &self,
        entries: impl Iterator<Item = Result<Entry>>,
        marker: &Marker,
        gate: impl Fn(&mut dyn FnMut() -> Result<()>) -> Result<()>,
    ) -> std::result::Result<u64, StepError> {
        self.make_room(&gate)?;
        let out = {
            let _g = self.spills.lock();
            let from = self.tree.next_table_id();
            self.spill_from.store(from, Ordering::Release);
            self.spill_locked(entries, marker, &gate)
                .map_err(|e| (e, from))
        };
        match out {
            Ok(bytes) => {
                self.spill_from.store(u64::MAX, Ordering::Release);
                Ok(bytes)
            }
            Err((e, from)) => {
                if let StepError::Transient { .. } = e {
                    let (_c, _s) = (self.compactions.lock(), self.spills.lock());
                    self.discard_unregistered(from);
                }
                self.spill_from.store(u64::MAX, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Runs in L0 of the tree's current version.
    fn l0_runs(&self) -> usize {
        self.tree
            .current_version()
            .iter_levels()
            .next()
            .map_or(0, |l| l.iter().count())
    }

    /// D6: compaction steps at threshold 0 (which keeps every version, G5 in mod.rs) until L0
    /// holds fewer than [`L0_RUNS_MAX`] runs, each through `gate` (nothing runs after a
    /// simulated power failure). Takes `compactions` while `spills` is not held. A failure is
    /// the step's (D5): after a transient one the tree is as it was.
    fn make_room(
        &self,
        gate: &impl Fn(&mut dyn FnMut() -> Result<()>) -> Result<()>,
    ) -> std::result::Result<(), StepError> {
        for _ in 0..ROOM_STEPS {
            if self.l0_runs() < L0_RUNS_MAX {
                return Ok(());
            }
            let mut step = None;
            gate(&mut || {
                step = Some(self.compact(0));
                Ok(())
            })?;
            match step {
                Some(Ok((true, _))) => self.set_dirty(),
                // Nothing to compact: the registration's own check (D6) decides.
                Some(Ok((false, _))) | None => return Ok(()),
                Some(Err(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// [`DiskTree::spill`] with `spills` held.
    fn spill_locked(
        &self,
        entries: impl Iterator<Item = Result<Entry>>,
        marker: &Marker,
        gate: &impl Fn(&mut dyn FnMut() -> Result<()>) -> Result<()>,
    ) -> std::result::Result<u64, StepError> {
        if marker.seq <= self.newest() {
            return Err(StepError::Fatal(Error::corrupt(format!(
                "spill marker at sequence {} not above the last one's {} (D4)",
                marker.seq,
                self.newest()
            ))));
        }
        // D6: only spills add runs to L0, one at a time, so this holds until the
        // registration below.
        let runs = self.l0_runs();
        if runs >= LSM_RUNS_LIMIT {
            return Err(StepError::Fatal(self.err(
                "registering spilled tables",
                format!(
                    "L0 holds {runs} runs and compaction does not reduce them; one more would \
                     make a version file lsm-tree cannot read (D6)"
                ),
            )));
        }
        let mark = InternalValue::from_components(
            MARKER_KEY.to_vec(),
            marker.encode(),
            marker.seq,
            ValueType::Value,
        );
        let fault = self.faults.get();
        let mut failed: Option<Error> = None;
        let mut last: Option<(Vec<u8>, u64)> = None;
        let mut written = 0u64;
        let stream = std::iter::once(Ok(mark)).chain(entries.map_while(|e| match e {
            Ok(e) => {
                if fault == Some(DiskFault::FullWritingTables) && written == 16 {
                    // After the writer has created its first table file.
                    return Some(Err(lsm_tree::Error::Io(injected("writing tables"))));
                }
                written += 1;
                if let Some((k, s)) = &last {
                    let sorted = (k.as_slice(), std::cmp::Reverse(*s))
                        < (e.key.as_slice(), std::cmp::Reverse(e.seq));
                    debug_assert!(sorted, "spill stream out of order (D1)");
                    if !sorted {
                        failed = Some(Error::corrupt(format!(
                            "spill stream out of order at a key of {} bytes, seq {}",
                            e.key.len(),
                            e.seq
                        )));
                        return None;
                    }
                }
                if e.key.len() >= KEY_MAX {
                    failed = Some(Error::TooLarge {
                        what: "key spilled to the disk levels",
                        len: e.key.len(),
                        max: KEY_MAX - 1,
                    });
                    return None;
                }
                let k = tagged(&e.key);
                last = Some((e.key, e.seq));
                Some(Ok(match e.value {
                    Some(v) => InternalValue::from_components(k, v, e.seq, ValueType::Value),
                    None => InternalValue::new_tombstone(k, e.seq),
                }))
            }
            Err(e) => {
                failed = Some(e);
                None
            }
        }));
        let made = self.tree.flush_to_tables(stream);
        if let Some(e) = failed {
            // A damaged record or a broken invariant: tables written but never registered are
            // deleted when the tree is next opened.
            return Err(StepError::Fatal(e));
        }
        let made = match made {
            Ok(m) => m,
            Err(e) => {
                return Err(match io_kind(&e) {
                    // D5: nothing registered, the tree untouched.
                    Some(kind) => StepError::Transient {
                        error: self.err("writing spilled tables", e),
                        kind,
                    },
                    None => StepError::Fatal(self.err("writing spilled tables", e)),
                });
            }
        };
        let Some((tables, _)) = made else {
            return Ok(0);
        };
        let bytes = tables.iter().map(|t| self.table_bytes(t.id())).sum();
        let mut io: Option<std::io::ErrorKind> = None;
        let registered = gate(&mut || {
            if fault == Some(DiskFault::FullRegistering) {
                io = Some(std::io::ErrorKind::StorageFull);
                return Err(self.err("registering spilled tables", injected("registering tables")));
            }
            self.counter.set(0);
            self.tree
                .register_tables(&tables, None, None, &[], 1)
                .map_err(|e| {
                    io = io_kind(&e);
                    self.err("registering spilled tables", e)
                })
        });
        if let Err(error) = registered {
            return Err(match io {
                Some(kind) if self.version_unchanged() => StepError::Transient { error, kind },
                _ => StepError::Fatal(error),
            });
        }
        self.record_registered(tables.iter().map(|t| t.id()));
        self.newest.fetch_max(marker.seq, Ordering::AcqRel);
        self.set_dirty();
        Ok(bytes)
    }

    /// Whether `current` on disk names the version the open tree holds: a registration that
    /// failed left the tree as it was (D5).
    fn version_unchanged(&self) -> bool {
        let open = self.tree.current_version().id();
        match version::check_files(&self.path) {
            Ok(Some(id)) => id == open,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "reading the disk levels' current version");
                false
            }
        }
    }

    /// Tables `ids` reached a version: kept from every failed step's removal (D5).
    fn record_registered(&self, ids: impl Iterator<Item = u64>) {
        let floor = self
            .spill_from
            .load(Ordering::Acquire)
            .min(self.compact_from.load(Ordering::Acquire));
        let mut r = self.registered.lock();
        r.retain(|&id| id >= floor);
        r.extend(ids.filter(|&id| id >= floor));
    }

    /// Removes the files a failed step left (D5): every table file numbered `from` or above
    /// that neither the current version names nor any version named while a step was in
    /// flight. The caller holds `compactions` and `spills`, so no step is writing a table.
    fn discard_unregistered(&self, from: u64) {
        let dir = self.path.join("tables");
        let version = self.tree.current_version();
        let live: std::collections::HashSet<u64> = version.iter_tables().map(|t| t.id()).collect();
        let kept = self.registered.lock().clone();
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "listing tables to remove a failed step's files");
                return;
            }
        };
        for e in rd.flatten() {
            let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            if id < from || live.contains(&id) || kept.contains(&id) {
                continue;
            }
            let file = e.path();
            if !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            match std::fs::remove_file(&file) {
                Ok(()) => {
                    tracing::debug!(file = %file.display(), "removed a failed step's table file")
                }
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "removing a failed step's table file")
                }
            }
        }
    }

    fn table_bytes(&self, id: u64) -> u64 {
        std::fs::metadata(self.path.join("tables").join(id.to_string())).map_or(0, |m| m.len())
    }

    /// Runs one leveled compaction step if the tree needs one. `threshold`: versions below it
    /// that a newer version shadows may be dropped (0 keeps every version). Returns whether
    /// the tree changed, and the bytes of the tables it wrote. A failure is transient or
    /// fatal as D5 says.
    pub fn compact(&self, threshold: u64) -> std::result::Result<(bool, u64), StepError> {
        let _g = self.compactions.lock();
        let from = self.tree.next_table_id();
        self.compact_from.store(from, Ordering::Release);
        let out = self.compact_locked(threshold);
        if let Err(StepError::Transient { .. }) = out {
            let _s = self.spills.lock();
            self.discard_unregistered(from);
        }
        self.compact_from.store(u64::MAX, Ordering::Release);
        out
    }

    /// [`DiskTree::compact`] with `compactions` held.
    fn compact_locked(&self, threshold: u64) -> std::result::Result<(bool, u64), StepError> {
        let version = self.tree.current_version();
        let before: std::collections::HashSet<u64> =
            version.iter_tables().map(|t| t.id()).collect();
        let fail = |what: &'static str, e: lsm_tree::Error| match io_kind(&e) {
            Some(kind) if self.version_unchanged() => StepError::Transient {
                error: self.err(what, e),
                kind,
            },
            _ => StepError::Fatal(self.err(what, e)),
        };
        self.counter.set(0);
        let strategy = Arc::new(lsm_tree::compaction::Leveled::default());
        let compacted = self.tree.compact(strategy, threshold);
        // A step that installed its tables and then failed (pruning old version files) still
        // changed the tree: what it wrote is kept.
        let after = self.tree.current_version();
        let new: Vec<u64> = after
            .iter_tables()
            .map(|t| t.id())
            .filter(|id| !before.contains(id))
            .collect();
        self.record_registered(new.iter().copied());
        compacted.map_err(|e| fail("compacting the disk levels", e))?;
        if after.id() == version.id() {
            return Ok((false, 0));
        }
        let written = new.iter().map(|&id| self.table_bytes(id)).sum();
        // Old versions (and the files only they name) go once no read holds them: a
        // compaction with threshold 0 does not prune them itself.
        self.counter.set(0);
        self.tree
            .register_tables(&[], None, None, &[], 1)
            .map_err(|e| fail("pruning old versions of the disk levels", e))?;
        Ok((true, written))
    }

    /// The newest version of `key` visible at `seq`, with its sequence number: `None` if
    /// there is none or it is a tombstone. Reads the tables level by level, newest run first,
    /// as lsm-tree's own `get` does, so that a table failing its checks is named.
    pub fn get(&self, key: &[u8], seq: u64) -> Result<Option<(u64, Vec<u8>)>> {
        if seq == 0 {
            return Ok(None);
        }
        self.get_tagged(&tagged(key), seq)
    }

    /// The sequence number of the newest version of `key`, a tombstone included (what a
    /// transaction's conflict check asks).
    pub fn newest_seq(&self, key: &[u8]) -> Result<Option<u64>> {
        Ok(self
            .newest_tagged(&tagged(key), u64::MAX - 1)?
            .map(|(seq, _)| seq))
    }

    /// [`DiskTree::get`] of a tagged key.
    fn get_tagged(&self, k: &[u8], seq: u64) -> Result<Option<(u64, Vec<u8>)>> {
        Ok(self
            .newest_tagged(k, seq)?
            .and_then(|(s, v)| v.map(|v| (s, v))))
    }

    /// The newest version of tagged key `k` visible at `seq`: its sequence number and value
    /// (`None`: a tombstone).
    fn newest_tagged(&self, k: &[u8], seq: u64) -> Result<Option<(u64, Option<Vec<u8>>)>> {
        let version = self.tree.current_version();
        let hash = lsm_tree::table::filter::standard_bloom::Builder::get_hash(k);
        for level in version.iter_levels() {
            for run in level.iter() {
                let Some(t) = run.get_for_key(k) else {
                    continue;
                };
                match t.get(k, seq + 1, hash) {
                    Ok(None) => {}
                    Ok(Some(iv)) => {
                        let value =
                            (iv.key.value_type == ValueType::Value).then(|| iv.value.to_vec());
                        return Ok(Some((iv.key.seqno, value)));
                    }
                    Err(e) => return Err(self.table_err(t.id(), e)),
                }
            }
        }
        Ok(None)
    }

    /// A read of table `id` failed with `e`: [`Error::Corrupt`] naming the table's file when
    /// it failed a check, [`Error::Disk`] otherwise.
    fn table_err(&self, id: u64, e: lsm_tree::Error) -> Error {
        let file = self.path.join("tables").join(id.to_string());
        match e {
            lsm_tree::Error::Io(e) => Error::disk("reading a table", &file, e),
            e => Error::corrupt(format!(
                "disk table {} fails its checks: {e:?}",
                file.display()
            )),
        }
    }

    /// Live keys in `[lower, upper)` visible at `seq`, with their values, in key order
    /// (reverse: `next_back`).
    pub fn range(
        &self,
        lower: std::ops::Bound<&[u8]>,
        upper: std::ops::Bound<&[u8]>,
        seq: u64,
    ) -> DiskRange {
        use std::ops::Bound;
        let lo = match lower {
            Bound::Included(k) => Bound::Included(tagged(k)),
            Bound::Excluded(k) => Bound::Excluded(tagged(k)),
            Bound::Unbounded => Bound::Included(vec![DATA]),
        };
        let hi = match upper {
            Bound::Included(k) => Bound::Included(tagged(k)),
            Bound::Excluded(k) => Bound::Excluded(tagged(k)),
            Bound::Unbounded => Bound::Excluded(vec![DATA + 1]),
        };
        DiskRange {
            inner: match seq {
                // D3: nothing on disk is at sequence 0.
                0 => Box::new(std::iter::empty()),
                _ => self.tree.range((lo, hi), seq + 1, None),
            },
            tree: self.tree.clone(),
            path: self.path.clone(),
        }
    }

    /// V3 for the tree's current version (version.rs): a line per table breaking it.
    fn version_problems(&self) -> Vec<String> {
        if !self.check_versions {
            return Vec::new();
        }
        let version = self.tree.current_version();
        version::check_global_seqnos(
            &self.path,
            version.id(),
            version.iter_tables().map(|t| (t.id(), t.global_seqno())),
        )
    }

    /// Checks the version files on disk against what the open tree holds (V1-V3 in
    /// version.rs, with no spill or compaction changing them meanwhile), then reads every
    /// table through (no compaction runs meanwhile, so none is deleted under it): tables read,
    /// their bytes, and a line per problem, naming its file.
    pub fn verify(&self) -> (u64, u64, Vec<String>) {
        let _g = self.compactions.lock();
        let mut bad = Vec::new();
        if self.check_versions {
            let _s = self.spills.lock();
            let open = self.tree.current_version().id();
            match version::check_files(&self.path) {
                Err(e) => bad.push(e.to_string()),
                Ok(Some(id)) if id == open => {}
                Ok(named) => bad.push(format!(
                    "disk levels: {} names version {named:?}, but the open tree is at version \
                     {open}",
                    self.path.join("current").display()
                )),
            }
            bad.extend(self.version_problems());
        }
        let version = self.tree.current_version();
        let (mut n, mut bytes) = (0, 0);
        for t in version.iter_tables() {
            n += 1;
            bytes += self.table_bytes(t.id());
            if let Some(Err(e)) = t.iter().find(|r| r.is_err()) {
                let file = self.path.join("tables").join(t.id().to_string());
                bad.push(format!(
                    "disk table {} fails its checks: {e:?}",
                    file.display()
                ));
            }
        }
        (n, bytes, bad)
    }

    /// Tables per level, bytes on disk, block-cache hit rate.
    pub fn figures(&self) -> TreeFigures {
        let tables = (0..7)
            .map(|i| self.tree.level_table_count(i).unwrap_or(0) as u64)
            .collect();
        let level_bytes = self
            .tree
            .current_version()
            .iter_levels()
            .map(|l| l.size())
            .collect();
        TreeFigures {
            tables,
            level_bytes,
            disk_bytes: self.tree.disk_space(),
            cache_hit_rate: self.tree.metrics().block_cache_hit_rate(),
        }
    }
}

/// An iterator over a tree's live keys (see [`DiskTree::range`]).
pub(crate) struct DiskRange {
    inner: Box<dyn DoubleEndedIterator<Item = lsm_tree::IterGuardImpl> + Send + 'static>,
    tree: AnyTree,
    path: PathBuf,
}

impl DiskRange {
    fn row(&self, g: lsm_tree::IterGuardImpl) -> Result<(Vec<u8>, Vec<u8>)> {
        use lsm_tree::Guard;
        let (k, v) = g.into_inner().map_err(|e| self.scan_err(e))?;
        Ok((k.get(1..).unwrap_or_default().to_vec(), v.to_vec()))
    }

    /// A scan failed with `e`: lsm-tree's error names no table, so every table is read
    /// through to find one that fails its checks, and the error names its file.
    fn scan_err(&self, e: lsm_tree::Error) -> Error {
        if let lsm_tree::Error::Io(e) = e {
            return Error::disk("reading the disk levels", &self.path, e);
        }
        let version = self.tree.current_version();
        for t in version.iter_tables() {
            if let Some(Err(te)) = t.iter().find(|r| r.is_err()) {
                let file = self.path.join("tables").join(t.id().to_string());
                return Error::corrupt(format!(
                    "disk table {} fails its checks: {te:?}",
                    file.display()
                ));
            }
        }
        Error::corrupt(format!(
            "disk levels at {} fail their checks: {e:?}",
            self.path.display()
        ))
    }
}

impl Iterator for DiskRange {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let g = self.inner.next()?;
        Some(self.row(g))
    }
}

impl DoubleEndedIterator for DiskRange {
    fn next_back(&mut self) -> Option<Self::Item> {
        let g = self.inner.next_back()?;
        Some(self.row(g))
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn entry(k: &[u8], seq: u64, v: Option<&[u8]>) -> Result<Entry> {
        Ok(Entry {
            key: k.to_vec(),
            seq,
            value: v.map(<[u8]>::to_vec),
        })
    }

    fn spill(t: &DiskTree, entries: Vec<Result<Entry>>, max_seq: u64) {
        let m = Marker {
            seq: max_seq,
            max_seq,
            births: vec![max_seq],
        };
        t.spill(entries.into_iter(), &m, |r| r())
            .map_err(StepError::into_error)
            .expect("spill");
    }

    /// Compacts until nothing changes (every table ends in the last level).
    fn compact_fully(t: &DiskTree, threshold: u64) {
        for _ in 0..64 {
            if !t
                .compact(threshold)
                .map_err(StepError::into_error)
                .expect("compact")
                .0
            {
                return;
            }
        }
        panic!("compaction never settled");
    }

    #[test]
    fn compaction_at_threshold_zero_keeps_what_snapshots_read_and_hides_deleted_keys() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
        let t = DiskTree::open(dir.path(), cache, true, Arc::default()).expect("open");
        // Five spills, each overwriting or deleting keys of the previous ones.
        for round in 0..5u64 {
            let base = 100 * (round + 1);
            let mut es = Vec::new();
            for k in 0..50u64 {
                let key = format!("k{k:03}").into_bytes();
                let v = format!("r{round}").into_bytes();
                let del = (k + round) % 3 == 0;
                es.push(entry(&key, base + k, (!del).then_some(&v[..])));
            }
            spill(&t, es, base + 99);
        }
        let want = |k: u64, at: u64| -> Option<Vec<u8>> {
            // The newest round whose write of k is at or below `at`.
            (0..5u64)
                .rev()
                .find(|r| 100 * (r + 1) + k <= at)
                .and_then(|r| ((k + r) % 3 != 0).then(|| format!("r{r}").into_bytes()))
        };
        let check = |what: &str| {
            for k in 0..50u64 {
                let key = format!("k{k:03}").into_bytes();
                for at in [150, 250, 350, 450, 600] {
                    let got = t.get(&key, at).expect("get").map(|(_, v)| v);
                    assert_eq!(got, want(k, at), "{what}: k{k} at {at}");
                }
            }
        };
        check("before compaction");
        assert_eq!(t.figures().tables[0], 5, "five L0 runs");
        compact_fully(&t, 0);
        let f = t.figures();
        assert!(
            f.tables[0] < 5 && f.tables.iter().sum::<u64>() > 0,
            "compacted: {f:?}"
        );
        check("after compaction at threshold 0");
        // Every reader at or above the newest sequence number: older versions may go, and
        // deleted keys stay deleted.
        compact_fully(&t, 600);
        for k in 0..50u64 {
            let key = format!("k{k:03}").into_bytes();
            assert_eq!(t.get(&key, 600).expect("get").map(|(_, v)| v), want(k, 600));
        }
        let rows: Vec<_> = t
            .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, 600)
            .map(|r| r.expect("row").0)
            .collect();
        let live: Vec<Vec<u8>> = (0..50u64)
            .filter(|&k| want(k, 600).is_some())
            .map(|k| format!("k{k:03}").into_bytes())
            .collect();
        assert_eq!(rows, live);
    }

    /// V3 (version.rs) holds on its own: a version file whose table has a global sequence
    /// number, with `current` recording that file's checksum, still fails the open; without
    /// the check lsm-tree opens it and the table's keys read as missing.
    #[test]
    fn a_table_with_a_global_sequence_number_fails_the_open_even_with_a_matching_checksum() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
        {
            let t = DiskTree::open(dir.path(), cache.clone(), true, Arc::default()).expect("open");
            spill(&t, vec![entry(b"k", 5, Some(b"v"))], 5);
        }
        let cur = dir.path().join("current");
        let mut c = std::fs::read(&cur).expect("current");
        let id = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
        let vfile = dir.path().join(format!("v{id}"));
        let tables = sfa::Reader::new(&vfile)
            .expect("sfa")
            .toc()
            .section(b"tables")
            .expect("tables")
            .pos() as usize;
        let mut v = std::fs::read(&vfile).expect("version");
        // Level count, L1's run count and its one run's table count; then the table's id,
        // checksum type and checksum come before its global_seqno.
        assert_eq!(v[tables..tables + 6], [7, 1, 1, 0, 0, 0]);
        let at = tables + 6 + 8 + 1 + 16;
        assert_eq!(v[at..at + 8], [0; 8], "global_seqno");
        v[at..at + 8].copy_from_slice(&1000u64.to_le_bytes());
        std::fs::write(&vfile, &v).expect("write");
        c[8..24].copy_from_slice(&xxhash_rust::xxh3::xxh3_128(&v).to_le_bytes());
        std::fs::write(&cur, &c).expect("write");
        let e = DiskTree::open(dir.path(), cache.clone(), true, Arc::default())
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("global sequence number 1000"), "{e}");
        let t = DiskTree::open(dir.path(), cache, false, Arc::default())
            .expect("lsm-tree alone opens it");
        assert_eq!(t.get(b"k", 10).expect("get"), None, "the key is hidden");
    }

    /// Table files in the tree's `tables` directory.
    fn table_files(dir: &Path) -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir(dir.join("tables"))
            .expect("tables")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }

    /// D5: a spill that runs out of disk space while writing its tables, or while registering
    /// them, is transient: the tree reads as before, the spill's table files are gone, and the
    /// same spill (same marker) succeeds once the fault clears.
    #[test]
    fn a_spill_failing_for_lack_of_space_leaves_the_tree_as_it_was_and_succeeds_again() {
        for fault in [DiskFault::FullWritingTables, DiskFault::FullRegistering] {
            let dir = tempfile::tempdir().expect("dir");
            let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
            let faults = Arc::new(Faults::default());
            let t = DiskTree::open(dir.path(), cache, true, faults.clone()).expect("open");
            let batch = |round: u64| -> Vec<Result<Entry>> {
                (0..500u64)
                    .map(|k| {
                        let v = format!("r{round}/{k}").into_bytes();
                        entry(
                            format!("k{k:04}").as_bytes(),
                            1000 * round + k,
                            Some(&v[..]),
                        )
                    })
                    .collect()
            };
            spill(&t, batch(1), 1999);
            let before = table_files(dir.path());
            let version = version::check_files(dir.path()).expect("current");
            faults.set(Some(fault));
            let m = Marker {
                seq: 2999,
                max_seq: 2999,
                births: vec![2],
            };
            for attempt in 0..3 {
                match t.spill(batch(2).into_iter(), &m, |r| r()) {
                    Err(StepError::Transient { kind, error }) => {
                        assert_eq!(kind, std::io::ErrorKind::StorageFull, "{fault:?}");
                        assert!(error.to_string().contains("injected"), "{error}");
                    }
                    other => panic!("{fault:?} attempt {attempt}: {other:?}"),
                }
                assert_eq!(table_files(dir.path()), before, "{fault:?}: files removed");
                assert_eq!(version::check_files(dir.path()).expect("current"), version);
                assert_eq!(t.newest(), 1999);
                let got = t.get(b"k0007", 5000).expect("get").map(|(_, v)| v);
                assert_eq!(got.as_deref(), Some(&b"r1/7"[..]), "{fault:?}");
            }
            faults.set(None);
            t.spill(batch(2).into_iter(), &m, |r| r())
                .map_err(StepError::into_error)
                .expect("the same spill succeeds");
            assert_eq!(t.marker().expect("marker"), Some(m.clone()));
            for k in 0..500u64 {
                let got = t.get(format!("k{k:04}").as_bytes(), 5000).expect("get");
                assert_eq!(got.map(|(_, v)| v), Some(format!("r2/{k}").into_bytes()));
            }
        }
    }

    /// D5: when `current` on disk no longer names the version the open tree holds (a
    /// registration that failed after replacing it), a failed registration is fatal and no
    /// file is removed.
    #[test]
    fn a_registration_failing_after_current_changed_is_fatal() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
        let faults = Arc::new(Faults::default());
        let t = DiskTree::open(dir.path(), cache, true, faults.clone()).expect("open");
        spill(&t, vec![entry(b"a", 5, Some(b"v"))], 5);
        // Stand-in for a `current` replaced by the failed registration: it names no version
        // the open tree holds.
        let cur = dir.path().join("current");
        let good = std::fs::read(&cur).expect("current");
        let mut c = good.clone();
        let id = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
        c[..8].copy_from_slice(&(id + 1).to_le_bytes());
        std::fs::write(&cur, &c).expect("write");
        faults.set(Some(DiskFault::FullRegistering));
        let m = Marker {
            seq: 9,
            max_seq: 9,
            births: vec![9],
        };
        let before = table_files(dir.path());
        match t.spill(vec![entry(b"b", 9, Some(b"w"))].into_iter(), &m, |r| r()) {
            Err(StepError::Fatal(_)) => {}
            other => panic!("{other:?}"),
        }
        assert!(
            table_files(dir.path()).len() > before.len(),
            "nothing removed"
        );
        std::fs::write(&cur, &good).expect("restore");
    }

    /// D6: every spill is an L0 run of its own, and lsm-tree 3.1.10 records a level's run count
    /// in one byte, so with no compaction worker (or one that never finishes a step) a 256th
    /// spill used to write a version file, with a matching checksum in `current`, that the
    /// next open failed to decode (`InvalidTag("ChecksumType", ..)`). Spills now compact L0
    /// themselves at the limit, and every spill's keys stay readable, before and after a
    /// reopen.
    #[test]
    fn spills_without_a_compaction_worker_keep_l0_within_what_lsm_tree_can_record() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
        let key = |i: u64| format!("k{i:04}").into_bytes();
        {
            let t = DiskTree::open(dir.path(), cache.clone(), true, Arc::default()).expect("open");
            for i in 1..=300u64 {
                spill(&t, vec![entry(&key(i), 10 * i, Some(b"v"))], 10 * i);
                assert!(
                    t.l0_runs() <= L0_RUNS_MAX,
                    "spill {i}: {} runs",
                    t.l0_runs()
                );
            }
            // Compactions at threshold 0 keep every version a reader may ask for.
            for i in [1, 150, 300] {
                assert_eq!(t.get(&key(i), 10 * i - 1).expect("get"), None);
                let got = t.get(&key(i), 10 * i).expect("get");
                assert_eq!(got, Some((10 * i, b"v".to_vec())), "k{i:04}");
            }
        }
        let t = DiskTree::open(dir.path(), cache, true, Arc::default())
            .map_err(StepError::into_error)
            .expect("reopen");
        assert_eq!(t.marker().expect("marker").map(|m| m.seq), Some(3000));
        for i in 1..=300u64 {
            let got = t.get(&key(i), 5000).expect("get").map(|(_, v)| v);
            assert_eq!(got.as_deref(), Some(&b"v"[..]), "k{i:04}");
        }
    }

    #[test]
    fn backoff_doubles_from_100_ms_to_5_s() {
        let ms: Vec<u64> = (1..=9)
            .map(|f| crate::spiller::backoff(f).as_millis() as u64)
            .collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(crate::spiller::backoff(u32::MAX).as_millis(), 5000);
    }

    #[test]
    fn markers_round_trip_and_reject_bad_lengths() {
        let m = Marker {
            seq: 80,
            max_seq: 77,
            births: vec![3, 9, 12],
        };
        assert_eq!(Marker::decode(80, &m.encode()), Some(m.clone()));
        let mut b = m.encode();
        b.pop();
        assert_eq!(Marker::decode(80, &b), None);
    }
}
