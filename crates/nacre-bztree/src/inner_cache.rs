//! A DRAM copy of inner nodes' keys (`BzTreeOptions::inner_cache`), so that a descent
//! searches each inner node in DRAM instead of reading and checking its metadata words and
//! keys in PM. Child words are still read from PM: they are the only part of an inner node
//! that changes in place.
//!
//! Invariants:
//! - C1: while an inner node is reachable, its info word, its sorted records and their keys
//!   never change (inner nodes are copy-on-write, S1 and S2 in smo.rs); only its status word
//!   and its child words do. So a copy taken from a reachable node stays right until the
//!   node is unlinked.
//! - C2 (version): [`InnerCache::bump`] runs after every install that unlinks an inner node,
//!   while the installing thread still holds its epoch (so before the node can be freed
//!   and reused), and before a dropped tree's nodes are freed. A pinned descent that
//!   reaches node `n` through a live word may store a copy of it, tagged with the version
//!   it read after pinning and before reading `n`, only if the version has not moved since;
//!   a copy is used only while the version still equals its tag. Then the node the copy
//!   describes was reachable when copied and is not unlinked, or was unlinked so recently
//!   that its unlinking thread has not bumped, so not freed: the reader sees it as a
//!   descent that started a moment earlier would (seed 002's readers may also pass through
//!   nodes being unlinked). A node unlinked after the reader reached it is not freed while
//!   the reader holds its epoch.
//! - C3: keys are copied only after their checksum is checked.
//!
//! A bump makes every copy stale, so during bursts of splits copies are not refilled: a
//! fill waits until no bump happened for [`QUIET`].
//!
//! Thread safety: shards of copies behind reader-writer locks; the version is an atomic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::node::NodeView;

/// Shards of the map (by node offset).
const SHARDS: usize = 16;
/// How long after a bump copies are not filled.
const QUIET: Duration = Duration::from_millis(2);

/// The copy of one inner node.
pub(crate) struct CachedInner {
    pub view: NodeView,
    /// Sorted keys, checked (C3).
    pub keys: Vec<Box<[u8]>>,
    /// Each record's child word, as an offset in the node.
    pub children: Vec<u32>,
    version: u64,
}

/// The copies of one forest's inner nodes.
pub(crate) struct InnerCache {
    version: AtomicU64,
    /// Nanoseconds from `start` to the last bump.
    bumped_at: AtomicU64,
    start: Instant,
    shards: Vec<RwLock<HashMap<u64, Arc<CachedInner>>>>,
    per_shard: usize,
}

impl InnerCache {
    /// A cache of at most `nodes` copies.
    pub fn new(nodes: usize) -> InnerCache {
        InnerCache {
            version: AtomicU64::new(1),
            bumped_at: AtomicU64::new(0),
            start: Instant::now(),
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            per_shard: nodes.div_ceil(SHARDS).max(1),
        }
    }

    /// The version a descent reads before the root word (C2).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// C2: every copy becomes stale.
    pub fn bump(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
        let now = self.start.elapsed().as_nanos() as u64;
        self.bumped_at.store(now, Ordering::Release);
    }

    fn shard(&self, off: u64) -> &RwLock<HashMap<u64, Arc<CachedInner>>> {
        // Nodes are at least 256 bytes apart.
        &self.shards[(off >> 8) as usize % SHARDS]
    }

    /// The copy of node `off`, if it is current (C2).
    pub fn get(&self, off: u64) -> Option<Arc<CachedInner>> {
        let shard = self.shard(off).read().unwrap_or_else(|e| e.into_inner());
        let c = shard.get(&off)?;
        (c.version == self.version()).then(|| c.clone())
    }

    /// Whether a descent at `version` should copy the inner nodes it reads: the version is
    /// current and no bump happened for [`QUIET`].
    pub fn wants_fill(&self, version: u64) -> bool {
        if self.version() != version {
            return false;
        }
        let now = self.start.elapsed().as_nanos() as u64;
        now.saturating_sub(self.bumped_at.load(Ordering::Acquire)) >= QUIET.as_nanos() as u64
    }

    /// Stores the copy of `view` taken by a descent at `version`, unless the version moved
    /// since (C2) or the shard is full of current copies.
    pub fn put(&self, view: NodeView, keys: Vec<Box<[u8]>>, children: Vec<u32>, version: u64) {
        let mut shard = self
            .shard(view.off)
            .write()
            .unwrap_or_else(|e| e.into_inner());
        // Under the shard's lock: a bump after this check finds the copy and stales it.
        if self.version() != version {
            return;
        }
        if shard.len() >= self.per_shard {
            shard.retain(|_, c| c.version == version);
            if shard.len() >= self.per_shard {
                return;
            }
        }
        shard.insert(
            view.off,
            Arc::new(CachedInner {
                view,
                keys,
                children,
                version,
            }),
        );
    }
}
