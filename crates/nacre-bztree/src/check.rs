//! A structural check of the whole tree, for tests and tools: walks every node from the
//! root and verifies the invariants a reader relies on.
//!
//! Checked: every node is an object of the node pool with a valid info word, reached once
//! (no cycles or shared children); inner nodes hold at least one child, keys in strictly
//! increasing order, each separator within the bounds its parent gives (S3); leaves hold
//! at most one visible record per key (L1), all within their bounds, all leaves at the same
//! depth; status and metadata words decode; record checksums match.

use nacre_pmem::PmOffset;
use nacre_pmwcas::EpochGuard;

use crate::error::{corrupt, Result};
use crate::layout::Meta;
use crate::tree::BzTree;

/// What [`BzTree::check`] found.
#[derive(Clone, Debug, Default)]
pub struct TreeCheck {
    /// Visible records.
    pub keys: u64,
    /// Leaf nodes.
    pub leaves: u64,
    /// Inner nodes.
    pub inner: u64,
    /// Levels (1 for a lone leaf root).
    pub depth: u32,
    /// Reachable frozen nodes (preparations a crash or a lost race left; writers help them).
    pub frozen: u64,
    /// Metadata slots reserved by inserts of earlier incarnations (garbage until the next
    /// rebuild of their leaf, T2).
    pub stale_reservations: u64,
    /// Metadata slots reserved under the current index epoch: inserts in flight (none in a
    /// quiescent tree, and none right after open: T1).
    pub pending_reservations: u64,
    /// Every reachable node, in walk order.
    pub nodes: Vec<PmOffset>,
}

impl BzTree {
    /// Walks the whole tree and checks its structure. Meant for a quiescent tree.
    pub fn check(&self) -> Result<TreeCheck> {
        let g = self.pm.pin()?;
        let mut out = TreeCheck::default();
        let root = self.word(self.root_word)?;
        let mut leaf_depth = None;
        self.check_node(&g, root, Vec::new(), None, 1, &mut leaf_depth, &mut out)?;
        out.depth = leaf_depth.unwrap_or(0);
        let mut seen = out.nodes.clone();
        seen.sort();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(corrupt("tree", root, "a node is reachable twice".into()));
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        g: &EpochGuard,
        off: u64,
        low: Vec<u8>,
        high: Option<Vec<u8>>,
        depth: u32,
        leaf_depth: &mut Option<u32>,
        out: &mut TreeCheck,
    ) -> Result<()> {
        if depth > 48 {
            return Err(corrupt("tree", off, "too deep".into()));
        }
        let n = self.node(off)?;
        out.nodes.push(PmOffset(off));
        if self.frozen(&n)? {
            out.frozen += 1;
        }
        let entries = self.entries(g, &n)?;
        let in_bounds = |k: &[u8]| k >= low.as_slice() && high.as_deref().is_none_or(|h| k < h);
        if n.is_leaf() {
            out.leaves += 1;
            if leaf_depth.is_some_and(|d| d != depth) {
                return Err(corrupt("tree", off, format!("leaf at depth {depth}")));
            }
            *leaf_depth = Some(depth);
            for (k, _) in &entries {
                if !in_bounds(k) {
                    return Err(corrupt("leaf", off, format!("key {k:?} out of bounds")));
                }
            }
            out.keys += entries.len() as u64;
            for slot in 0..self.count(&n)? {
                if let (_, Meta::Reserved { epoch }) = self.meta(&n, slot)? {
                    if epoch != self.epoch {
                        out.stale_reservations += 1;
                    } else {
                        out.pending_reservations += 1;
                    }
                }
            }
            return Ok(());
        }
        out.inner += 1;
        if entries.is_empty() {
            return Err(corrupt("inner node", off, "no children".into()));
        }
        for (i, (k, child)) in entries.iter().enumerate() {
            if i > 0 && (!in_bounds(k) || k.as_slice() <= low.as_slice()) {
                return Err(corrupt(
                    "inner node",
                    off,
                    format!("separator {k:?} out of bounds"),
                ));
            }
            let c_low = if i == 0 { low.clone() } else { k.clone() };
            let c_high = match entries.get(i + 1) {
                Some((nk, _)) => Some(nk.clone()),
                None => high.clone(),
            };
            self.check_node(g, *child, c_low, c_high, depth + 1, leaf_depth, out)?;
        }
        Ok(())
    }
}
