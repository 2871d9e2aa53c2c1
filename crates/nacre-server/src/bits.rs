//! Bit operations on byte strings: GETBIT, SETBIT, BITCOUNT, BITPOS, BITOP
//! and the BITFIELD integer helpers, with Redis 7.0 semantics.
//!
//! Bits are numbered from the most significant bit of the first byte, so bit
//! 0 is `0x80` of byte 0 and bit 8 is `0x80` of byte 1. Reads past the end of
//! a string see zero bits; writes grow the string with zero bytes.

use crate::num::parse_i64_strict;

/// Largest bit offset accepted by SETBIT, GETBIT and BITFIELD: offsets must
/// be below 2^32, which addresses a 512 MiB string (the default
/// `proto-max-bulk-len`).
pub const MAX_BIT_OFFSET: u64 = 512 * 1024 * 1024 * 8 - 1;

/// Error message for an invalid bit offset.
pub const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// Error message for an invalid BITFIELD type.
pub const ERR_FIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// An error reply; the field is the full message, starting with `"ERR "`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitError(pub &'static str);

/// Parses a bit offset argument.
///
/// Accepts a non-negative decimal integer not larger than
/// [`MAX_BIT_OFFSET`]. When `hash_allowed` is true and `bits > 0` (BITFIELD),
/// the form `#N` is accepted too and means `N * bits`.
pub fn parse_bit_offset(arg: &[u8], hash_allowed: bool, bits: u32) -> Result<u64, BitError> {
    let err = BitError(ERR_BIT_OFFSET);
    let (use_hash, digits) = match arg.split_first() {
        Some((b'#', rest)) if hash_allowed && bits > 0 => (true, rest),
        _ => (false, arg),
    };
    let mut offset = parse_i64_strict(digits).ok_or(err)?;
    if use_hash {
        offset = offset.checked_mul(i64::from(bits)).ok_or(err)?;
    }
    let offset = u64::try_from(offset).map_err(|_| err)?;
    if offset > MAX_BIT_OFFSET {
        return Err(err);
    }
    Ok(offset)
}

/// Returns the bit (0 or 1) at `offset`; bits past the end read as 0.
pub fn getbit(v: &[u8], offset: u64) -> u8 {
    let byte = offset >> 3;
    match usize::try_from(byte).ok().and_then(|i| v.get(i)) {
        Some(b) => (b >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

/// Grows `v` with zero bytes so that it covers bits `offset .. offset + bits`.
///
/// BITFIELD pads the string this way for every write operation before it
/// runs them (even ones that then fail on overflow). Offsets above
/// [`MAX_BIT_OFFSET`] are ignored.
pub fn ensure_bits(v: &mut Vec<u8>, offset: u64, bits: u32) {
    if let Some(len) = needed_len(offset, bits) {
        if v.len() < len {
            v.resize(len, 0);
        }
    }
}

/// Byte length needed to hold bits `offset .. offset + bits`, or `None` when
/// `offset` is above [`MAX_BIT_OFFSET`].
fn needed_len(offset: u64, bits: u32) -> Option<usize> {
    if offset > MAX_BIT_OFFSET {
        return None;
    }
    let last = offset + u64::from(bits.max(1)) - 1;
    usize::try_from((last >> 3) + 1).ok()
}

/// Sets the bit at `offset` and returns its previous value (0 or 1),
/// growing `v` with zero bytes when needed.
///
/// Offsets above [`MAX_BIT_OFFSET`] (which [`parse_bit_offset`] never
/// returns) leave `v` untouched.
pub fn setbit(v: &mut Vec<u8>, offset: u64, bit: bool) -> u8 {
    let old = getbit(v, offset);
    ensure_bits(v, offset, 1);
    if let Some(b) = usize::try_from(offset >> 3).ok().and_then(|i| v.get_mut(i)) {
        let mask = 0x80u8 >> (offset & 7);
        if bit {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
    old
}

/// Counts set bits in a byte slice.
fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut total: u64 = 0;
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        total += u64::from(u64::from_ne_bytes(word).count_ones());
    }
    total
        + chunks
            .remainder()
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>()
}

/// Resolves a BYTE or BIT range into an inclusive range of bit positions,
/// after converting negative indexes and clamping as Redis does.
/// `end == None` means "up to the last unit". Returns `None` for an empty
/// range.
fn resolve_range(len: usize, start: i64, end: Option<i64>, is_bit: bool) -> Option<(u64, u64)> {
    let unit: i128 = if is_bit { 8 } else { 1 };
    let total = len as i128 * unit;
    let mut s = i128::from(start);
    let mut e = end.map_or(total - 1, i128::from);
    if s < 0 {
        s += total;
    }
    if e < 0 {
        e += total;
    }
    s = s.max(0);
    e = e.max(0);
    if e >= total {
        e = total - 1;
    }
    if s > e {
        return None;
    }
    let (first, last) = if is_bit { (s, e) } else { (s * 8, e * 8 + 7) };
    Some((u64::try_from(first).ok()?, u64::try_from(last).ok()?))
}

/// Mask of the bits of byte `idx` that lie inside bit range `first..=last`
/// (which must overlap that byte).
fn byte_mask(idx: u64, first: u64, last: u64) -> u8 {
    let mut mask = 0xffu8;
    if idx == first >> 3 {
        mask &= 0xff >> (first & 7);
    }
    if idx == last >> 3 {
        mask &= 0xffu8 << (7 - (last & 7));
    }
    mask
}

/// Counts set bits in the inclusive bit range `first..=last` of `v`; the
/// range must lie inside `v`.
fn count_bit_range(v: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = match (usize::try_from(first >> 3), usize::try_from(last >> 3)) {
        (Ok(f), Ok(l)) if f <= l && l < v.len() => (f, l),
        _ => return 0,
    };
    if fb == lb {
        return u64::from((v[fb] & byte_mask(fb as u64, first, last)).count_ones());
    }
    let head = v[fb] & byte_mask(fb as u64, first, last);
    let tail = v[lb] & byte_mask(lb as u64, first, last);
    u64::from(head.count_ones()) + popcount(&v[fb + 1..lb]) + u64::from(tail.count_ones())
}

/// BITCOUNT: counts set bits in `v`, optionally restricted to
/// `(start, end, is_bit)`, an inclusive range in bytes (or bits when
/// `is_bit`). Negative indexes count from the end; out-of-range indexes are
/// clamped; a range with both indexes negative and `start > end` counts 0.
pub fn bitcount(v: &[u8], range: Option<(i64, i64, bool)>) -> u64 {
    let Some((start, end, is_bit)) = range else {
        return popcount(v);
    };
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    match resolve_range(v.len(), start, Some(end), is_bit) {
        Some((first, last)) => count_bit_range(v, first, last),
        None => 0,
    }
}

/// Finds the first bit equal to `bit` in bit range `first..=last` of `v`.
fn find_bit(v: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let fb = usize::try_from(first >> 3).ok()?;
    let lb = usize::try_from(last >> 3).ok()?;
    let bytes = v.get(fb..=lb)?;
    for (k, &raw) in bytes.iter().enumerate() {
        let idx = (fb + k) as u64;
        let candidates = if bit { raw } else { !raw };
        let hits = if idx == first >> 3 || idx == last >> 3 {
            candidates & byte_mask(idx, first, last)
        } else {
            candidates
        };
        if hits != 0 {
            return Some(idx * 8 + u64::from(hits.leading_zeros()));
        }
    }
    None
}

/// BITPOS: returns the position of the first bit equal to `bit`, or -1.
///
/// `start`/`end` form an inclusive range in bytes (bits when `is_bit`) with
/// negative indexes counting from the end, clamped like BITCOUNT; a missing
/// `start` means 0 and a missing `end` means the last unit. An empty range
/// (including an empty string) gives -1. When looking for a clear bit
/// without an explicit `end` and every bit in range is set, the answer is
/// the first bit past the end of the string; with an explicit `end` it is
/// -1. A missing key is the caller's business (0 for clear, -1 for set).
pub fn bitpos(v: &[u8], bit: bool, start: Option<i64>, end: Option<i64>, is_bit: bool) -> i64 {
    let Some((first, last)) = resolve_range(v.len(), start.unwrap_or(0), end, is_bit) else {
        return -1;
    };
    match find_bit(v, bit, first, last) {
        Some(pos) => i64::try_from(pos).unwrap_or(-1),
        None if bit || end.is_some() => -1,
        None => i64::try_from(last + 1).unwrap_or(-1),
    }
}

/// A BITOP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    /// Bitwise AND of all sources.
    And,
    /// Bitwise OR of all sources.
    Or,
    /// Bitwise XOR of all sources.
    Xor,
    /// Bitwise NOT of a single source.
    Not,
}

/// BITOP: combines the sources byte by byte.
///
/// Missing keys are passed as empty slices. The result is as long as the
/// longest source, shorter sources being padded with zero bytes. `Not` uses
/// only the first source (the caller rejects any other count). No sources
/// give an empty result.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let Some((first, rest)) = srcs.split_first() else {
        return Vec::new();
    };
    if op == BitOp::Not {
        return first.iter().map(|b| !b).collect();
    }
    let max_len = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = first.to_vec();
    out.resize(max_len, 0);
    for src in rest {
        for (i, o) in out.iter_mut().enumerate() {
            let b = src.get(i).copied().unwrap_or(0);
            match op {
                BitOp::And => *o &= b,
                BitOp::Or => *o |= b,
                BitOp::Xor => *o ^= b,
                BitOp::Not => {}
            }
        }
    }
    out
}

/// A BITFIELD integer type such as `i16` or `u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldType {
    /// Whether the field is a two's complement signed integer.
    pub signed: bool,
    /// Width in bits: 1..=64 for signed, 1..=63 for unsigned.
    pub bits: u32,
}

impl FieldType {
    /// Width clamped to what the helpers can handle (0..=64).
    fn width(self) -> u32 {
        self.bits.min(64)
    }

    /// Inclusive value range of the type.
    fn limits(self) -> (i128, i128) {
        let w = self.width();
        if w == 0 {
            (0, 0)
        } else if self.signed {
            (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
        } else {
            (0, (1i128 << w) - 1)
        }
    }

    /// Reduces `x` modulo 2^bits into the type's range (two's complement
    /// for signed types).
    fn wrap(self, x: i128) -> i64 {
        let w = self.width();
        if w == 0 {
            return 0;
        }
        // Truncation to the low 64 bits is the intent here.
        let low = x as u64;
        if w == 64 {
            return low as i64;
        }
        let masked = low & ((1u64 << w) - 1);
        if self.signed && masked & (1u64 << (w - 1)) != 0 {
            (masked | (u64::MAX << w)) as i64
        } else {
            masked as i64
        }
    }

    /// A user-supplied value as a mathematical integer of this type's
    /// domain: unsigned types see negative values as their 64-bit unsigned
    /// reinterpretation, as Redis 7.0 does.
    fn widen(self, value: i64) -> i128 {
        if self.signed {
            i128::from(value)
        } else {
            i128::from(value as u64)
        }
    }
}

/// Parses a BITFIELD type: `i1`..`i64` or `u1`..`u63`.
pub fn parse_field_type(arg: &[u8]) -> Result<FieldType, BitError> {
    let err = BitError(ERR_FIELD_TYPE);
    let (signed, digits) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(err),
    };
    let bits = parse_i64_strict(digits).ok_or(err)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(err);
    }
    let bits = u32::try_from(bits).map_err(|_| err)?;
    Ok(FieldType { signed, bits })
}

/// Reads `bits` bits starting at `offset` as an unsigned number, most
/// significant bit first.
fn read_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, i| {
        (acc << 1) | u64::from(getbit(v, offset.saturating_add(i)))
    })
}

/// Writes the low `bits` bits of `value` starting at `offset`, most
/// significant bit first, growing `v` as needed. Offsets above
/// [`MAX_BIT_OFFSET`] are ignored.
fn write_bits(v: &mut Vec<u8>, offset: u64, bits: u32, value: u64) {
    if needed_len(offset, bits).is_none() {
        return;
    }
    ensure_bits(v, offset, bits);
    for i in 0..bits {
        let pos = offset + u64::from(i);
        let mask = 0x80u8 >> (pos & 7);
        if let Some(b) = usize::try_from(pos >> 3)
            .ok()
            .and_then(|idx| v.get_mut(idx))
        {
            if (value >> (bits - 1 - i)) & 1 == 1 {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

/// Reads the field of type `t` at bit `offset` (zeros past the end).
pub fn get_field(v: &[u8], offset: u64, t: FieldType) -> i64 {
    let w = t.width();
    t.wrap(i128::from(read_bits(v, offset, w)))
}

/// Writes `value` (already in the type's range) into the field.
fn store_field(v: &mut Vec<u8>, offset: u64, t: FieldType, value: i64) {
    let w = t.width();
    // Two's complement bit pattern; only the low `w` bits are written.
    write_bits(v, offset, w, value as u64);
}

/// Overflow policy for BITFIELD SET and INCRBY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Wrap around modulo 2^bits (the default).
    Wrap,
    /// Saturate at the type's minimum or maximum.
    Sat,
    /// Refuse the operation (reply nil, leave the field unchanged).
    Fail,
}

/// Fits `x` into type `t` under policy `ov`; `None` for a FAIL overflow.
fn fit(t: FieldType, x: i128, ov: Overflow) -> Option<i64> {
    let (min, max) = t.limits();
    if (min..=max).contains(&x) {
        return Some(t.wrap(x));
    }
    match ov {
        Overflow::Wrap => Some(t.wrap(x)),
        Overflow::Sat => Some(t.wrap(if x > max { max } else { min })),
        Overflow::Fail => None,
    }
}

/// BITFIELD SET with the default WRAP policy: stores `value` wrapped to the
/// type and returns the previous value (the tests' shorthand for
/// [`set_field_checked`] with WRAP).
#[cfg(test)]
pub fn set_field(v: &mut Vec<u8>, offset: u64, t: FieldType, value: i64) -> i64 {
    let old = get_field(v, offset, t);
    let new = t.wrap(t.widen(value));
    store_field(v, offset, t, new);
    old
}

/// BITFIELD SET under an explicit overflow policy: returns `(old, new)`, or
/// `None` (nothing written) when `value` does not fit and `ov` is FAIL.
/// With SAT an out-of-range value is clamped to the type's limits; for
/// unsigned types a negative value counts as a huge positive one, so it
/// saturates to the maximum.
pub fn set_field_checked(
    v: &mut Vec<u8>,
    offset: u64,
    t: FieldType,
    value: i64,
    ov: Overflow,
) -> Option<(i64, i64)> {
    let old = get_field(v, offset, t);
    let new = fit(t, t.widen(value), ov)?;
    store_field(v, offset, t, new);
    Some((old, new))
}

/// BITFIELD INCRBY: adds `incr` to the field under policy `ov` and returns
/// the new value, or `None` (nothing written) on a FAIL overflow.
pub fn incr_field(
    v: &mut Vec<u8>,
    offset: u64,
    t: FieldType,
    incr: i64,
    ov: Overflow,
) -> Option<i64> {
    let old = get_field(v, offset, t);
    let new = fit(t, t.widen(old) + i128::from(incr), ov)?;
    store_field(v, offset, t, new);
    Some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ft(s: &str) -> FieldType {
        match parse_field_type(s.as_bytes()) {
            Ok(t) => t,
            Err(e) => panic!("bad type {s}: {e:?}"),
        }
    }

    /// Reference bit counter over an inclusive bit range.
    fn naive_count(v: &[u8], first: u64, last: u64) -> u64 {
        (first..=last).map(|i| u64::from(getbit(v, i))).sum()
    }

    #[test]
    fn max_offset_is_2_pow_32_minus_1() {
        assert_eq!(MAX_BIT_OFFSET, (1u64 << 32) - 1);
    }

    #[test]
    fn parse_offsets() {
        assert_eq!(parse_bit_offset(b"0", false, 0), Ok(0));
        assert_eq!(parse_bit_offset(b"7", false, 0), Ok(7));
        assert_eq!(
            parse_bit_offset(b"4294967295", false, 0),
            Ok(MAX_BIT_OFFSET)
        );
        let err = Err(BitError(ERR_BIT_OFFSET));
        assert_eq!(parse_bit_offset(b"4294967296", false, 0), err);
        assert_eq!(parse_bit_offset(b"-1", false, 0), err);
        assert_eq!(parse_bit_offset(b"-0", false, 0), err);
        assert_eq!(parse_bit_offset(b"", false, 0), err);
        assert_eq!(parse_bit_offset(b"+1", false, 0), err);
        assert_eq!(parse_bit_offset(b"01", false, 0), err);
        assert_eq!(parse_bit_offset(b" 1", false, 0), err);
        assert_eq!(parse_bit_offset(b"1.5", false, 0), err);
        assert_eq!(parse_bit_offset(b"abc", false, 0), err);
        assert_eq!(parse_bit_offset(b"99999999999999999999999", false, 0), err);
        assert_eq!(parse_bit_offset(b"9223372036854775807", false, 0), err);
        // `#N` form.
        assert_eq!(parse_bit_offset(b"#0", true, 8), Ok(0));
        assert_eq!(parse_bit_offset(b"#3", true, 8), Ok(24));
        assert_eq!(parse_bit_offset(b"#2", true, 5), Ok(10));
        assert_eq!(parse_bit_offset(b"#536870911", true, 8), Ok((1 << 32) - 8));
        assert_eq!(parse_bit_offset(b"#536870912", true, 8), err);
        assert_eq!(parse_bit_offset(b"#3", false, 8), err);
        assert_eq!(parse_bit_offset(b"#3", true, 0), err);
        assert_eq!(parse_bit_offset(b"#", true, 8), err);
        assert_eq!(parse_bit_offset(b"#-1", true, 8), err);
        assert_eq!(parse_bit_offset(b"##1", true, 8), err);
        // Multiplication overflow must be an error, not a wrapped value.
        assert_eq!(parse_bit_offset(b"#2305843009213693953", true, 8), err);
        assert_eq!(parse_bit_offset(b"#9223372036854775807", true, 64), err);
        assert_eq!(
            ERR_BIT_OFFSET,
            "ERR bit offset is not an integer or out of range"
        );
    }

    #[test]
    fn getbit_setbit_docs() {
        // SETBIT mykey 7 1 -> 0; SETBIT mykey 7 0 -> 1; GET -> "\x00".
        let mut v = Vec::new();
        assert_eq!(setbit(&mut v, 7, true), 0);
        assert_eq!(v, b"\x01");
        assert_eq!(setbit(&mut v, 7, false), 1);
        assert_eq!(v, b"\x00");
        // GETBIT example.
        let mut v = Vec::new();
        setbit(&mut v, 7, true);
        assert_eq!(getbit(&v, 0), 0);
        assert_eq!(getbit(&v, 7), 1);
        assert_eq!(getbit(&v, 100), 0);
    }

    #[test]
    fn setbit_grows_and_preserves() {
        let mut v = b"a".to_vec();
        assert_eq!(setbit(&mut v, 20, true), 0);
        assert_eq!(v, vec![b'a', 0, 0x08]);
        assert_eq!(setbit(&mut v, 20, true), 1);
        assert_eq!(setbit(&mut v, 1, false), 1);
        assert_eq!(v[0], b'a' & !0x40);
        // Bit 0 is the MSB.
        let mut v = Vec::new();
        setbit(&mut v, 0, true);
        assert_eq!(v, vec![0x80]);
    }

    #[test]
    fn huge_offsets_do_not_panic() {
        let mut v = b"x".to_vec();
        assert_eq!(getbit(&v, u64::MAX), 0);
        assert_eq!(setbit(&mut v, u64::MAX, true), 0);
        assert_eq!(setbit(&mut v, MAX_BIT_OFFSET + 1, true), 0);
        assert_eq!(v, b"x");
        let t = ft("i64");
        assert_eq!(get_field(&v, u64::MAX, t), 0);
        assert_eq!(get_field(&v, u64::MAX - 3, t), 0);
        assert_eq!(set_field(&mut v, u64::MAX, t, 5), 0);
        assert_eq!(
            incr_field(&mut v, u64::MAX - 10, t, 5, Overflow::Wrap),
            Some(5)
        );
        ensure_bits(&mut v, u64::MAX, 64);
        assert_eq!(v, b"x");
        // Odd, hand-built types must not panic either.
        let odd = FieldType {
            signed: false,
            bits: 0,
        };
        assert_eq!(get_field(&v, 0, odd), 0);
        assert_eq!(set_field(&mut v, 0, odd, 7), 0);
        assert_eq!(incr_field(&mut v, 0, odd, 7, Overflow::Sat), Some(0));
        let wide = FieldType {
            signed: false,
            bits: 200,
        };
        assert_eq!(set_field(&mut v, 0, wide, -1), 0x78i64 << 56);
        assert_eq!(get_field(&v, 0, wide), -1);
        let wide_signed = FieldType {
            signed: true,
            bits: 200,
        };
        assert_eq!(
            incr_field(&mut v, 0, wide_signed, i64::MIN, Overflow::Sat),
            Some(i64::MIN)
        );
    }

    #[test]
    fn field_may_extend_past_max_offset() {
        // A field may start at the largest offset and run past it; the
        // string then needs a few bytes beyond 512 MiB.
        assert_eq!(
            needed_len(MAX_BIT_OFFSET - 3, 8),
            Some(512 * 1024 * 1024 + 1)
        );
        assert_eq!(needed_len(MAX_BIT_OFFSET, 64), Some(512 * 1024 * 1024 + 8));
        assert_eq!(needed_len(MAX_BIT_OFFSET + 1, 1), None);
        // The write path itself, on a small unaligned offset.
        let mut v = Vec::new();
        set_field(
            &mut v,
            4,
            FieldType {
                signed: false,
                bits: 8,
            },
            0xff,
        );
        assert_eq!(v, vec![0x0f, 0xf0]);
    }

    #[test]
    fn bitcount_docs() {
        let v = b"foobar";
        assert_eq!(bitcount(v, None), 26);
        assert_eq!(bitcount(v, Some((0, 0, false))), 4);
        assert_eq!(bitcount(v, Some((1, 1, false))), 6);
        assert_eq!(bitcount(v, Some((5, 30, true))), 17);
    }

    #[test]
    fn bitcount_ranges() {
        let v = b"foobar";
        assert_eq!(bitcount(v, Some((0, -1, false))), 26);
        assert_eq!(bitcount(v, Some((1, -2, false))), bitcount(b"ooba", None));
        assert_eq!(bitcount(v, Some((-2, 1, false))), 0);
        assert_eq!(bitcount(v, Some((0, 1000, false))), 26);
        assert_eq!(bitcount(v, Some((0, -1, true))), 26);
        assert_eq!(bitcount(v, Some((10, 14, true))), naive_count(v, 10, 14));
        assert_eq!(bitcount(v, Some((3, 14, true))), naive_count(v, 3, 14));
        assert_eq!(bitcount(v, Some((3, 29, true))), naive_count(v, 3, 29));
        assert_eq!(bitcount(v, Some((10, -34, true))), naive_count(v, 10, 14));
        assert_eq!(bitcount(v, Some((0, 1000, true))), 26);
        assert_eq!(bitcount(v, Some((i64::MIN, i64::MAX, false))), 26);
        assert_eq!(bitcount(v, Some((i64::MIN, i64::MAX, true))), 26);
        assert_eq!(bitcount(v, Some((i64::MAX, i64::MAX, true))), 0);
        // Negative start > negative end gives 0, even where clamping would
        // otherwise select the first byte.
        let x = b"xxxx";
        assert_eq!(bitcount(x, Some((-6, -7, false))), 0);
        assert_eq!(bitcount(x, Some((-6, -7, true))), 0);
        assert_eq!(bitcount(x, Some((-7, -6, false))), bitcount(b"x", None));
        // Out of range.
        assert_eq!(bitcount(x, Some((4, 10, false))), 0);
        assert_eq!(bitcount(x, Some((32, 100, true))), 0);
        assert_eq!(bitcount(x, Some((19, 10, true))), 0);
        // Single bit and single byte.
        assert_eq!(bitcount(b"\x80", Some((0, 0, true))), 1);
        assert_eq!(bitcount(b"\x80", Some((1, 7, true))), 0);
        assert_eq!(bitcount(b"\xff\xff", Some((7, 8, true))), 2);
        // Empty string.
        assert_eq!(bitcount(b"", None), 0);
        assert_eq!(bitcount(b"", Some((0, -1, false))), 0);
        assert_eq!(bitcount(b"", Some((0, -1, true))), 0);
        // Regression-style: huge end.
        let mut one = Vec::new();
        setbit(&mut one, 0, true);
        assert_eq!(bitcount(&one, Some((0, 4_294_967_296, false))), 1);
    }

    #[test]
    fn bitcount_matches_naive_on_all_small_ranges() {
        let v: Vec<u8> = (0u8..23).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let nbits = v.len() as i64 * 8;
        for s in -nbits - 3..nbits + 3 {
            for e in -nbits - 3..nbits + 3 {
                let got = bitcount(&v, Some((s, e, true)));
                let rs = if s < 0 { (s + nbits).max(0) } else { s };
                let re = if e < 0 {
                    (e + nbits).max(0)
                } else {
                    e.min(nbits - 1)
                };
                let want = if (s < 0 && e < 0 && s > e) || rs > re {
                    0
                } else {
                    naive_count(&v, rs as u64, re as u64)
                };
                assert_eq!(got, want, "range {s} {e}");
            }
        }
    }

    #[test]
    fn bitpos_docs() {
        assert_eq!(bitpos(b"\xff\xf0\x00", false, None, None, false), 12);
        let v = b"\x00\xff\xf0";
        assert_eq!(bitpos(v, true, Some(0), None, false), 8);
        assert_eq!(bitpos(v, true, Some(2), None, false), 16);
        assert_eq!(bitpos(v, true, Some(2), Some(-1), false), 16);
        assert_eq!(bitpos(v, true, Some(7), Some(15), true), 8);
        let z = b"\x00\x00\x00";
        assert_eq!(bitpos(z, true, None, None, false), -1);
        assert_eq!(bitpos(z, true, Some(7), Some(-3), true), -1);
    }

    #[test]
    fn bitpos_small_strings() {
        assert_eq!(bitpos(b"\x00\x0f\x00", true, None, None, false), 12);
        assert_eq!(bitpos(b"\x00", false, None, None, false), 0);
        assert_eq!(bitpos(b"\x80", true, None, None, false), 0);
        assert_eq!(bitpos(b"\x01", true, None, None, false), 7);
        assert_eq!(bitpos(b"", false, None, None, false), -1);
        assert_eq!(bitpos(b"", true, None, None, false), -1);
        assert_eq!(bitpos(b"", false, Some(0), None, false), -1);
        assert_eq!(bitpos(b"", false, Some(0), Some(-1), true), -1);
    }

    #[test]
    fn bitpos_bit1_intervals() {
        let v = b"\x00\xff\x00";
        assert_eq!(bitpos(v, true, Some(0), Some(-1), false), 8);
        assert_eq!(bitpos(v, true, Some(1), Some(-1), false), 8);
        assert_eq!(bitpos(v, true, Some(2), Some(-1), false), -1);
        assert_eq!(bitpos(v, true, Some(2), Some(200), false), -1);
        assert_eq!(bitpos(v, true, Some(1), Some(1), false), 8);
        assert_eq!(bitpos(v, true, Some(0), Some(-1), true), 8);
        assert_eq!(bitpos(v, true, Some(8), Some(-1), true), 8);
        assert_eq!(bitpos(v, true, Some(16), Some(-1), true), -1);
        assert_eq!(bitpos(v, true, Some(16), Some(200), true), -1);
        assert_eq!(bitpos(v, true, Some(8), Some(8), true), 8);
    }

    #[test]
    fn bitpos_bit0_intervals() {
        let v = b"\xff\x00\xff";
        assert_eq!(bitpos(v, false, Some(0), Some(-1), false), 8);
        assert_eq!(bitpos(v, false, Some(1), Some(-1), false), 8);
        assert_eq!(bitpos(v, false, Some(2), Some(-1), false), -1);
        assert_eq!(bitpos(v, false, Some(2), Some(200), false), -1);
        assert_eq!(bitpos(v, false, Some(1), Some(1), false), 8);
        assert_eq!(bitpos(v, false, Some(0), Some(-1), true), 8);
        assert_eq!(bitpos(v, false, Some(8), Some(-1), true), 8);
        assert_eq!(bitpos(v, false, Some(16), Some(-1), true), -1);
        assert_eq!(bitpos(v, false, Some(16), Some(200), true), -1);
        assert_eq!(bitpos(v, false, Some(8), Some(8), true), 8);
    }

    #[test]
    fn bitpos_clear_bit_end_given_or_not() {
        let v = b"\xff\xff\xff";
        assert_eq!(bitpos(v, false, None, None, false), 24);
        assert_eq!(bitpos(v, false, Some(0), None, false), 24);
        assert_eq!(bitpos(v, false, Some(1), None, false), 24);
        assert_eq!(bitpos(v, false, Some(0), Some(-1), false), -1);
        assert_eq!(bitpos(v, false, Some(0), None, true), 24);
        assert_eq!(bitpos(v, false, Some(5), None, true), 24);
        assert_eq!(bitpos(v, false, Some(0), Some(-1), true), -1);
        assert_eq!(bitpos(v, false, Some(0), Some(23), true), -1);
        // Bits outside a BIT range are ignored.
        let w = b"\x7f\xff\xfe";
        assert_eq!(bitpos(w, false, Some(1), Some(22), true), -1);
        assert_eq!(bitpos(w, false, Some(1), Some(23), true), 23);
        assert_eq!(bitpos(w, false, Some(0), Some(22), true), 0);
        assert_eq!(bitpos(w, false, Some(1), None, true), 23);
        assert_eq!(bitpos(b"\xfe", false, Some(0), Some(6), true), -1);
        assert_eq!(bitpos(b"\xfe", false, Some(0), None, true), 7);
    }

    #[test]
    fn bitpos_start_after_end_and_negatives() {
        let v = b"\x00\xff\x00";
        assert_eq!(bitpos(v, true, Some(2), Some(1), false), -1);
        assert_eq!(bitpos(v, false, Some(2), Some(1), false), -1);
        assert_eq!(bitpos(v, true, Some(-1), Some(-2), false), -1);
        assert_eq!(bitpos(v, true, Some(-2), Some(-2), false), 8);
        assert_eq!(bitpos(v, true, Some(-100), Some(-2), false), 8);
        assert_eq!(bitpos(v, true, Some(-100), Some(-100), false), -1);
        assert_eq!(bitpos(v, false, Some(-100), Some(-100), false), 0);
        assert_eq!(bitpos(v, true, Some(-16), None, true), 8);
        assert_eq!(bitpos(v, true, Some(i64::MIN), Some(i64::MAX), true), 8);
        assert_eq!(bitpos(v, true, Some(i64::MAX), None, true), -1);
        assert_eq!(bitpos(v, false, Some(i64::MAX), None, false), -1);
    }

    #[test]
    fn bitpos_matches_naive() {
        let data: [&[u8]; 4] = [
            b"\xff\xff\x7f\xff\xff\xff\xff\xff\xff\xfe",
            b"\x00\x00\x00\x00\x00\x00\x00\x00\x01",
            b"\x5a\xa5",
            b"\xff",
        ];
        for v in data {
            let n = v.len() as i64 * 8;
            for bit in [false, true] {
                for s in -n - 2..n + 2 {
                    for e in -n - 2..n + 2 {
                        let rs = if s < 0 { (s + n).max(0) } else { s };
                        let re = if e < 0 { (e + n).max(0) } else { e.min(n - 1) };
                        let want = if rs > re {
                            -1
                        } else {
                            (rs..=re)
                                .find(|&i| getbit(v, i as u64) == u8::from(bit))
                                .unwrap_or(-1)
                        };
                        assert_eq!(
                            bitpos(v, bit, Some(s), Some(e), true),
                            want,
                            "{bit} {s} {e}"
                        );
                    }
                    let rs = if s < 0 { (s + n).max(0) } else { s };
                    let want = if rs > n - 1 {
                        -1
                    } else {
                        (rs..n)
                            .find(|&i| getbit(v, i as u64) == u8::from(bit))
                            .unwrap_or(if bit { -1 } else { n })
                    };
                    assert_eq!(bitpos(v, bit, Some(s), None, true), want, "{bit} {s}");
                }
            }
        }
    }

    #[test]
    fn bitop_docs() {
        let r = bitop(BitOp::And, &[b"foobar", b"abcdef"]);
        assert_eq!(r, b"`bc`ab");
        assert_eq!(bitop(BitOp::Or, &[b"foobar", b"abcdef"]), b"goofev");
    }

    #[test]
    fn bitop_padding_and_missing() {
        let a: &[u8] = b"\x01\x02\xff";
        let none: &[u8] = b"";
        assert_eq!(bitop(BitOp::Or, &[none, a, none]), a);
        assert_eq!(bitop(BitOp::And, &[none, a, none]), b"\x00\x00\x00");
        assert_eq!(bitop(BitOp::Xor, &[none, a, none]), a);
        let long: &[u8] = b"\x01\x02\xff\xff";
        assert_eq!(bitop(BitOp::And, &[long, a]), b"\x01\x02\xff\x00");
        assert_eq!(bitop(BitOp::Or, &[long, a]), b"\x01\x02\xff\xff");
        assert_eq!(bitop(BitOp::Xor, &[long, a]), b"\x00\x00\x00\xff");
        assert_eq!(bitop(BitOp::And, &[a]), a);
        assert_eq!(bitop(BitOp::Or, &[a]), a);
        assert_eq!(bitop(BitOp::Xor, &[a, a]), b"\x00\x00\x00");
        assert_eq!(bitop(BitOp::Not, &[a]), b"\xfe\xfd\x00");
        assert_eq!(bitop(BitOp::Not, &[none]), b"");
        assert_eq!(bitop(BitOp::And, &[]), b"");
        assert_eq!(bitop(BitOp::Not, &[]), b"");
        assert_eq!(bitop(BitOp::And, &[none, none]), b"");
    }

    #[test]
    fn field_type_parsing() {
        assert_eq!(
            ft("i1"),
            FieldType {
                signed: true,
                bits: 1
            }
        );
        assert_eq!(
            ft("i64"),
            FieldType {
                signed: true,
                bits: 64
            }
        );
        assert_eq!(
            ft("u1"),
            FieldType {
                signed: false,
                bits: 1
            }
        );
        assert_eq!(
            ft("u63"),
            FieldType {
                signed: false,
                bits: 63
            }
        );
        assert_eq!(
            ft("u8"),
            FieldType {
                signed: false,
                bits: 8
            }
        );
        let err = Err(BitError(ERR_FIELD_TYPE));
        for bad in [
            "u64",
            "i65",
            "i0",
            "u0",
            "i",
            "u",
            "",
            "I8",
            "U8",
            "x8",
            "i-1",
            "i08",
            "i8 ",
            "i+8",
            "s8",
            "i99999999999999999999",
        ] {
            assert_eq!(parse_field_type(bad.as_bytes()), err, "{bad}");
        }
        assert!(ERR_FIELD_TYPE.starts_with("ERR Invalid bitfield type."));
    }

    #[test]
    fn bitfield_docs_incrby_get() {
        // BITFIELD mykey INCRBY i5 100 1 GET u4 0 -> 1, 0
        let mut v = Vec::new();
        assert_eq!(
            incr_field(&mut v, 100, ft("i5"), 1, Overflow::Wrap),
            Some(1)
        );
        assert_eq!(get_field(&v, 0, ft("u4")), 0);
        assert_eq!(v.len(), 14);
    }

    #[test]
    fn bitfield_docs_hash_offsets() {
        // BITFIELD mykey SET i8 #0 100 SET i8 #1 200
        let mut v = Vec::new();
        let t = ft("i8");
        let o0 = parse_bit_offset(b"#0", true, t.bits);
        let o1 = parse_bit_offset(b"#1", true, t.bits);
        assert_eq!((o0, o1), (Ok(0), Ok(8)));
        assert_eq!(set_field(&mut v, 0, t, 100), 0);
        assert_eq!(set_field(&mut v, 8, t, 200), 0);
        assert_eq!(get_field(&v, 0, t), 100);
        assert_eq!(get_field(&v, 8, t), -56);
        assert_eq!(v, vec![100, 200]);
    }

    #[test]
    fn bitfield_docs_overflow_sat_sequence() {
        // BITFIELD mykey incrby u2 100 1 OVERFLOW SAT incrby u2 102 1
        let mut v = Vec::new();
        let u2 = ft("u2");
        let expected = [(1, 1), (2, 2), (3, 3), (0, 3)];
        for (a, b) in expected {
            assert_eq!(incr_field(&mut v, 100, u2, 1, Overflow::Wrap), Some(a));
            assert_eq!(incr_field(&mut v, 102, u2, 1, Overflow::Sat), Some(b));
        }
        // OVERFLOW FAIL incrby u2 102 1 -> nil, value unchanged.
        let before = v.clone();
        assert_eq!(incr_field(&mut v, 102, u2, 1, Overflow::Fail), None);
        assert_eq!(v, before);
        assert_eq!(get_field(&v, 102, u2), 3);
    }

    #[test]
    fn bitfield_docs_i8_wrap_and_sat() {
        let i8t = ft("i8");
        let mut v = Vec::new();
        set_field(&mut v, 0, i8t, 127);
        assert_eq!(incr_field(&mut v, 0, i8t, 1, Overflow::Wrap), Some(-128));
        set_field(&mut v, 0, i8t, 120);
        assert_eq!(incr_field(&mut v, 0, i8t, 10, Overflow::Sat), Some(127));
        set_field(&mut v, 0, i8t, -120);
        assert_eq!(incr_field(&mut v, 0, i8t, -10, Overflow::Sat), Some(-128));
        assert_eq!(incr_field(&mut v, 0, i8t, -1, Overflow::Fail), None);
        assert_eq!(get_field(&v, 0, i8t), -128);
    }

    #[test]
    fn bitfield_set_get_basics() {
        let mut v = Vec::new();
        let i8t = ft("i8");
        assert_eq!(set_field(&mut v, 0, i8t, -100), 0);
        assert_eq!(set_field(&mut v, 0, i8t, 101), -100);
        assert_eq!(get_field(&v, 0, i8t), 101);
        let mut v = Vec::new();
        let u8t = ft("u8");
        assert_eq!(set_field(&mut v, 0, u8t, 255), 0);
        assert_eq!(set_field(&mut v, 0, u8t, 100), 255);
        assert_eq!(get_field(&v, 0, u8t), 100);
        // #<idx> form writes "ABC".
        let mut v = Vec::new();
        for (i, c) in [65, 66, 67].into_iter().enumerate() {
            set_field(&mut v, i as u64 * 8, u8t, c);
        }
        assert_eq!(v, b"ABC");
        // Unaligned fields.
        let mut v = Vec::new();
        set_field(&mut v, 3, ft("u5"), 0b10101);
        assert_eq!(v, vec![0b0001_0101]);
        set_field(&mut v, 6, ft("u4"), 0b1111);
        assert_eq!(v, vec![0b0001_0111, 0b1100_0000]);
        assert_eq!(get_field(&v, 6, ft("u4")), 15);
        assert_eq!(get_field(&v, 6, ft("i4")), -1);
        assert_eq!(get_field(&v, 0, ft("u16")), 0b0001_0111_1100_0000);
    }

    #[test]
    fn bitfield_incrby_basics_and_wrap() {
        let u8t = ft("u8");
        let mut v = Vec::new();
        set_field(&mut v, 0, u8t, 10);
        assert_eq!(incr_field(&mut v, 0, u8t, 100, Overflow::Wrap), Some(110));
        assert_eq!(incr_field(&mut v, 0, u8t, 100, Overflow::Wrap), Some(210));
        // Unsigned wrap.
        let mut v = Vec::new();
        set_field(&mut v, 0, u8t, 100);
        assert_eq!(incr_field(&mut v, 0, u8t, 257, Overflow::Wrap), Some(101));
        assert_eq!(get_field(&v, 0, u8t), 101);
        assert_eq!(incr_field(&mut v, 0, u8t, 255, Overflow::Wrap), Some(100));
        // Unsigned sat.
        let mut v = Vec::new();
        set_field(&mut v, 0, u8t, 100);
        assert_eq!(incr_field(&mut v, 0, u8t, 257, Overflow::Sat), Some(255));
        assert_eq!(incr_field(&mut v, 0, u8t, -255, Overflow::Sat), Some(0));
        // Signed wrap.
        let i8t = ft("i8");
        let mut v = Vec::new();
        set_field(&mut v, 0, i8t, 100);
        assert_eq!(incr_field(&mut v, 0, i8t, 257, Overflow::Wrap), Some(101));
        assert_eq!(incr_field(&mut v, 0, i8t, 255, Overflow::Wrap), Some(100));
        // Signed sat.
        let mut v = Vec::new();
        set_field(&mut v, 0, u8t, 100);
        assert_eq!(incr_field(&mut v, 0, i8t, 257, Overflow::Sat), Some(127));
        assert_eq!(incr_field(&mut v, 0, i8t, -255, Overflow::Sat), Some(-128));
    }

    #[test]
    fn bitfield_64_and_63_bit_edges() {
        let i64t = ft("i64");
        let mut v = Vec::new();
        assert_eq!(set_field(&mut v, 5, i64t, i64::MAX), 0);
        assert_eq!(get_field(&v, 5, i64t), i64::MAX);
        assert_eq!(
            incr_field(&mut v, 5, i64t, 1, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            incr_field(&mut v, 5, i64t, -1, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(incr_field(&mut v, 5, i64t, -1, Overflow::Fail), None);
        assert_eq!(
            incr_field(&mut v, 5, i64t, i64::MAX, Overflow::Fail),
            Some(-1)
        );
        assert_eq!(
            incr_field(&mut v, 5, i64t, i64::MIN, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(
            incr_field(&mut v, 5, i64t, i64::MAX, Overflow::Wrap),
            Some(-1)
        );
        assert_eq!(
            incr_field(&mut v, 5, i64t, i64::MIN, Overflow::Wrap),
            Some(i64::MAX)
        );
        let u63 = ft("u63");
        let max63 = i64::MAX;
        let mut v = Vec::new();
        assert_eq!(set_field(&mut v, 1, u63, max63), 0);
        assert_eq!(get_field(&v, 1, u63), max63);
        assert_eq!(incr_field(&mut v, 1, u63, 1, Overflow::Wrap), Some(0));
        assert_eq!(incr_field(&mut v, 1, u63, -1, Overflow::Wrap), Some(max63));
        assert_eq!(
            incr_field(&mut v, 1, u63, i64::MAX, Overflow::Sat),
            Some(max63)
        );
        assert_eq!(incr_field(&mut v, 1, u63, i64::MIN, Overflow::Sat), Some(0));
        // SET u63 -1 wraps to the maximum.
        assert_eq!(set_field(&mut v, 1, u63, -1), 0);
        assert_eq!(get_field(&v, 1, u63), max63);
        // i1 and u1.
        let i1 = ft("i1");
        let mut v = Vec::new();
        assert_eq!(incr_field(&mut v, 0, i1, 1, Overflow::Wrap), Some(-1));
        assert_eq!(incr_field(&mut v, 0, i1, 1, Overflow::Wrap), Some(0));
        assert_eq!(incr_field(&mut v, 0, i1, 1, Overflow::Sat), Some(0));
        assert_eq!(incr_field(&mut v, 0, i1, -5, Overflow::Sat), Some(-1));
        let u1 = ft("u1");
        assert_eq!(incr_field(&mut v, 8, u1, 3, Overflow::Wrap), Some(1));
        assert_eq!(incr_field(&mut v, 8, u1, 1, Overflow::Fail), None);
    }

    #[test]
    fn bitfield_set_with_overflow_policies() {
        let u8t = ft("u8");
        let i8t = ft("i8");
        let mut v = Vec::new();
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, 300, Overflow::Wrap),
            Some((0, 44))
        );
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, 300, Overflow::Sat),
            Some((44, 255))
        );
        assert_eq!(set_field_checked(&mut v, 0, u8t, 300, Overflow::Fail), None);
        assert_eq!(get_field(&v, 0, u8t), 255);
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, 7, Overflow::Fail),
            Some((255, 7))
        );
        // Negative values on unsigned types behave as huge values.
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, -1, Overflow::Wrap),
            Some((7, 255))
        );
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, -1, Overflow::Sat),
            Some((255, 255))
        );
        assert_eq!(set_field_checked(&mut v, 0, u8t, -1, Overflow::Fail), None);
        assert_eq!(
            set_field_checked(&mut v, 0, u8t, -256, Overflow::Wrap),
            Some((255, 0))
        );
        // Signed.
        assert_eq!(
            set_field_checked(&mut v, 0, i8t, 200, Overflow::Wrap),
            Some((0, -56))
        );
        assert_eq!(
            set_field_checked(&mut v, 0, i8t, 200, Overflow::Sat),
            Some((-56, 127))
        );
        assert_eq!(
            set_field_checked(&mut v, 0, i8t, -200, Overflow::Sat),
            Some((127, -128))
        );
        assert_eq!(
            set_field_checked(&mut v, 0, i8t, -129, Overflow::Fail),
            None
        );
        assert_eq!(
            set_field_checked(&mut v, 0, i8t, -128, Overflow::Fail),
            Some((-128, -128))
        );
        assert_eq!(set_field(&mut v, 0, i8t, 128), -128);
        assert_eq!(get_field(&v, 0, i8t), -128);
        // FAIL leaves the string untouched (no growth).
        let mut w = Vec::new();
        assert_eq!(
            set_field_checked(&mut w, 64, i8t, 1000, Overflow::Fail),
            None
        );
        assert!(w.is_empty());
        ensure_bits(&mut w, 64, 8);
        assert_eq!(w.len(), 9);
        ensure_bits(&mut w, 0, 8);
        assert_eq!(w.len(), 9);
    }

    #[test]
    fn bitfield_wrap_fuzz_against_modular_arithmetic() {
        // Deterministic pseudo-random sequence.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let bits = (next() % 64 + 1) as u32;
            let signed = bits == 64 || next() % 2 == 0;
            let t = FieldType { signed, bits };
            let offset = next() % 40;
            let mut v = Vec::new();
            let start = next() as i64;
            let incr = next() as i64;
            set_field(&mut v, offset, t, start);
            let stored = get_field(&v, offset, t);
            let modulus = 1i128 << bits;
            let norm = |x: i128| {
                let r = x.rem_euclid(modulus);
                if signed && r >= modulus / 2 {
                    r - modulus
                } else {
                    r
                }
            };
            assert_eq!(i128::from(stored), norm(i128::from(start)));
            let got = incr_field(&mut v, offset, t, incr, Overflow::Wrap);
            let want = norm(i128::from(stored) + i128::from(incr));
            assert_eq!(got.map(i128::from), Some(want));
            assert_eq!(i128::from(get_field(&v, offset, t)), want);
            // Neighbouring bits stay clear.
            if offset > 0 {
                assert_eq!(bitcount(&v, Some((0, offset as i64 - 1, true))), 0);
            }
            let end = offset + u64::from(bits);
            assert_eq!(bitcount(&v, Some((end as i64, i64::MAX, true))), 0);
        }
    }
}
