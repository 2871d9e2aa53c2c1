//! Leaf operations (seed 002 §6.3.2): insert, update, delete, each one or two PMwCAS
//! operations on a leaf's status word, a metadata word and (update, delete) a value word.
//!
//! Insert: reserve (2-word PMwCAS: status count and block size, metadata slot 0 → reserved
//! with the index epoch); write the record and persist it (B3); re-check every earlier slot
//! for the same key, waiting briefly for inserts of this incarnation still reserved before
//! ours (then giving the slot up and retrying, so no thread waits inside its epoch guard);
//! make it visible (2-word PMwCAS: metadata reserved → record, status unchanged).
//! Update: 3-word PMwCAS (value word, metadata unchanged, status unchanged).
//! Delete: 3-word PMwCAS (metadata → deleted, status delete size, value unchanged).
//!
//! Invariants:
//! - B2: every PMwCAS here expects the leaf's unfrozen status word, so none succeeds on a
//!   frozen leaf; a writer that finds its leaf frozen helps the structure modification and
//!   retries from the root.
//! - B3: a record's bytes are flushed and fenced before the PMwCAS that makes it visible.
//! - L1: at most one visible record per key in a leaf: an insert makes its record visible
//!   only after finding no visible record with its key in any earlier slot and no reserved
//!   slot of this incarnation before its own (later inserts wait for it in turn).
//! - L2: metadata slots are appended in order under the status word's record count; a slot
//!   at or beyond the count is 0 (B4 for fresh nodes, the reservation PMwCAS otherwise).
//!
//! Thread safety: all shared words change only through PMwCAS; the record bytes written here
//! belong to the inserting thread until its visibility PMwCAS.

use std::time::{Duration, Instant};

use nacre_pmwcas::EpochGuard;

use crate::error::{BzError, Result};
use crate::layout::{record_crc, record_len, LeafStatus, Meta, META_AT};
use crate::node::NodeView;
use crate::options::BzMutation;
use crate::tree::{Attempt, BzTree, Step};

/// How long an insert keeps retrying behind an earlier reserved insert into the same leaf.
const WAIT_LIMIT: Duration = Duration::from_secs(10);
/// Yields an insert waits, inside one attempt, for an earlier reserved insert.
const PENDING_SPINS: u32 = 64;

enum Earlier {
    /// No earlier record has the key and no earlier insert is pending.
    Clear,
    /// An earlier visible record has the key, with this value.
    Duplicate(u64),
    /// An earlier insert of this incarnation is still reserved.
    Pending,
}

impl BzTree {
    fn leaf_of(path: &[Step]) -> NodeView {
        path[path.len() - 1].node
    }

    /// Freezes the leaf at the end of `path` (its space ran out) and runs its structure
    /// modification.
    fn leaf_full(&self, g: &EpochGuard, path: &[Step]) -> Result<()> {
        let leaf = Self::leaf_of(path);
        if self.freeze(&leaf)? {
            self.help(g, path, path.len() - 1)?;
        }
        Ok(())
    }

    /// Looks at the slots before `slot` for `key`.
    fn earlier(&self, g: &EpochGuard, leaf: &NodeView, slot: u32, key: &[u8]) -> Result<Earlier> {
        if let Ok((
            _,
            _,
            m @ Meta::Record {
                visible: true,
                offset,
                ..
            },
        )) = self.search_sorted(g, leaf, key)?
        {
            let _ = m;
            return Ok(Earlier::Duplicate(
                self.word(nacre_pmem::PmOffset(leaf.off + u64::from(offset)))?,
            ));
        }
        let mut pending = false;
        for i in leaf.info.sorted..slot {
            let (_, m) = self.meta(leaf, i)?;
            match m {
                Meta::Record {
                    visible: true,
                    offset,
                    ..
                } if self.key(g, leaf, m)? == key => {
                    return Ok(Earlier::Duplicate(
                        self.word(nacre_pmem::PmOffset(leaf.off + u64::from(offset)))?,
                    ));
                }
                Meta::Reserved { epoch } if epoch == self.epoch => pending = true,
                _ => {}
            }
        }
        Ok(if pending {
            Earlier::Pending
        } else {
            Earlier::Clear
        })
    }

    /// One insert attempt: `Done(None)` inserted, `Done(Some(v))` the key holds `v`.
    /// `pending_since` carries, across attempts, when this insert first gave way to an
    /// earlier insert still in flight.
    pub(crate) fn leaf_insert(
        &self,
        g: &EpochGuard,
        path: &[Step],
        key: &[u8],
        value: u64,
        pending_since: &mut Option<Instant>,
    ) -> Result<Attempt<Option<u64>>> {
        let leaf = Self::leaf_of(path);
        let s = self.leaf_status(&leaf)?;
        if s.frozen {
            self.help(g, path, path.len() - 1)?;
            return Ok(Attempt::Retry);
        }
        if let Some(h) = self.find(g, &leaf, s.count, key)? {
            return Ok(Attempt::Done(Some(self.word(h.value_addr)?)));
        }
        let len = record_len(key.len());
        let used = META_AT + 8 * u64::from(s.count) + u64::from(s.block);
        if used + 8 + len > u64::from(self.node_size) || s.count >= 0x3FFF {
            self.leaf_full(g, path)?;
            return Ok(Attempt::Retry);
        }
        let slot = s.count;
        let reserved = LeafStatus {
            count: s.count + 1,
            block: s.block + len as u32,
            ..s
        };
        // Both descriptors are taken before anything changes: past the reservation this
        // attempt must finish, and waiting for a descriptor inside the guard could wait on
        // the guard itself.
        let Some(complete) = self.pm.try_descriptor()? else {
            return Ok(Attempt::Retry);
        };
        let mut complete = Some(complete);
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(Attempt::Retry);
        };
        d.add(leaf.status_addr(), s.word(), reserved.word())?;
        d.add(
            leaf.meta_addr(slot),
            0,
            Meta::Reserved { epoch: self.epoch }.word(),
        )?;
        if !d.execute()? {
            return Ok(Attempt::Retry);
        }
        let offset = self.node_size - reserved.block;
        self.write_record(&leaf, offset, key, value)?;
        let record = Meta::Record {
            visible: true,
            offset,
            key_len: key.len() as u32,
            total: len as u32,
        };
        let mut spins = 0u32;
        loop {
            let s = self.leaf_status(&leaf)?;
            if s.frozen {
                // The reservation is abandoned: the rebuild skips it (T2).
                self.help(g, path, path.len() - 1)?;
                return Ok(Attempt::Retry);
            }
            match self.earlier(g, &leaf, slot, key)? {
                Earlier::Clear => {}
                Earlier::Duplicate(v) => {
                    self.abort_reservation(&leaf, slot, len as u32)?;
                    return Ok(Attempt::Done(Some(v)));
                }
                Earlier::Pending if spins < PENDING_SPINS => {
                    spins += 1;
                    std::thread::yield_now();
                    continue;
                }
                Earlier::Pending => {
                    // Waiting longer inside the epoch guard would hold back reclamation
                    // (and so the descriptors the earlier insert needs to finish): give the
                    // slot up and start over, within an overall limit.
                    self.abort_reservation(&leaf, slot, len as u32)?;
                    let since = pending_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > WAIT_LIMIT {
                        return Err(BzError::Stalled { node: leaf.off });
                    }
                    return Ok(Attempt::Retry);
                }
            }
            let mut d = match complete.take() {
                Some(d) => d,
                None => self.pm.descriptor()?,
            };
            d.add(
                leaf.meta_addr(slot),
                Meta::Reserved { epoch: self.epoch }.word(),
                record.word(),
            )?;
            d.add(leaf.status_addr(), s.word(), s.word())?;
            if d.execute()? {
                return Ok(Attempt::Done(None));
            }
        }
    }

    /// Writes a record's bytes into its reserved space and persists them (B3).
    fn write_record(&self, leaf: &NodeView, offset: u32, key: &[u8], value: u64) -> Result<()> {
        let mut rec = Vec::with_capacity(record_len(key.len()) as usize);
        rec.extend_from_slice(&value.to_le_bytes());
        rec.extend_from_slice(&record_crc(offset, key).to_le_bytes());
        rec.extend_from_slice(key);
        rec.resize(record_len(key.len()) as usize, 0);
        let at = nacre_pmem::PmOffset(leaf.off + u64::from(offset));
        // SAFETY: the space was reserved by this thread's PMwCAS; no other thread reads it
        // before the visibility PMwCAS (its metadata slot says reserved), and the node cannot
        // be freed while this thread holds its epoch guard.
        unsafe { self.pool.write(at, &rec) };
        if self.mutation != Some(BzMutation::SkipRecordFlush) {
            self.pool.persist(at, rec.len())?;
        }
        Ok(())
    }

    /// Gives up a reservation whose key turned out to be present: the slot becomes empty and
    /// its space counts as deleted. A frozen leaf is left alone (its rebuild drops the slot).
    fn abort_reservation(&self, leaf: &NodeView, slot: u32, len: u32) -> Result<()> {
        loop {
            let s = self.leaf_status(leaf)?;
            if s.frozen {
                return Ok(());
            }
            let after = LeafStatus {
                deleted: s.deleted + len,
                ..s
            };
            let mut d = self.pm.descriptor()?;
            d.add(
                leaf.meta_addr(slot),
                Meta::Reserved { epoch: self.epoch }.word(),
                0,
            )?;
            d.add(leaf.status_addr(), s.word(), after.word())?;
            if d.execute()? {
                return Ok(());
            }
        }
    }

    /// One update attempt: `Done(Some(old))` replaced, `Done(None)` absent.
    pub(crate) fn leaf_update(
        &self,
        g: &EpochGuard,
        path: &[Step],
        key: &[u8],
        value: u64,
    ) -> Result<Attempt<Option<u64>>> {
        self.leaf_update_if(g, path, key, None, value)
    }

    /// One update attempt that, with `expected`, changes nothing unless the value is that
    /// (returning the value found, absent or not).
    pub(crate) fn leaf_update_if(
        &self,
        g: &EpochGuard,
        path: &[Step],
        key: &[u8],
        expected: Option<u64>,
        value: u64,
    ) -> Result<Attempt<Option<u64>>> {
        let leaf = Self::leaf_of(path);
        let s = self.leaf_status(&leaf)?;
        if s.frozen {
            self.help(g, path, path.len() - 1)?;
            return Ok(Attempt::Retry);
        }
        let Some(h) = self.find(g, &leaf, s.count, key)? else {
            return Ok(Attempt::Done(None));
        };
        let old = self.word(h.value_addr)?;
        if expected.is_some_and(|e| e != old) {
            return Ok(Attempt::Done(Some(old)));
        }
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(Attempt::Retry);
        };
        d.add(h.value_addr, old, value)?;
        d.add(leaf.meta_addr(h.slot), h.meta, h.meta)?;
        d.add(leaf.status_addr(), s.word(), s.word())?;
        Ok(if d.execute()? {
            Attempt::Done(Some(old))
        } else {
            Attempt::Retry
        })
    }

    /// One delete attempt: `Done((old, underfull))`, `old` the deleted value (None if
    /// absent), `underfull` whether the leaf now asks for a merge.
    pub(crate) fn leaf_delete(
        &self,
        g: &EpochGuard,
        path: &[Step],
        key: &[u8],
    ) -> Result<Attempt<(Option<u64>, bool)>> {
        let leaf = Self::leaf_of(path);
        let s = self.leaf_status(&leaf)?;
        if s.frozen {
            self.help(g, path, path.len() - 1)?;
            return Ok(Attempt::Retry);
        }
        let Some(h) = self.find(g, &leaf, s.count, key)? else {
            return Ok(Attempt::Done((None, false)));
        };
        let Meta::Record {
            offset,
            key_len,
            total,
            ..
        } = Meta::decode(h.meta, leaf.off, self.node_size)?
        else {
            return Ok(Attempt::Retry);
        };
        let old = self.word(h.value_addr)?;
        let deleted = Meta::Record {
            visible: false,
            offset,
            key_len,
            total,
        };
        let after = LeafStatus {
            deleted: s.deleted + h.total,
            ..s
        };
        let Some(mut d) = self.pm.try_descriptor()? else {
            return Ok(Attempt::Retry);
        };
        d.add(h.value_addr, old, old)?;
        d.add(leaf.meta_addr(h.slot), h.meta, deleted.word())?;
        d.add(leaf.status_addr(), s.word(), after.word())?;
        if !d.execute()? {
            return Ok(Attempt::Retry);
        }
        let live = u64::from(after.block - after.deleted);
        Ok(Attempt::Done((
            Some(old),
            path.len() > 1 && live < self.merge_trigger(),
        )))
    }
}
