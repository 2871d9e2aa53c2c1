//! The persistent Global Index written beside the volatile one (`Options::persistent_index`,
//! docs/persistent-index.md, step 2 of its wiring): every change the background worker
//! makes to a key's entry in a volatile [`GlobalIndex`] is made to the key's entries in a
//! BzTree of the engine's forest too, so that the volatile index, rebuilt at every open, is
//! the oracle the tree is checked against (`Db::check`). With `Options::persistent_index_reads`
//! point reads that reach the Global Index read the tree; open does not use it yet.
//!
//! Invariants:
//! - M1 (mirror): while the forest is not stale, once the worker has finished with a key,
//!   the key's entry in its generation's tree names the volatile entry's newest version
//!   (sequence, offset, tombstone and blob flags), and its count is the volatile ghosts
//!   plus the volatile older versions, or [`GHOST_MAX`] (saturated, P4 in persistent.rs);
//!   a key the volatile index lacks has no entry. Older versions stay in DRAM only: no
//!   reader that needs them survives a crash. A key too long for the tree has no entry
//!   (the long-key list of the design is not built).
//! - M2 (slots): subtable `id`'s generations use tree slots `2 id + 1` and `2 id + 2`: the
//!   live generation one of them, a generation frozen for its spill the other. Once the
//!   spill is done, a frozen generation's tree is dropped when no view can read it any
//!   more, just before the zones its entries point into are given back (both wait for the
//!   same ticket); when a crash came after the spill reached the disk and before its
//!   finish, recovery drops both of the subtable's trees before it gives the spilled zones
//!   back. So no entry outlives its record's zone, which open checks with
//!   `Options::audit_persistent_index` before it reconciles anything.
//! - M3 (open): after the volatile index is rebuilt, each subtable's tree is brought to M1
//!   (entries of keys the volatile index lacks removed, the rest synced); the pair's other
//!   slot and the slots of subtables that do not exist are dropped. A crash at any point of
//!   the previous run therefore leaves nothing the next open keeps by mistake. Trees the
//!   engine root does not trust (`index_trusted` in store.rs: a run without the index, or
//!   M4) are all dropped first and written again.
//! - M4 (failure): an error from the tree (a full node pool, damage, I/O) marks the forest
//!   stale, logged once, and durably untrusted before the caller goes on: mirroring stops
//!   and M1 no longer holds until the next open writes the trees again. The volatile index
//!   is not affected, and point reads go back to it.
//! - M6 (merged marks): a memtable is marked merged (its object's `merged` word) only once
//!   every key of it is in the tree: a user memtable after its merge, a relocation memtable
//!   when the cleaner closes it. An audited open checks the trees as a crash left them
//!   against the marks ([`GiForest::check_complete`]).
//! - M5 (slots in use): a slot's tree is created or dropped only while no [`Mirror`] of an
//!   earlier generation holds it: a spilled generation keeps its slot until its tree is
//!   dropped (M2). The spiller does not freeze a generation while the other slot is held
//!   (a view still reads the previous spilled generation); a freeze that finds it held
//!   anyway leaves the forest stale (M4).
//!
//! Thread safety: the background worker is the only writer of a generation's tree (as of
//! its volatile index), recovery reconciles before the database is shared (with several
//! threads, each writing the entries of its own run of keys only), and checks run
//! with the worker paused. Readers never write; they read a generation's tree only through
//! a view, which keeps the tree from being dropped (M2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use nacre_bztree::{BzForest, BzTreeOptions};
use nacre_halloc::Halloc;

use crate::error::{Error, Result};
use crate::gi::index::{GlobalIndex, KeyEntry, Version};
use crate::gi::persistent::{encode_value, PersistentIndex, PmVersion, SeqOf, GHOST_MAX};
use crate::options::RecoveryMutation;

/// The forest's name in the pool (its regions are `bzt.gi`, `bzn.gi`, `bz.gi`).
const NAME: &str = "gi";
/// Node size of the engine's trees: room for eight entries of the longest key.
const NODE_SIZE: u32 = 2048;

/// What the audit knows of one key (see [`GiForest::check_complete`]): its newest version
/// in the Global Index's memtables, and its newest in those not marked merged (sequence,
/// tombstone, blob).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Expected {
    pub newest: Option<(u64, bool, bool)>,
    pub unmarked: Option<(u64, bool, bool)>,
    /// Records of the key that are not tombstones (copies included).
    pub values: u64,
}

/// The engine's forest of Global Index trees.
pub(crate) struct GiForest {
    forest: BzForest,
    stale: AtomicBool,
    /// Versions left out because their key is too long for the tree.
    long_versions: AtomicU64,
    /// A rule switched off (mutation tests only).
    mutation: Option<RecoveryMutation>,
    /// `Options::persistent_index_reads`.
    reads: bool,
    /// Slots a [`Mirror`] holds now (M5).
    leased: std::sync::Mutex<std::collections::HashSet<u32>>,
    /// Reads an entry's sequence number from its record (P3 in persistent.rs).
    seq_of: SeqOf,
    /// Durably marks the trees untrusted (M4).
    distrust: Distrust,
}

/// Durably records that the trees stopped following the volatile index (the engine root's
/// `index_trusted` word, store.rs).
pub(crate) type Distrust = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// The options of the engine's forest for `max_subtables` subtables and `nodes` nodes.
pub(crate) fn forest_options(max_subtables: u64, nodes: u64) -> BzTreeOptions {
    let trees = u32::try_from(2 * max_subtables + 1).unwrap_or(u32::MAX);
    PersistentIndex::forest_options(
        NAME,
        trees,
        NODE_SIZE,
        nodes,
        crate::options::limits::PERSISTENT_INDEX_KEY_MAX,
    )
}

/// Nodes of a forest that takes `share` percent of `bytes` of pool.
pub(crate) fn nodes_for(bytes: u64, share: u32) -> u64 {
    (bytes / 100 * u64::from(share) / u64::from(NODE_SIZE)).max(64)
}

impl GiForest {
    /// Opens the forest (PMwCAS recovery) and finishes a drop a crash cut.
    pub fn open(
        halloc: &Halloc,
        opts: &BzTreeOptions,
        (mutation, reads): (Option<RecoveryMutation>, bool),
        distrust: Distrust,
    ) -> Result<Arc<GiForest>> {
        let (forest, stats) =
            BzForest::open(halloc, opts).map_err(super::persistent::index_error)?;
        forest
            .finish_drop()
            .map_err(super::persistent::index_error)?;
        tracing::debug!(?stats, "persistent Global Index opened");
        let pool = halloc.pmem().clone();
        let seq_of: SeqOf = Arc::new(move |at, key| crate::record::read_identity(&pool, at, key));
        Ok(Arc::new(GiForest {
            seq_of,
            distrust,
            forest,
            stale: AtomicBool::new(false),
            long_versions: AtomicU64::new(0),
            mutation,
            reads,
            leased: std::sync::Mutex::new(std::collections::HashSet::new()),
        }))
    }

    /// Whether a failure stopped mirroring (M4).
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// Versions not mirrored because their key is too long.
    pub fn long_versions(&self) -> u64 {
        self.long_versions.load(Ordering::Relaxed)
    }

    /// M4: mirroring stops, once, with the reason logged; the trees are durably marked
    /// untrusted before the caller goes on (so before anything they name can be freed).
    fn fail(&self, what: &str, e: &Error) {
        if !self.stale.swap(true, Ordering::AcqRel) {
            if let Err(d) = (self.distrust)() {
                tracing::error!(error = %d, "could not mark the persistent Global Index untrusted");
            }
            tracing::error!(
                error = %e,
                step = what,
                "the persistent Global Index could not follow the volatile one; it is not \
                 written again until the next open rebuilds it (reads never use it)"
            );
        }
    }

    /// Runs `f`, marking the forest stale if it fails.
    fn guard<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Option<T> {
        if self.is_stale() {
            return None;
        }
        match f() {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(what, &e);
                None
            }
        }
    }

    /// The slots of subtable `id` (M2).
    fn slots(id: u32) -> (u32, u32) {
        (2 * id + 1, 2 * id + 2)
    }

    /// A mirror on slot `slot`, emptied first.
    fn fresh(self: &Arc<Self>, slot: u32) -> Option<Mirror> {
        // M5: a generation still read (or still to drop its tree) keeps its slot.
        if !self.lease(slot) {
            self.fail(
                "create a tree",
                &Error::InvalidOptions(format!(
                    "tree {slot} still belongs to an earlier generation that views read"
                )),
            );
            return None;
        }
        let index = self.guard("create a tree", || {
            self.forest
                .drop_tree(slot)
                .map_err(super::persistent::index_error)?;
            PersistentIndex::in_forest(&self.forest, slot, self.seq_of.clone())
        });
        let Some(index) = index else {
            self.unlease(slot);
            return None;
        };
        Some(Mirror {
            forest: self.clone(),
            index,
            slot,
            dropped: AtomicBool::new(false),
        })
    }

    /// Takes slot `slot` for a mirror; false when one holds it.
    fn lease(&self, slot: u32) -> bool {
        self.leased
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(slot)
    }

    fn unlease(&self, slot: u32) {
        self.leased
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&slot);
    }

    /// The mirror of a new subtable `id`'s first generation.
    pub fn for_new_subtable(self: &Arc<Self>, id: u32) -> Option<Mirror> {
        self.fresh(Self::slots(id).0)
    }

    /// M3 for subtable `id` after recovery rebuilt `gi`: picks the slot holding a tree (the
    /// first when both or neither do), drops the other, and brings the kept one to M1.
    pub fn reconcile(
        self: &Arc<Self>,
        id: u32,
        gi: &GlobalIndex,
        cuts: &[Vec<u8>],
    ) -> Option<Mirror> {
        let m = self.pick(id)?;
        self.reconcile_picked(&m, gi, cuts).then_some(m)
    }

    /// Whether exactly one of subtable `id`'s slots holds a tree: the live generation's, so
    /// reads may use it while the volatile index is rebuilt (R1 in pending.rs). Two trees
    /// (a crash during a spill: which is frozen is not recorded) or none, and reads wait.
    pub fn one_tree(&self, id: u32) -> bool {
        let (a, b) = Self::slots(id);
        let has = |s| self.forest.existing(s).map(|t| t.is_some());
        matches!((has(a), has(b)), (Ok(x), Ok(y)) if x != y)
    }

    /// The first half of [`GiForest::reconcile`]: picks the slot of subtable `id` holding a
    /// tree (or the first), drops the other, and opens it. Open uses it alone when the
    /// volatile index is rebuilt in the background (reads then use the tree as it is, R1 in
    /// pending.rs).
    pub fn pick(self: &Arc<Self>, id: u32) -> Option<Mirror> {
        let (a, b) = Self::slots(id);
        let slot = self.guard("pick a tree", || {
            let has = |s| self.forest.existing(s).map(|t| t.is_some());
            let keep_b = has(b).map_err(super::persistent::index_error)?
                && !has(a).map_err(super::persistent::index_error)?;
            let (keep, other) = if keep_b { (b, a) } else { (a, b) };
            self.forest
                .drop_tree(other)
                .map_err(super::persistent::index_error)?;
            Ok(keep)
        })?;
        if !self.lease(slot) {
            return None;
        }
        let Some(index) = self.guard("open a tree", || {
            PersistentIndex::in_forest(&self.forest, slot, self.seq_of.clone())
        }) else {
            self.unlease(slot);
            return None;
        };
        Some(Mirror {
            forest: self.clone(),
            index,
            slot,
            dropped: AtomicBool::new(false),
        })
    }

    /// The second half of [`GiForest::reconcile`]: brings `m`'s tree to `gi` (M3); false if
    /// that failed (the forest is then stale, M4).
    pub fn reconcile_picked(&self, m: &Mirror, gi: &GlobalIndex, cuts: &[Vec<u8>]) -> bool {
        if self.mutation == Some(RecoveryMutation::SkipIndexReconcile) {
            return true;
        }
        self.guard("reconcile a tree", || m.reconcile(gi, cuts))
            .is_some()
    }

    /// The index in slot `slot`, if it holds a tree (none is created).
    fn existing_index(&self, slot: u32) -> Result<Option<PersistentIndex>> {
        if self
            .forest
            .existing(slot)
            .map_err(super::persistent::index_error)?
            .is_none()
        {
            return Ok(None);
        }
        PersistentIndex::in_forest(&self.forest, slot, self.seq_of.clone()).map(Some)
    }

    /// Audit (`Options::audit_persistent_index`, tests): every entry of every tree names a
    /// record in a zone the pool holds, with the entry's key and flags. The
    /// engine relies on this without reading the tree back once open stops rebuilding the
    /// index; recovery runs it before it reconciles anything, so it sees the trees exactly
    /// as a crash left them. How many entries it checked.
    pub fn audit(&self, store: &crate::store::Store) -> Result<u64> {
        use crate::record::{read_record, Kind};
        let mut checked = 0;
        for slot in 1..self.forest.trees() {
            let Some(index) = self.existing_index(slot)? else {
                continue;
            };
            index.walk(|it| {
                let bad = |why: &str| {
                    Error::corrupt_at(
                        format!(
                            "persistent index tree {slot}: the entry of {:?} {why}",
                            it.key
                        ),
                        it.at,
                    )
                };
                let zone = store
                    .zones
                    .zone_of(it.at)
                    .ok_or_else(|| bad("points outside every zone"))?;
                if !store.zones.is_owned(zone).map_err(Error::from_alloc)? {
                    return Err(bad("points into a free zone"));
                }
                let room = crate::blob::room_in_zone(&store.zones, it.at)?;
                let rec = read_record(&store.pool, it.at, room)
                    .map_err(|e| bad(&format!("names no record ({e})")))?;
                if rec.key != it.key
                    || (rec.kind == Kind::Delete) != it.tomb
                    || (rec.kind == Kind::Blob) != it.blob
                {
                    return Err(bad(&format!(
                        "names the record of {:?} at sequence {} ({:?})",
                        rec.key, rec.seq, rec.kind
                    )));
                }
                checked += 1;
                Ok(())
            })?;
        }
        Ok(checked)
    }

    /// The audit's completeness check of subtable `id`'s trees as a crash left them
    /// (before anything is reconciled), against `expected` per key: the trees together with
    /// the memtables not marked merged answer every key as all the memtables do. The newer
    /// of a key's entry and its newest version in unmarked memtables is its newest version
    /// anywhere, when that is not a tombstone; otherwise it is a tombstone or nothing (the
    /// horizon drops a lone tombstone, whose record stays in PM until its zone goes). This
    /// is what an open that rebuilds only unmarked memtables relies on.
    pub fn check_complete(
        &self,
        id: u32,
        expected: &std::collections::HashMap<Vec<u8>, Expected>,
    ) -> Result<()> {
        let (a, b) = Self::slots(id);
        let mut trees = Vec::new();
        for slot in [a, b] {
            trees.extend(self.existing_index(slot)?);
        }
        let Some(first) = trees.first() else {
            return Ok(());
        };
        let bad = |key: &[u8], what: String| {
            Err(Error::corrupt(format!(
                "persistent index of subtable {id}: key {key:?} {what}"
            )))
        };
        for (key, e) in expected {
            if !first.fits(key) {
                continue;
            }
            let mut tree: Option<(u64, bool, bool)> = None;
            let mut copies = 0;
            for t in &trees {
                if let Some((v, c)) = t.newest(key)? {
                    if tree.is_none_or(|(s, _, _)| v.seq > s) {
                        tree = Some((v.seq, v.tomb, v.blob));
                        copies = c;
                    }
                }
            }
            let both = match (tree, e.unmarked) {
                (Some(t), Some(u)) => Some(if t.0 >= u.0 { t } else { u }),
                (t, u) => t.or(u),
            };
            let ok = match e.newest {
                Some(n) if !n.1 => both == Some(n),
                _ => both.is_none_or(|(_, tomb, _)| tomb),
            };
            if !ok {
                return bad(
                    key,
                    format!(
                        "reads as {both:?} from the trees ({tree:?}) and the unmarked memtables \
                         ({:?}), as {:?} from all the memtables",
                        e.unmarked, e.newest
                    ),
                );
            }
            // P4: an entry that is all there is of its key counts at least the key's other
            // records that could come back after a crash (tombstones cannot).
            let named = u64::from(tree.is_some_and(|(_, tomb, _)| !tomb));
            let others = e.values.saturating_sub(named);
            if e.unmarked.is_none() && tree.is_some() && copies < others.min(GHOST_MAX) {
                return bad(
                    key,
                    format!(
                        "counts {copies} other copies in its entry, and PM holds {others} \
                         other records of it that are not tombstones"
                    ),
                );
            }
        }
        // Entries of keys no memtable holds: at most a dropped tombstone's leftovers.
        for t in &trees {
            t.walk(|it| {
                if !it.tomb && !expected.contains_key(&it.key) {
                    return bad(&it.key, "has an entry and no record in any memtable".into());
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Drops both trees of subtable `id`.
    fn drop_pair(&self, id: u32) -> Result<()> {
        let (a, b) = Self::slots(id);
        for s in [a, b] {
            self.forest
                .drop_tree(s)
                .map_err(super::persistent::index_error)?;
        }
        Ok(())
    }

    /// Drops both trees of subtable `id` (recovery, M2).
    pub fn drop_subtable(&self, id: u32) {
        self.guard("drop a spilled subtable's trees", || self.drop_pair(id));
    }

    /// M3: drops the trees of every subtable id below `max` that `live` does not name.
    pub fn drop_others(&self, max: u64, live: &[u32]) {
        self.guard("drop unused trees", || {
            for id in 0..u32::try_from(max).unwrap_or(u32::MAX) {
                if !live.contains(&id) {
                    self.drop_pair(id)?;
                }
            }
            Ok(())
        });
    }
}

/// One generation's tree.
pub(crate) struct Mirror {
    forest: Arc<GiForest>,
    index: PersistentIndex,
    slot: u32,
    /// Its tree was dropped (a spilled generation): the slot is no longer its own.
    dropped: AtomicBool,
}

impl Drop for Mirror {
    /// M5: the slot is free for a later generation once this one's index is gone, or its
    /// tree dropped.
    fn drop(&mut self) {
        if !self.dropped.load(Ordering::Acquire) {
            self.forest.unlease(self.slot);
        }
    }
}

/// The copies of a key in PM that its entry does not name (P4 in persistent.rs): the ghosts
/// and every version but the newest.
fn copies(versions: &[Version], ghosts: u64) -> u64 {
    ghosts.saturating_add(versions.len().saturating_sub(1) as u64)
}

fn pm(v: &Version) -> PmVersion {
    PmVersion {
        seq: v.seq,
        at: v.at,
        tomb: v.tomb,
        blob: v.blob,
    }
}

impl Mirror {
    /// Whether this generation's tree follows the volatile index (M1): the forest is not
    /// stale and the tree was not dropped.
    pub fn following(&self) -> bool {
        !self.forest.is_stale() && !self.dropped.load(Ordering::Acquire)
    }

    /// Whether point reads of `key` go to this tree: reads are asked for, the tree is not
    /// stale, and the key fits it.
    pub fn serves(&self, key: &[u8]) -> bool {
        self.forest.reads && self.can_serve(key)
    }

    /// Whether this tree can answer point reads of `key` while the volatile index is
    /// rebuilt (R1 in pending.rs): the tree is not stale or dropped, and the key fits it.
    pub fn can_serve(&self, key: &[u8]) -> bool {
        !self.forest.is_stale() && !self.dropped.load(Ordering::Acquire) && self.index.fits(key)
    }

    /// The newest version of `key`: its sequence number and record.
    pub fn newest(&self, key: &[u8]) -> Result<Option<(u64, nacre_pmem::PmOffset)>> {
        Ok(self.index.newest(key)?.map(|(v, _)| (v.seq, v.at)))
    }

    /// The mirror of the generation after this one (a spill froze this one): the pair's
    /// other slot, emptied first (M2).
    pub fn next_generation(&self) -> Option<Mirror> {
        self.forest.fresh(self.partner())
    }

    /// The pair's other slot.
    fn partner(&self) -> u32 {
        if self.slot % 2 == 1 {
            self.slot + 1
        } else {
            self.slot - 1
        }
    }

    /// Whether a freeze could start the next generation now: no earlier generation still
    /// holds the other slot (M5).
    pub fn next_slot_free(&self) -> bool {
        self.forest.is_stale()
            || !self
                .forest
                .leased
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&self.partner())
    }

    /// Drops this generation's tree: its spill is done and no view reads it any more (M2).
    pub fn drop_tree(&self) {
        if self.dropped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.forest.guard("drop a spilled tree", || {
            self.forest
                .forest
                .drop_tree(self.slot)
                .map(|_| ())
                .map_err(super::persistent::index_error)
        });
        self.forest.unlease(self.slot);
    }

    /// Brings `key`'s entry from the volatile entry before the writer's change (`old`,
    /// newest first, with count `old_ghosts`), which the tree holds (M1) so it is not read,
    /// to the entry after it (`want` with count `ghosts`; empty when the key left the
    /// index). Nothing is written when the entry stays the same: a merge that only keeps
    /// or drops older versions.
    pub fn change(
        &self,
        key: &[u8],
        old: &[Version],
        old_ghosts: u64,
        want: &[Version],
        ghosts: u64,
    ) {
        if self.dropped.load(Ordering::Acquire) {
            // A spilled generation's tree is gone, and its slot maybe another's (M5).
            return;
        }
        self.forest.guard("mirror a change", || {
            if !self.index.fits(key) {
                self.forest
                    .long_versions
                    .fetch_add(want.len() as u64, Ordering::Relaxed);
                return Ok(());
            }
            let have = old
                .first()
                .map(|v| encode_value(&pm(v), copies(old, old_ghosts)))
                .transpose()?;
            let mut newest = want.first().map(pm);
            if self.forest.mutation == Some(RecoveryMutation::MirrorSkipsRelocation) {
                if let (Some(w), Some(h)) = (&mut newest, old.first()) {
                    if h.seq == w.seq && h.tomb == w.tomb {
                        w.at = h.at;
                    }
                }
            }
            self.index
                .change(key, have, newest.as_ref(), copies(want, ghosts))
        });
    }

    /// M3: ordered passes over the tree beside the volatile index, which change only what
    /// differs: entries of keys `gi` lacks go, keys only `gi` holds are written, and keys in
    /// both are brought to the volatile entry. Keys `cuts` (in order) split the work: a
    /// thread per run of keys between two of them (the tree takes concurrent writers; no two
    /// threads touch one key).
    fn reconcile(&self, gi: &GlobalIndex, cuts: &[Vec<u8>]) -> Result<()> {
        if cuts.is_empty() {
            return self.reconcile_range(gi, None, None);
        }
        let bounds: Vec<Option<&[u8]>> = std::iter::once(None)
            .chain(cuts.iter().map(|k| Some(k.as_slice())))
            .chain(std::iter::once(None))
            .collect();
        std::thread::scope(|s| {
            let runs: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (from, to) = (w[0], w[1]);
                    s.spawn(move || self.reconcile_range(gi, from, to))
                })
                .collect();
            // Every run is joined (a panic goes on up); the first error is the answer.
            let mut first = Ok(());
            for h in runs {
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })
    }

    /// [`Mirror::reconcile`] over the keys `from <= key < to` (no bound where `None`).
    fn reconcile_range(
        &self,
        gi: &GlobalIndex,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
    ) -> Result<()> {
        let mut vol = gi
            .entries_range(from, to)
            .filter(|e| self.index.fits(e.key()))
            .peekable();
        // Changes land at or before the walk's cursor.
        self.index.walk_range(from, to, |it| {
            while let Some(e) = vol.next_if(|e| e.key()[..] < it.key[..]) {
                self.put(e.key(), None, Some(e.value()))?;
            }
            let e = vol.next_if(|e| e.key()[..] == it.key[..]);
            self.put(&it.key, Some(it.word), e.as_ref().map(|e| e.value()))
        })?;
        for e in vol {
            self.put(e.key(), None, Some(e.value()))?;
        }
        Ok(())
    }

    /// Brings `key`'s entry from value word `have` to volatile entry `e` (none: removed).
    fn put(&self, key: &[u8], have: Option<u64>, e: Option<&KeyEntry>) -> Result<()> {
        match e {
            Some(e) => {
                let vs = e.versions();
                let want = vs.first().map(pm);
                self.index
                    .change(key, have, want.as_ref(), copies(&vs, e.ghosts()))
            }
            None => self.index.change(key, have, None, 0),
        }
    }

    /// M1 against `gi`: the first difference, if any. Only with the forest not stale.
    pub fn compare(&self, gi: &GlobalIndex) -> std::result::Result<(), String> {
        if self.forest.is_stale() {
            return Ok(());
        }
        let err = |e: Error| format!("persistent index (tree {}): {e}", self.slot);
        let mut expected = 0u64;
        for e in gi.entries() {
            let key = e.key();
            if !self.index.fits(key) {
                continue;
            }
            let vs = e.value().versions();
            let want = vs.first().map(pm);
            let have = self.index.newest(key).map_err(err)?;
            if have.map(|(v, _)| v) != want {
                return Err(format!(
                    "persistent index (tree {}): key {key:?} holds {have:?}, the volatile \
                     index {want:?}",
                    self.slot
                ));
            }
            let c = copies(&vs, e.value().ghosts());
            let count = have.map_or(0, |(_, c)| c);
            if count != c.min(GHOST_MAX) && count != GHOST_MAX {
                return Err(format!(
                    "persistent index (tree {}): key {key:?} counts {count} other copies, \
                     the volatile index {c}",
                    self.slot
                ));
            }
            expected += 1;
        }
        // No entry of a key the volatile index lacks: the totals agree.
        let mut total = 0u64;
        self.index
            .walk(|_| {
                total += 1;
                Ok(())
            })
            .map_err(err)?;
        if total != expected {
            return Err(format!(
                "persistent index (tree {}): {total} entries, the volatile index {expected} \
                 keys that fit",
                self.slot
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use nacre_pmem::{Backend, Pool, PoolOptions};

    fn forest() -> Arc<GiForest> {
        let pool = Arc::new(
            Pool::create_sim(8 << 20, &PoolOptions::with_backend(Backend::Sim)).expect("pool"),
        );
        let halloc = Halloc::open(pool).expect("halloc");
        GiForest::open(
            &halloc,
            &forest_options(4, 256),
            (None, false),
            Arc::new(|| Ok(())),
        )
        .expect("forest")
    }

    #[test]
    fn a_slot_held_by_a_spilled_generation_is_not_reused_until_its_tree_goes() {
        let f = forest();
        let first = f.for_new_subtable(1).expect("first generation");
        assert!(first.next_slot_free());
        let second = first.next_generation().expect("second generation");
        // The first generation (spilled, still read) holds its slot: the generation after
        // the second must wait (M5), and taking the slot anyway leaves the forest stale.
        assert!(!second.next_slot_free());
        assert!(!f.is_stale());
        assert!(second.next_generation().is_none());
        assert!(f.is_stale(), "a refused slot stops mirroring (M4)");

        let f = forest();
        let first = f.for_new_subtable(1).expect("first generation");
        let second = first.next_generation().expect("second generation");
        first.drop_tree();
        assert!(second.next_slot_free(), "a dropped tree frees its slot");
        let third = second.next_generation().expect("third generation");
        drop(first);
        assert!(!third.next_slot_free(), "the second still holds its slot");
        drop(second);
        assert!(third.next_slot_free(), "an index gone frees its slot");
        assert!(!f.is_stale());
    }
}
