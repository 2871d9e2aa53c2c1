//! Object pools: fixed-size persistent objects with a log-free freelist (seed 000 §3.4.1).
//!
//! Layout inside the pool's region (docs/format.md):
//! ```text
//! +0     header line: magic, object size, count, objects offset, kind, checksum
//! +64    hd: index of the first free object (NIL = empty), on its own cache line
//! +128   entries: one u64 per object = committed bit (63) | next free index (0..63)
//! +A     objects: count x object size, A aligned to 64 (4096 for objects >= 4 KiB)
//! ```
//!
//! Protocol (Figure 9): `get` pops the head of the freelist, storing the new head without
//! flushing it; the caller fills and persists the object; `commit` sets the object's committed
//! bit with one 8-byte store, one flush and one fence, the only durability cost of an
//! allocation. `release` clears the bit and pushes the object (one flush, one fence); `abort`
//! returns an uncommitted object with no flush at all. The head and the links on media may
//! therefore lag behind DRAM; the committed bits never do, and recovery trusts only them.
//!
//! Invariants:
//! - H1: after recovery every object is exactly one of free (on the freelist, bit clear) or
//!   committed (bit set, off the freelist). Recovery walks the freelist from `hd` marking
//!   reachable objects, unlinks reachable objects whose bit is set (a torn release or a stale
//!   head), reclaims objects that are neither reachable nor committed (a crash between `get`
//!   and `commit`), and persists the rebuilt list. Recovery never changes a committed entry.
//! - H2: `commit` is a single 8-byte persistent store; the caller persists the object's
//!   contents before calling it, so a committed object's contents are durable.
//! - H3: the committed bit of an object changes only by `commit` (set) and `release` (clear);
//!   the next field of an entry changes only while the object is free, under the freelist lock.
//!
//! Thread safety: `get`, `release`, `abort` serialise on one mutex guarding the head;
//! `commit` and `check` touch only the object's own entry and take no lock. A per-object
//! state byte in DRAM (free / gotten / committed) rejects double releases and commits of
//! objects that were never handed out, before anything on media changes.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nacre_pmem::{PmOffset, Pool};

use crate::error::{HallocError, Result};

/// Index of an object in its pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjId(pub u64);

const MAGIC: u64 = u64::from_le_bytes(*b"HALLOCOP");
const COMMITTED: u64 = 1 << 63;
const NEXT_MASK: u64 = COMMITTED - 1;
/// End of the freelist.
const NIL: u64 = NEXT_MASK;
const HD_AT: u64 = 64;
const ENTRIES_AT: u64 = 128;

/// Smallest object size.
pub const MIN_OBJECT_SIZE: u64 = 8;
/// Largest object size (zones included).
pub const MAX_OBJECT_SIZE: u64 = 1 << 30;

const FREE: u8 = 0;
const GOTTEN: u8 = 1;
const DONE: u8 = 2;

fn state_name(s: u8) -> &'static str {
    match s {
        FREE => "free",
        GOTTEN => "allocated but not committed",
        _ => "committed",
    }
}

/// The shape of an object pool, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShape {
    /// Bytes per object.
    pub object_size: u64,
    /// Number of objects.
    pub count: u64,
    /// Caller-defined kind recorded in the header (see [`crate::PoolKind`]).
    pub kind: u64,
}

impl PoolShape {
    fn objects_at(&self) -> u64 {
        let align = if self.object_size >= 4096 { 4096 } else { 64 };
        (ENTRIES_AT + 8 * self.count).next_multiple_of(align)
    }

    /// Bytes of region this shape needs.
    pub fn region_len(&self) -> u64 {
        self.objects_at() + self.count * self.object_size
    }

    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        if !(MIN_OBJECT_SIZE..=MAX_OBJECT_SIZE).contains(&self.object_size) {
            return Err(HallocError::ObjectSizeOutOfRange {
                size: self.object_size,
                min: MIN_OBJECT_SIZE,
                max: MAX_OBJECT_SIZE,
            });
        }
        if self.count == 0 || self.count >= NIL {
            return Err(HallocError::EmptyPool {
                pool: name.to_string(),
            });
        }
        Ok(())
    }

    fn encode(&self) -> [u64; 8] {
        let mut h = [
            MAGIC,
            self.object_size,
            self.count,
            self.objects_at(),
            self.kind,
            0,
            0,
            0,
        ];
        h[7] = header_checksum(&h);
        h
    }
}

fn header_checksum(h: &[u64; 8]) -> u64 {
    // FNV-1a over the first seven words: cheap, and enough to tell a written header from a
    // torn or never-written one (the header is written once, after the body).
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    for w in &h[..7] {
        for b in w.to_le_bytes() {
            x ^= u64::from(b);
            x = x.wrapping_mul(0x100_0000_01b3);
        }
    }
    x | 1
}

/// What recovery found when a pool was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Objects reachable from the freelist head.
    pub reachable: u64,
    /// Objects with the committed bit set.
    pub committed: u64,
    /// Uncommitted objects not reachable from the freelist on media, linked back in: a crash
    /// between get and commit, or links that were not yet written back (they are lazy).
    pub reclaimed: u64,
    /// Committed objects found on the freelist and unlinked (torn release or stale head).
    pub unlinked: u64,
    /// Free objects after recovery.
    pub free: u64,
}

struct FreeList {
    hd: u64,
}

/// A pool of fixed-size persistent objects.
pub struct ObjectPool {
    name: String,
    pool: Arc<Pool>,
    base: PmOffset,
    shape: PoolShape,
    objects: PmOffset,
    head: Mutex<FreeList>,
    /// Objects on the freelist; changed under `head`'s lock, read without it.
    free: AtomicU64,
    state: Vec<AtomicU8>,
    recovery: RecoveryStats,
}

impl std::fmt::Debug for ObjectPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectPool")
            .field("name", &self.name)
            .field("shape", &self.shape)
            .finish()
    }
}

impl ObjectPool {
    /// Formats a new pool in `base..base + shape.region_len()`: body first, header last, so a
    /// crash during formatting leaves no valid header and formatting simply runs again.
    pub(crate) fn format(pool: &Pool, base: PmOffset, shape: &PoolShape) -> Result<()> {
        let entries = base.add(ENTRIES_AT);
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut i = 0u64;
        while i < shape.count {
            buf.clear();
            let end = (i + 8192).min(shape.count);
            for j in i..end {
                let next = if j + 1 == shape.count { NIL } else { j + 1 };
                buf.extend_from_slice(&next.to_le_bytes());
            }
            // SAFETY: the pool is being formatted; no other thread has it yet.
            unsafe { pool.copy_nt(entries.add(8 * i), &buf) };
            i = end;
        }
        pool.store_u64(base.add(HD_AT), 0);
        pool.fence()?;
        let h = shape.encode();
        let bytes: Vec<u8> = h.iter().flat_map(|w| w.to_le_bytes()).collect();
        // SAFETY: as above.
        unsafe { pool.write(base, &bytes) };
        pool.persist(base, bytes.len())?;
        Ok(())
    }

    /// Reads the header at `base`: `None` if never fully written.
    pub(crate) fn read_shape(pool: &Pool, base: PmOffset) -> Option<PoolShape> {
        let mut h = [0u64; 8];
        for (i, w) in h.iter_mut().enumerate() {
            *w = pool.load_u64(base.add(8 * i as u64));
        }
        if h[0] != MAGIC || h[7] != header_checksum(&h) {
            return None;
        }
        let shape = PoolShape {
            object_size: h[1],
            count: h[2],
            kind: h[4],
        };
        (h[3] == shape.objects_at()).then_some(shape)
    }

    /// Opens a formatted pool and runs recovery (invariant H1).
    pub(crate) fn open(
        name: &str,
        pool: Arc<Pool>,
        base: PmOffset,
        shape: PoolShape,
    ) -> Result<ObjectPool> {
        shape.validate(name)?;
        pool.check_range(base, shape.region_len())?;
        let mut op = ObjectPool {
            name: name.to_string(),
            objects: base.add(shape.objects_at()),
            base,
            shape,
            pool,
            head: Mutex::new(FreeList { hd: NIL }),
            free: AtomicU64::new(0),
            state: (0..shape.count).map(|_| AtomicU8::new(FREE)).collect(),
            recovery: RecoveryStats::default(),
        };
        op.recover()?;
        Ok(op)
    }

    fn entry_off(&self, i: u64) -> PmOffset {
        self.base.add(ENTRIES_AT + 8 * i)
    }

    fn entry(&self, i: u64) -> u64 {
        self.pool.load_u64(self.entry_off(i))
    }

    fn recover(&mut self) -> Result<()> {
        let n = self.shape.count;
        let mut reachable = vec![false; n as usize];
        let mut order = Vec::new();
        let mut stats = RecoveryStats::default();
        let mut i = self.pool.load_u64(self.base.add(HD_AT));
        // The walk stops at NIL, an out-of-range index, or a cycle (stale links).
        while i < n && !reachable[i as usize] {
            reachable[i as usize] = true;
            stats.reachable += 1;
            let e = self.entry(i);
            if e & COMMITTED != 0 {
                stats.unlinked += 1;
            } else {
                order.push(i);
            }
            i = e & NEXT_MASK;
        }
        for j in 0..n {
            let e = self.entry(j);
            if e & COMMITTED != 0 {
                stats.committed += 1;
                self.state[j as usize].store(DONE, Ordering::Relaxed);
            } else if !reachable[j as usize] {
                stats.reclaimed += 1;
                order.push(j);
            }
        }
        // Rewrite the links that differ, then the head; one fence.
        for (k, &obj) in order.iter().enumerate() {
            let next = order.get(k + 1).copied().unwrap_or(NIL);
            if self.entry(obj) != next {
                self.pool.store_u64(self.entry_off(obj), next);
            }
        }
        let hd = order.first().copied().unwrap_or(NIL);
        self.pool.store_u64(self.base.add(HD_AT), hd);
        self.pool.fence()?;
        stats.free = order.len() as u64;
        *self.lock() = FreeList { hd };
        self.free.store(stats.free, Ordering::Release);
        if stats.reclaimed + stats.unlinked > 0 {
            tracing::info!(pool = %self.name, ?stats, "halloc recovery repaired the freelist");
        }
        self.recovery = stats;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, FreeList> {
        // The head is only changed after the corresponding media stores succeed, so a
        // poisoned lock still guards a consistent list.
        self.head.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_id(&self, id: ObjId) -> Result<usize> {
        if id.0 >= self.shape.count {
            return Err(HallocError::NoSuchObject {
                pool: self.name.clone(),
                id: id.0,
                count: self.shape.count,
            });
        }
        Ok(id.0 as usize)
    }

    fn transition(&self, id: ObjId, from: u8, to: u8, op: &'static str) -> Result<()> {
        let i = self.check_id(id)?;
        self.state[i]
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|s| HallocError::BadObjectState {
                pool: self.name.clone(),
                id: id.0,
                state: state_name(s),
                op,
            })
    }

    /// Takes an object off the freelist. Its contents are undefined; fill and persist them,
    /// then [`ObjectPool::commit`]. Until committed, a crash returns it to the freelist.
    pub fn get(&self) -> Result<ObjId> {
        let mut fl = self.lock();
        if fl.hd == NIL {
            return Err(HallocError::Exhausted {
                pool: self.name.clone(),
                count: self.shape.count,
                object_size: self.shape.object_size,
            });
        }
        let a = fl.hd;
        let next = self.entry(a) & NEXT_MASK;
        self.pool.store_u64_unflushed(self.base.add(HD_AT), next);
        fl.hd = next;
        self.free.fetch_sub(1, Ordering::AcqRel);
        self.state[a as usize].store(GOTTEN, Ordering::Release);
        Ok(ObjId(a))
    }

    /// Marks a gotten object committed: one 8-byte store, one flush, one fence (H2). The
    /// caller must have persisted the object's contents first.
    pub fn commit(&self, id: ObjId) -> Result<()> {
        self.transition(id, GOTTEN, DONE, "commit")?;
        let off = self.entry_off(id.0);
        self.pool
            .store_u64(off, self.pool.load_u64(off) | COMMITTED);
        if let Err(e) = self.pool.fence() {
            self.state[id.0 as usize].store(GOTTEN, Ordering::Release);
            return Err(e.into());
        }
        Ok(())
    }

    /// Every committed object, in index order (from the DRAM state, which recovery built from
    /// media and every later commit and release updated).
    pub fn committed_ids(&self) -> Vec<ObjId> {
        self.state
            .iter()
            .enumerate()
            .filter(|(_, s)| s.load(Ordering::Acquire) == DONE)
            .map(|(i, _)| ObjId(i as u64))
            .collect()
    }

    /// Whether the object is committed (as media says).
    pub fn check(&self, id: ObjId) -> Result<bool> {
        self.check_id(id)?;
        Ok(self.entry(id.0) & COMMITTED != 0)
    }

    /// Links `id` in front of the list. Only a release needs its entry durable (the cleared
    /// committed bit); the caller fences.
    fn push(&self, fl: &mut FreeList, id: ObjId, durable: bool) {
        if durable {
            self.pool.store_u64(self.entry_off(id.0), fl.hd);
        } else {
            self.pool.store_u64_unflushed(self.entry_off(id.0), fl.hd);
        }
        self.pool.store_u64_unflushed(self.base.add(HD_AT), id.0);
        fl.hd = id.0;
        self.free.fetch_add(1, Ordering::AcqRel);
    }

    /// Releases a committed object: clears its bit and pushes it on the freelist, durably.
    /// Releasing an object that is free or not yet committed is refused with an error and
    /// changes nothing.
    pub fn release(&self, id: ObjId) -> Result<()> {
        self.release_many(&[id])
    }

    /// Releases several committed objects with a single fence (batch reclaim). Validates
    /// every id before changing anything.
    pub fn release_many(&self, ids: &[ObjId]) -> Result<()> {
        let mut fl = self.lock();
        for (k, &id) in ids.iter().enumerate() {
            if let Err(e) = self.transition(id, DONE, FREE, "release") {
                for &done in &ids[..k] {
                    self.state[done.0 as usize].store(DONE, Ordering::Release);
                }
                return Err(e);
            }
        }
        for &id in ids {
            self.push(&mut fl, id, true);
        }
        self.pool.fence()?;
        Ok(())
    }

    /// Returns a gotten, uncommitted object to the freelist (nothing flushed: if the push is
    /// lost, recovery reclaims the object anyway).
    pub fn abort(&self, id: ObjId) -> Result<()> {
        let mut fl = self.lock();
        self.transition(id, GOTTEN, FREE, "abort")?;
        self.push(&mut fl, id, false);
        Ok(())
    }

    /// Where the object's bytes start.
    pub fn offset(&self, id: ObjId) -> PmOffset {
        self.objects.add(id.0 * self.shape.object_size)
    }

    /// The object whose bytes start at `off`, if any.
    pub fn id_at(&self, off: PmOffset) -> Option<ObjId> {
        let rel = off.get().checked_sub(self.objects.get())?;
        let i = rel / self.shape.object_size;
        (rel % self.shape.object_size == 0 && i < self.shape.count).then_some(ObjId(i))
    }

    /// The object whose bytes contain `off`, if any.
    pub fn id_containing(&self, off: PmOffset) -> Option<ObjId> {
        let rel = off.get().checked_sub(self.objects.get())?;
        let i = rel / self.shape.object_size;
        (i < self.shape.count).then_some(ObjId(i))
    }

    /// The pool's name in the registry.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size and count.
    pub fn shape(&self) -> PoolShape {
        self.shape
    }

    /// Bytes per object.
    pub fn object_size(&self) -> u64 {
        self.shape.object_size
    }

    /// Objects currently on the freelist.
    pub fn free_count(&self) -> u64 {
        self.free.load(Ordering::Acquire)
    }

    /// What recovery did when this pool was opened.
    pub fn recovery(&self) -> RecoveryStats {
        self.recovery
    }

    /// The persistent-memory pool underneath.
    pub fn pmem(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Walks media and checks H1: every object is exactly one of free (reachable from the
    /// head, bit clear) or committed, the list has no cycle, and the count of free objects
    /// matches. Only meaningful while no other thread mutates the pool.
    pub fn verify(&self) -> Result<()> {
        let n = self.shape.count;
        let mut seen = vec![false; n as usize];
        let mut i = self.pool.load_u64(self.base.add(HD_AT));
        let mut free = 0;
        while i != NIL {
            if i >= n || seen[i as usize] {
                return Err(HallocError::Corrupt(format!(
                    "{}: freelist leaves the pool or loops at {i}",
                    self.name
                )));
            }
            seen[i as usize] = true;
            let e = self.entry(i);
            if e & COMMITTED != 0 {
                return Err(HallocError::Corrupt(format!(
                    "{}: object {i} is on the freelist and committed",
                    self.name
                )));
            }
            free += 1;
            i = e & NEXT_MASK;
        }
        for j in 0..n {
            let committed = self.entry(j) & COMMITTED != 0;
            if !committed
                && !seen[j as usize]
                && self.state[j as usize].load(Ordering::Acquire) != GOTTEN
            {
                return Err(HallocError::Corrupt(format!(
                    "{}: object {j} is neither free nor committed",
                    self.name
                )));
            }
        }
        if free != self.free_count() {
            return Err(HallocError::Corrupt(format!(
                "{}: {free} objects on the freelist, {} expected",
                self.name,
                self.free_count()
            )));
        }
        Ok(())
    }
}
