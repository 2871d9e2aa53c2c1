//! Subtables: named, independent key spaces (RocksDB's column families). In PM a subtable is
//! its object and its memlist: every memtable it owns, chained newest first through the
//! memtable objects' `next` words, whatever the memtable's state (active, immutable, merged
//! into the Global Index, or holding relocated records). In DRAM it is a read view (active
//! and immutable memtables with their indexes), its Global Index, and the chain.
//!
//! Invariants:
//! - S1: a memtable is committed in the memtable pool before the memlist reaches it, so the
//!   memlist only links committed memtables; one committed but not linked when a crash hits
//!   is released by recovery. New memtables are linked at the head.
//! - S2: a memtable leaves the memlist (one 8-byte store in its predecessor, or the head)
//!   only when none of its slots holds a zone; it is released after.
//! - S3: the active memtable is the newest user memtable; every record in it or in an
//!   immutable memtable is newer than every record of the same key in the Global Index
//!   (memtables are merged oldest first; relocated records go to relocation memtables,
//!   which belong to the Global Index). Sealing a memtable links its successor first, so the
//!   newest user memtable in PM is never one that was sealed: recovery, which makes the
//!   newest one active again, never revives a memtable whose records were merged (and maybe
//!   relocated, which would index one version twice and free a live blob's zones).
//!
//! Thread safety: `state` serialises changes to the chain and the view: stage 2 of the Reorder
//! Ring (switches, relocation memtables) and the background worker (seals, merges, unlinks).
//! Readers load the view without locking.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Mutex, MutexGuard};

use nacre_halloc::ObjId;
use nacre_pmem::PmOffset;

use crate::art::ArtIndex;
use crate::error::Result;
use crate::gi::GlobalIndex;
use crate::memtable::{Memtable, Role};
use crate::space::Space;
use crate::store::Store;
use crate::view::{Frozen, MemSource, Sealed, Tickets, View};

/// A handle to a subtable of a [`crate::Db`]. Cheap to clone.
#[derive(Clone)]
pub struct Subtable {
    pub(crate) inner: Arc<SubtableInner>,
}

pub(crate) struct SubtableInner {
    pub id: u32,
    pub name: String,
    pub obj: ObjId,
    /// Identity of the owning database instance (handles from another `Db` are refused).
    pub db: u64,
    pub view: ArcSwap<View>,
    pub state: Mutex<SubState>,
    /// Zones the cleaner retired: bumped before the view that stops pointing into a zone is
    /// installed, so an iterator that sees it unchanged holds no offset into a freed zone.
    pub retires: AtomicU64,
    /// Keys of the Global Index to look at again (older versions kept for readers, or a
    /// tombstone waiting for its ghosts): the background worker re-applies the horizon.
    pub revisit: Mutex<Vec<Vec<u8>>>,
}

/// The subtable's structure, changed under its lock.
pub(crate) struct SubState {
    /// Every memtable in the memlist, newest first (mirrors PM).
    pub chain: Vec<Arc<Memtable>>,
    /// Where the cleaner appends relocated records.
    pub reloc: Option<Arc<Memtable>>,
}

impl std::fmt::Debug for Subtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subtable")
            .field("id", &self.inner.id)
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Subtable {
    pub(crate) fn new(
        db: u64,
        id: u32,
        name: String,
        obj: ObjId,
        chain: Vec<Arc<Memtable>>,
        view: View,
    ) -> Self {
        Subtable {
            inner: Arc::new(SubtableInner {
                id,
                name,
                obj,
                db,
                view: ArcSwap::from_pointee(view),
                state: Mutex::new(SubState { chain, reloc: None }),
                retires: AtomicU64::new(0),
                revisit: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The subtable's id (stable across restarts).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The subtable's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl SubtableInner {
    /// The Global Index merges go into (the background worker's; readers use their view's).
    pub fn gi(&self) -> Arc<GlobalIndex> {
        self.view.load().gi.clone()
    }

    pub fn lock(&self) -> MutexGuard<'_, SubState> {
        self.state.lock()
    }

    /// Creates a memtable of `role` and links it at the head of the memlist (S1).
    fn link_new(&self, store: &Store, st: &mut SubState, role: Role) -> Result<Arc<Memtable>> {
        let next = st.chain.first().map_or(PmOffset::NULL, |m| m.offset(store));
        let m = Arc::new(Memtable::create(store, u64::from(self.id), next, role)?);
        store.subs.set_memlist(self.obj, m.offset(store))?;
        st.chain.insert(0, m.clone());
        Ok(m)
    }

    /// Stage 2: the active memtable, sealing the current one first if `full`. `last_seq` is
    /// the last sequence number granted so far and `visible` the last committed one.
    pub fn active_for_write(
        &self,
        store: &Store,
        space: &Space,
        tickets: &Arc<Tickets>,
        full: bool,
        last_seq: u64,
        visible: u64,
    ) -> Result<MemSource> {
        if !full {
            // Only stage 2 (serial) changes the active memtable.
            if let Some(a) = &self.view.load().active {
                return Ok(a.clone());
            }
        }
        let mut st = self.lock();
        let view = self.view.load_full();
        if let (Some(a), false) = (&view.active, full) {
            return Ok(a.clone());
        }
        let mem = self.link_new(store, &mut st, Role::User)?;
        if view.active.is_some() {
            space.sealed_one();
        }
        let active = MemSource {
            mem,
            index: Arc::new(ArtIndex::default()),
        };
        let mut immutables = Vec::with_capacity(view.immutables.len() + 1);
        if let Some(old) = &view.active {
            immutables.push(Sealed {
                src: old.clone(),
                last_seq,
            });
        }
        immutables.extend(view.immutables.iter().cloned());
        let n = immutables.len();
        self.view.store(Arc::new(View {
            active: Some(active.clone()),
            immutables,
            gi: view.gi.clone(),
            frozen: view.frozen.clone(),
            _ticket: tickets.issue(visible),
        }));
        tracing::debug!(subtable = %self.name, immutables = n, "memtable switch");
        Ok(active)
    }

    /// Stage 2 (of a group with nothing to write): seals the active memtable, if it holds
    /// anything, and starts a new (empty) one in front of it (S3: the newest user memtable is
    /// never one that was sealed, so recovery never makes a merged memtable active again).
    /// Whether it sealed one.
    pub fn seal(
        &self,
        store: &Store,
        space: &Space,
        tickets: &Arc<Tickets>,
        last_seq: u64,
        visible: u64,
    ) -> Result<bool> {
        let holds = |a: &MemSource| a.mem.committed() > 0;
        if self.view.load().active.as_ref().is_none_or(|a| !holds(a)) {
            return Ok(false);
        }
        self.active_for_write(store, space, tickets, true, last_seq, visible)?;
        Ok(true)
    }

    /// Stage 2 of a relocation group: the relocation memtable, a new one if `full`.
    pub fn reloc_for_write(&self, store: &Store, full: bool) -> Result<Arc<Memtable>> {
        let mut st = self.lock();
        match &st.reloc {
            Some(m) if !full => Ok(m.clone()),
            _ => {
                let m = self.link_new(store, &mut st, Role::Relocation)?;
                st.reloc = Some(m.clone());
                Ok(m)
            }
        }
    }

    /// Stage 2 of a group that failed after sealing `mem` with its own last sequence number
    /// (it had reserved there): nothing of that group is in `mem` any more, so its merge waits
    /// only for `last_seq`, the last sequence number granted before the group.
    pub fn reseal(&self, tickets: &Arc<Tickets>, visible: u64, mem: &Arc<Memtable>, last_seq: u64) {
        self.replace_view(tickets, visible, |v| {
            let immutables = v
                .immutables
                .iter()
                .map(|s| Sealed {
                    src: s.src.clone(),
                    last_seq: if Arc::ptr_eq(&s.src.mem, mem) {
                        s.last_seq.min(last_seq)
                    } else {
                        s.last_seq
                    },
                })
                .collect();
            (v.active.clone(), immutables)
        });
    }

    /// Installs a view with the same memtables as now but `f` applied, and a new ticket.
    pub fn replace_view(
        &self,
        tickets: &Arc<Tickets>,
        visible: u64,
        f: impl FnOnce(&View) -> (Option<MemSource>, Vec<Sealed>),
    ) -> u64 {
        let _st = self.lock();
        let view = self.view.load_full();
        let (active, immutables) = f(&view);
        let ticket = tickets.issue(visible);
        let id = ticket.id;
        self.view.store(Arc::new(View {
            active,
            immutables,
            gi: view.gi.clone(),
            frozen: view.frozen.clone(),
            _ticket: ticket,
        }));
        id
    }

    /// Installs a view with the same memtables as now and the Global Indexes `f` returns
    /// (given the current view and the memlist), and a new ticket; the ticket's id.
    pub fn replace_tiers(
        &self,
        tickets: &Arc<Tickets>,
        visible: u64,
        f: impl FnOnce(&View, &[Arc<Memtable>]) -> (Arc<GlobalIndex>, Option<Arc<Frozen>>),
    ) -> u64 {
        let st = self.lock();
        let view = self.view.load_full();
        let (gi, frozen) = f(&view, &st.chain);
        let ticket = tickets.issue(visible);
        let id = ticket.id;
        self.view.store(Arc::new(View {
            active: view.active.clone(),
            immutables: view.immutables.clone(),
            gi,
            frozen,
            _ticket: ticket,
        }));
        id
    }

    /// Unlinks a memtable that holds no zone (S2) and releases it. The active and the
    /// relocation memtable are never unlinked.
    pub fn unlink(&self, store: &Store, mem: &Arc<Memtable>) -> Result<()> {
        let mut st = self.lock();
        if st.reloc.as_ref().is_some_and(|r| Arc::ptr_eq(r, mem)) {
            return Ok(());
        }
        let Some(i) = st.chain.iter().position(|m| Arc::ptr_eq(m, mem)) else {
            return Ok(());
        };
        let next = st
            .chain
            .get(i + 1)
            .map_or(PmOffset::NULL, |m| m.offset(store));
        match i {
            0 => store.subs.set_memlist(self.obj, next)?,
            _ => store.mems.set_next(st.chain[i - 1].obj, next)?,
        }
        st.chain.remove(i);
        store.mems.release(mem.obj)?;
        Ok(())
    }
}
