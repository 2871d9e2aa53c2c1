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
//! Thread safety: reads are lock-free (lsm-tree's versions); spills run one at a time
//! (`spills`), as do compactions (`compactions`); a spill and a compaction may overlap
//! (lsm-tree serialises their version changes). `verify` takes `compactions`, then `spills`
//! while it checks the version files; nothing else holds both.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsm_tree::{AbstractTree, AnyTree, InternalValue, SequenceNumberCounter, ValueType};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::version;
use crate::error::{Error, Result};

/// Tag byte in front of user keys.
const DATA: u8 = 1;
/// Tag byte of the spill marker's key.
const META: u8 = 0;
/// Keys lsm-tree takes are shorter than this (with the tag byte).
const KEY_MAX: usize = 65535;
/// The spill marker's key.
const MARKER_KEY: &[u8] = &[META, b's', b'p', b'i', b'l', b'l'];

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
    /// global sequence numbers after (V3).
    pub fn open(
        path: &Path,
        cache: Arc<lsm_tree::Cache>,
        check_versions: bool,
    ) -> Result<DiskTree> {
        if check_versions {
            version::check_files(path)?;
        }
        let counter = SequenceNumberCounter::new(0);
        let tree = lsm_tree::Config::new(path, counter.clone(), SequenceNumberCounter::new(0))
            .use_cache(cache)
            .open()
            .map_err(|e| Error::disk("opening the disk levels", path, e))?;
        let t = DiskTree {
            tree,
            path: path.to_path_buf(),
            counter,
            spills: Mutex::new(()),
            compactions: Mutex::new(()),
            newest: AtomicU64::new(0),
            dirty: AtomicBool::new(true),
            check_versions,
        };
        if let Some(bad) = t.version_problems().into_iter().next() {
            return Err(Error::corrupt(bad));
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

    fn err(&self, what: &'static str, e: lsm_tree::Error) -> Error {
        Error::disk(what, &self.path, e)
    }

    /// Writes `entries` (sorted, D1) and `marker` as new tables, then registers them through
    /// `gate` (which runs the registration, or refuses it: a simulated power failure): when
    /// this returns `Ok`, they are durable (tables, version file and their directories
    /// synced). Returns the bytes of the new tables.
    pub fn spill(
        &self,
        entries: impl Iterator<Item = Result<Entry>>,
        marker: &Marker,
        gate: impl FnOnce(&mut dyn FnMut() -> Result<()>) -> Result<()>,
    ) -> Result<u64> {
        let _g = self.spills.lock();
        if marker.seq <= self.newest() {
            return Err(Error::corrupt(format!(
                "spill marker at sequence {} not above the last one's {} (D4)",
                marker.seq,
                self.newest()
            )));
        }
        let mark = InternalValue::from_components(
            MARKER_KEY.to_vec(),
            marker.encode(),
            marker.seq,
            ValueType::Value,
        );
        let mut failed: Option<Error> = None;
        let mut last: Option<(Vec<u8>, u64)> = None;
        let stream = std::iter::once(Ok(mark)).chain(entries.map_while(|e| match e {
            Ok(e) => {
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
            // Tables written but never registered are deleted when the tree is next opened.
            return Err(e);
        }
        let Some((tables, _)) = made.map_err(|e| self.err("writing spilled tables", e))? else {
            return Ok(0);
        };
        let bytes = tables.iter().map(|t| self.table_bytes(t.id())).sum();
        gate(&mut || {
            self.counter.set(0);
            self.tree
                .register_tables(&tables, None, None, &[], 1)
                .map_err(|e| self.err("registering spilled tables", e))
        })?;
        self.newest.fetch_max(marker.seq, Ordering::AcqRel);
        self.set_dirty();
        Ok(bytes)
    }

    fn table_bytes(&self, id: u64) -> u64 {
        std::fs::metadata(self.path.join("tables").join(id.to_string())).map_or(0, |m| m.len())
    }

    /// Runs one leveled compaction step if the tree needs one. `threshold`: versions below it
    /// that a newer version shadows may be dropped (0 keeps every version). Returns whether
    /// the tree changed, and the bytes of the tables it wrote.
    pub fn compact(&self, threshold: u64) -> Result<(bool, u64)> {
        let _g = self.compactions.lock();
        let version = self.tree.current_version();
        let before: std::collections::HashSet<u64> =
            version.iter_tables().map(|t| t.id()).collect();
        self.counter.set(0);
        let strategy = Arc::new(lsm_tree::compaction::Leveled::default());
        self.tree
            .compact(strategy, threshold)
            .map_err(|e| self.err("compacting the disk levels", e))?;
        let after = self.tree.current_version();
        if after.id() == version.id() {
            return Ok((false, 0));
        }
        let written = after
            .iter_tables()
            .map(|t| t.id())
            .filter(|id| !before.contains(id))
            .map(|id| self.table_bytes(id))
            .sum();
        // Old versions (and the files only they name) go once no read holds them: a
        // compaction with threshold 0 does not prune them itself.
        self.counter.set(0);
        self.tree
            .register_tables(&[], None, None, &[], 1)
            .map_err(|e| self.err("pruning old versions of the disk levels", e))?;
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
        t.spill(entries.into_iter(), &m, |r| r()).expect("spill");
    }

    /// Compacts until nothing changes (every table ends in the last level).
    fn compact_fully(t: &DiskTree, threshold: u64) {
        for _ in 0..64 {
            if !t.compact(threshold).expect("compact").0 {
                return;
            }
        }
        panic!("compaction never settled");
    }

    #[test]
    fn compaction_at_threshold_zero_keeps_what_snapshots_read_and_hides_deleted_keys() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = Arc::new(lsm_tree::Cache::with_capacity_bytes(1 << 20));
        let t = DiskTree::open(dir.path(), cache, true).expect("open");
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
            let t = DiskTree::open(dir.path(), cache.clone(), true).expect("open");
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
        let e = DiskTree::open(dir.path(), cache.clone(), true)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("global sequence number 1000"), "{e}");
        let t = DiskTree::open(dir.path(), cache, false).expect("lsm-tree alone opens it");
        assert_eq!(t.get(b"k", 10).expect("get"), None, "the key is hidden");
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
