//! What readers pin: a subtable's read view (its memtables at one moment, like RocksDB's
//! SuperVersion), the tickets that tell background work which views are still held, and the
//! registry of snapshots.
//!
//! Invariants:
//! - V1: a reader loads its view first and only then reads `visible`; so a reader holding a
//!   view with ticket `t` reads at a sequence number at least `t.seq`.
//! - V2: a version may leave the Global Index only if no reader can need it: readers are
//!   those holding a ticket (they read at `>=` the oldest live ticket's sequence, V1) and the
//!   registered snapshots (and iterators, which register their sequence).
//! - V3: a zone whose records were moved is given back only once every ticket issued before
//!   the view that stopped pointing into it is gone: readers holding such a ticket may still
//!   hold offsets into the zone.
//!
//! Thread safety: the registries are mutex-guarded and touched only when a view is installed
//! or dropped, or a snapshot taken or released, never per read.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::art::ArtIndex;
use crate::gi::GlobalIndex;
use crate::index::MemIndex;
use crate::memtable::Memtable;

/// A memtable with its volatile index, as readers and writers reach it.
#[derive(Clone)]
pub(crate) struct MemSource {
    pub mem: Arc<Memtable>,
    pub index: Arc<ArtIndex>,
}

/// An immutable memtable waiting to be merged into the Global Index.
#[derive(Clone)]
pub(crate) struct Sealed {
    pub src: MemSource,
    /// The last sequence number granted before it was sealed: once `visible` reaches it, every
    /// group that wrote into it has committed.
    pub last_seq: u64,
}

/// One subtable's memtables and Global Indexes at one moment.
pub(crate) struct View {
    /// Where writes go (none right after a seal, until the next write).
    pub active: Option<MemSource>,
    /// Sealed memtables, newest first.
    pub immutables: Vec<Sealed>,
    /// The Global Index merges go into.
    pub gi: Arc<GlobalIndex>,
    /// A Global Index frozen for its spill to the disk levels (disk.rs): read after `gi`,
    /// before the disk levels, until its records are durably on disk.
    pub frozen: Option<Arc<Frozen>>,
    /// Held for its drop: the view's claim on versions and zones.
    pub _ticket: Ticket,
}

/// A frozen Global Index and the memtables behind it (every memtable that belonged to the
/// Global Index when it was frozen).
pub(crate) struct Frozen {
    pub gi: Arc<GlobalIndex>,
    pub mems: Vec<Arc<Memtable>>,
}

impl View {
    /// The newest version of `key` with sequence at most `seq` in PM: memtables (newest
    /// first), then the Global Index, then the frozen one.
    pub fn newest(
        &self,
        key: &[u8],
        seq: u64,
    ) -> crate::error::Result<Option<(u64, nacre_pmem::PmOffset)>> {
        if let Some(hit) = self.indexes().find_map(|ix| ix.get(key, seq)) {
            return Ok(Some(hit));
        }
        if let Some(hit) = self.gi.get_at(key, seq)? {
            return Ok(Some(hit));
        }
        match &self.frozen {
            Some(f) => f.gi.get_at(key, seq),
            None => Ok(None),
        }
    }

    /// Memtable indexes, newest first.
    pub fn indexes(&self) -> impl Iterator<Item = &Arc<ArtIndex>> {
        self.active
            .iter()
            .map(|m| &m.index)
            .chain(self.immutables.iter().map(|s| &s.src.index))
    }
}

/// Issues tickets and knows the oldest one still held.
#[derive(Default)]
pub(crate) struct Tickets {
    inner: Mutex<TicketsInner>,
}

#[derive(Default)]
struct TicketsInner {
    next: u64,
    live: BTreeMap<u64, u64>,
}

/// A view's claim: while it lives, versions visible at `seq` stay indexed (V2) and zones it
/// may point into stay allocated (V3).
pub(crate) struct Ticket {
    pub id: u64,
    tickets: Arc<Tickets>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.tickets.inner.lock().live.remove(&self.id);
    }
}

impl Tickets {
    /// A ticket for a view installed when `seq` was visible.
    pub fn issue(self: &Arc<Self>, seq: u64) -> Ticket {
        let mut t = self.inner.lock();
        t.next += 1;
        let id = t.next;
        t.live.insert(id, seq);
        Ticket {
            id,
            tickets: self.clone(),
        }
    }

    /// The oldest live ticket's id and sequence number (ids and sequences grow together).
    pub fn oldest(&self) -> Option<(u64, u64)> {
        let t = self.inner.lock();
        t.live.first_key_value().map(|(&id, &seq)| (id, seq))
    }
}

/// Registered read points: snapshots and iterators.
#[derive(Default)]
pub(crate) struct Snapshots {
    held: Mutex<BTreeMap<u64, usize>>,
    /// Live registrations by holder: [`Holder::Snapshot`], [`Holder::Iterator`].
    live: [std::sync::atomic::AtomicUsize; 2],
}

/// What holds a read point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    Snapshot = 0,
    Iterator = 1,
}

/// A registration of sequence number `seq`, released on drop.
pub(crate) struct SnapGuard {
    pub seq: u64,
    holder: Holder,
    reg: Arc<Snapshots>,
}

impl Drop for SnapGuard {
    fn drop(&mut self) {
        self.reg.live[self.holder as usize].fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        let mut s = self.reg.held.lock();
        if let Some(n) = s.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seq);
            }
        }
    }
}

impl Snapshots {
    /// Registers `seq()` (called under the registry's lock, so a read point is registered
    /// before any background step can compute a horizon past it).
    pub fn register(self: &Arc<Self>, holder: Holder, seq: impl FnOnce() -> u64) -> SnapGuard {
        let mut s = self.held.lock();
        let seq = seq();
        *s.entry(seq).or_insert(0) += 1;
        self.live[holder as usize].fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        SnapGuard {
            seq,
            holder,
            reg: self.clone(),
        }
    }

    /// Live snapshots and iterators.
    pub fn live(&self) -> (usize, usize) {
        let n = |h: Holder| self.live[h as usize].load(std::sync::atomic::Ordering::Acquire);
        (n(Holder::Snapshot), n(Holder::Iterator))
    }

    /// Every registered sequence number, ascending, with how many hold it.
    pub fn held(&self) -> Vec<(u64, usize)> {
        self.held.lock().iter().map(|(&s, &n)| (s, n)).collect()
    }
}

/// A consistent read view: every read through it sees exactly the writes acknowledged before
/// it was taken. Released on drop; while it lives, the versions it reads stay in PM.
pub struct Snapshot {
    pub(crate) guard: SnapGuard,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> u64 {
        self.guard.seq
    }
}
