//! One value in Redis 7.0's RDB encoding, as `DUMP` writes it and `RESTORE` reads it: a type
//! byte, the value, the RDB version (10) and a CRC-64. Nacre writes the plain encodings
//! (strings, sets, hashes, sorted sets with binary scores, lists as listpack nodes), which
//! every Redis since 7.0 loads; it reads those and every compact encoding Redis writes
//! (listpacks, ziplists, intsets, LZF-compressed and integer strings, scores as text).

use super::listpack::{intset_decode, lp_decode, lp_encode, zl_decode};
use super::{check_footer, get_len, get_string, put_footer, put_len, put_string};

/// The RDB version Redis 7.0 writes and reads.
pub const RDB_VERSION: u16 = 10;

// RDB value types (Redis's `RDB_TYPE_*`).
pub const STRING: u8 = 0;
pub const LIST: u8 = 1;
pub const SET: u8 = 2;
pub const ZSET: u8 = 3;
pub const HASH: u8 = 4;
pub const ZSET_2: u8 = 5;
pub const MODULE: u8 = 6;
pub const MODULE_2: u8 = 7;
pub const HASH_ZIPMAP: u8 = 9;
pub const LIST_ZIPLIST: u8 = 10;
pub const SET_INTSET: u8 = 11;
pub const ZSET_ZIPLIST: u8 = 12;
pub const HASH_ZIPLIST: u8 = 13;
pub const LIST_QUICKLIST: u8 = 14;
pub const STREAM_LISTPACKS: u8 = 15;
pub const HASH_LISTPACK: u8 = 16;
pub const ZSET_LISTPACK: u8 = 17;
pub const LIST_QUICKLIST_2: u8 = 18;
pub const STREAM_LISTPACKS_2: u8 = 19;

/// Most elements in one listpack node of a list Nacre writes (Redis's default node holds up
/// to 8 KiB: `list-max-listpack-size -2`).
const NODE_ITEMS: usize = 128;
const NODE_BYTES: usize = 8 << 10;

/// A whole value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list's elements, in order.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A hash's fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A sorted set's members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A stream with its groups.
    Stream(Box<super::stream::StreamValue>),
}

/// Why a payload cannot be restored, in Redis's words.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    /// The footer's version is newer than 10, or the checksum is wrong.
    #[error("DUMP payload version or checksum are wrong")]
    Footer,
    /// The value does not parse (or is a type Nacre does not hold: streams, modules).
    #[error("Bad data format")]
    Format,
}

/// The `DUMP` payload of `v`.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = vec![type_of(v)];
    put_value(v, &mut out);
    put_footer(&mut out, RDB_VERSION);
    out
}

/// The RDB type byte `v` is written with.
pub fn type_of(v: &Value) -> u8 {
    match v {
        Value::String(_) => STRING,
        Value::List(_) => LIST_QUICKLIST_2,
        Value::Set(_) => SET,
        Value::Hash(_) => HASH,
        Value::ZSet(_) => ZSET_2,
        Value::Stream(_) => STREAM_LISTPACKS_2,
    }
}

/// Appends `v` in the encoding of [`type_of`] (without the type byte).
pub fn put_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::String(s) => put_string(out, s),
        Value::List(items) => {
            let mut nodes: Vec<&[Vec<u8>]> = Vec::new();
            let mut start = 0;
            let mut bytes = 0;
            for (i, it) in items.iter().enumerate() {
                if i > start && (i - start >= NODE_ITEMS || bytes + it.len() > NODE_BYTES) {
                    nodes.push(&items[start..i]);
                    start = i;
                    bytes = 0;
                }
                bytes += it.len();
            }
            if start < items.len() {
                nodes.push(&items[start..]);
            }
            put_len(out, nodes.len() as u64);
            for n in nodes {
                // Packed (a listpack), not plain.
                put_len(out, 2);
                put_string(out, &lp_encode(n));
            }
        }
        Value::Set(members) => {
            put_len(out, members.len() as u64);
            for m in members {
                put_string(out, m);
            }
        }
        Value::Hash(fields) => {
            put_len(out, fields.len() as u64);
            for (f, v) in fields {
                put_string(out, f);
                put_string(out, v);
            }
        }
        Value::ZSet(members) => {
            put_len(out, members.len() as u64);
            // As Redis: from the highest score down, so a load appends at the head.
            for (m, s) in members.iter().rev() {
                put_string(out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        Value::Stream(st) => super::stream::encode(st, out),
    }
}

/// The value a `RESTORE` payload holds.
pub fn decode(payload: &[u8]) -> Result<Value, DumpError> {
    let body = check_footer(payload, RDB_VERSION).ok_or(DumpError::Footer)?;
    let (&kind, _) = body.split_first().ok_or(DumpError::Format)?;
    let (v, end) = decode_at(kind, body, 1).ok_or(DumpError::Format)?;
    if end != body.len() {
        return Err(DumpError::Format);
    }
    Ok(v)
}

/// A count, bounded by what the payload could hold (at least one byte per item), so a
/// hostile length never reserves memory the payload does not back.
fn count(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let (n, special, at) = get_len(b, at)?;
    let n = usize::try_from(n).ok()?;
    (!special && n <= b.len().saturating_sub(at)).then_some((n, at))
}

fn strings(b: &[u8], mut at: usize, n: usize) -> Option<(Vec<Vec<u8>>, usize)> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (s, next) = get_string(b, at)?;
        out.push(s);
        at = next;
    }
    Some((out, at))
}

/// Pairs from a flat list (field, value, field, value...).
fn pairs(flat: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if flat.len() % 2 != 0 {
        return None;
    }
    let mut it = flat.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Some(out)
}

/// A score written as text (older sorted sets, and listpack entries).
fn score_text(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    let v = match t {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => t.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

fn scored(flat: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, f64)>> {
    pairs(flat)?
        .into_iter()
        .map(|(m, s)| Some((m, score_text(&s)?)))
        .collect()
}

/// The value of RDB type `kind` encoded at `at` in `b`, and where it ends; `None` if it does
/// not parse (or is a type Nacre does not read: modules, zipmaps).
pub fn decode_at(kind: u8, b: &[u8], at: usize) -> Option<(Value, usize)> {
    Some(match kind {
        STRING => {
            let (s, at) = get_string(b, at)?;
            (Value::String(s), at)
        }
        LIST | SET => {
            let (n, at) = count(b, at)?;
            let (items, at) = strings(b, at, n)?;
            let v = if kind == LIST {
                Value::List(items)
            } else {
                Value::Set(items)
            };
            (v, at)
        }
        HASH => {
            let (n, at) = count(b, at)?;
            let (flat, at) = strings(b, at, n.checked_mul(2)?)?;
            (Value::Hash(pairs(flat)?), at)
        }
        ZSET | ZSET_2 => {
            let (n, mut at) = count(b, at)?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let (m, next) = get_string(b, at)?;
                at = next;
                let s = if kind == ZSET_2 {
                    let s = f64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?);
                    at += 8;
                    s
                } else {
                    // A length byte (253 NaN, 254 +inf, 255 -inf), then the text.
                    let l = *b.get(at)?;
                    at += 1;
                    match l {
                        253 => return None,
                        254 => f64::INFINITY,
                        255 => f64::NEG_INFINITY,
                        l => {
                            let t = b.get(at..at + usize::from(l))?;
                            at += usize::from(l);
                            score_text(t)?
                        }
                    }
                };
                if s.is_nan() {
                    return None;
                }
                out.push((m, s));
            }
            out.reverse();
            (Value::ZSet(out), at)
        }
        SET_INTSET => {
            let (blob, at) = get_string(b, at)?;
            (Value::Set(intset_decode(&blob)?), at)
        }
        LIST_ZIPLIST => {
            let (blob, at) = get_string(b, at)?;
            (Value::List(zl_decode(&blob)?), at)
        }
        HASH_ZIPLIST | HASH_LISTPACK => {
            let (blob, at) = get_string(b, at)?;
            let flat = if kind == HASH_ZIPLIST {
                zl_decode(&blob)?
            } else {
                lp_decode(&blob)?
            };
            (Value::Hash(pairs(flat)?), at)
        }
        ZSET_ZIPLIST | ZSET_LISTPACK => {
            let (blob, at) = get_string(b, at)?;
            let flat = if kind == ZSET_ZIPLIST {
                zl_decode(&blob)?
            } else {
                lp_decode(&blob)?
            };
            (Value::ZSet(scored(flat)?), at)
        }
        LIST_QUICKLIST | LIST_QUICKLIST_2 => {
            let (nodes, mut at) = count(b, at)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = if kind == LIST_QUICKLIST_2 {
                    let (c, special, next) = get_len(b, at)?;
                    at = next;
                    if special {
                        return None;
                    }
                    c
                } else {
                    2
                };
                let (blob, next) = get_string(b, at)?;
                at = next;
                match (container, kind) {
                    (1, _) => items.push(blob),
                    (2, LIST_QUICKLIST) => items.extend(zl_decode(&blob)?),
                    (2, _) => {
                        let node = lp_decode(&blob)?;
                        if node.is_empty() {
                            return None;
                        }
                        items.extend(node);
                    }
                    _ => return None,
                }
            }
            (Value::List(items), at)
        }
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 => {
            let (st, at) = super::stream::decode(b, at, kind == STREAM_LISTPACKS_2)?;
            (Value::Stream(Box::new(st)), at)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let big: Vec<Vec<u8>> = (0..1000).map(|i| format!("e{i}").into_bytes()).collect();
        for v in [
            Value::String(b"hello".to_vec()),
            Value::String(Vec::new()),
            Value::List(big.clone()),
            Value::List(vec![vec![b'x'; 20_000], b"a".to_vec()]),
            Value::Set(big.clone()),
            Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
            Value::ZSet(vec![
                (b"a".to_vec(), f64::NEG_INFINITY),
                (b"b".to_vec(), -1.5),
                (b"c".to_vec(), 7.0),
            ]),
        ] {
            assert_eq!(decode(&encode(&v)), Ok(v));
        }
    }

    #[test]
    fn damage_and_strangers_are_refused() {
        let mut p = encode(&Value::String(b"hello".to_vec()));
        let n = p.len();
        p[n - 1] ^= 1;
        assert_eq!(decode(&p), Err(DumpError::Footer));
        // A truncated stream (type 19) and a truncated set are bad data.
        let mut s = vec![19, 0];
        put_footer(&mut s, RDB_VERSION);
        assert_eq!(decode(&s), Err(DumpError::Format));
        let mut t = vec![SET, 5, 1, b'a'];
        put_footer(&mut t, RDB_VERSION);
        assert_eq!(decode(&t), Err(DumpError::Format));
        // A huge count backed by nothing is refused without reserving memory.
        let mut h = vec![HASH, 0x81];
        h.extend_from_slice(&u64::MAX.to_be_bytes());
        put_footer(&mut h, RDB_VERSION);
        assert_eq!(decode(&h), Err(DumpError::Format));
    }
}
