//! How a YCSB record (a key and `field_count` named fields) is stored by the embedded
//! targets: one value per key holding every field, as YCSB's RocksDB binding does, so an
//! update of one field reads, merges and rewrites the record.
//!
//! Encoding: for each field, its index (`u16` little-endian), its length (`u32`
//! little-endian), then its bytes. Fields appear in increasing index order.

use crate::error::{BenchError, Result};

/// A record's fields: (field index, value), in increasing index order.
pub type Fields = Vec<(usize, Vec<u8>)>;

/// The YCSB name of field `i` (`field0`, `field1`, ...).
pub fn field_name(i: usize) -> String {
    format!("field{i}")
}

/// Encodes `fields` into one value.
pub fn encode(fields: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let len = fields.iter().map(|(_, v)| 6 + v.len()).sum();
    let mut out = Vec::with_capacity(len);
    for (i, v) in fields {
        out.extend_from_slice(&(*i as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Decodes a value written by [`encode`]; a value that does not parse is an error naming
/// the byte offset where it went wrong.
pub fn decode(mut buf: &[u8]) -> Result<Fields> {
    let total = buf.len();
    let mut out = Vec::new();
    while !buf.is_empty() {
        let at = total - buf.len();
        let bad = || BenchError::InvalidParams(format!("corrupt YCSB record at byte {at}"));
        let header = buf.get(..6).ok_or_else(bad)?;
        let idx = u16::from_le_bytes([header[0], header[1]]) as usize;
        let len = u32::from_le_bytes([header[2], header[3], header[4], header[5]]) as usize;
        let value = buf.get(6..6 + len).ok_or_else(bad)?;
        out.push((idx, value.to_vec()));
        buf = &buf[6 + len..];
    }
    Ok(out)
}

/// `old` with the fields of `new` replaced or added, still in index order.
pub fn merge(mut old: Fields, new: &[(usize, Vec<u8>)]) -> Fields {
    for (i, v) in new {
        match old.binary_search_by_key(i, |(j, _)| *j) {
            Ok(pos) => old[pos].1.clone_from(v),
            Err(pos) => old.insert(pos, (*i, v.clone())),
        }
    }
    old
}

/// The fields of `all` selected by `wanted` (`None`: every field).
pub fn select(all: Fields, wanted: Option<&[usize]>) -> Fields {
    match wanted {
        None => all,
        Some(w) => all.into_iter().filter(|(i, _)| w.contains(i)).collect(),
    }
}
