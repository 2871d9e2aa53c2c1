//! Range scans (seed 002 §6.3.2, "Range Scans"): one leaf at a time, each a snapshot of its
//! visible records taken inside one epoch guard; the next leaf is found by traversing to the
//! previous leaf's upper bound (from the separators on the path), so empty leaves are
//! crossed without special cases.
//!
//! Consistency: each leaf's records are read inside one guard, as a natural race with
//! concurrent writers to that leaf (seed 002); keys come out in strictly increasing order.

use nacre_pmem::PmOffset;
use nacre_pmwcas::EpochGuard;

use crate::error::Result;
use crate::layout::Meta;
use crate::node::NodeView;
use crate::tree::BzTree;

impl BzTree {
    /// Up to `limit` entries with `start <= key < end` (no upper bound when `end` is
    /// `None`), in key order.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let mut out: Vec<(Vec<u8>, u64)> = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.for_each_leaf(start, end, |entries| {
            out.extend(entries.into_iter().take(limit - out.len()));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Hands `f` the entries with `start <= key < end` (no upper bound when `end` is `None`)
    /// one leaf at a time, in key order: each leaf's snapshot, sorted, never empty, and
    /// only keys above the last one handed over. No guard is held while `f` runs, so `f`
    /// may change the tree; the walk goes on from the leaf's upper bound as it was when the
    /// leaf was read, so every key in the range that was there throughout is handed over
    /// once. `f` returns whether to go on.
    pub fn for_each_leaf(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        mut f: impl FnMut(Vec<(Vec<u8>, u64)>) -> Result<bool>,
    ) -> Result<()> {
        let mut cur = start.to_vec();
        let mut last: Option<Vec<u8>> = None;
        loop {
            let (mut entries, upper) = {
                let g = self.pm.pin()?;
                let (path, upper) = self.traverse(&g, &cur, true)?;
                let leaf = path[path.len() - 1].node;
                (self.entries(&g, &leaf)?, upper)
            };
            entries.retain(|(k, _)| {
                k.as_slice() >= start
                    && end.is_none_or(|e| k.as_slice() < e)
                    && last.as_ref().is_none_or(|l| k > l)
            });
            if let Some((k, _)) = entries.last() {
                last = Some(k.clone());
                if !f(entries)? {
                    return Ok(());
                }
            }
            match upper {
                Some(u) if end.is_none_or(|e| u.as_slice() < e) => cur = u,
                _ => return Ok(()),
            }
        }
    }

    /// The first entry whose key is at least `key`: in the leaf for `key`, a binary search
    /// of its sorted records and a look at its unsorted tail (nothing copied but the entry
    /// found); then, if none there, the leaves after it as a scan finds them.
    pub fn seek(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        self.seek_map(key, |k, v| (k.to_vec(), v))
    }

    /// [`BzTree::seek`], handing the entry found to `f` (its key borrowed, its value).
    pub fn seek_map<T>(&self, key: &[u8], f: impl FnOnce(&[u8], u64) -> T) -> Result<Option<T>> {
        let mut cur: std::borrow::Cow<'_, [u8]> = std::borrow::Cow::Borrowed(key);
        loop {
            let g = self.pm.pin()?;
            let d = self.descend(&g, &cur, true, false)?;
            let leaf = d.path[d.path.len() - 1].node;
            let count = self.leaf_status(&leaf)?.count;
            let mut best: Option<(&[u8], u32)> = None;
            let first = match self.search_sorted(&g, &leaf, key)? {
                Ok((slot, _, _)) | Err(slot) => slot,
            };
            for slot in first..leaf.info.sorted {
                if let Some((k, offset)) = self.visible_key(&g, &leaf, slot)? {
                    consider(key, k, offset, &mut best);
                    break;
                }
            }
            for slot in leaf.info.sorted..count {
                if let Some((k, offset)) = self.visible_key(&g, &leaf, slot)? {
                    consider(key, k, offset, &mut best);
                }
            }
            if let Some((k, offset)) = best {
                let v = self.word(PmOffset(leaf.off + u64::from(offset)))?;
                return Ok(Some(f(k, v)));
            }
            match d.upper {
                Some(u) => cur = std::borrow::Cow::Owned(u),
                None => return Ok(None),
            }
        }
    }

    /// The checked key and record offset of slot `slot` of `leaf` if it holds a visible
    /// record.
    fn visible_key<'g>(
        &self,
        g: &'g EpochGuard,
        leaf: &NodeView,
        slot: u32,
    ) -> Result<Option<(&'g [u8], u32)>> {
        match self.meta(leaf, slot)? {
            (
                _,
                m @ Meta::Record {
                    visible: true,
                    offset,
                    ..
                },
            ) => Ok(Some((self.key(g, leaf, m)?, offset))),
            _ => Ok(None),
        }
    }

    /// The last entry whose key is below `key`: the leaf whose range reaches just below
    /// `key`, then (when its entries below `key` are all deleted) the leaves before it, each
    /// found by descending to just below the previous one's lower bound.
    pub fn seek_before(&self, key: &[u8]) -> Result<Option<(Vec<u8>, u64)>> {
        let mut cur = key.to_vec();
        loop {
            let g = self.pm.pin()?;
            let d = self.descend(&g, &cur, false, true)?;
            let leaf = d.path[d.path.len() - 1].node;
            if let Some(e) = self
                .entries(&g, &leaf)?
                .into_iter()
                .take_while(|(k, _)| *k < cur)
                .last()
            {
                return Ok(Some(e));
            }
            match d.lower {
                Some(l) if l < cur => cur = l,
                _ => return Ok(None),
            }
        }
    }
}

/// Keeps `k` (a record at `offset`) in `best` if it is at least `key` and below what `best`
/// holds.
fn consider<'a>(key: &[u8], k: &'a [u8], offset: u32, best: &mut Option<(&'a [u8], u32)>) {
    if k >= key && best.is_none_or(|(b, _)| k < b) {
        *best = Some((k, offset));
    }
}
