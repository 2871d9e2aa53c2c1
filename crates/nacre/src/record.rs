//! Records and ChainLog items as laid out in memtable zones (docs/format.md).
//!
//! ```text
//! item   := header(40) record*            one group's records for one memtable (or, where
//!                                         they exceed a zone, for one zone of it)
//! header := magic u32 | len u32 | seq u64 | run u64 | count u32 | items u32 (bit 31: two fences) |
//!           body_crc u32 | crc32c(header[0..36]) u32
//! record := seq u64 | klen u32 | vlen u32 | kind u8 | id_crc u24 | crc u32 | key | value | pad8
//! ```
//! `len` counts the header and the records (a multiple of 8). The header crc also covers the
//! item's *place* ([`Place`]: the birth of the memtable it was written into and its position
//! there), which is not stored: bytes left in a zone by an earlier owner never parse as an
//! item of the memtable that owns the zone now (zones are reused within a run). `seq` is the group's first
//! sequence number and `run` the engine run that wrote the item: together they name the group
//! (sequence numbers of groups a crash cut are reused by later runs). `count` is the records
//! in this item, `items` the items of the whole group (one per memtable it touched, or
//! several consecutive ones in a memtable where its records there exceed a zone), and `body_crc` the crc32c
//! of the records, so recovery can tell a whole group from a torn one when the group's
//! records, headers and commit points became durable in one fence. A record's crc32c covers
//! its header up to the crc, its key and its value; its `id_crc` (the low 24 bits of the
//! crc32c of its header's first 17 bytes and its key) covers what names the version, so a
//! record whose value alone is damaged is still known by key, sequence number and size: reads
//! of that key fail, the rest of its item still parses. Where an item did not fit in the rest of a zone, the
//! 8-byte `ZONE_END` marker (if there is room for it) tells the scanner to go on at the next
//! zone.
//!
//! R1: the readers here only read bytes no thread writes any more: an item below its
//! memtable's commit point was written once before it was committed (T5 in memtable.rs) and
//! its zone is given back only once no reader can hold its offset (V3 in view.rs); recovery
//! reads before the database is shared; stage 3 writes only its own reservation.

use nacre_pmem::{PmOffset, Pool};

use crate::error::{Error, Result};

/// Marker of an item header.
pub const ITEM_MAGIC: u32 = u32::from_le_bytes(*b"NCRI");
/// Marker written where the rest of a zone is unused.
pub const ZONE_END: u64 = u64::from_le_bytes(*b"NCRZEND!");
/// Bytes of an item header.
pub const ITEM_HEADER: usize = 40;
/// Bit of an item header's `items` word set when its group commits in two fences.
const TWO_FENCE: u32 = 1 << 31;
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 24;

/// Whether a record stores a value or deletes its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Key set to value.
    Put = 1,
    /// Key deleted (tombstone).
    Delete = 2,
    /// Key set to a value stored out of line: the record's value is the blob's descriptor
    /// (blob.rs).
    Blob = 3,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            3 => Some(Kind::Blob),
            _ => None,
        }
    }
}

/// Bytes a record occupies in a zone.
pub fn record_size(klen: usize, vlen: usize) -> usize {
    (RECORD_HEADER + klen + vlen).next_multiple_of(8)
}

/// Appends an encoded record to `buf`.
pub fn encode_record(buf: &mut Vec<u8>, seq: u64, kind: Kind, key: &[u8], value: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
    buf.push(kind as u8);
    let id = id_crc(&buf[start..start + 17], key);
    buf.extend_from_slice(&id.to_le_bytes()[..3]);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[start..start + 20]), key);
    let crc = crc32c::crc32c_append(crc, value);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    buf.resize(start + record_size(key.len(), value.len()), 0);
}

/// The identity check of a record: the low 24 bits of the crc32c of its header's first 17
/// bytes (sequence number, lengths, kind) and its key.
fn id_crc(head: &[u8], key: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&head[..17]), key) & 0x00FF_FFFF
}

/// Where an item belongs: the birth number of its memtable (unique per memtable incarnation)
/// and its position in that memtable. Bound into the header crc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The memtable's birth number.
    pub birth: u64,
    /// The item's position in the memtable.
    pub pos: u64,
}

fn header_crc(h: &[u8], place: Place) -> u32 {
    let c = crc32c::crc32c_append(crc32c::crc32c(&h[..36]), &place.birth.to_le_bytes());
    crc32c::crc32c_append(c, &place.pos.to_le_bytes())
}

/// Writes the header of the item in `item` (header space first, then its records): the body
/// checksum covers `item[ITEM_HEADER..]`, the item's length is `item.len()`.
///
/// Precondition: the item fits in a zone (so below 4 GiB).
///
/// # Panics
/// If `item` is shorter than a header.
pub fn encode_item_header(
    item: &mut [u8],
    place: Place,
    seq: u64,
    run: u64,
    count: u32,
    items: u32,
    two_fence: bool,
) {
    debug_assert!(items < TWO_FENCE);
    let items = items | if two_fence { TWO_FENCE } else { 0 };
    let len = item.len() as u32;
    let body_crc = crc32c::crc32c(&item[ITEM_HEADER..]);
    let h = &mut item[..ITEM_HEADER];
    h[0..4].copy_from_slice(&ITEM_MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..24].copy_from_slice(&run.to_le_bytes());
    h[24..28].copy_from_slice(&count.to_le_bytes());
    h[28..32].copy_from_slice(&items.to_le_bytes());
    h[32..36].copy_from_slice(&body_crc.to_le_bytes());
    let crc = header_crc(h, place);
    h[36..40].copy_from_slice(&crc.to_le_bytes());
}

/// A decoded item header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemHeader {
    /// Bytes of the item, header included.
    pub len: u32,
    /// The group's first sequence number.
    pub seq: u64,
    /// The engine run that wrote the item.
    pub run: u64,
    /// Records in the item.
    pub count: u32,
    /// Items (memtables) in the item's group.
    pub items: u32,
    /// The group was committed in two fences: its records were durable before any
    /// `commit_id` covering it was written.
    pub two_fence: bool,
    /// crc32c of the item's records.
    pub body_crc: u32,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads and checks the item header at `off`, which must belong at `place`; `room` is how many
/// bytes of the zone follow.
pub fn read_item_header(
    pool: &Pool,
    off: PmOffset,
    place: Place,
    room: usize,
) -> Result<ItemHeader> {
    let mut h = [0u8; ITEM_HEADER];
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off, &mut h) };
    let len = u32_at(&h, 4);
    if u32_at(&h, 0) != ITEM_MAGIC
        || u32_at(&h, 36) != header_crc(&h, place)
        || (len as usize) < ITEM_HEADER
        || len as usize > room
        || len % 8 != 0
    {
        return Err(Error::corrupt_at("bad item header", off));
    }
    Ok(ItemHeader {
        len,
        seq: u64_at(&h, 8),
        run: u64_at(&h, 16),
        count: u32_at(&h, 24),
        items: u32_at(&h, 28) & !TWO_FENCE,
        two_fence: u32_at(&h, 28) & TWO_FENCE != 0,
        body_crc: u32_at(&h, 32),
    })
}

/// Whether the records of the item at `off` (whose header `h` was read there) match the
/// header's body checksum.
pub fn item_body_matches(pool: &Pool, off: PmOffset, h: &ItemHeader) -> bool {
    let mut body = vec![0u8; h.len as usize - ITEM_HEADER];
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off.add(ITEM_HEADER as u64), &mut body) };
    crc32c::crc32c(&body) == h.body_crc
}

/// A record read back from a zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: Kind,
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes (empty for deletes).
    pub value: Vec<u8>,
}

#[cfg(test)]
impl Record {
    /// Bytes the record occupies.
    pub fn size(&self) -> usize {
        record_size(self.key.len(), self.value.len())
    }
}

/// Reads and verifies the record at `off`, which must lie within `room` bytes of its item.
pub fn read_record(pool: &Pool, off: PmOffset, room: usize) -> Result<Record> {
    let mut kv = Vec::new();
    let (seq, kind, klen) = read_record_into(pool, off, room, &mut kv)?;
    let value = kv.split_off(klen);
    Ok(Record {
        seq,
        kind,
        key: kv,
        value,
    })
}

/// [`read_record`] into a caller's buffer (reused across records): leaves the key and value in
/// `kv` and returns the sequence number, kind and key length.
pub fn read_record_into(
    pool: &Pool,
    off: PmOffset,
    room: usize,
    kv: &mut Vec<u8>,
) -> Result<(u64, Kind, usize)> {
    match read_record_checked(pool, off, room, kv)? {
        Checked::Whole { seq, kind, klen } => Ok((seq, kind, klen)),
        Checked::ValueDamaged { .. } => Err(Error::corrupt_at("record fails its checksum", off)),
    }
}

/// A record read by [`read_record_checked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// The record passed its checksum.
    Whole { seq: u64, kind: Kind, klen: usize },
    /// The record's identity (sequence number, kind, lengths, key) passed its check and the
    /// rest did not: a damaged value. Its size is known, so the records after it still parse.
    ValueDamaged { seq: u64, kind: Kind, klen: usize },
}

/// Reads the record at `off` (within `room` bytes of its item) into `kv` (key then value) and
/// checks it. An error when its identity is damaged too: then not even its size is known.
pub fn read_record_checked(
    pool: &Pool,
    off: PmOffset,
    room: usize,
    kv: &mut Vec<u8>,
) -> Result<Checked> {
    let mut h = [0u8; RECORD_HEADER];
    if room < RECORD_HEADER {
        return Err(Error::corrupt_at("record overruns its item", off));
    }
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off, &mut h) };
    let (klen, vlen) = (u32_at(&h, 8) as usize, u32_at(&h, 12) as usize);
    if record_size(klen, vlen) > room {
        return Err(Error::corrupt_at("record overruns its item", off));
    }
    kv.clear();
    kv.resize(klen + vlen, 0);
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off.add(RECORD_HEADER as u64), kv) };
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..20]), kv);
    let kind = Kind::from_u8(h[16]);
    let seq = u64_at(&h, 0);
    match kind {
        Some(kind) if crc == u32_at(&h, 20) => Ok(Checked::Whole { seq, kind, klen }),
        Some(kind) if id_crc(&h, &kv[..klen]) == u32_at(&h, 16) >> 8 => {
            Ok(Checked::ValueDamaged { seq, kind, klen })
        }
        _ => Err(Error::corrupt_at(
            "record fails its checksum and its identity check",
            off,
        )),
    }
}

/// The sequence number of the record at `off`, which the caller's index names as a record of
/// `key`: its header's lengths, kind and key must pass its identity check (`id_crc`) and the
/// key must be `key`, so a damaged header or an offset that names another record is
/// `Corrupt`, never another record's sequence number. Reads only the header and the key.
pub fn read_identity(pool: &Pool, off: PmOffset, key: &[u8]) -> Result<u64> {
    let end = off
        .get()
        .checked_add((RECORD_HEADER + key.len()) as u64)
        .filter(|&e| e <= pool.size());
    if end.is_none() {
        return Err(Error::corrupt_at("record overruns the pool", off));
    }
    let mut h = [0u8; RECORD_HEADER];
    // SAFETY: R1 (module doc): these bytes are no longer written; in bounds (checked above).
    unsafe { pool.read(off, &mut h) };
    if u32_at(&h, 8) as usize != key.len() {
        return Err(Error::corrupt_at("record names another key", off));
    }
    let mut k = vec![0u8; key.len()];
    // SAFETY: as above.
    unsafe { pool.read(off.add(RECORD_HEADER as u64), &mut k) };
    if k != key {
        return Err(Error::corrupt_at("record names another key", off));
    }
    if Kind::from_u8(h[16]).is_none() || id_crc(&h, &k) != u32_at(&h, 16) >> 8 {
        return Err(Error::corrupt_at("record fails its identity check", off));
    }
    Ok(u64_at(&h, 0))
}

/// The size a record occupies and its kind, from its header alone.
pub fn read_record_meta(pool: &Pool, off: PmOffset) -> Result<(u32, Kind)> {
    let mut h = [0u8; RECORD_HEADER];
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off, &mut h) };
    let (klen, vlen) = (u32_at(&h, 8) as usize, u32_at(&h, 12) as usize);
    match Kind::from_u8(h[16]) {
        Some(k) => Ok((record_size(klen, vlen) as u32, k)),
        None => Err(Error::corrupt_at("record has a bad kind", off)),
    }
}

/// Reads the kind and value of the record at `off` (the index already matched the key), which
/// must lie within `room` bytes (the rest of its zone); `None` for a tombstone. A
/// [`Kind::Blob`] record's value is a blob descriptor. With `verify` the record's crc is
/// checked over its header, key and value, so a damaged byte is `Corrupt`, never data;
/// without it only the lengths are bounded by `room`.
pub fn read_value(
    pool: &Pool,
    off: PmOffset,
    room: usize,
    verify: bool,
) -> Result<Option<(Kind, Vec<u8>)>> {
    let mut h = [0u8; RECORD_HEADER];
    if room < RECORD_HEADER {
        return Err(Error::corrupt_at("record overruns its zone", off));
    }
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off, &mut h) };
    let (klen, vlen) = (u32_at(&h, 8) as usize, u32_at(&h, 12) as usize);
    if record_size(klen, vlen) > room {
        return Err(Error::corrupt_at("record overruns its zone", off));
    }
    let kind =
        Kind::from_u8(h[16]).ok_or_else(|| Error::corrupt_at("record has a bad kind", off))?;
    // A tombstone's value (empty unless damaged) is read only to check the crc.
    let want = verify || kind != Kind::Delete;
    let mut v = vec![0u8; if want { vlen } else { 0 }];
    // SAFETY: R1 (module doc): these bytes are no longer written.
    unsafe { pool.read(off.add((RECORD_HEADER + klen) as u64), &mut v) };
    if verify {
        let mut crc = crc32c::crc32c(&h[..20]);
        let mut chunk = [0u8; 256];
        let mut k = 0;
        while k < klen {
            let n = (klen - k).min(chunk.len());
            // SAFETY: R1 (module doc): these bytes are no longer written.
            unsafe { pool.read(off.add((RECORD_HEADER + k) as u64), &mut chunk[..n]) };
            crc = crc32c::crc32c_append(crc, &chunk[..n]);
            k += n;
        }
        if crc32c::crc32c_append(crc, &v) != u32_at(&h, 20) {
            return Err(Error::corrupt_at("record fails its checksum", off));
        }
    }
    Ok((kind != Kind::Delete).then_some((kind, v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacre_pmem::{Backend, PoolOptions};

    #[test]
    fn records_and_items_roundtrip_and_detect_damage() -> Result<()> {
        let pool = Pool::create_sim(1 << 20, &PoolOptions::with_backend(Backend::Sim))?;
        let mut buf = vec![0u8; ITEM_HEADER];
        encode_record(&mut buf, 7, Kind::Put, b"key", b"value!");
        encode_record(&mut buf, 8, Kind::Delete, b"gone", b"");
        let len = buf.len() as u32;
        let place = Place { birth: 9, pos: 128 };
        encode_item_header(&mut buf, place, 7, 3, 2, 5, true);
        let at = pool.data_start();
        // SAFETY: a test's own pool, one thread.
        unsafe { pool.write(at, &buf) };
        let h = read_item_header(&pool, at, place, 4096)?;
        for other in [
            Place {
                birth: 10,
                pos: 128,
            },
            Place { birth: 9, pos: 0 },
        ] {
            assert!(
                read_item_header(&pool, at, other, 4096).is_err(),
                "an item read at another place"
            );
        }
        assert_eq!(
            h,
            ItemHeader {
                len,
                seq: 7,
                run: 3,
                count: 2,
                items: 5,
                two_fence: true,
                body_crc: crc32c::crc32c(&buf[ITEM_HEADER..]),
            }
        );
        assert!(item_body_matches(&pool, at, &h));
        let r1 = read_record(
            &pool,
            at.add(ITEM_HEADER as u64),
            len as usize - ITEM_HEADER,
        )?;
        assert_eq!(
            (r1.seq, r1.kind, &r1.key[..], &r1.value[..]),
            (7, Kind::Put, &b"key"[..], &b"value!"[..])
        );
        let r2_at = at.add((ITEM_HEADER + r1.size()) as u64);
        let r2 = read_record(&pool, r2_at, 64)?;
        assert_eq!((r2.kind, &r2.key[..]), (Kind::Delete, &b"gone"[..]));
        assert_eq!(
            read_value(&pool, at.add(ITEM_HEADER as u64), 4096, true)?,
            Some((Kind::Put, b"value!".to_vec()))
        );
        assert_eq!(read_value(&pool, r2_at, 4096, true)?, None);
        assert!(
            read_item_header(&pool, at, place, len as usize - 8).is_err(),
            "item longer than room"
        );
        // SAFETY: a test's own pool, one thread.
        unsafe { pool.write(at.add(ITEM_HEADER as u64 + 25), b"X") };
        assert!(
            read_record(&pool, at.add(ITEM_HEADER as u64), 4096).is_err(),
            "crc"
        );
        assert!(!item_body_matches(&pool, at, &h), "body crc");
        // SAFETY: a test's own pool, one thread.
        unsafe { pool.write(at.add(2), b"Z") };
        assert!(read_item_header(&pool, at, place, 4096).is_err());
        Ok(())
    }
}
