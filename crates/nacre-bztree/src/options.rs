//! `BzTreeOptions`: the shape of a tree, validated before anything is created.

use nacre_pmwcas::RecoveryMutation;

use crate::error::{BzError, Result};
use crate::layout::{
    header_len, record_space, KEY_LEN_LIMIT, NODE_HEADER, NODE_SIZE_MAX, NODE_SIZE_MIN,
};

/// Longest tree name (its regions are `bzt.<name>`, `bzn.<name>`, PMwCAS instance `bz.<name>`).
pub const TREE_NAME_MAX: usize = 14;
/// Most trees in one forest ([`BzTreeOptions::trees`]).
pub const TREES_MAX: u32 = 4096;

/// How a tree is shaped. Defaults: name `"index"`, 1 KiB nodes, keys up to 64 bytes, 4096
/// nodes, 1024 descriptors, 64 threads.
#[derive(Clone, Debug)]
pub struct BzTreeOptions {
    /// Tree name; several trees may share a pool under different names.
    pub name: String,
    /// Bytes per node: a multiple of 256 in 256..=32768 (fixed at creation).
    pub node_size: u32,
    /// Longest key (fixed at creation): inner nodes must hold at least eight of them.
    pub max_key_len: usize,
    /// Nodes in the node pool (fixed at creation).
    pub nodes: u64,
    /// PMwCAS descriptors (fixed at creation).
    pub descriptors: u32,
    /// Most threads using the tree at once.
    pub max_threads: usize,
    /// Trees sharing this PMwCAS instance, node pool and header (a [`crate::BzForest`]):
    /// fixed at creation, at most [`TREES_MAX`]. One pool region set serves them all, so a
    /// user with many trees (one per subtable generation) does not run out of the pool's
    /// regions.
    pub trees: u32,
    /// Finished PMwCAS operations that accumulate before reclamation runs.
    pub reclaim_batch: usize,
    /// Keeps a DRAM copy of inner nodes' keys, so descents search inner nodes without
    /// reading PM (child words are still read from PM). Default on.
    pub inner_cache: bool,
    #[doc(hidden)]
    pub mutation: Option<BzMutation>,
    #[doc(hidden)]
    pub pmwcas_mutation: Option<RecoveryMutation>,
}

impl Default for BzTreeOptions {
    fn default() -> Self {
        BzTreeOptions {
            name: "index".into(),
            node_size: 1024,
            max_key_len: 64,
            nodes: 4096,
            descriptors: 1024,
            max_threads: 64,
            trees: 1,
            reclaim_batch: 16,
            inner_cache: true,
            mutation: None,
            pmwcas_mutation: None,
        }
    }
}

/// A durability or recovery rule switched off, so a test can show that the power-failure
/// torture catches its absence. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BzMutation {
    /// Open does not advance the index epoch (rule T1).
    SkipEpochBump,
    /// Record bytes are not flushed before the record is made visible (B3).
    SkipRecordFlush,
    /// New nodes are not persisted before they are installed (B4).
    SkipNodeFlush,
    /// A node allocated where an inner node was keeps that node's copy in the inner-node
    /// cache (C2 in inner_cache.rs).
    SkipCacheForget,
}

impl BzTreeOptions {
    /// Bytes of the pool a forest of this shape takes at most: its header, its PMwCAS
    /// descriptors and its node pool, each with a page of alignment. A caller that shares
    /// the pool plans its own regions around this.
    pub fn pool_bytes(&self) -> u64 {
        const PAGE: u64 = 4096;
        let nodes = nacre_halloc::PoolShape {
            object_size: u64::from(self.node_size),
            count: self.nodes,
            kind: nacre_halloc::PoolKind::Object as u64,
        }
        .region_len();
        header_len(self.trees) + nacre_pmwcas::region_len(self.descriptors) + nodes + 3 * PAGE
    }

    /// Checks every field against its range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BzError::InvalidOptions(m));
        if self.name.is_empty() || self.name.len() > TREE_NAME_MAX || self.name.contains('\0') {
            return bad(format!(
                "name {:?}: 1 to {TREE_NAME_MAX} bytes, no NUL",
                self.name
            ));
        }
        if !(NODE_SIZE_MIN..=NODE_SIZE_MAX).contains(&self.node_size) || self.node_size % 256 != 0 {
            return bad(format!(
                "node_size {}: a multiple of 256 in {NODE_SIZE_MIN}..={NODE_SIZE_MAX}",
                self.node_size
            ));
        }
        if self.max_key_len > KEY_LEN_LIMIT {
            return bad(format!(
                "max_key_len {} > {KEY_LEN_LIMIT}",
                self.max_key_len
            ));
        }
        let usable = u64::from(self.node_size) - NODE_HEADER;
        if 8 * record_space(self.max_key_len) > usable {
            return bad(format!(
                "max_key_len {}: a {}-byte node must hold eight records of the longest key",
                self.max_key_len, self.node_size
            ));
        }
        if self.nodes < 8 {
            return bad(format!("nodes {} < 8", self.nodes));
        }
        if !(1..=TREES_MAX).contains(&self.trees) {
            return bad(format!("trees {}: 1 to {TREES_MAX}", self.trees));
        }
        if self.descriptors < 16 {
            return bad(format!("descriptors {} < 16", self.descriptors));
        }
        Ok(())
    }
}
