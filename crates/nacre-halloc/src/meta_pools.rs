//! Customised object pools for engine metadata (seed 000 §3.4.2, Figure 8).
//!
//! Memtable object (size 64 + 8 x slots, rounded up to 64):
//! ```text
//! +0   gidx      u64  commit point: check u12 | prev/8 u26 | cur/8 u26 (see `gidx_word`)
//! +8   next      u64  next memtable in its subtable's memlist: a checked link (0 = end)
//! +16  subtable  u64  owning subtable id
//! +24  slots     u64  number of zone slots (fixed per pool)
//! +32  birth     u64  the engine's number for this incarnation of the object (never reused)
//! +40  role      u64  what the engine uses the memtable for (its meaning belongs to the engine)
//! +48  head_crc  u64  crc32c of subtable, slots, birth, role and the object's offset
//! +56  merged    u64  a checked value: 1 once the engine recorded every record of the
//!                     memtable in its persistent index, else 0
//! +64  slot[i]   u64  a checked value: zone id + 1 of the i-th zone; 0 = empty;
//!                     u32::MAX = reclaimed (the zone held data once and was given back)
//! ```
//! Subtable object (64 bytes): `+0 id u64`, `+8 memlist head` (a checked link), `+16 name
//! [40]` (NUL-padded), `+56 crc32c of id, name and the object's offset`.
//!
//! Every field is an aligned 8-byte word updated with one atomic persistent store, so a crash
//! never tears a field. The fields written after the object is taken (gidx, links, slots)
//! check themselves: a *checked value* is `crc32c(value, the word's pool offset) << 32 |
//! value`, and a *checked link* is a checked value holding the target's offset / 64; the
//! fields written once before it is committed are covered by the object's head crc. A flipped
//! bit or a zeroed page in any of them is reported as [`HallocError::DamagedWord`] naming the
//! field and its offset, never read as a value. The meaning of the fields (and the order they
//! are written in) belongs to the engine; these pools only fix the layout and the checks.

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
const HEAD_CRC: u64 = 48;
const MERGED: u64 = 56;
const SLOTS: u64 = 64;
/// Slot value of a zone that was given back.
const RECLAIMED: u32 = u32::MAX;
/// Largest commit position `gidx` holds (positions are multiples of 8).
pub const GIDX_POS_MAX: u64 = ((1 << 26) - 1) * 8;

/// `crc32c(v, at)`: binds a value to the word it is stored in.
fn crc_at(v: u64, at: PmOffset) -> u32 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_le_bytes());
    b[8..].copy_from_slice(&at.get().to_le_bytes());
    crc32c::crc32c(&b)
}

/// The checked value word for `v` stored at `at`.
fn seal(v: u32, at: PmOffset) -> u64 {
    u64::from(crc_at(u64::from(v), at)) << 32 | u64::from(v)
}

/// The value of checked word `w` read at `at`, or [`HallocError::DamagedWord`].
fn unseal(w: u64, at: PmOffset, what: &'static str) -> Result<u32> {
    let v = w as u32;
    if (w >> 32) as u32 == crc_at(u64::from(v), at) {
        Ok(v)
    } else {
        Err(HallocError::DamagedWord { what, at: at.get() })
    }
}

/// The checked link word for `target` (64-byte aligned; `NULL` ends a list) stored at `at`.
fn seal_link(target: PmOffset, at: PmOffset) -> Result<u64> {
    let t = target.get();
    if t % 64 != 0 || t / 64 >= u64::from(u32::MAX) {
        return Err(HallocError::Corrupt(format!(
            "a link to {t:#x} cannot be stored: not 64-byte aligned or beyond 256 GiB"
        )));
    }
    Ok(seal((t / 64) as u32, at))
}

fn unseal_link(w: u64, at: PmOffset, what: &'static str) -> Result<PmOffset> {
    Ok(PmOffset(u64::from(unseal(w, at, what)?) * 64))
}

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

/// The fields of a memtable object written once, before it is committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemtableHead {
    /// Owning subtable id.
    pub subtable: u64,
    /// The incarnation number given at [`MemtablePool::get`].
    pub birth: u64,
    /// The role given at [`MemtablePool::get`].
    pub role: u64,
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

    fn head_crc(off: PmOffset, subtable: u64, slots: u64, birth: u64, role: u64) -> u64 {
        let mut b = [0u8; 40];
        for (i, v) in [subtable, slots, birth, role, off.get()].iter().enumerate() {
            b[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        // Never 0, so a zeroed object fails.
        u64::from(crc32c::crc32c(&b)) | 1 << 32
    }

    /// Gets a memtable object and initialises it durably (gidx 0, no zones, no next) for
    /// `subtable` with the given `birth` and `role`; commit it once it is linked where the
    /// engine can find it.
    pub fn get(&self, subtable: u64, birth: u64, role: u64) -> Result<ObjId> {
        let id = self.inner.get()?;
        let pool = self.inner.pmem();
        let off = self.inner.offset(id);
        let mut head = vec![0u8; Self::object_size(self.slots) as usize];
        let mut put = |at: u64, v: u64| head[at as usize..][..8].copy_from_slice(&v.to_le_bytes());
        put(GIDX, Self::encode_gidx(off.add(GIDX), 0, 0));
        put(NEXT, seal(0, off.add(NEXT)));
        put(SUBTABLE, subtable);
        put(NSLOTS, self.slots);
        put(BIRTH, birth);
        put(ROLE, role);
        put(
            HEAD_CRC,
            Self::head_crc(off, subtable, self.slots, birth, role),
        );
        put(MERGED, seal(0, off.add(MERGED)));
        for s in 0..self.slots {
            put(SLOTS + 8 * s, seal(0, off.add(SLOTS + 8 * s)));
        }
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

    fn load(&self, at: PmOffset) -> u64 {
        self.inner.pmem().load_u64(at)
    }

    /// The fields written once, checked against the object's head crc.
    pub fn head(&self, id: ObjId) -> Result<MemtableHead> {
        let off = self.inner.offset(id);
        let w = |f: u64| self.load(off.add(f));
        let (subtable, slots, birth, role) = (w(SUBTABLE), w(NSLOTS), w(BIRTH), w(ROLE));
        if w(HEAD_CRC) != Self::head_crc(off, subtable, slots, birth, role) || slots != self.slots {
            return Err(HallocError::DamagedWord {
                what: "memtable object head",
                at: off.get(),
            });
        }
        Ok(MemtableHead {
            subtable,
            birth,
            role,
        })
    }

    fn encode_gidx(at: PmOffset, prev: u64, cur: u64) -> u64 {
        let v = ((prev / 8) << 26) | (cur / 8);
        u64::from(crc_at(v, at) & 0xFFF) << 52 | v
    }

    /// The `gidx` word for commit point `(prev, cur)`, for callers that store it themselves
    /// (batching its flush with other stores). Positions are multiples of 8 up to
    /// [`GIDX_POS_MAX`].
    pub fn gidx_word(&self, id: ObjId, prev: u64, cur: u64) -> u64 {
        debug_assert!(prev % 8 == 0 && cur % 8 == 0 && prev.max(cur) <= GIDX_POS_MAX);
        Self::encode_gidx(self.word(id, GIDX), prev, cur)
    }

    /// The commit point `(prev, cur)`, checked.
    pub fn gidx(&self, id: ObjId) -> Result<(u64, u64)> {
        let at = self.word(id, GIDX);
        let w = self.load(at);
        let v = w & ((1 << 52) - 1);
        if w >> 52 != u64::from(crc_at(v, at) & 0xFFF) {
            return Err(HallocError::DamagedWord {
                what: "memtable commit point (gidx)",
                at: at.get(),
            });
        }
        Ok(((v >> 26) * 8, (v & ((1 << 26) - 1)) * 8))
    }

    /// Durably sets the commit point to `(prev, cur)`.
    pub fn set_gidx(&self, id: ObjId, prev: u64, cur: u64) -> Result<()> {
        if prev % 8 != 0 || cur % 8 != 0 || prev.max(cur) > GIDX_POS_MAX {
            return Err(HallocError::Corrupt(format!(
                "commit point ({prev}, {cur}) is not a pair of multiples of 8 up to {GIDX_POS_MAX}"
            )));
        }
        let w = self.gidx_word(id, prev, cur);
        Ok(self.inner.pmem().persist_u64(self.word(id, GIDX), w)?)
    }

    /// Offset of the `gidx` word.
    pub fn gidx_offset(&self, id: ObjId) -> PmOffset {
        self.word(id, GIDX)
    }

    /// The next memtable in the memlist (`NULL` at the end), checked.
    pub fn next(&self, id: ObjId) -> Result<PmOffset> {
        let at = self.word(id, NEXT);
        unseal_link(self.load(at), at, "memtable list link")
    }

    /// Durably sets the memlist link.
    pub fn set_next(&self, id: ObjId, next: PmOffset) -> Result<()> {
        let at = self.word(id, NEXT);
        Ok(self.inner.pmem().persist_u64(at, seal_link(next, at)?)?)
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

    /// What slot `slot` holds, checked.
    pub fn slot(&self, id: ObjId, slot: u64) -> Result<Slot> {
        let at = self.slot_at(id, slot)?;
        Ok(match unseal(self.load(at), at, "memtable zone slot")? {
            0 => Slot::Empty,
            RECLAIMED => Slot::Reclaimed,
            v => Slot::Zone(ObjId(u64::from(v) - 1)),
        })
    }

    /// Durably marks slot `slot` reclaimed: its zone is about to be given back and nothing at
    /// its positions may be read again. Do this before releasing the zone.
    pub fn set_reclaimed(&self, id: ObjId, slot: u64) -> Result<()> {
        let at = self.slot_at(id, slot)?;
        Ok(self.inner.pmem().persist_u64(at, seal(RECLAIMED, at))?)
    }

    /// Durably records `zone` in slot `slot` (record it before committing the zone).
    pub fn set_zone(&self, id: ObjId, slot: u64, zone: Option<ObjId>) -> Result<()> {
        let at = self.slot_at(id, slot)?;
        let v = match zone {
            None => 0,
            Some(z) if z.0 + 1 < u64::from(RECLAIMED) => (z.0 + 1) as u32,
            Some(z) => {
                return Err(HallocError::NoSuchObject {
                    pool: "zones (a slot holds ids below 2^32 - 2)".into(),
                    id: z.0,
                    count: u64::from(RECLAIMED) - 1,
                })
            }
        };
        Ok(self.inner.pmem().persist_u64(at, seal(v, at))?)
    }

    /// Whether the `merged` mark is set, checked.
    pub fn merged(&self, id: ObjId) -> Result<bool> {
        let at = self.word(id, MERGED);
        Ok(unseal(self.load(at), at, "memtable merged mark")? == 1)
    }

    /// Durably sets the `merged` mark.
    pub fn set_merged(&self, id: ObjId) -> Result<()> {
        let at = self.word(id, MERGED);
        Ok(self.inner.pmem().persist_u64(at, seal(1, at))?)
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
    pub const NAME_MAX: usize = 40;

    pub(crate) fn new(inner: Arc<ObjectPool>) -> Self {
        SubtablePool { inner }
    }

    fn crc(off: PmOffset, id: u64, name: &[u8]) -> u64 {
        let mut b = [0u8; 56];
        b[..8].copy_from_slice(&id.to_le_bytes());
        b[8..8 + name.len()].copy_from_slice(name);
        b[48..].copy_from_slice(&off.get().to_le_bytes());
        // Never 0, so a zeroed object fails.
        u64::from(crc32c::crc32c(&b)) | 1 << 32
    }

    /// Whether `name` can be stored: 1 to [`Self::NAME_MAX`] bytes, no NUL.
    pub fn valid_name(name: &str) -> bool {
        !name.is_empty() && name.len() <= Self::NAME_MAX && !name.contains('\0')
    }

    /// Gets a subtable object and persists its id, an empty memlist and its name; commit it
    /// to make it exist.
    pub fn get(&self, id: u64, name: &str) -> Result<ObjId> {
        if !Self::valid_name(name) {
            return Err(HallocError::BadName {
                name: name.to_string(),
                max: Self::NAME_MAX,
            });
        }
        let obj = self.inner.get()?;
        let off = self.inner.offset(obj);
        let mut b = [0u8; Self::OBJECT_SIZE as usize];
        b[..8].copy_from_slice(&id.to_le_bytes());
        b[8..16].copy_from_slice(&seal(0, off.add(8)).to_le_bytes());
        b[16..16 + name.len()].copy_from_slice(name.as_bytes());
        let crc = Self::crc(off, id, &b[16..56]);
        b[56..].copy_from_slice(&crc.to_le_bytes());
        // SAFETY: as in `MemtablePool::get`: a fresh object, not yet shared.
        unsafe { self.inner.pmem().copy_persist(off, &b)? };
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

    /// Id and name of a subtable object, checked.
    pub fn read(&self, obj: ObjId) -> Result<(u64, String)> {
        let off = self.inner.offset(obj);
        let pool = self.inner.pmem();
        // The id, name and crc are written once, before the object is committed; the memlist
        // word, the only one written later, is not read here.
        let id = pool.load_u64(off);
        let crc = pool.load_u64(off.add(56));
        let mut name = [0u8; Self::NAME_MAX];
        // SAFETY: the name is written once, before the object is committed, and never again.
        unsafe { pool.read(off.add(16), &mut name) };
        let n = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        // The crc covers the whole field, padding included.
        if crc != Self::crc(off, id, &name) || n == 0 {
            return Err(HallocError::DamagedWord {
                what: "subtable object (id and name)",
                at: off.get(),
            });
        }
        let name = std::str::from_utf8(&name[..n]).map_err(|_| HallocError::DamagedWord {
            what: "subtable name (not UTF-8)",
            at: off.get(),
        })?;
        Ok((id, name.to_string()))
    }

    /// Head of the subtable's memtable list, checked.
    pub fn memlist(&self, obj: ObjId) -> Result<PmOffset> {
        let at = self.inner.offset(obj).add(8);
        unseal_link(
            self.inner.pmem().load_u64(at),
            at,
            "subtable memtable list head",
        )
    }

    /// Durably sets the head of the memtable list.
    pub fn set_memlist(&self, obj: ObjId, head: PmOffset) -> Result<()> {
        let at = self.inner.offset(obj).add(8);
        Ok(self.inner.pmem().persist_u64(at, seal_link(head, at)?)?)
    }

    /// The object pool underneath.
    pub fn objects(&self) -> &Arc<ObjectPool> {
        &self.inner
    }
}
