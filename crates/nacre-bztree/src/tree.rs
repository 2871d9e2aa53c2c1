//! `BzTree`: opening (and creating) a tree, traversal, and the public operations, each a
//! retry loop of attempts made inside one epoch guard.
//!
//! Invariants:
//! - T1 (recovery): open runs PMwCAS recovery, then advances the index epoch durably, before
//!   any operation; so a metadata slot reserved by an insert that a crash cut off carries an
//!   epoch older than the current one, and no insert ever waits for it or completes it.
//! - T2: a record reserved but never made visible never becomes visible: only the thread that
//!   reserved it (in the current incarnation) may complete it, with a PMwCAS whose expected
//!   value names its epoch; consolidation, split and merge copy visible records only, so such
//!   space is reclaimed at the node's next rebuild.
//! - T3: a tree's root word holds 0 (no tree yet, or dropped) or a committed node; open
//!   reads it and nothing else: no traversal, no rebuild.
//! - T4 (drop): a dropped tree's nodes are reachable only from the forest's graveyard word
//!   until freed; each free is one PMwCAS that clears the word pointing at a childless node
//!   and frees that node on success, so no node is freed twice or left behind, whatever a
//!   crash interrupts (`BzForest::finish_drop` resumes).
//! - B2: a frozen node is never modified: every PMwCAS that changes a node's words also
//!   expects its unfrozen status word (leaf operations, child swaps), and a node becomes
//!   unreachable only after it is frozen (the install of its replacement freezes it or
//!   happens after its preparation froze it).
//!
//! Thread safety: `BzTree` is `Send + Sync`. Every operation pins the PMwCAS epoch for one
//! attempt (traversal plus at most a few PMwCAS operations), so nodes it reads stay allocated.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre_halloc::Halloc;
use nacre_pmem::{PmOffset, Pool};
use nacre_pmwcas::{
    EpochGuard, NodePool, NodePoolSpec, Pmwcas, PmwcasOptions, Policy, RecoveryStats,
};

use crate::error::{corrupt, BzError, Result};
use crate::layout::{
    decode_epoch, epoch_word, header_crc, header_len, root_at, shape_word, Kind, Meta, EPOCH_AT,
    GRAVE_AT, HEADER_CRC_AT, SHAPE_AT, TREES_AT, TREE_MAGIC,
};
use crate::node::NodeView;
use crate::options::{BzMutation, BzTreeOptions};

/// Deepest tree a traversal accepts before reporting corruption (a cycle).
const MAX_DEPTH: usize = 48;

/// One node on a root-to-leaf path: the node, the word that points to it (the root word or
/// a child word of its parent) and its slot in the parent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub node: NodeView,
    pub holder: PmOffset,
    pub index: u32,
}

/// A leaf bound found on the way down: a key copied from the inner-node cache, or the
/// record of an inner node whose key is read (and checked) at the end.
enum BoundAt {
    Copy(Arc<crate::inner_cache::CachedInner>, usize),
    Slot(NodeView, Meta),
}

/// Where a descent ended: the path from the root to a leaf, and the leaf's bounds.
pub(crate) struct Descent {
    pub path: Vec<Step>,
    /// Exclusive upper bound (when asked for; `None` for the rightmost leaf).
    pub upper: Option<Vec<u8>>,
    /// Inclusive lower bound, for descents before a key (`None` for the leftmost leaf).
    pub lower: Option<Vec<u8>>,
}

/// The outcome of one attempt of an operation.
pub(crate) enum Attempt<T> {
    Done(T),
    Retry,
}

/// What open found and did.
#[derive(Clone, Copy, Debug)]
pub struct OpenStats {
    /// PMwCAS recovery (descriptors scanned, operations rolled forward and back, ...).
    pub pmwcas: RecoveryStats,
    /// The index epoch of this incarnation.
    pub epoch: u32,
    /// Whether the tree was created by this open ([`BzTree::open`]; always false from
    /// [`BzForest::open`], whose [`BzForest::tree`] says it per tree).
    pub created: bool,
    /// Wall time of the whole open.
    pub elapsed: Duration,
}

/// Structure modifications performed since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmoStats {
    /// Nodes replaced by a consolidated copy.
    pub consolidations: u64,
    /// Nodes split in two.
    pub splits: u64,
    /// Pairs of nodes merged.
    pub merges: u64,
    /// Times the root was replaced by its only child.
    pub root_collapses: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub consolidations: AtomicU64,
    pub splits: AtomicU64,
    pub merges: AtomicU64,
    pub root_collapses: AtomicU64,
}

/// What the trees of one forest share: the pool, the PMwCAS instance and its node pool, the
/// header, the shape and the index epoch (a [`BzTree`] dereferences to it).
#[doc(hidden)]
pub struct Shared {
    pub(crate) pool: Arc<Pool>,
    pub(crate) pm: Pmwcas,
    pub(crate) header: PmOffset,
    pub(crate) node_size: u32,
    pub(crate) max_key: usize,
    pub(crate) epoch: u32,
    pub(crate) mutation: Option<BzMutation>,
    /// Copies of inner nodes (`BzTreeOptions::inner_cache`).
    pub(crate) cache: Option<crate::inner_cache::InnerCache>,
    trees: u32,
}

/// Trees that share one PMwCAS instance, one node pool and one header region (each tree a
/// root word in it): `BzTreeOptions::trees` trees for three pool regions, however many.
/// Open is PMwCAS recovery and an epoch bump for all of them at once.
pub struct BzForest {
    shared: Arc<Shared>,
}

/// A latch-free B+-tree in persistent memory (seed 002 §6.2-§6.5): byte-string keys to u64
/// values below 2^61, every change a PMwCAS. One tree of a [`BzForest`]
/// ([`BzTree::open`] opens a forest of its own).
pub struct BzTree {
    shared: Arc<Shared>,
    pub(crate) root_word: PmOffset,
    slot: u32,
    pub(crate) counters: Counters,
}

impl std::ops::Deref for BzTree {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl std::fmt::Debug for BzTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BzTree")
            .field("header", &self.header)
            .field("slot", &self.slot)
            .field("node_size", &self.node_size)
            .field("epoch", &self.epoch)
            .finish()
    }
}

fn header_corrupt(off: PmOffset, detail: String) -> BzError {
    corrupt("tree header", off.get(), detail)
}

impl BzForest {
    /// Opens the forest `opts.name` on `halloc`'s pool, creating it on first use. Recovery
    /// is PMwCAS recovery plus one epoch bump: its cost depends neither on the trees' sizes
    /// nor on their number. Trees are opened (and an empty one created) with
    /// [`BzForest::tree`].
    pub fn open(halloc: &Halloc, opts: &BzTreeOptions) -> Result<(BzForest, OpenStats)> {
        let start = Instant::now();
        opts.validate()?;
        let pool = halloc.pmem().clone();
        let pm_opts = PmwcasOptions {
            name: format!("bz.{}", opts.name),
            descriptors: opts.descriptors,
            max_threads: opts.max_threads,
            reclaim_batch: opts.reclaim_batch,
            node_pools: vec![NodePoolSpec {
                name: format!("bzn.{}", opts.name),
                object_size: u64::from(opts.node_size),
                count: opts.nodes,
            }],
            recovery_mutation: opts.pmwcas_mutation,
            ..PmwcasOptions::default()
        };
        let (pm, rstats) = Pmwcas::open_or_create(halloc, &pm_opts)?;
        let name = format!("bzt.{}", opts.name);
        let trees = u64::from(opts.trees);
        let header = match pool.region(&name) {
            Some(r) if r.len < header_len(opts.trees) => {
                return Err(BzError::InvalidOptions(format!(
                    "tree {} has a header of {} bytes, too small for the {trees} trees asked for",
                    opts.name, r.len
                )))
            }
            Some(r) => r.offset,
            None => {
                pool.reserve_region(&name, header_len(opts.trees), 64, 0)?
                    .offset
            }
        };
        let shape = shape_word(opts.node_size, opts.max_key_len);
        let magic = pool.load_u64(header);
        if magic != TREE_MAGIC {
            let s = pool.load_u64(header.add(SHAPE_AT));
            let t = pool.load_u64(header.add(TREES_AT));
            let c = pool.load_u64(header.add(HEADER_CRC_AT));
            let blank = s == 0 && t == 0 && c == 0;
            let torn = s == shape && t == trees && c == header_crc(TREE_MAGIC, shape, trees);
            if magic != 0 || !(blank || torn) {
                return Err(header_corrupt(header, format!("bad magic {magic:#x}")));
            }
            pool.store_u64(header.add(SHAPE_AT), shape);
            pool.store_u64(header.add(TREES_AT), trees);
            pool.store_u64(
                header.add(HEADER_CRC_AT),
                header_crc(TREE_MAGIC, shape, trees),
            );
            pool.store_u64(header.add(EPOCH_AT), epoch_word(0));
            pool.fence()?;
            pool.persist_u64(header, TREE_MAGIC)?;
            tracing::info!(tree = %opts.name, trees, "bztree formatted");
        } else {
            let s = pool.load_u64(header.add(SHAPE_AT));
            let t = pool.load_u64(header.add(TREES_AT));
            let c = pool.load_u64(header.add(HEADER_CRC_AT));
            if c != header_crc(TREE_MAGIC, s, t) {
                return Err(header_corrupt(header, format!("checksum {c:#x} mismatch")));
            }
            if s != shape || t != trees {
                return Err(BzError::InvalidOptions(format!(
                    "tree {} has shape {s:#x} and {t} trees, options ask for {shape:#x} and {trees}",
                    opts.name
                )));
            }
        }
        let ew = pool.load_u64(header.add(EPOCH_AT));
        let old = decode_epoch(ew)
            .ok_or_else(|| header_corrupt(header, format!("epoch word {ew:#x}")))?;
        let epoch = if opts.mutation == Some(BzMutation::SkipEpochBump) {
            old
        } else {
            let e = old.wrapping_add(1);
            pool.persist_u64(header.add(EPOCH_AT), epoch_word(e))?;
            e
        };
        let shared = Arc::new(Shared {
            pool,
            pm,
            header,
            node_size: opts.node_size,
            max_key: opts.max_key_len,
            epoch,
            mutation: opts.mutation,
            cache: opts.inner_cache.then(|| {
                // One copy per inner node of a full pool: about one in eight nodes.
                crate::inner_cache::InnerCache::new((opts.nodes / 8).clamp(64, 1 << 20) as usize)
            }),
            trees: opts.trees,
        });
        let stats = OpenStats {
            pmwcas: rstats,
            epoch,
            created: false,
            elapsed: start.elapsed(),
        };
        tracing::debug!(?stats, "bztree forest opened");
        Ok((BzForest { shared }, stats))
    }

    /// Tree `slot` (below `BzTreeOptions::trees`), created empty if it has no root yet
    /// (one PMwCAS installs its first leaf, T3); with whether this call created it.
    pub fn tree(&self, slot: u32) -> Result<(BzTree, bool)> {
        if let Some(tree) = self.existing(slot)? {
            return Ok((tree, false));
        }
        let tree = self.handle(slot, self.shared.header.add(root_at(slot)));
        let leaf = tree.new_node(Kind::Leaf, &[])?;
        let mut d = tree.pm.descriptor()?;
        if let Err(e) = d.add_with_policy(
            tree.root_word,
            0,
            leaf.get(),
            Policy::FreeNewOnFailure,
            Some(tree.nodes()),
        ) {
            let _ = tree.nodes().abort(leaf);
            return Err(e.into());
        }
        // Another thread may have created it meanwhile: then the fresh leaf goes back.
        let created = d.execute()?;
        Ok((tree, created))
    }

    /// Tree `slot` if it has been created (its root word is set), without creating it.
    pub fn existing(&self, slot: u32) -> Result<Option<BzTree>> {
        if slot >= self.shared.trees {
            return Err(BzError::InvalidOptions(format!(
                "tree {slot} of a forest of {}",
                self.shared.trees
            )));
        }
        let tree = self.handle(slot, self.shared.header.add(root_at(slot)));
        match tree.word(tree.root_word)? {
            0 => Ok(None),
            root => {
                tree.node(root)?;
                Ok(Some(tree))
            }
        }
    }

    /// Drops tree `slot`: detaches its root (one PMwCAS moves it from the tree's root word to
    /// the forest's graveyard word, so the slot is empty at once and a later
    /// [`BzForest::tree`] creates it anew), then frees its nodes (see
    /// [`BzForest::finish_drop`]). False when the tree did not exist. No thread may use the
    /// tree while it is dropped.
    pub fn drop_tree(&self, slot: u32) -> Result<bool> {
        let Some(tree) = self.existing(slot)? else {
            return Ok(false);
        };
        // One drop at a time: finish any earlier one (a crash may have cut it).
        self.finish_drop()?;
        let root = tree.word(tree.root_word)?;
        let mut d = tree.pm.descriptor()?;
        d.add(tree.root_word, root, 0)?;
        d.add(self.grave(), 0, root)?;
        if !d.execute()? {
            return Err(BzError::InvalidOptions(format!(
                "tree {slot} changed while it was dropped"
            )));
        }
        self.finish_drop()?;
        Ok(true)
    }

    /// Frees the nodes of a dropped tree (the graveyard's), deepest first: each free is one
    /// PMwCAS that clears the word pointing at a node with no children left (a leaf, or an
    /// inner node whose child words are all cleared) and frees the node on success. A crash
    /// leaves the cleared words cleared and the rest in place, so calling this again after
    /// open finishes the drop, freeing every node exactly once. Returns the nodes freed.
    pub fn finish_drop(&self) -> Result<u64> {
        let grave = self.grave();
        let any = self.handle(u32::MAX, grave);
        let mut freed = 0;
        loop {
            let mut holder = grave;
            let mut off = any.word(holder)?;
            if off == 0 {
                return Ok(freed);
            }
            // Down the first child still attached until a node has none.
            for _ in 0..MAX_DEPTH {
                let n = any.node(off)?;
                if n.is_leaf() {
                    break;
                }
                let mut child = None;
                for i in 0..n.info.sorted {
                    if let (_, Meta::Record { offset, .. }) = any.meta(&n, i)? {
                        let word = PmOffset(n.off + u64::from(offset));
                        let c = any.word(word)?;
                        if c != 0 {
                            child = Some((word, c));
                            break;
                        }
                    }
                }
                match child {
                    Some((word, c)) => (holder, off) = (word, c),
                    None => break,
                }
            }
            let mut d = any.pm.descriptor()?;
            d.add_with_policy(holder, off, 0, Policy::FreeOldOnSuccess, Some(any.nodes()))?;
            if !d.execute()? {
                return Err(corrupt(
                    "dropped tree",
                    off,
                    "a word of a dropped tree changed while it was freed".into(),
                ));
            }
            freed += 1;
        }
    }

    /// A handle on the tree whose root word is at `root_word` (tree `slot`, or the
    /// graveyard's).
    fn handle(&self, slot: u32, root_word: PmOffset) -> BzTree {
        BzTree {
            shared: self.shared.clone(),
            root_word,
            slot,
            counters: Counters::default(),
        }
    }

    fn grave(&self) -> PmOffset {
        self.shared.header.add(GRAVE_AT)
    }

    /// Trees this forest holds room for.
    pub fn trees(&self) -> u32 {
        self.shared.trees
    }

    /// The index epoch of this incarnation.
    pub fn epoch(&self) -> u32 {
        self.shared.epoch
    }
}

impl BzTree {
    /// Opens the tree `opts.name` on `halloc`'s pool, creating it on first use: tree 0 of a
    /// forest of `opts.trees` trees (see [`BzForest::open`]).
    pub fn open(halloc: &Halloc, opts: &BzTreeOptions) -> Result<(BzTree, OpenStats)> {
        let start = Instant::now();
        let (forest, mut stats) = BzForest::open(halloc, opts)?;
        let (tree, created) = forest.tree(0)?;
        stats.created = created;
        stats.elapsed = start.elapsed();
        Ok((tree, stats))
    }

    /// This tree's slot in its forest.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    pub(crate) fn nodes(&self) -> &NodePool {
        // The tree's PMwCAS instance is always opened with exactly one node pool.
        self.pm
            .node_pool(0)
            .unwrap_or_else(|| unreachable!("tree opened without its node pool"))
    }

    /// The tree's node pool (for accounting and checks).
    pub fn node_pool(&self) -> &NodePool {
        self.nodes()
    }

    /// The PMwCAS instance underneath.
    pub fn pmwcas(&self) -> &Pmwcas {
        &self.pm
    }

    /// The index epoch of this incarnation.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Longest key accepted.
    pub fn max_key_len(&self) -> usize {
        self.max_key
    }

    /// Structure modifications performed since open.
    pub fn smo_stats(&self) -> SmoStats {
        let c = &self.counters;
        SmoStats {
            consolidations: c.consolidations.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            merges: c.merges.load(Ordering::Relaxed),
            root_collapses: c.root_collapses.load(Ordering::Relaxed),
        }
    }

    /// Reclaims finished descriptors and, if no other tree of its forest is open, closes.
    /// Dropping without `close` is safe.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => Ok(shared.pm.close()?),
            Err(shared) => shared.pm.collect().map(|_| ()).map_err(Into::into),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.max_key {
            return Err(BzError::KeyTooLong {
                len: key.len(),
                max: self.max_key,
            });
        }
        Ok(())
    }

    fn check_value(value: u64) -> Result<()> {
        if !nacre_pmwcas::is_plain(value) {
            return Err(BzError::ValueTooLarge { value });
        }
        Ok(())
    }

    /// The path from the root to the leaf whose key range holds `key`, and (with `upper`)
    /// the leaf's exclusive upper bound (`None` for the rightmost leaf).
    pub(crate) fn traverse(
        &self,
        g: &EpochGuard,
        key: &[u8],
        want_upper: bool,
    ) -> Result<(Vec<Step>, Option<Vec<u8>>)> {
        let d = self.descend(g, key, want_upper, false)?;
        Ok((d.path, d.upper))
    }

    /// The path to the leaf whose key range holds `key` or, with `before`, the leaf whose
    /// range holds the keys just below `key` (the range ends at or above it and starts
    /// below it); with the leaf's exclusive upper bound (when `want_upper`) and its inclusive
    /// lower bound when `before` (`None` for the leftmost leaf).
    pub(crate) fn descend(
        &self,
        g: &EpochGuard,
        key: &[u8],
        want_upper: bool,
        before: bool,
    ) -> Result<Descent> {
        let mut lower: Option<BoundAt> = None;
        let mut path: Vec<Step> = Vec::with_capacity(8);
        let mut holder = self.root_word;
        let mut index = 0;
        let mut upper: Option<BoundAt> = None;
        let mut off = self.word(holder)?;
        loop {
            let cached = self.cache.as_ref().and_then(|c| c.get(off));
            let n = match &cached {
                Some(c) => c.view,
                None => self.node(off)?,
            };
            path.push(Step {
                node: n,
                holder,
                index,
            });
            if n.is_leaf() {
                // Bounds are read once, at the end (only the deepest of each counts).
                let bound = |at: Option<BoundAt>| -> Result<Option<Vec<u8>>> {
                    Ok(match at {
                        None => None,
                        Some(BoundAt::Copy(c, i)) => Some(c.keys[i].to_vec()),
                        Some(BoundAt::Slot(n, m)) => Some(self.key(g, &n, m)?.to_vec()),
                    })
                };
                let (upper, lower) = (bound(upper)?, bound(lower)?);
                return Ok(Descent { path, upper, lower });
            }
            if path.len() > MAX_DEPTH || n.info.sorted == 0 {
                return Err(corrupt(
                    "inner node",
                    n.off,
                    format!("{} children at depth {}", n.info.sorted, path.len()),
                ));
            }
            let copy = match cached {
                Some(c) => Some(c),
                None => self.copy_inner(g, &n)?,
            };
            let (i, child) = match &copy {
                Some(c) => {
                    let i = match c.keys.binary_search_by(|k| k[..].cmp(key)) {
                        Ok(slot) if before => slot.saturating_sub(1),
                        Ok(slot) => slot,
                        Err(p) => p.saturating_sub(1),
                    };
                    if want_upper && i + 1 < c.keys.len() {
                        upper = Some(BoundAt::Copy(c.clone(), i + 1));
                    }
                    if before && i > 0 {
                        lower = Some(BoundAt::Copy(c.clone(), i));
                    }
                    (i as u32, c.children[i])
                }
                None => {
                    let i = match self.search_sorted(g, &n, key)? {
                        Ok((slot, _, _)) if before => slot.saturating_sub(1),
                        Ok((slot, _, _)) => slot,
                        Err(p) => p.saturating_sub(1),
                    };
                    if want_upper && i + 1 < n.info.sorted {
                        upper = Some(BoundAt::Slot(n, self.meta(&n, i + 1)?.1));
                    }
                    let (_, m) = self.meta(&n, i)?;
                    if before && i > 0 {
                        // Separators grow with depth: the deepest one left of the path
                        // bounds the leaf from below.
                        lower = Some(BoundAt::Slot(n, m));
                    }
                    (i, Self::child_offset(&n, i, m)?)
                }
            };
            holder = PmOffset(n.off + u64::from(child));
            index = i;
            off = self.word(holder)?;
        }
    }

    /// Where inner node `n`'s record `i` (metadata `m`) keeps its child word.
    fn child_offset(n: &NodeView, i: u32, m: Meta) -> Result<u32> {
        match m {
            Meta::Record {
                visible: true,
                offset,
                ..
            } => Ok(offset),
            _ => Err(corrupt(
                "inner node",
                n.off,
                format!("slot {i} holds {m:?}"),
            )),
        }
    }

    /// Copies inner node `n`, reached through a live word under guard `g`, into the cache
    /// (its keys checked, C2 and C3 in inner_cache.rs), and returns the copy.
    fn copy_inner(
        &self,
        g: &EpochGuard,
        n: &NodeView,
    ) -> Result<Option<Arc<crate::inner_cache::CachedInner>>> {
        let Some(cache) = &self.cache else {
            return Ok(None);
        };
        let mut keys = Vec::with_capacity(n.info.sorted as usize);
        let mut children = Vec::with_capacity(n.info.sorted as usize);
        for i in 0..n.info.sorted {
            let (_, m) = self.meta(n, i)?;
            children.push(Self::child_offset(n, i, m)?);
            keys.push(Box::<[u8]>::from(self.key(g, n, m)?));
        }
        if keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err(corrupt(
                "inner node",
                n.off,
                "sorted keys out of order".into(),
            ));
        }
        Ok(Some(cache.put(*n, keys, children)))
    }

    /// Runs attempts of a write on the leaf for `key` until one is done.
    fn write<T>(
        &self,
        key: &[u8],
        mut attempt: impl FnMut(&EpochGuard, &[Step]) -> Result<Attempt<T>>,
    ) -> Result<T> {
        self.check_key(key)?;
        loop {
            let g = self.pm.pin()?;
            let (path, _) = self.traverse(&g, key, false)?;
            if let Attempt::Done(t) = attempt(&g, &path)? {
                return Ok(t);
            }
            drop(g);
            // A retry may be waiting on other threads (a freeze, a descriptor): let them run.
            std::thread::yield_now();
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<u64>> {
        self.check_key(key)?;
        let g = self.pm.pin()?;
        let (path, _) = self.traverse(&g, key, false)?;
        let leaf = path[path.len() - 1].node;
        let count = self.leaf_status(&leaf)?.count;
        match self.find(&g, &leaf, count, key)? {
            Some(h) => Ok(Some(self.word(h.value_addr)?)),
            None => Ok(None),
        }
    }

    /// Inserts `key` → `value` if `key` is absent; returns whether it inserted.
    pub fn insert(&self, key: &[u8], value: u64) -> Result<bool> {
        Self::check_value(value)?;
        let mut since = None;
        let r = self.write(key, |g, path| {
            self.leaf_insert(g, path, key, value, &mut since)
        })?;
        Ok(r.is_none())
    }

    /// Replaces the value of `key` if present; returns the value replaced.
    pub fn update(&self, key: &[u8], value: u64) -> Result<Option<u64>> {
        Self::check_value(value)?;
        self.write(key, |g, path| self.leaf_update(g, path, key, value))
    }

    /// Inserts or replaces; returns the value replaced, if any.
    pub fn upsert(&self, key: &[u8], value: u64) -> Result<Option<u64>> {
        Self::check_value(value)?;
        let mut since = None;
        self.write(key, |g, path| {
            if let Attempt::Done(Some(old)) = self.leaf_update(g, path, key, value)? {
                return Ok(Attempt::Done(Some(old)));
            }
            match self.leaf_insert(g, path, key, value, &mut since)? {
                Attempt::Done(None) => Ok(Attempt::Done(None)),
                // Present after all (a concurrent insert won): update it next attempt.
                _ => Ok(Attempt::Retry),
            }
        })
    }

    /// Replaces the value of `key` with `value` only if it is `expected`, in one PMwCAS:
    /// `Ok(())` when it did, else `Err` with what `key` holds (`None`: absent).
    pub fn update_if(
        &self,
        key: &[u8],
        expected: u64,
        value: u64,
    ) -> Result<std::result::Result<(), Option<u64>>> {
        Self::check_value(value)?;
        self.write(key, |g, path| {
            self.leaf_update_if(g, path, key, Some(expected), value)
        })
        .map(|r| match r {
            Some(old) if old == expected => Ok(()),
            other => Err(other),
        })
    }

    /// Deletes `key`; returns its value if it was present.
    pub fn delete(&self, key: &[u8]) -> Result<Option<u64>> {
        let (old, underfull) = self.write(key, |g, path| self.leaf_delete(g, path, key))?;
        if underfull {
            self.rebalance(key)?;
        }
        Ok(old)
    }
}
