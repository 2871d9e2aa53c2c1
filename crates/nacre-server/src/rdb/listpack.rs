//! Redis's compact encodings inside RDB values: listpacks (7.0's lists, small hashes and
//! sorted sets), ziplists (the same before 7.0) and intsets (small sets of integers). Nacre
//! writes listpacks (a list's nodes) and reads all three; every read checks its bounds, so a
//! damaged or hostile payload is an error, never a panic.

/// Most entries a listpack header counts (more reads as "unknown").
const LP_COUNT_UNKNOWN: usize = 65535;

/// The bytes of a listpack holding `items` as strings.
pub fn lp_encode(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0u8; 6];
    for it in items {
        let start = out.len();
        let n = it.len();
        // As Redis: text that is a canonical 64-bit integer is stored as one.
        if let Some(v) = crate::num::parse_i64_strict(it).filter(|_| n <= 20) {
            push_int(&mut out, v);
            let len = out.len() - start;
            out.extend_from_slice(&backlen(len));
            continue;
        }
        if n < 64 {
            out.push(0x80 | n as u8);
        } else if n < 4096 {
            out.push(0xE0 | (n >> 8) as u8);
            out.push(n as u8);
        } else {
            out.push(0xF0);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
        out.extend_from_slice(it);
        let len = out.len() - start;
        out.extend_from_slice(&backlen(len));
    }
    out.push(0xFF);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = items.len().min(LP_COUNT_UNKNOWN) as u16;
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}

/// Bytes of a listpack's header and end marker.
pub const LP_OVERHEAD: u64 = 7;

/// Bytes an element whose encoding takes `enc` bytes takes, with its back length.
fn with_backlen(enc: u64) -> u64 {
    enc + backlen(enc as usize).len() as u64
}

/// Bytes the integer element `v` takes in a listpack.
pub fn int_size(v: i64) -> u64 {
    let enc = if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    };
    with_backlen(enc)
}

/// Bytes the element `item` takes in a listpack (as an integer when it is one, as Redis
/// stores it).
pub fn item_size(item: &[u8]) -> u64 {
    if let Some(v) = crate::num::parse_i64_strict(item) {
        return int_size(v);
    }
    let n = item.len() as u64;
    let enc = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    with_backlen(enc)
}

/// A listpack integer entry, in the smallest encoding that holds `v`.
fn push_int(out: &mut Vec<u8>, v: i64) {
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u16) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else {
        let (tag, width) = if i16::try_from(v).is_ok() {
            (0xF1, 2)
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            (0xF2, 3)
        } else if i32::try_from(v).is_ok() {
            (0xF3, 4)
        } else {
            (0xF4, 8)
        };
        out.push(tag);
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
}

/// An entry's length written backwards after it (7 bits a byte, most significant first).
fn backlen(l: usize) -> Vec<u8> {
    let bytes = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    (0..bytes)
        .map(|i| {
            let shift = 7 * (bytes - 1 - i);
            let b = ((l >> shift) & 127) as u8;
            if i == 0 {
                b
            } else {
                b | 128
            }
        })
        .collect()
}

/// A signed integer of `bits` bits from its two's-complement value `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The little-endian unsigned integer in `b`.
fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |acc, &x| (acc << 8) | u64::from(x))
}

/// The entries of a listpack, integers as decimal text; `None` if malformed.
pub fn lp_decode(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = usize::try_from(le(b.get(..4)?)).ok()?;
    if total != b.len() || b.last() != Some(&0xFF) {
        return None;
    }
    let count = le(b.get(4..6)?) as usize;
    let mut out = Vec::new();
    let mut at = 6;
    while *b.get(at)? != 0xFF {
        let e = b[at];
        let (item, len): (Vec<u8>, usize) = if e & 0x80 == 0 {
            (u64::from(e & 0x7F).to_string().into_bytes(), 1)
        } else if e & 0xC0 == 0x80 {
            let n = usize::from(e & 0x3F);
            (b.get(at + 1..at + 1 + n)?.to_vec(), 1 + n)
        } else if e & 0xE0 == 0xC0 {
            let v = (u64::from(e & 0x1F) << 8) | u64::from(*b.get(at + 1)?);
            (signed(v, 13).to_string().into_bytes(), 2)
        } else if e & 0xF0 == 0xE0 {
            let n = (usize::from(e & 0x0F) << 8) | usize::from(*b.get(at + 1)?);
            (b.get(at + 2..at + 2 + n)?.to_vec(), 2 + n)
        } else {
            let int = |w: usize| -> Option<(Vec<u8>, usize)> {
                let v = le(b.get(at + 1..at + 1 + w)?);
                Some((signed(v, 8 * w as u32).to_string().into_bytes(), 1 + w))
            };
            match e {
                0xF1 => int(2)?,
                0xF2 => int(3)?,
                0xF3 => int(4)?,
                0xF4 => int(8)?,
                0xF0 => {
                    let n = usize::try_from(le(b.get(at + 1..at + 5)?)).ok()?;
                    (b.get(at + 5..at.checked_add(5 + n)?)?.to_vec(), 5 + n)
                }
                _ => return None,
            }
        };
        let back = backlen(len);
        if b.get(at + len..at + len + back.len())? != back.as_slice() {
            return None;
        }
        at += len + back.len();
        out.push(item);
    }
    if at + 1 != b.len() || (count != LP_COUNT_UNKNOWN && count != out.len()) {
        return None;
    }
    Some(out)
}

/// The entries of a ziplist, integers as decimal text; `None` if malformed.
pub fn zl_decode(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let total = usize::try_from(le(b.get(..4)?)).ok()?;
    if total != b.len() || b.last() != Some(&0xFF) {
        return None;
    }
    let count = le(b.get(8..10)?) as usize;
    let mut out = Vec::new();
    let mut at = 10;
    while *b.get(at)? != 0xFF {
        // The previous entry's length: one byte, or 0xFE and four.
        at += if b[at] < 0xFE { 1 } else { 5 };
        let e = *b.get(at)?;
        let (item, len): (Vec<u8>, usize) = match e >> 6 {
            0 => {
                let n = usize::from(e & 0x3F);
                (b.get(at + 1..at + 1 + n)?.to_vec(), 1 + n)
            }
            1 => {
                let n = (usize::from(e & 0x3F) << 8) | usize::from(*b.get(at + 1)?);
                (b.get(at + 2..at + 2 + n)?.to_vec(), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(b.get(at + 1..at + 5)?.try_into().ok()?) as usize;
                (b.get(at + 5..at.checked_add(5 + n)?)?.to_vec(), 5 + n)
            }
            _ => {
                let int = |w: usize| -> Option<(Vec<u8>, usize)> {
                    let v = le(b.get(at + 1..at + 1 + w)?);
                    Some((signed(v, 8 * w as u32).to_string().into_bytes(), 1 + w))
                };
                match e {
                    0xC0 => int(2)?,
                    0xD0 => int(4)?,
                    0xE0 => int(8)?,
                    0xF0 => int(3)?,
                    0xFE => int(1)?,
                    0xF1..=0xFD => ((i64::from(e & 0x0F) - 1).to_string().into_bytes(), 1),
                    _ => return None,
                }
            }
        };
        at += len;
        out.push(item);
    }
    if at + 1 != b.len() || (count != 0xFFFF && count != out.len()) {
        return None;
    }
    Some(out)
}

/// The members of an intset, as decimal text; `None` if malformed.
pub fn intset_decode(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let width = usize::try_from(le(b.get(..4)?)).ok()?;
    let n = usize::try_from(le(b.get(4..8)?)).ok()?;
    if !matches!(width, 2 | 4 | 8) || b.len() != 8 + n.checked_mul(width)? {
        return None;
    }
    Some(
        b[8..]
            .chunks(width)
            .map(|c| signed(le(c), 8 * width as u32).to_string().into_bytes())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpacks_round_trip_and_read_redis_integers() {
        let items: Vec<Vec<u8>> = [0usize, 1, 63, 64, 4095, 4096, 70000]
            .iter()
            .map(|&n| vec![b'x'; n])
            .collect();
        let lp = lp_encode(&items);
        assert_eq!(lp_decode(&lp), Some(items));
        // 7-bit 5, 13-bit -2, 16-bit 1000, 64-bit -1, as Redis writes them.
        let mut b = vec![0u8; 6];
        for e in [
            &[0x05u8, 1][..],
            &[0xDF, 0xFE, 2],
            &[0xF1, 0xE8, 0x03, 3],
            &[0xF4, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 9],
        ] {
            b.extend_from_slice(e);
        }
        b.push(0xFF);
        let total = b.len() as u32;
        b[..4].copy_from_slice(&total.to_le_bytes());
        b[4..6].copy_from_slice(&4u16.to_le_bytes());
        let want: Vec<Vec<u8>> = ["5", "-2", "1000", "-1"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(lp_decode(&b), Some(want));
        // Damage: a wrong count, a cut entry.
        let mut bad = b.clone();
        bad[4] = 5;
        assert_eq!(lp_decode(&bad), None);
        assert_eq!(lp_decode(&b[..b.len() - 3]), None);
    }

    #[test]
    fn ziplists_and_intsets_are_read() {
        // A ziplist of "ab" and the immediate 7.
        let mut z = vec![0u8; 10];
        z.extend_from_slice(&[0, 0x02, b'a', b'b', 4, 0xF8]);
        z.push(0xFF);
        let total = z.len() as u32;
        z[..4].copy_from_slice(&total.to_le_bytes());
        z[8..10].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(zl_decode(&z), Some(vec![b"ab".to_vec(), b"7".to_vec()]));
        let mut i = Vec::new();
        i.extend_from_slice(&2u32.to_le_bytes());
        i.extend_from_slice(&2u32.to_le_bytes());
        i.extend_from_slice(&(-3i16).to_le_bytes());
        i.extend_from_slice(&9i16.to_le_bytes());
        assert_eq!(intset_decode(&i), Some(vec![b"-3".to_vec(), b"9".to_vec()]));
        assert_eq!(intset_decode(&i[..10]), None);
    }
}
