//! A DRAM copy of inner nodes' keys (`BzTreeOptions::inner_cache`), so that a descent
//! searches each inner node in DRAM instead of reading and checking its metadata words and
//! keys in PM. Child words are still read from PM: they are the only part of an inner node
//! that changes in place.
//!
//! Invariants:
//! - C1: an inner node's info word, its sorted records and their keys never change between
//!   its allocation and its free (inner nodes are copy-on-write, S1 and S2 in smo.rs); only
//!   its status word and its child words do.
//! - C2: the copy of the node at an offset is removed when that offset is allocated again
//!   ([`InnerCache::forget`], before the new node is linked). A copy is stored only by a
//!   descent that holds its epoch and reached the node through a live word, so the node
//!   cannot be freed, let alone allocated again, before the copy is stored. Hence every
//!   copy in the map describes the node now at its offset, and a descent that reaches the
//!   offset through a live word may use it: it reads what reading PM would give.
//! - C3: keys are copied only after their checksum is checked, and only in order.
//!
//! Thread safety: shards of copies behind reader-writer locks.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::node::NodeView;

/// Shards of the map (by node offset).
const SHARDS: usize = 64;

/// The copy of one inner node.
pub(crate) struct CachedInner {
    pub view: NodeView,
    /// Sorted keys, checked (C3).
    pub keys: Vec<Box<[u8]>>,
    /// Each record's child word, as an offset in the node.
    pub children: Vec<u32>,
}

/// The copies of one forest's inner nodes.
pub(crate) struct InnerCache {
    shards: Vec<RwLock<HashMap<u64, Arc<CachedInner>>>>,
    per_shard: usize,
}

impl InnerCache {
    /// A cache of at most `nodes` copies.
    pub fn new(nodes: usize) -> InnerCache {
        InnerCache {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            per_shard: nodes.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, off: u64) -> &RwLock<HashMap<u64, Arc<CachedInner>>> {
        // Nodes are at least 256 bytes apart.
        &self.shards[(off >> 8) as usize % SHARDS]
    }

    /// The copy of the node at `off`, if any.
    pub fn get(&self, off: u64) -> Option<Arc<CachedInner>> {
        let shard = self.shard(off).read().unwrap_or_else(|e| e.into_inner());
        shard.get(&off).cloned()
    }

    /// C2: the offset `off` was just allocated; whatever was copied from it is gone.
    pub fn forget(&self, off: u64) {
        let mut shard = self.shard(off).write().unwrap_or_else(|e| e.into_inner());
        shard.remove(&off);
    }

    /// Stores the copy of `view` (C2: by a pinned descent that reached it through a live
    /// word), unless its shard is full; returns it.
    pub fn put(
        &self,
        view: NodeView,
        keys: Vec<Box<[u8]>>,
        children: Vec<u32>,
    ) -> Arc<CachedInner> {
        let copy = Arc::new(CachedInner {
            view,
            keys,
            children,
        });
        let mut shard = self
            .shard(view.off)
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if shard.len() >= self.per_shard {
            // Copies of nodes that were unlinked but whose offsets are not reused yet are
            // the likely waste; without knowing which, start over.
            shard.clear();
        }
        shard.insert(view.off, copy.clone());
        copy
    }
}
