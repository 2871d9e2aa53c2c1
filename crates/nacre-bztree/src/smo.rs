//! Structure modifications (seed 002 §6.3.3, §6.4): consolidation, split, merge and root
//! collapse. Each freezes the nodes it replaces, builds their replacements (and a new parent
//! version for split and merge, inner nodes being copy-on-write), and installs them with one
//! PMwCAS whose memory policies free the old nodes on success and the new ones on failure.
//!
//! PMwCAS shapes (node X at path[j], parent P, grandparent G; "holder" is the word pointing
//! to a node: a child word of its parent, or the root word):
//! - consolidate: holder(X) X→X' (free X on success, X' on failure), P.status version bump.
//! - split: P.status → frozen, holder(P) P→P' (free P / P'), G.status version bump, and
//!   memory-only entries: free X on success, X1 and X2 on failure. X the root: root X→R.
//! - merge of siblings A, B (both frozen first by one 2-word PMwCAS): P.status → frozen,
//!   holder(P) P→P', G.status bump, free A and B on success, M on failure; when P is the
//!   root and would keep one child, the root word takes M directly.
//! - root collapse: root.status → frozen, root word R→child (free R on success).
//!
//! Invariants:
//! - S1: a node is replaced only while frozen, and its replacement is built from a snapshot
//!   taken after the freeze (a frozen node never changes, B2), so no completed update is
//!   lost; everything a helper does for a frozen node depends only on that snapshot.
//! - S2: a new parent version P' is built from P's children read after P's status word, and
//!   installed only if P's status word is unchanged: every in-place child swap bumps the
//!   status version, so P' cannot drop a concurrent swap.
//! - S3 (bounds): a split puts keys < separator in the left node and ≥ separator in the
//!   right; a parent record's key is the lowest key its child may hold, children in key
//!   order; merges concatenate adjacent siblings and drop the right one's record.
//! - S4 (memory): every node a PMwCAS unlinks is freed by its policy exactly once, on
//!   success only; every fresh node is committed by the descriptor and freed on failure
//!   (PMwCAS N1, N2), so Halloc's committed node set is the reachable set after any crash.
//!
//! Thread safety: any number of threads may help the same frozen node; exactly one install
//! succeeds, the others' PMwCAS fails on a changed word and frees their copies.

use std::sync::atomic::Ordering;

use nacre_pmem::PmOffset;
use nacre_pmwcas::{Descriptor, EpochGuard, Policy};

use crate::error::{corrupt, Result};
use crate::layout::{record_space, InnerStatus, Kind, LeafStatus};
use crate::node::{Entries, NodeView};
use crate::tree::{BzTree, Step};

impl BzTree {
    /// Live bytes above which a rebuilt node is split rather than consolidated.
    pub(crate) fn split_threshold(&self) -> u64 {
        self.usable() * 5 / 8
    }

    /// Live record bytes below which a leaf asks to be merged.
    pub(crate) fn merge_trigger(&self) -> u64 {
        self.usable() / 4
    }

    /// The most live bytes a merged node may hold.
    fn merge_limit(&self) -> u64 {
        self.usable() / 2
    }

    /// The frozen form of a status word.
    fn frozen_word(&self, n: &NodeView, w: u64) -> Result<u64> {
        Ok(if n.is_leaf() {
            LeafStatus {
                frozen: true,
                ..LeafStatus::decode(w, n.off)?
            }
            .word()
        } else {
            InnerStatus {
                frozen: true,
                ..InnerStatus::decode(w, n.off)?
            }
            .word()
        })
    }

    /// Sets a node's frozen bit (1-word PMwCAS); returns whether it is frozen now.
    pub(crate) fn freeze(&self, n: &NodeView) -> Result<bool> {
        let w = self.status_word(n)?;
        if self.frozen(n)? {
            return Ok(true);
        }
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(false);
        };
        d.add(n.status_addr(), w, self.frozen_word(n, w)?)?;
        Ok(d.execute()?)
    }

    /// Allocates a node with `entries` and links it into `d` with `link`; a node not yet
    /// handed to the descriptor is given back if linking fails.
    fn fresh(
        &self,
        d: &mut Descriptor<'_>,
        kind: Kind,
        entries: &[(Vec<u8>, u64)],
        link: impl FnOnce(&mut Descriptor<'_>, PmOffset) -> nacre_pmwcas::Result<()>,
    ) -> Result<PmOffset> {
        let off = self.new_node(kind, entries)?;
        if let Err(e) = link(d, off) {
            let _ = self.nodes().abort(off);
            return Err(e.into());
        }
        Ok(off)
    }

    /// The unfrozen status of an inner node on the path, or `None` after helping it (it is
    /// frozen: the caller gives up this attempt).
    fn live_inner(&self, g: &EpochGuard, path: &[Step], j: usize) -> Result<Option<InnerStatus>> {
        let s = self.inner_status(&path[j].node)?;
        if s.frozen {
            self.help(g, &path[..=j], j)?;
            return Ok(None);
        }
        Ok(Some(s))
    }

    /// Completes the structure modification of the frozen node `path[j]`: a split if its
    /// live entries are large, else a consolidation. Returns once an attempt was made; the
    /// caller re-traverses.
    pub(crate) fn help(&self, g: &EpochGuard, path: &[Step], j: usize) -> Result<()> {
        let x = path[j].node;
        let entries = self.entries(g, &x)?;
        if Self::entries_space(&entries) > self.split_threshold() && entries.len() >= 2 {
            self.split(g, path, j, &entries)
        } else {
            self.consolidate(g, path, j, &entries)
        }
    }

    fn consolidate(
        &self,
        g: &EpochGuard,
        path: &[Step],
        j: usize,
        entries: &Entries,
    ) -> Result<()> {
        let x = path[j];
        let parent = if j > 0 {
            match self.live_inner(g, path, j - 1)? {
                Some(s) => Some((path[j - 1].node.status_addr(), s)),
                None => return Ok(()),
            }
        } else {
            None
        };
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(());
        };
        self.fresh(&mut d, x.node.info.kind, entries, |d, new| {
            d.add_with_policy(
                x.holder,
                x.node.off,
                new.get(),
                Policy::FreeOne,
                Some(self.nodes()),
            )
        })?;
        if let Some((addr, s)) = parent {
            d.add(addr, s.word(), s.bumped().word())?;
        }
        if d.execute()? {
            self.counters.consolidations.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn split(&self, g: &EpochGuard, path: &[Step], j: usize, entries: &Entries) -> Result<()> {
        let x = path[j];
        let kind = x.node.info.kind;
        let total = Self::entries_space(entries);
        let mut m = 0;
        let mut acc = 0;
        while m < entries.len() - 1 && (acc < total / 2 || m == 0) {
            acc += record_space(entries[m].0.len());
            m += 1;
        }
        let (left, right) = entries.split_at(m);
        let sep = right[0].0.clone();
        let nodes = self.nodes();
        if j == 0 {
            let Some(mut d) = self.pm.try_descriptor()? else {
                return Ok(());
            };
            let l = self.fresh(&mut d, kind, left, |d, o| d.free_on_failure(nodes, o))?;
            let r = self.fresh(&mut d, kind, right, |d, o| d.free_on_failure(nodes, o))?;
            let root = vec![(Vec::new(), l.get()), (sep, r.get())];
            self.fresh(&mut d, Kind::Inner, &root, |d, o| {
                d.add_with_policy(
                    self.root_word,
                    x.node.off,
                    o.get(),
                    Policy::FreeOne,
                    Some(nodes),
                )
            })?;
            if d.execute()? {
                self.counters.splits.fetch_add(1, Ordering::Relaxed);
                if !x.node.is_leaf() {}
            }
            return Ok(());
        }
        let p = path[j - 1];
        let Some(sp) = self.live_inner(g, path, j - 1)? else {
            return Ok(());
        };
        let mut pe = self.entries(g, &p.node)?;
        let idx = x.index as usize;
        if pe.get(idx).map(|e| e.1) != Some(x.node.off) {
            return Ok(());
        }
        if Self::entries_space(&pe) + record_space(sep.len()) > self.usable() {
            // The parent has no room for another child: split it first (its preparation is
            // this freeze), then retry from the root.
            if self.freeze(&p.node)? {
                self.help(g, &path[..j], j - 1)?;
            }
            return Ok(());
        }
        let gs = if j >= 2 {
            match self.live_inner(g, path, j - 2)? {
                Some(s) => Some((path[j - 2].node.status_addr(), s)),
                None => return Ok(()),
            }
        } else {
            None
        };
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(());
        };
        let l = self.fresh(&mut d, kind, left, |d, o| d.free_on_failure(nodes, o))?;
        let r = self.fresh(&mut d, kind, right, |d, o| d.free_on_failure(nodes, o))?;
        pe[idx].1 = l.get();
        pe.insert(idx + 1, (sep, r.get()));
        self.fresh(&mut d, Kind::Inner, &pe, |d, o| {
            d.add_with_policy(p.holder, p.node.off, o.get(), Policy::FreeOne, Some(nodes))
        })?;
        d.add(
            p.node.status_addr(),
            sp.word(),
            InnerStatus { frozen: true, ..sp }.word(),
        )?;
        if let Some((addr, s)) = gs {
            d.add(addr, s.word(), s.bumped().word())?;
        }
        d.free_on_success(nodes, PmOffset(x.node.off))?;
        if d.execute()? {
            self.counters.splits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Tries to merge the unfrozen node `path[j]` (not the root) with an adjacent sibling
    /// under the same parent; returns whether a merge was installed.
    pub(crate) fn try_merge(&self, g: &EpochGuard, path: &[Step], j: usize) -> Result<bool> {
        let x = path[j];
        let p = path[j - 1];
        let Some(sp) = self.live_inner(g, path, j - 1)? else {
            return Ok(false);
        };
        let pe = self.entries(g, &p.node)?;
        let idx = x.index as usize;
        if pe.len() < 2 || pe.get(idx).map(|e| e.1) != Some(x.node.off) {
            return Ok(false);
        }
        if self.frozen(&x.node)? {
            self.help(g, path, j)?;
            return Ok(false);
        }
        let xs = Self::entries_space(&self.entries(g, &x.node)?);
        let mut chosen = None;
        for sib in [idx.checked_sub(1), Some(idx + 1)].into_iter().flatten() {
            let Some(&(_, s_off)) = pe.get(sib) else {
                continue;
            };
            let s = self.node(s_off)?;
            if s.info.kind != x.node.info.kind {
                return Err(corrupt(
                    "inner node",
                    p.node.off,
                    "children of different kinds".into(),
                ));
            }
            if self.frozen(&s)? {
                continue;
            }
            if xs + Self::entries_space(&self.entries(g, &s)?) <= self.merge_limit() {
                chosen = Some((sib, s));
                break;
            }
        }
        let Some((sib, s)) = chosen else {
            return Ok(false);
        };
        // Preparation: freeze both with one PMwCAS.
        let (xw, sw) = (self.status_word(&x.node)?, self.status_word(&s)?);
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(false);
        };
        d.add(x.node.status_addr(), xw, self.frozen_word(&x.node, xw)?)?;
        d.add(s.status_addr(), sw, self.frozen_word(&s, sw)?)?;
        if !d.execute()? {
            return Ok(false);
        }
        let (ai, a, b) = if sib < idx {
            (sib, s, x.node)
        } else {
            (idx, x.node, s)
        };
        let mut merged = self.entries(g, &a)?;
        merged.extend(self.entries(g, &b)?);
        if Self::entries_space(&merged) > self.split_threshold() {
            // Grew in the meantime: the two frozen nodes are rebuilt separately by helpers.
            return Ok(false);
        }
        let gs = if j >= 2 {
            match self.live_inner(g, path, j - 2)? {
                Some(s) => Some((path[j - 2].node.status_addr(), s)),
                None => return Ok(false),
            }
        } else {
            None
        };
        let nodes = self.nodes();
        let kind = x.node.info.kind;
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(false);
        };
        let frozen_p = InnerStatus { frozen: true, ..sp }.word();
        let collapse = pe.len() == 2 && j == 1;
        if collapse {
            // The root would keep one child: the merged node becomes the root.
            self.fresh(&mut d, kind, &merged, |d, o| {
                d.add_with_policy(
                    self.root_word,
                    p.node.off,
                    o.get(),
                    Policy::FreeOne,
                    Some(nodes),
                )
            })?;
        } else {
            let m = self.fresh(&mut d, kind, &merged, |d, o| d.free_on_failure(nodes, o))?;
            let mut pe = pe;
            pe[ai].1 = m.get();
            pe.remove(ai + 1);
            self.fresh(&mut d, Kind::Inner, &pe, |d, o| {
                d.add_with_policy(p.holder, p.node.off, o.get(), Policy::FreeOne, Some(nodes))
            })?;
            if let Some((addr, s)) = gs {
                d.add(addr, s.word(), s.bumped().word())?;
            }
        }
        d.add(p.node.status_addr(), sp.word(), frozen_p)?;
        d.free_on_success(nodes, PmOffset(a.off))?;
        d.free_on_success(nodes, PmOffset(b.off))?;
        let ok = d.execute()?;
        if ok {
            self.counters.merges.fetch_add(1, Ordering::Relaxed);
            if collapse {
                self.counters.root_collapses.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(ok)
    }

    /// Replaces an inner root with a single child by that child.
    fn collapse_root(&self, root: &NodeView) -> Result<bool> {
        let s = self.inner_status(root)?;
        if s.frozen || root.info.sorted != 1 {
            return Ok(false);
        }
        let (_, m) = self.meta(root, 0)?;
        let crate::layout::Meta::Record { offset, .. } = m else {
            return Err(corrupt(
                "inner node",
                root.off,
                format!("slot 0 holds {m:?}"),
            ));
        };
        let child = self.word(PmOffset(root.off + u64::from(offset)))?;
        self.node(child)?;
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(false);
        };
        d.add(
            root.status_addr(),
            s.word(),
            InnerStatus { frozen: true, ..s }.word(),
        )?;
        d.add_with_policy(
            self.root_word,
            root.off,
            child,
            Policy::FreeOldOnSuccess,
            Some(self.nodes()),
        )?;
        let ok = d.execute()?;
        if ok {
            self.counters.root_collapses.fetch_add(1, Ordering::Relaxed);
        }
        Ok(ok)
    }

    /// After a delete left the leaf for `key` underfull: merges underfull nodes on its path
    /// bottom-up and collapses a root with one child, a bounded number of times.
    pub(crate) fn rebalance(&self, key: &[u8]) -> Result<()> {
        for _ in 0..4 {
            let g = self.pm.pin()?;
            let (path, _) = self.traverse(&g, key, false)?;
            let root = path[0].node;
            if !root.is_leaf() && root.info.sorted == 1 {
                self.collapse_root(&root)?;
                continue;
            }
            let mut merged = false;
            for j in (1..path.len()).rev() {
                let n = path[j].node;
                let live = Self::entries_space(&self.entries(&g, &n)?);
                if live < self.merge_trigger() && self.try_merge(&g, &path, j)? {
                    merged = true;
                    break;
                }
            }
            if !merged {
                return Ok(());
            }
        }
        Ok(())
    }
}
