//! The superblock: the first 16 KiB of every pool (layout in docs/format.md).
//!
//! ```text
//! 0x0000  header (4 KiB)   magic, format version, pool size, UUID, data start; crc32c
//! 0x1000  meta slot A      seq, bump pointer, root offsets, region table; crc32c
//! 0x2000  meta slot B      same layout
//! 0x3000  reserved
//! 0x4000  data start
//! ```
//!
//! Invariants:
//! - S1: the header is written once, at create, and made durable after slot A, so a crash
//!   during create leaves a file without magic ("not a pool"), never a half-formatted pool.
//! - S2: a metadata update writes the slot that is *not* current with `seq + 1` and persists it;
//!   the valid slot with the highest `seq` is current. A torn update therefore leaves the
//!   previous slot current: root and region changes are crash-atomic.

use crate::error::PmemError;
use crate::offset::PmOffset;
use std::path::Path;

/// Magic bytes at offset 0 of every pool.
pub const MAGIC: [u8; 8] = *b"NACRE\0PM";
/// Format version written and read by this build.
pub const FORMAT_VERSION: u32 = 2;
/// Size of the header block.
pub const HEADER_SIZE: usize = 4096;
/// Offset of metadata slot A (slot B follows it).
pub const META_SLOT_OFFSET: u64 = 4096;
/// Size of one metadata slot.
pub const META_SLOT_SIZE: usize = 4096;
/// First byte available to regions.
pub const DATA_START: u64 = 16384;
/// Smallest pool accepted.
pub const MIN_POOL_SIZE: u64 = 1 << 20;
/// Number of root offset slots.
pub const ROOT_SLOTS: usize = 16;
/// Number of region table entries.
pub const MAX_REGIONS: usize = 32;
/// Longest region name in bytes.
pub const REGION_NAME_MAX: usize = 24;

const CHECKSUM_AT: usize = 4088;
const ROOTS_AT: usize = 24;
const REGIONS_AT: usize = ROOTS_AT + ROOT_SLOTS * 8;
const REGION_ENTRY: usize = REGION_NAME_MAX + 24;

/// The immutable part of the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// Pool size in bytes.
    pub pool_size: u64,
    /// Random identity assigned at create.
    pub uuid: [u8; 16],
    /// First byte available to regions.
    pub data_start: u64,
}

/// A named, reserved span of the pool, recorded in the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// Name given at reservation.
    pub name: String,
    /// First byte of the region.
    pub offset: PmOffset,
    /// Length in bytes.
    pub len: u64,
    /// Caller-defined tag (e.g. a structure kind and version).
    pub tag: u64,
}

/// The mutable, double-buffered part of the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Update sequence; the valid slot with the highest wins.
    pub seq: u64,
    /// First unreserved byte.
    pub next_free: u64,
    /// Root offsets for upper layers.
    pub roots: [u64; ROOT_SLOTS],
    /// Reserved regions, in reservation order.
    pub regions: Vec<Region>,
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn wr_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn checksum(b: &[u8]) -> u64 {
    u64::from(crc32c::crc32c(&b[..CHECKSUM_AT]))
}

impl Header {
    /// Encodes the header block, checksum included.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        wr_u64(&mut b, 16, self.pool_size);
        b[24..40].copy_from_slice(&self.uuid);
        wr_u64(&mut b, 40, self.data_start);
        let c = checksum(&b);
        wr_u64(&mut b, CHECKSUM_AT, c);
        b
    }

    /// Decodes and validates a header block read from a file of `file_len` bytes. `b` may be
    /// shorter than a full header when the file is.
    pub fn decode(path: &Path, b: &[u8], file_len: u64) -> Result<Header, PmemError> {
        let path = path.to_path_buf();
        if b.len() < 8 || b[0..8] != MAGIC {
            return Err(PmemError::NotAPool { path });
        }
        if b.len() < HEADER_SIZE {
            return Err(PmemError::Truncated {
                path,
                expected: DATA_START,
                actual: file_len,
            });
        }
        let version = rd_u32(b, 8);
        if version != FORMAT_VERSION {
            return Err(PmemError::UnsupportedVersion {
                path,
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if rd_u64(b, CHECKSUM_AT) != checksum(b) {
            return Err(PmemError::BadChecksum {
                path,
                what: "superblock header",
            });
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[24..40]);
        let h = Header {
            version,
            pool_size: rd_u64(b, 16),
            uuid,
            data_start: rd_u64(b, 40),
        };
        if h.data_start != DATA_START || h.pool_size < MIN_POOL_SIZE {
            return Err(PmemError::CorruptSuperblock {
                path,
                detail: format!(
                    "pool size {} / data start {} out of range",
                    h.pool_size, h.data_start
                ),
            });
        }
        if file_len < h.pool_size {
            return Err(PmemError::Truncated {
                path,
                expected: h.pool_size,
                actual: file_len,
            });
        }
        Ok(h)
    }
}

impl Meta {
    /// Metadata of a freshly formatted pool.
    pub fn fresh() -> Meta {
        Meta {
            seq: 1,
            next_free: DATA_START,
            roots: [0; ROOT_SLOTS],
            regions: Vec::new(),
        }
    }

    /// Encodes one metadata slot, checksum included.
    pub fn encode(&self) -> [u8; META_SLOT_SIZE] {
        let mut b = [0u8; META_SLOT_SIZE];
        wr_u64(&mut b, 0, self.seq);
        wr_u64(&mut b, 8, self.next_free);
        b[16..20].copy_from_slice(&(self.regions.len() as u32).to_le_bytes());
        for (i, r) in self.roots.iter().enumerate() {
            wr_u64(&mut b, ROOTS_AT + i * 8, *r);
        }
        for (i, r) in self.regions.iter().enumerate() {
            let at = REGIONS_AT + i * REGION_ENTRY;
            b[at..at + r.name.len()].copy_from_slice(r.name.as_bytes());
            wr_u64(&mut b, at + REGION_NAME_MAX, r.offset.get());
            wr_u64(&mut b, at + REGION_NAME_MAX + 8, r.len);
            wr_u64(&mut b, at + REGION_NAME_MAX + 16, r.tag);
        }
        let c = checksum(&b);
        wr_u64(&mut b, CHECKSUM_AT, c);
        b
    }

    /// Decodes one slot; `None` if it was never written or its checksum fails (a torn update).
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let seq = rd_u64(b, 0);
        if seq == 0 || rd_u64(b, CHECKSUM_AT) != checksum(b) {
            return None;
        }
        let count = rd_u32(b, 16) as usize;
        if count > MAX_REGIONS {
            return None;
        }
        let mut roots = [0u64; ROOT_SLOTS];
        for (i, r) in roots.iter_mut().enumerate() {
            *r = rd_u64(b, ROOTS_AT + i * 8);
        }
        let mut regions = Vec::with_capacity(count);
        for i in 0..count {
            let at = REGIONS_AT + i * REGION_ENTRY;
            let raw = &b[at..at + REGION_NAME_MAX];
            let n = raw.iter().position(|&c| c == 0).unwrap_or(REGION_NAME_MAX);
            regions.push(Region {
                name: String::from_utf8_lossy(&raw[..n]).into_owned(),
                offset: PmOffset(rd_u64(b, at + REGION_NAME_MAX)),
                len: rd_u64(b, at + REGION_NAME_MAX + 8),
                tag: rd_u64(b, at + REGION_NAME_MAX + 16),
            });
        }
        Some(Meta {
            seq,
            next_free: rd_u64(b, 8),
            roots,
            regions,
        })
    }

    /// Checks that every recorded range fits the pool and regions do not overlap.
    pub fn validate(&self, path: &Path, pool_size: u64) -> Result<(), PmemError> {
        let bad = |detail: String| PmemError::CorruptSuperblock {
            path: path.to_path_buf(),
            detail,
        };
        if self.next_free < DATA_START || self.next_free > pool_size {
            return Err(bad(format!(
                "bump pointer {:#x} out of range",
                self.next_free
            )));
        }
        for r in &self.regions {
            let end = r.offset.get().checked_add(r.len);
            if r.offset.get() < DATA_START || end.is_none_or(|e| e > self.next_free) {
                return Err(bad(format!("region {:?} out of range", r.name)));
            }
        }
        Ok(())
    }
}

/// Chooses the current metadata slot from the two raw slots (invariant S2).
pub fn pick_meta(a: &[u8], b: &[u8]) -> Option<(usize, Meta)> {
    match (Meta::decode(a), Meta::decode(b)) {
        (Some(x), Some(y)) if y.seq > x.seq => Some((1, y)),
        (Some(x), _) => Some((0, x)),
        (None, Some(y)) => Some((1, y)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_checks() {
        let h = Header {
            version: FORMAT_VERSION,
            pool_size: 8 << 20,
            uuid: [7; 16],
            data_start: DATA_START,
        };
        let p = Path::new("x");
        let b = h.encode();
        assert_eq!(Header::decode(p, &b, 8 << 20).ok(), Some(h.clone()));
        let mut bad = b;
        bad[100] ^= 1;
        assert!(matches!(
            Header::decode(p, &bad, 8 << 20),
            Err(PmemError::BadChecksum { .. })
        ));
        assert!(matches!(
            Header::decode(p, &b, 4 << 20),
            Err(PmemError::Truncated { .. })
        ));
        let mut other = h.clone();
        other.version = FORMAT_VERSION + 1;
        assert!(matches!(
            Header::decode(p, &other.encode(), 8 << 20),
            Err(PmemError::UnsupportedVersion { found, .. }) if found == FORMAT_VERSION + 1
        ));
    }

    #[test]
    fn meta_roundtrip_and_slot_choice() {
        let mut m = Meta::fresh();
        m.roots[3] = 0x5000;
        m.regions.push(Region {
            name: "halloc.meta".into(),
            offset: PmOffset(DATA_START),
            len: 4096,
            tag: 9,
        });
        m.next_free = DATA_START + 4096;
        let a = m.encode();
        assert_eq!(Meta::decode(&a), Some(m.clone()));
        let mut m2 = m.clone();
        m2.seq = 2;
        let b = m2.encode();
        assert_eq!(pick_meta(&a, &b).map(|x| x.0), Some(1));
        let mut torn = b;
        torn[30] ^= 0xff;
        assert_eq!(pick_meta(&a, &torn).map(|x| x.0), Some(0));
        assert_eq!(pick_meta(&[0; META_SLOT_SIZE], &[0; META_SLOT_SIZE]), None);
    }
}
