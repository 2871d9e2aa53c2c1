//! Customised object pools for engine metadata (seed 000 §3.4.2, Figure 8).
//!
//! Memtable object (size 64 + 8 x slots, rounded up to 64):
//! ```text
//! +0   gidx      u64  commit point of the memtable's append position (Reorder Ring)
//! +8   next      u64  next memtable in its subtable's memlist (PmOffset, 0 = end)
//! +16  subtable  u64  owning subtable id
//! +24  slots     u64  number of zone slots (fixed per pool)
//! +32  birth     u64  the engine's number for this incarnation of the object (never reused)
//! +40  role      u64  what the engine uses the memtable for (its meaning belongs to the engine)
//! +48  reserved  16 bytes (0)
//! +64  slot[i]   u64  zone id + 1 of the i-th zone; 0 = empty; u64::MAX = reclaimed (the
//!                     zone held data once and was given back)
//! ```
//! Subtable object (64 bytes): `+0 id u64`, `+8 memlist head u64 (PmOffset)`, `+16 name [48]`.
//!
//! Every field is an aligned 8-byte word updated with one atomic persistent store, so a crash
//! never tears a field. The meaning of the fields (and the order they are written in) belongs
//! to the engine; these pools only fix the layout.

use std::sync::Arc;

use nacre_pmem::PmOffset;

use crate::error::{HallocError, Result};
use crate::object_pool::{ObjId, ObjectPool};

/// Byte offsets of a memtable object's fields.
const GIDX: u64 = 0;
const NEXT: u64 = 8;
const SUBTABLE: u64 = 16;
const NSLOTS: u64 = 24;
const BIRTH: u64 = 32;
const ROLE: u64 = 40;
const SLOTS: u64 = 64;
/// Slot word of a zone that was given back.
const RECLAIMED: u64 = u64::MAX;

/// What a memtable's zone slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Never held a zone.
    Empty,
    /// Holds this zone.
    Zone(ObjId),
    /// Held a zone that was given back; its positions hold nothing.
    Reclaimed,
}

/// Pool of memtable objects.
#[derive(Clone, Debug)]
pub struct MemtablePool {
    inner: Arc<ObjectPool>,
    slots: u64,
}

impl MemtablePool {
    pub(crate) fn new(inner: Arc<ObjectPool>, slots: u64) -> Self {
        MemtablePool { inner, slots }
    }

    /// Object size for `slots` zone slots.
    pub fn object_size(slots: u64) -> u64 {
        (SLOTS + 8 * slots).next_multiple_of(64)
    }

    /// Zone slots per memtable object.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Gets a memtable object and initialises it durably (gidx 0, no zones, no next) for
    /// `subtable` with the given `birth` and `role`; commit it once it is linked where the
    /// engine can find it.
    pub fn get(&self, subtable: u64, birth: u64, role: u64) -> Result<ObjId> {
        let id = self.inner.get()?;
        let pool = self.inner.pmem();
        let off = self.inner.offset(id);
        let mut head = vec![0u8; Self::object_size(self.slots) as usize];
        head[SUBTABLE as usize..][..8].copy_from_slice(&subtable.to_le_bytes());
        head[NSLOTS as usize..][..8].copy_from_slice(&self.slots.to_le_bytes());
        head[BIRTH as usize..][..8].copy_from_slice(&birth.to_le_bytes());
        head[ROLE as usize..][..8].copy_from_slice(&role.to_le_bytes());
        // SAFETY: the object was just taken off the freelist: it is this caller's alone until
        // it is committed and linked.
        unsafe { pool.copy_persist(off, &head)? };
        Ok(id)
    }

    /// Commits a memtable object (H2: its contents were persisted by `get` and the setters).
    pub fn commit(&self, id: ObjId) -> Result<()> {
        self.inner.commit(id)
    }

    /// Releases a memtable object.
    pub fn release(&self, id: ObjId) -> Result<()> {
        self.inner.release(id)
    }

    fn word(&self, id: ObjId, at: u64) -> PmOffset {
        self.inner.offset(id).add(at)
    }

    /// The memtable's `gidx` word.
    pub fn gidx(&self, id: ObjId) -> u64 {
        self.inner.pmem().load_u64(self.word(id, GIDX))
    }

    /// Offset of the `gidx` word, for callers that batch its flush with other stores.
    pub fn gidx_offset(&self, id: ObjId) -> PmOffset {
        self.word(id, GIDX)
    }

    /// Durably sets `gidx`.
    pub fn set_gidx(&self, id: ObjId, v: u64) -> Result<()> {
        Ok(self.inner.pmem().persist_u64(self.word(id, GIDX), v)?)
    }

    /// The next memtable in the memlist.
    pub fn next(&self, id: ObjId) -> PmOffset {
        PmOffset(self.inner.pmem().load_u64(self.word(id, NEXT)))
    }

    /// Durably sets the memlist link.
    pub fn set_next(&self, id: ObjId, next: PmOffset) -> Result<()> {
        Ok(self
            .inner
            .pmem()
            .persist_u64(self.word(id, NEXT), next.get())?)
    }

    /// The owning subtable id.
    pub fn subtable(&self, id: ObjId) -> u64 {
        self.inner.pmem().load_u64(self.word(id, SUBTABLE))
    }

    /// The incarnation number given at [`MemtablePool::get`].
    pub fn birth(&self, id: ObjId) -> u64 {
        self.inner.pmem().load_u64(self.word(id, BIRTH))
    }

    /// The role given at [`MemtablePool::get`].
    pub fn role(&self, id: ObjId) -> u64 {
        self.inner.pmem().load_u64(self.word(id, ROLE))
    }

    fn slot_at(&self, id: ObjId, slot: u64) -> Result<PmOffset> {
        if slot >= self.slots {
            return Err(HallocError::NoSuchObject {
                pool: format!("{} slot", self.inner.name()),
                id: slot,
                count: self.slots,
            });
        }
        Ok(self.word(id, SLOTS + 8 * slot))
    }

    /// The zone in slot `slot`, if any (none for an empty or reclaimed slot).
    pub fn zone(&self, id: ObjId, slot: u64) -> Result<Option<ObjId>> {
        Ok(match self.slot(id, slot)? {
            Slot::Zone(z) => Some(z),
            Slot::Empty | Slot::Reclaimed => None,
        })
    }

    /// What slot `slot` holds.
    pub fn slot(&self, id: ObjId, slot: u64) -> Result<Slot> {
        Ok(match self.inner.pmem().load_u64(self.slot_at(id, slot)?) {
            0 => Slot::Empty,
            RECLAIMED => Slot::Reclaimed,
            v => Slot::Zone(ObjId(v - 1)),
        })
    }

    /// Durably marks slot `slot` reclaimed: its zone is about to be given back and nothing at
    /// its positions may be read again. Do this before releasing the zone.
    pub fn set_reclaimed(&self, id: ObjId, slot: u64) -> Result<()> {
        let at = self.slot_at(id, slot)?;
        Ok(self.inner.pmem().persist_u64(at, RECLAIMED)?)
    }

    /// Durably records `zone` in slot `slot` (record it before committing the zone).
    pub fn set_zone(&self, id: ObjId, slot: u64, zone: Option<ObjId>) -> Result<()> {
        let at = self.slot_at(id, slot)?;
        Ok(self
            .inner
            .pmem()
            .persist_u64(at, zone.map_or(0, |z| z.0 + 1))?)
    }

    /// The object pool underneath.
    pub fn objects(&self) -> &Arc<ObjectPool> {
        &self.inner
    }
}

/// Pool of subtable objects.
#[derive(Clone, Debug)]
pub struct SubtablePool {
    inner: Arc<ObjectPool>,
}

impl SubtablePool {
    /// Bytes per subtable object.
    pub const OBJECT_SIZE: u64 = 64;
    /// Longest subtable name stored.
    pub const NAME_MAX: usize = 48;

    pub(crate) fn new(inner: Arc<ObjectPool>) -> Self {
        SubtablePool { inner }
    }

    /// Gets a subtable object and persists its id and name; commit it to make it exist.
    pub fn get(&self, id: u64, name: &str) -> Result<ObjId> {
        if name.is_empty() || name.len() > Self::NAME_MAX || name.contains('\0') {
            return Err(HallocError::BadName {
                name: name.to_string(),
                max: Self::NAME_MAX,
            });
        }
        let obj = self.inner.get()?;
        let mut b = [0u8; Self::OBJECT_SIZE as usize];
        b[..8].copy_from_slice(&id.to_le_bytes());
        b[16..16 + name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: as in `MemtablePool::get`: a fresh object, not yet shared.
        unsafe { self.inner.pmem().copy_persist(self.inner.offset(obj), &b)? };
        Ok(obj)
    }

    /// Commits a subtable object.
    pub fn commit(&self, obj: ObjId) -> Result<()> {
        self.inner.commit(obj)
    }

    /// Releases a subtable object.
    pub fn release(&self, obj: ObjId) -> Result<()> {
        self.inner.release(obj)
    }

    /// Id and name of a subtable object.
    pub fn read(&self, obj: ObjId) -> (u64, String) {
        let off = self.inner.offset(obj);
        let mut b = [0u8; Self::OBJECT_SIZE as usize];
        let pool = self.inner.pmem();
        // The id is written once, before the object is committed; the memlist word, the only
        // one written later, is read with an atomic load.
        b[..8].copy_from_slice(&pool.load_u64(off).to_le_bytes());
        // SAFETY: the name is written once, before the object is committed, and never again.
        unsafe { pool.read(off.add(16), &mut b[16..]) };
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[..8]);
        let name = &b[16..];
        let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        (
            u64::from_le_bytes(id),
            String::from_utf8_lossy(&name[..n]).into_owned(),
        )
    }

    /// Head of the subtable's memtable list.
    pub fn memlist(&self, obj: ObjId) -> PmOffset {
        PmOffset(self.inner.pmem().load_u64(self.inner.offset(obj).add(8)))
    }

    /// Durably sets the head of the memtable list.
    pub fn set_memlist(&self, obj: ObjId, head: PmOffset) -> Result<()> {
        Ok(self
            .inner
            .pmem()
            .persist_u64(self.inner.offset(obj).add(8), head.get())?)
    }

    /// The object pool underneath.
    pub fn objects(&self) -> &Arc<ObjectPool> {
        &self.inner
    }
}
