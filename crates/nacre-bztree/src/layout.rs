//! On-media layout of BzTree nodes and of the tree header (docs/format.md, "BzTree").
//!
//! ```text
//! node (node_size bytes, a Halloc object of the tree's node pool)
//! +0   status word   PMwCAS target, CRC-12 codeword (below)
//! +8   info word     kind (8) | sorted count (16) | node_size / 256 (8) | crc32c of bits 0..32 (32)
//! +16  record metadata array, one codeword per record, growing up
//!      ... free space ...
//!      record storage block, growing down from the node's end; a record at an 8-aligned
//!      offset: value u64 (PMwCAS target) | crc32c u32 of (offset u16, key length u16, key) |
//!      key bytes | padding to 8
//! ```
//! Status and metadata words are codewords: bits 12..60 carry 48 data bits, bits 0..12 a
//! CRC-12 of them, bit 60 is zero, bits 61..63 are PMwCAS's. Any flip confined to one byte of
//! bits 0..61 makes the codeword invalid (a CRC of degree 12 detects every burst of up to 12
//! bits), so a damaged word reads as `Corrupt`, never as another valid word.
//!
//! Leaf status data: frozen (bit 47) | record count (32..46) | delete size (16..32) | block
//! size (0..16). Inner status data: frozen (bit 47) | version (0..47), bumped whenever a child
//! pointer of the node is swapped in place.
//! Metadata data: 0 = empty (unused slot or aborted insert); reserved (bit 46) with the low 32
//! bits of the allocation's index epoch; otherwise visible (bit 47) | total length (30..46) |
//! key length (16..30) | offset (0..16), deleted records keeping offset and lengths with the
//! visible bit clear.

use crate::error::{corrupt, Result};

/// Bytes of a node header (status and info words).
pub const NODE_HEADER: u64 = 16;
/// Offset of the status word in a node.
pub const STATUS_AT: u64 = 0;
/// Offset of the info word in a node.
pub const INFO_AT: u64 = 8;
/// Offset of the record metadata array in a node.
pub const META_AT: u64 = 16;
/// Fixed bytes of a record before its key: value word and checksum.
pub const RECORD_FIXED: u64 = 12;
/// Longest key a node format can describe.
pub const KEY_LEN_LIMIT: usize = (1 << 14) - 1;
/// Largest node size (offsets and block sizes are 16-bit).
pub const NODE_SIZE_MAX: u32 = 32768;
/// Smallest node size.
pub const NODE_SIZE_MIN: u32 = 256;

const DATA_BITS: u32 = 48;
const DATA_MASK: u64 = (1 << DATA_BITS) - 1;
const CRC12_POLY: u16 = 0x80F;

const fn crc12_table() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u16) << 4;
        let mut b = 0;
        while b < 8 {
            r = if r & 0x800 != 0 {
                (r << 1) ^ CRC12_POLY
            } else {
                r << 1
            };
            b += 1;
        }
        t[i] = r & 0xFFF;
        i += 1;
    }
    t
}

static CRC12: [u16; 256] = crc12_table();

/// CRC-12 (generator x^12+x^11+x^3+x^2+x+1) of 48 data bits, most significant byte first.
fn crc12(data: u64) -> u64 {
    let mut crc: u16 = 0;
    for i in (0..6).rev() {
        let b = (data >> (8 * i)) as u8;
        let idx = ((crc >> 4) as u8 ^ b) as usize;
        crc = ((crc << 8) ^ CRC12[idx]) & 0xFFF;
    }
    u64::from(crc)
}

/// The codeword carrying 48 data bits.
pub fn encode(data: u64) -> u64 {
    debug_assert!(data <= DATA_MASK);
    (data & DATA_MASK) << 12 | crc12(data & DATA_MASK)
}

/// The data bits of a codeword, or `None` if it is not one (damaged).
pub fn decode(word: u64) -> Option<u64> {
    if word >> 60 != 0 {
        return None;
    }
    let data = (word >> 12) & DATA_MASK;
    (crc12(data) == word & 0xFFF).then_some(data)
}

const FROZEN: u64 = 1 << 47;

/// A decoded leaf status word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafStatus {
    /// The node is immutable (being replaced).
    pub frozen: bool,
    /// Entries of the metadata array in use.
    pub count: u32,
    /// Bytes of the record storage block.
    pub block: u32,
    /// Bytes of records deleted (or aborted) since the node was built.
    pub deleted: u32,
}

impl LeafStatus {
    /// The codeword.
    pub fn word(self) -> u64 {
        encode(
            u64::from(self.frozen) << 47
                | u64::from(self.count) << 32
                | u64::from(self.deleted) << 16
                | u64::from(self.block),
        )
    }

    /// Decodes a leaf status codeword.
    pub fn decode(word: u64, node: u64) -> Result<LeafStatus> {
        let d = decode(word).ok_or_else(|| corrupt("leaf status", node, format!("{word:#x}")))?;
        if d & (1 << 46) != 0 {
            return Err(corrupt("leaf status", node, format!("{word:#x}: bit 46")));
        }
        Ok(LeafStatus {
            frozen: d & FROZEN != 0,
            count: ((d >> 32) & 0x3FFF) as u32,
            deleted: ((d >> 16) & 0xFFFF) as u32,
            block: (d & 0xFFFF) as u32,
        })
    }
}

/// A decoded inner status word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InnerStatus {
    /// The node is immutable (being replaced).
    pub frozen: bool,
    /// Bumped by every in-place child pointer swap.
    pub version: u64,
}

impl InnerStatus {
    /// The codeword.
    pub fn word(self) -> u64 {
        encode(u64::from(self.frozen) << 47 | (self.version & (FROZEN - 1)))
    }

    /// Decodes an inner status codeword.
    pub fn decode(word: u64, node: u64) -> Result<InnerStatus> {
        let d = decode(word).ok_or_else(|| corrupt("inner status", node, format!("{word:#x}")))?;
        Ok(InnerStatus {
            frozen: d & FROZEN != 0,
            version: d & (FROZEN - 1),
        })
    }

    /// The status after one more child swap.
    pub fn bumped(self) -> InnerStatus {
        InnerStatus {
            version: (self.version + 1) & (FROZEN - 1),
            ..self
        }
    }
}

/// A decoded record metadata word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta {
    /// Unused slot, or an insert that was aborted.
    Empty,
    /// Space reserved by an insert of index epoch `epoch` (low 32 bits) not yet visible.
    Reserved {
        /// Allocation epoch.
        epoch: u32,
    },
    /// A record at `offset`.
    Record {
        /// Whether the record is visible (else deleted).
        visible: bool,
        /// Offset of the record in its node.
        offset: u32,
        /// Key bytes.
        key_len: u32,
        /// Bytes of the whole record, padding included.
        total: u32,
    },
}

const VISIBLE: u64 = 1 << 47;
const RESERVED: u64 = 1 << 46;

impl Meta {
    /// The codeword.
    pub fn word(self) -> u64 {
        match self {
            Meta::Empty => 0,
            Meta::Reserved { epoch } => encode(RESERVED | u64::from(epoch)),
            Meta::Record {
                visible,
                offset,
                key_len,
                total,
            } => encode(
                u64::from(visible) << 47
                    | u64::from(total) << 30
                    | u64::from(key_len) << 16
                    | u64::from(offset),
            ),
        }
    }

    /// Decodes a metadata codeword of the node at `node` whose size is `node_size`.
    pub fn decode(word: u64, node: u64, node_size: u32) -> Result<Meta> {
        let bad = |why: &str| corrupt("record metadata", node, format!("{word:#x}: {why}"));
        let d = decode(word).ok_or_else(|| bad("not a codeword"))?;
        if d == 0 {
            return Ok(Meta::Empty);
        }
        if d & RESERVED != 0 {
            if d & !(RESERVED | 0xFFFF_FFFF) != 0 {
                return Err(bad("reserved entry with record fields"));
            }
            return Ok(Meta::Reserved { epoch: d as u32 });
        }
        let offset = (d & 0xFFFF) as u32;
        let key_len = ((d >> 16) & 0x3FFF) as u32;
        let total = ((d >> 30) & 0xFFFF) as u32;
        if total != record_len(key_len as usize) as u32 {
            return Err(bad("total length does not match key length"));
        }
        if offset % 8 != 0 || (offset as u64) < META_AT + 8 || offset + total > node_size {
            return Err(bad("record outside the node"));
        }
        Ok(Meta::Record {
            visible: d & VISIBLE != 0,
            offset,
            key_len,
            total,
        })
    }
}

/// Bytes a record with a key of `key_len` bytes occupies in the storage block.
pub fn record_len(key_len: usize) -> u64 {
    (RECORD_FIXED + key_len as u64).div_ceil(8) * 8
}

/// Bytes a record occupies in a node, its metadata entry included.
pub fn record_space(key_len: usize) -> u64 {
    8 + record_len(key_len)
}

/// The checksum stored with a record.
pub fn record_crc(offset: u32, key: &[u8]) -> u32 {
    let c = crc32c::crc32c(&(offset as u16).to_le_bytes());
    let c = crc32c::crc32c_append(c, &(key.len() as u16).to_le_bytes());
    crc32c::crc32c_append(c, key)
}

/// Node kinds, as stored in the info word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Keys to values; has free space.
    Leaf,
    /// Separator keys to child nodes; immutable but for in-place child swaps.
    Inner,
}

const KIND_LEAF: u64 = 0xA5;
const KIND_INNER: u64 = 0x5A;

/// A decoded info word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// Leaf or inner.
    pub kind: Kind,
    /// Entries of the metadata array in key order (all of them, for inner nodes).
    pub sorted: u32,
    /// Bytes of the node.
    pub node_size: u32,
}

impl Info {
    /// The info word.
    pub fn word(self) -> u64 {
        let k = match self.kind {
            Kind::Leaf => KIND_LEAF,
            Kind::Inner => KIND_INNER,
        };
        let low = k | u64::from(self.sorted) << 8 | u64::from(self.node_size / 256) << 24;
        low | u64::from(crc32c::crc32c(&(low as u32).to_le_bytes())) << 32
    }

    /// Decodes the info word of the node at `node`, expecting nodes of `node_size` bytes.
    pub fn decode(word: u64, node: u64, node_size: u32) -> Result<Info> {
        let bad = |why: &str| corrupt("node info", node, format!("{word:#x}: {why}"));
        let low = word as u32;
        if u64::from(crc32c::crc32c(&low.to_le_bytes())) != word >> 32 {
            return Err(bad("checksum mismatch"));
        }
        let kind = match u64::from(low) & 0xFF {
            KIND_LEAF => Kind::Leaf,
            KIND_INNER => Kind::Inner,
            _ => return Err(bad("unknown node kind")),
        };
        let info = Info {
            kind,
            sorted: (low >> 8) & 0xFFFF,
            node_size: (low >> 24) * 256,
        };
        if info.node_size != node_size {
            return Err(bad("node size differs from the tree's"));
        }
        if META_AT + 8 * u64::from(info.sorted) > u64::from(node_size) {
            return Err(bad("sorted count beyond the node"));
        }
        Ok(info)
    }
}

/// Tree header region: magic, shape, checksum, tree 0's root word, index epoch, tree count,
/// then the root words of trees 1 and up.
pub const TREE_MAGIC: u64 = u64::from_le_bytes(*b"NACREBZT");
/// Layout version in the tree header.
pub const TREE_VERSION: u64 = 2;
/// Offset of the shape word in the tree header.
pub const SHAPE_AT: u64 = 8;
/// Offset of the header checksum.
pub const HEADER_CRC_AT: u64 = 16;
/// Offset of the root word (a PMwCAS target holding the root node's offset).
pub const ROOT_AT: u64 = 24;
/// Offset of the index epoch word: epoch (32) | crc32c of it (32).
pub const EPOCH_AT: u64 = 32;
/// Offset of the tree count of a forest (covered by the header checksum).
pub const TREES_AT: u64 = 40;
/// Offset of the graveyard word: the root of a dropped tree whose nodes are still being
/// freed (a PMwCAS target; 0 when no drop is in progress).
pub const GRAVE_AT: u64 = 48;
/// Offset of the root words of trees 1 and up (tree 0's is at [`ROOT_AT`]).
pub const MORE_ROOTS_AT: u64 = 64;

/// Bytes of the header region of a forest of `trees` trees.
pub fn header_len(trees: u32) -> u64 {
    MORE_ROOTS_AT + 8 * u64::from(trees.saturating_sub(1))
}

/// Offset in the header of tree `slot`'s root word.
pub fn root_at(slot: u32) -> u64 {
    if slot == 0 {
        ROOT_AT
    } else {
        MORE_ROOTS_AT + 8 * u64::from(slot - 1)
    }
}

/// The shape word: node size (32) | max key length (16) | layout version (16).
pub fn shape_word(node_size: u32, max_key: usize) -> u64 {
    u64::from(node_size) | (max_key as u64) << 32 | TREE_VERSION << 48
}

/// Checksum of the magic, shape and tree count words.
pub fn header_crc(magic: u64, shape: u64, trees: u64) -> u64 {
    let c = crc32c::crc32c(&magic.to_le_bytes());
    let c = crc32c::crc32c_append(c, &shape.to_le_bytes());
    u64::from(crc32c::crc32c_append(c, &trees.to_le_bytes()))
}

/// The epoch word for `epoch`.
pub fn epoch_word(epoch: u32) -> u64 {
    u64::from(epoch) | u64::from(crc32c::crc32c(&epoch.to_le_bytes())) << 32
}

/// The epoch an epoch word holds, if intact.
pub fn decode_epoch(word: u64) -> Option<u32> {
    let e = word as u32;
    (u64::from(crc32c::crc32c(&e.to_le_bytes())) == word >> 32).then_some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_flip_of_a_codeword_is_detected() {
        let samples = [
            0u64,
            1,
            DATA_MASK,
            0x8000_1234_5678,
            LeafStatus {
                frozen: false,
                count: 17,
                block: 4000,
                deleted: 96,
            }
            .word()
                >> 12,
        ];
        for data in samples {
            let w = encode(data);
            assert_eq!(decode(w), Some(data));
            for byte in 0..8 {
                for x in 1..=255u64 {
                    let flip = (x << (8 * byte)) & ((1 << 61) - 1);
                    if flip == 0 {
                        continue;
                    }
                    assert_eq!(decode(w ^ flip), None, "{data:#x} byte {byte} xor {x:#x}");
                }
            }
        }
    }

    #[test]
    fn words_round_trip() {
        let s = LeafStatus {
            frozen: true,
            count: 0x3FFF,
            block: 0xFFFF,
            deleted: 12,
        };
        assert_eq!(LeafStatus::decode(s.word(), 0).ok(), Some(s));
        let i = InnerStatus {
            frozen: false,
            version: 99,
        };
        assert_eq!(InnerStatus::decode(i.word(), 0).ok(), Some(i));
        for m in [
            Meta::Empty,
            Meta::Reserved { epoch: 7 },
            Meta::Record {
                visible: true,
                offset: 1000,
                key_len: 9,
                total: record_len(9) as u32,
            },
        ] {
            assert_eq!(Meta::decode(m.word(), 0, 4096).ok(), Some(m));
            assert!(m.word() < 1 << 61);
        }
        let info = Info {
            kind: Kind::Inner,
            sorted: 33,
            node_size: 1024,
        };
        assert_eq!(Info::decode(info.word(), 0, 1024).ok(), Some(info));
        assert!(Info::decode(info.word() ^ 0x100, 0, 1024).is_err());
        assert_eq!(decode_epoch(epoch_word(5)), Some(5));
        assert_eq!(decode_epoch(epoch_word(5) ^ 1), None);
    }
}
