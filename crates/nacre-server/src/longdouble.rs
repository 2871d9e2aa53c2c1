//! The x87 80-bit extended format (C `long double` on x86-64 Linux) as Redis's
//! `INCRBYFLOAT` and `HINCRBYFLOAT` use it: glibc `strtold` parsing, addition
//! rounded to 64 significand bits, and `%.17Lf` output with trailing zeros and
//! a trailing point removed.

use std::cmp::Ordering;
use std::fmt::Write as _;

/// Biased exponent of infinities and NaNs.
const EXP_SPECIAL: u16 = 0x7fff;
/// A finite value is `mant * 2^(max(exp, 1) - EXP_OFFSET)`.
const EXP_OFFSET: i64 = 16446;
/// Weight of the lowest significand bit of the smallest values (subnormals).
const MIN_LSB: i64 = -16445;
/// The explicit integer bit of a normal significand.
const INT_BIT: u64 = 1 << 63;
/// Significant decimal digits kept while parsing; further digits only count as
/// "something non-zero follows". Every rounding boundary of the format has
/// fewer significant digits than this, so the result is unaffected.
const MAX_DIGITS: usize = 12_000;
/// Parsed exponents saturate at this magnitude (far outside the format's range).
const EXP_CAP: i64 = 1_000_000_000_000_000;
/// 10^17: the scale of `%.17Lf`.
const TEN_POW_17: u128 = 100_000_000_000_000_000;
/// 10^19: the largest power of ten in a `u64`.
const TEN_POW_19: u64 = 10_000_000_000_000_000_000;

/// An x87 80-bit extended value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongDouble {
    /// Sign bit.
    neg: bool,
    /// Biased 15-bit exponent: 0 for zeros and subnormals, 0x7fff for
    /// infinities and NaNs.
    exp: u16,
    /// 64-bit significand with an explicit integer bit.
    mant: u64,
}

impl LongDouble {
    /// Positive zero.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        exp: 0,
        mant: 0,
    };

    /// Parses like strtold over the whole input (None if any byte is left over or the input is empty).
    ///
    /// Accepts what glibc's `strtold` accepts in the C locale: leading white
    /// space, an optional sign, then a decimal number (digits with an optional
    /// point, optional `e`/`E` exponent), a hexadecimal number (`0x` prefix,
    /// optional `p`/`P` binary exponent), `inf`/`infinity` or `nan`/`nan(...)`,
    /// all letters case-insensitive. The value is correctly rounded (ties to
    /// even), except that, as in glibc, a hexadecimal input of exactly
    /// 2^-16446 + 2^-16510 gives zero rather than the smallest subnormal. A
    /// finite number too large for the format gives infinity and one too small
    /// gives zero, which is the value `strtold` returns; Redis refuses both (it
    /// sees `ERANGE`), as it refuses NaN, white space and input of 5120 bytes
    /// or more.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        let (value, used) = parse_prefix(s)?;
        if used == s.len() {
            Some(value)
        } else {
            None
        }
    }

    /// Whether this is a NaN.
    pub fn is_nan(self) -> bool {
        self.exp == EXP_SPECIAL && self.mant != INT_BIT
    }

    /// Whether this is an infinity of either sign.
    pub fn is_infinite(self) -> bool {
        self.exp == EXP_SPECIAL && self.mant == INT_BIT
    }

    /// Sum rounded to the 80-bit format.
    ///
    /// Rounds to nearest, ties to even. An exact zero sum is +0 unless both
    /// operands are -0. Infinities of opposite signs give NaN, and NaN
    /// operands give NaN.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, other: LongDouble) -> LongDouble {
        if self.is_nan() || other.is_nan() {
            return nan(false);
        }
        match (self.is_infinite(), other.is_infinite()) {
            (true, true) if self.neg != other.neg => return nan(true),
            (true, _) => return self,
            (false, true) => return other,
            (false, false) => {}
        }
        if self.mant == 0 && other.mant == 0 {
            return zero(self.neg && other.neg);
        }
        if other.mant == 0 {
            return self;
        }
        if self.mant == 0 {
            return other;
        }
        let (big, small) = if self.lsb() >= other.lsb() {
            (self, other)
        } else {
            (other, self)
        };
        // 62 guard bits below the larger operand's significand leave room
        // for the carry of an addition within a u128.
        const GUARD: i64 = 62;
        let a = u128::from(big.mant) << GUARD;
        let e2 = big.lsb() - GUARD;
        let b_full = u128::from(small.mant) << GUARD;
        let d = big.lsb() - small.lsb();
        let (b, sticky) = if d >= 128 {
            (0, true)
        } else {
            let d = d as u32;
            let lost = if d == 0 {
                false
            } else {
                b_full & ((1u128 << d) - 1) != 0
            };
            (b_full >> d, lost)
        };
        if big.neg == small.neg {
            return round_pack(big.neg, a + b, e2, sticky);
        }
        // Opposite signs. Bits are only lost when the operands are far apart,
        // so then `a` is well above `b` and the exact difference lies strictly
        // between `a - b - 1` and `a - b`.
        if sticky {
            return round_pack(big.neg, a - b - 1, e2, true);
        }
        match a.cmp(&b) {
            Ordering::Greater => round_pack(big.neg, a - b, e2, false),
            Ordering::Less => round_pack(small.neg, b - a, e2, false),
            Ordering::Equal => LongDouble::ZERO,
        }
    }

    /// The double `x`, exactly (every double is a `long double`).
    pub fn from_f64(x: f64) -> LongDouble {
        let bits = x.to_bits();
        let neg = bits >> 63 == 1;
        let e = ((bits >> 52) & 0x7ff) as u16;
        let m = bits & ((1 << 52) - 1);
        match e {
            0x7ff if m == 0 => inf(neg),
            0x7ff => LongDouble {
                neg,
                exp: EXP_SPECIAL,
                mant: INT_BIT | (1 << 62),
            },
            0 if m == 0 => zero(neg),
            // Subnormal: normalize (the extended format's range holds it as a normal value).
            0 => {
                let lz = m.leading_zeros() as u16;
                LongDouble {
                    neg,
                    exp: 15372 - lz,
                    mant: m << lz,
                }
            }
            _ => LongDouble {
                neg,
                exp: e + 15360,
                mant: INT_BIT | (m << 11),
            },
        }
    }

    /// "%.17Lf" with trailing zeros and a trailing point removed.
    ///
    /// The exact binary value is rounded to 17 decimals, ties to even. Redis
    /// turns a result of `-0` into `0`, so a negative zero, and any negative
    /// value that rounds to zero at 17 decimals, give `"0"`. Infinities give
    /// `inf`/`-inf` and NaNs `nan`/`-nan`.
    pub fn to_human(self) -> String {
        if self.is_nan() {
            return if self.neg { "-nan" } else { "nan" }.to_string();
        }
        if self.is_infinite() {
            return if self.neg { "-inf" } else { "inf" }.to_string();
        }
        let lsb = self.lsb();
        let body = if self.mant == 0 {
            "0".to_string()
        } else if lsb >= 64 {
            let mut big = Big::from_u64(self.mant);
            big.shl(lsb as u64);
            big.to_decimal()
        } else if lsb >= 0 {
            (u128::from(self.mant) << lsb).to_string()
        } else {
            fixed17(self.mant, (-lsb) as u32)
        };
        if self.neg && body != "0" {
            format!("-{body}")
        } else {
            body
        }
    }

    /// Weight (power of two) of the lowest significand bit of a finite value.
    fn lsb(self) -> i64 {
        i64::from(self.exp.max(1)) - EXP_OFFSET
    }
}

/// A zero of the given sign.
fn zero(neg: bool) -> LongDouble {
    LongDouble {
        neg,
        exp: 0,
        mant: 0,
    }
}

/// An infinity of the given sign.
fn inf(neg: bool) -> LongDouble {
    LongDouble {
        neg,
        exp: EXP_SPECIAL,
        mant: INT_BIT,
    }
}

/// A quiet NaN of the given sign.
fn nan(neg: bool) -> LongDouble {
    LongDouble {
        neg,
        exp: EXP_SPECIAL,
        mant: INT_BIT | (INT_BIT >> 1),
    }
}

/// `mant * 2^-shift` correctly rounded (ties to even) to 17 decimals, with
/// trailing zeros and a trailing point removed.
fn fixed17(mant: u64, shift: u32) -> String {
    // mant * 10^17 < 2^121.
    let p = u128::from(mant) * TEN_POW_17;
    let n = if shift >= 128 {
        0
    } else {
        let q = p >> shift;
        let half = (p >> (shift - 1)) & 1 == 1;
        let rest = p & ((1u128 << (shift - 1)) - 1) != 0;
        if half && (rest || q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    let int = n / TEN_POW_17;
    let frac = n % TEN_POW_17;
    if frac == 0 {
        return int.to_string();
    }
    let digits = format!("{frac:017}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

/// Rounds `(m + f) * 2^e2` to the format, ties to even, where `f` is zero
/// when `sticky` is false and strictly between 0 and 1 otherwise. Callers
/// pass `sticky` only with `m` at least 2^65, so that `f` lies below the
/// rounding bit.
fn round_pack(neg: bool, m: u128, e2: i64, sticky: bool) -> LongDouble {
    if m == 0 {
        return zero(neg);
    }
    let len = i64::from(128 - m.leading_zeros());
    let top = len - 1 + e2;
    let mut lsb = (top - 63).max(MIN_LSB);
    let shift = lsb - e2;
    let mant: u128 = if shift <= 0 {
        // Exact: `len - shift <= 64`.
        m << ((-shift) as u32)
    } else {
        let (q, half, rest) = if shift > 128 {
            (0, false, true)
        } else if shift == 128 {
            (0, m >> 127 == 1, m & ((1u128 << 127) - 1) != 0)
        } else {
            let s = shift as u32;
            (
                m >> s,
                (m >> (s - 1)) & 1 == 1,
                m & ((1u128 << (s - 1)) - 1) != 0,
            )
        };
        let mut q = q;
        if half && (rest || sticky || q & 1 == 1) {
            q += 1;
        }
        if q == 1u128 << 64 {
            q = 1u128 << 63;
            lsb += 1;
        }
        q
    };
    if mant == 0 {
        return zero(neg);
    }
    let mant = mant as u64;
    if mant & INT_BIT == 0 {
        // Subnormal: `lsb` is MIN_LSB.
        return LongDouble { neg, exp: 0, mant };
    }
    let exp = lsb + EXP_OFFSET;
    if exp >= i64::from(EXP_SPECIAL) {
        return inf(neg);
    }
    LongDouble {
        neg,
        exp: exp as u16,
        mant,
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

fn hex_value(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

/// Reads an exponent's digits after the `e`/`p` at `s[i]`: returns the
/// (saturated) signed value and the index after it, or `None` when no digit
/// follows (the exponent is then not part of the number).
fn parse_exponent(s: &[u8], mut i: usize) -> Option<(i64, usize)> {
    i += 1;
    let mut neg = false;
    match s.get(i) {
        Some(b'-') => {
            neg = true;
            i += 1;
        }
        Some(b'+') => i += 1,
        _ => {}
    }
    if !s.get(i).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    while let Some(&c) = s.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        v = (v * 10 + i64::from(c - b'0')).min(EXP_CAP);
        i += 1;
    }
    Some((if neg { -v } else { v }, i))
}

/// The longest prefix `strtold` converts: its value and length. `None` when
/// no conversion is performed.
fn parse_prefix(s: &[u8]) -> Option<(LongDouble, usize)> {
    let mut i = 0;
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    match s.get(i) {
        Some(b'-') => {
            neg = true;
            i += 1;
        }
        Some(b'+') => i += 1,
        _ => {}
    }
    let rest = &s[i..];
    if starts_with_ci(rest, b"inf") {
        let n = if starts_with_ci(&rest[3..], b"inity") {
            8
        } else {
            3
        };
        return Some((inf(neg), i + n));
    }
    if starts_with_ci(rest, b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let mut j = 4;
            while rest
                .get(j)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                j += 1;
            }
            if rest.get(j) == Some(&b')') {
                n = j + 1;
            }
        }
        return Some((nan(neg), i + n));
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        return Some(match parse_hex(neg, s, i + 2) {
            Some(r) => r,
            // "0x" without hexadecimal digits converts just the "0".
            None => (zero(neg), i + 1),
        });
    }
    parse_decimal(neg, s, i)
}

/// A hexadecimal number whose digits start at `s[i]` (after "0x").
fn parse_hex(neg: bool, s: &[u8], mut i: usize) -> Option<(LongDouble, usize)> {
    let mut m: u128 = 0;
    let mut kept = 0u32;
    let mut e2: i64 = 0;
    let mut sticky = false;
    let mut any = false;
    let mut take = |d: u32, frac: bool, m: &mut u128, e2: &mut i64| {
        if kept == 0 && d == 0 {
            if frac {
                *e2 -= 4;
            }
        } else if kept < 32 {
            *m = (*m << 4) | u128::from(d);
            kept += 1;
            if frac {
                *e2 -= 4;
            }
        } else {
            sticky |= d != 0;
            if !frac {
                *e2 += 4;
            }
        }
    };
    while let Some(d) = s.get(i).copied().and_then(hex_value) {
        take(d, false, &mut m, &mut e2);
        any = true;
        i += 1;
    }
    if s.get(i) == Some(&b'.') {
        let mut j = i + 1;
        let mut frac_any = false;
        while let Some(d) = s.get(j).copied().and_then(hex_value) {
            take(d, true, &mut m, &mut e2);
            frac_any = true;
            j += 1;
        }
        if any || frac_any {
            any = true;
            i = j;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        if let Some((p, j)) = parse_exponent(s, i) {
            e2 = e2.saturating_add(p);
            i = j;
        }
    }
    if m == 0 {
        return Some((zero(neg), i));
    }
    // glibc drops the bit 2^-64 below the leading bit when the leading bit
    // has weight 2^-16446 (half the smallest subnormal), so such a value
    // rounds to zero unless some other bit below the leading one is set.
    let len = i64::from(128 - m.leading_zeros());
    if len - 1 + e2 == -16446 {
        let bit = -16510 - e2;
        if (0..128).contains(&bit) {
            m &= !(1u128 << bit);
        }
    }
    Some((round_pack(neg, m, e2, sticky), i))
}

/// A decimal number starting at `s[i]`, or `None` if there is no digit.
fn parse_decimal(neg: bool, s: &[u8], mut i: usize) -> Option<(LongDouble, usize)> {
    let mut digits: Vec<u8> = Vec::new();
    let mut e10: i64 = 0;
    let mut truncated = false;
    let mut any = false;
    while let Some(&c) = s.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        let d = c - b'0';
        if !digits.is_empty() || d != 0 {
            if digits.len() < MAX_DIGITS {
                digits.push(d);
            } else {
                truncated |= d != 0;
                e10 += 1;
            }
        }
        any = true;
        i += 1;
    }
    if s.get(i) == Some(&b'.') {
        let mut j = i + 1;
        let mut frac_any = false;
        while let Some(&c) = s.get(j) {
            if !c.is_ascii_digit() {
                break;
            }
            let d = c - b'0';
            if !digits.is_empty() || d != 0 {
                if digits.len() < MAX_DIGITS {
                    digits.push(d);
                    e10 -= 1;
                } else {
                    truncated |= d != 0;
                }
            } else {
                e10 -= 1;
            }
            frac_any = true;
            j += 1;
        }
        if any || frac_any {
            any = true;
            i = j;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        if let Some((e, j)) = parse_exponent(s, i) {
            e10 = e10.saturating_add(e);
            i = j;
        }
    }
    Some((decimal_value(neg, digits, e10, truncated), i))
}

/// The value of the digits `digits` (most significant first, the first
/// non-zero) times 10^e10, plus something below the last digit when
/// `truncated`, correctly rounded.
fn decimal_value(neg: bool, mut digits: Vec<u8>, mut e10: i64, truncated: bool) -> LongDouble {
    if truncated {
        // Strictly between the kept digits and their successor.
        digits.push(1);
        e10 -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
        e10 += 1;
    }
    if digits.is_empty() {
        return zero(neg);
    }
    let n = digits.len() as i64;
    // At least 10^4933: above the largest finite value and its rounding range.
    if n + e10 > 4933 {
        return inf(neg);
    }
    // Below 10^-4952: under half the smallest subnormal.
    if n + e10 < -4951 {
        return zero(neg);
    }
    let d = Big::from_digits(&digits);
    if e10 >= 0 {
        let mut m = d;
        m.mul_pow10(e10 as u64);
        let (top, shift, sticky) = m.top_u128();
        return round_pack(neg, top, shift as i64, sticky);
    }
    // value = d / 10^-e10: a quotient of 66 or 67 bits and a remainder.
    let den = Big::pow10((-e10) as u64);
    let s = 66 + den.bit_len() as i64 - d.bit_len() as i64;
    let (num, den) = if s >= 0 {
        let mut num = d;
        num.shl(s as u64);
        (num, den)
    } else {
        let mut den = den;
        den.shl((-s) as u64);
        (d, den)
    };
    let (q, rem_nonzero) = num.div_small_quotient(den);
    round_pack(neg, q, -s, rem_nonzero)
}

/// An unsigned big integer: little-endian 64-bit limbs, no high zero limbs.
#[derive(Clone, Debug)]
struct Big {
    limbs: Vec<u64>,
}

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big { limbs: vec![v] };
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    /// `self = self * mul + add`.
    fn mul_add_small(&mut self, mul: u64, add: u64) {
        let mut carry = u128::from(add);
        for limb in &mut self.limbs {
            let t = u128::from(*limb) * u128::from(mul) + carry;
            *limb = t as u64;
            carry = t >> 64;
        }
        if carry != 0 {
            self.limbs.push(carry as u64);
        }
        self.trim();
    }

    /// The integer written by decimal digit values (most significant first).
    fn from_digits(digits: &[u8]) -> Big {
        let mut b = Big { limbs: Vec::new() };
        for chunk in digits.chunks(19) {
            let mut scale = 1u64;
            let mut v = 0u64;
            for &d in chunk {
                v = v * 10 + u64::from(d);
                scale *= 10;
            }
            b.mul_add_small(scale, v);
        }
        b
    }

    fn mul_pow10(&mut self, mut n: u64) {
        while n >= 19 {
            self.mul_add_small(TEN_POW_19, 0);
            n -= 19;
        }
        if n > 0 {
            self.mul_add_small(10u64.pow(n as u32), 0);
        }
    }

    fn pow10(n: u64) -> Big {
        let mut b = Big::from_u64(1);
        b.mul_pow10(n);
        b
    }

    fn bit_len(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(&top) => self.limbs.len() as u64 * 64 - u64::from(top.leading_zeros()),
        }
    }

    fn shl(&mut self, bits: u64) {
        if self.limbs.is_empty() {
            return;
        }
        let words = (bits / 64) as usize;
        let b = (bits % 64) as u32;
        if b > 0 {
            let mut carry = 0u64;
            for limb in &mut self.limbs {
                let next = *limb >> (64 - b);
                *limb = (*limb << b) | carry;
                carry = next;
            }
            if carry != 0 {
                self.limbs.push(carry);
            }
        }
        if words > 0 {
            let mut v = vec![0u64; words];
            v.extend_from_slice(&self.limbs);
            self.limbs = v;
        }
    }

    fn shr1(&mut self) {
        let mut carry = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let next = *limb << 63;
            *limb = (*limb >> 1) | carry;
            carry = next;
        }
        self.trim();
    }

    fn cmp_big(&self, other: &Big) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// `self -= other`, for `self >= other`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = false;
        for (i, limb) in self.limbs.iter_mut().enumerate() {
            let o = other.limbs.get(i).copied().unwrap_or(0);
            let (v1, b1) = limb.overflowing_sub(o);
            let (v2, b2) = v1.overflowing_sub(u64::from(borrow));
            *limb = v2;
            borrow = b1 || b2;
        }
        self.trim();
    }

    /// `self / den` for a quotient under 2^128, and whether a remainder is
    /// left. Quotient bits beyond 127 are not computed.
    fn div_small_quotient(mut self, den: Big) -> (u128, bool) {
        let k = self.bit_len().saturating_sub(den.bit_len()).min(127);
        let mut shifted = den;
        shifted.shl(k);
        let mut q: u128 = 0;
        for i in (0..=k).rev() {
            if self.cmp_big(&shifted) != Ordering::Less {
                self.sub_assign(&shifted);
                q |= 1u128 << i;
            }
            shifted.shr1();
        }
        (q, !self.limbs.is_empty())
    }

    /// The top 128 bits (or the whole value when shorter), how far they were
    /// shifted down, and whether any bit below them is set.
    fn top_u128(&self) -> (u128, u64, bool) {
        let len = self.bit_len();
        if len <= 128 {
            let lo = u128::from(self.limbs.first().copied().unwrap_or(0));
            let hi = u128::from(self.limbs.get(1).copied().unwrap_or(0));
            return (lo | (hi << 64), 0, false);
        }
        let shift = len - 128;
        let word = (shift / 64) as usize;
        let b = (shift % 64) as u32;
        let limb = |i: usize| u128::from(self.limbs.get(i).copied().unwrap_or(0));
        let window = limb(word) | (limb(word + 1) << 64);
        let top = if b == 0 {
            window
        } else {
            (window >> b) | (limb(word + 2) << (128 - b))
        };
        let low_words = self.limbs[..word].iter().any(|&l| l != 0);
        let low_bits = b > 0 && self.limbs[word] & ((1u64 << b) - 1) != 0;
        (top, shift, low_words || low_bits)
    }

    fn to_decimal(&self) -> String {
        let mut chunks: Vec<u64> = Vec::new();
        let mut cur = self.limbs.clone();
        while !cur.is_empty() {
            let mut rem = 0u128;
            for limb in cur.iter_mut().rev() {
                let t = (rem << 64) | u128::from(*limb);
                *limb = (t / u128::from(TEN_POW_19)) as u64;
                rem = t % u128::from(TEN_POW_19);
            }
            while cur.last() == Some(&0) {
                cur.pop();
            }
            chunks.push(rem as u64);
        }
        let mut out = match chunks.pop() {
            None => return "0".to_string(),
            Some(top) => top.to_string(),
        };
        for c in chunks.iter().rev() {
            let _ = write!(out, "{c:019}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_convert_exactly() {
        for (x, want) in [
            (1.0, "1"),
            (-2.5, "-2.5"),
            (13.361389338970184, "13.36138933897018433"),
            (0.1, "0.10000000000000001"),
            (1e-310, "0"),
        ] {
            assert_eq!(LongDouble::from_f64(x).to_human(), want, "{x}");
        }
        assert_eq!(LongDouble::from_f64(f64::INFINITY).to_human(), "inf");
        assert_eq!(
            LongDouble::parse(b"0x1p-1074"),
            Some(LongDouble::from_f64(5e-324))
        );
    }

    fn ld(s: &str) -> LongDouble {
        match LongDouble::parse(s.as_bytes()) {
            Some(v) => v,
            None => panic!("failed to parse {s:?}"),
        }
    }

    fn incr(a: &str, b: &str) -> String {
        ld(a).add(ld(b)).to_human()
    }

    #[test]
    fn redis_replies() {
        let mut v = LongDouble::ZERO;
        let mut seen = Vec::new();
        for _ in 0..3 {
            v = v.add(ld("0.1"));
            seen.push(v.to_human());
        }
        assert_eq!(seen, ["0.1", "0.2", "0.3"]);
        assert_eq!(incr("10.5", "0.1"), "10.6");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("-6248", "1e-5"), "-6247.99998999999999993");
        assert_eq!(
            incr("1e308", "1e308"),
            "199999999999999999993371759311691291321120199694831134415594095989843469737676123744200253843777078640893494450108026446304269499187921167194841628860392837535918200039206381557326219209014213335878306791577877829121087126122536729803237260434173178506889763247582601711514636284849020905456510092687857156096"
        );
        assert_eq!(incr("13", "1.23456789012345678"), "14.23456789012345678");
        assert_eq!(incr("150", "12345678901234567890"), "12345678901234568040");
        assert_eq!(incr("9223372036854775807", "1"), "9223372036854775808");
        assert_eq!(incr("9223372036854775807", "0"), "9223372036854775807");
        assert_eq!(incr("3.0e3", "0"), "3000");
        assert_eq!(incr("1.5", "-1.5"), "0");
    }

    #[test]
    fn more_redis_replies() {
        let cases = [
            ("0", "0.000003814697265625", "0.00000381469726562"),
            ("0", "0.000003814697265635", "0.00000381469726563"),
            ("0", "1e-20", "0"),
            ("0", "-1e-20", "0"),
            ("-0", "-0", "0"),
            ("0", "0x10", "16"),
            ("0", "0x1.8p1", "3"),
            ("0", "0X1P3", "8"),
            ("0", "0x.8", "0.5"),
            ("0", "0x8.", "8"),
            ("0", "0x1e5", "485"),
            ("0", "5.", "5"),
            ("0", ".5", "0.5"),
            ("0", "+5", "5"),
            ("0", "1e+5", "100000"),
            ("0", "1E-2", "0.01"),
            ("0", "0e99999", "0"),
            ("0", "1e-4940", "0"),
            ("0", "1.9e-4951", "0"),
        ];
        for (a, b, want) in cases {
            assert_eq!(incr(a, b), want, "{a} + {b}");
        }
    }

    #[test]
    fn extremes() {
        let max = "1189731495357231765021263853030970205169063322294624200440323733891737005522970722616410290336528882853545697807495577314427443153670288434198125573853743678673593200706973263201915918282961524365529510646791086614311790632169778838896134786560600399148753433211454911160088679845154866512852340149773037600009125479393966223151383622417838542743917838138717805889487540575168226347659235576974805113725649020884855222494791399377585026011773549180099796226026859508558883608159846900235645132346594476384939859276456284579661772930407806609229102715046085388087959327781622986827547830768080040150694942303411728957777100335714010559775242124057347007386251660110828379119623008469277200965153500208474470792443848545912886723000619085126472111951361467527633519562927597957250278002980795904193139603021470997035276467445530922022679656280991498232083329641241038509239184734786121921697210543484287048353408113042573002216421348917347174234800714880751002064390517234247656004721768096486107994943415703476320643558624207443504424380566136017608837478165389027809576975977286860071487028287955567141404632615832623602762896316173978484254486860609948270867968048078702511858930838546584223040908805996294594586201903766048446790926002225410530775901065760671347200125846406957030257138960983757998926954553052368560758683179223113639519468850880771872104705203957587480013143131444254943919940175753169339392366881856189129931729104252921236835159922322050998001677102784035360140829296398115122877768135706045789343535451696539561254048846447169786893211671087229088082778350518228857646062218739702851655083720992349483334435228984751232753726636066213902281264706234075352071724058665079518217303463782631353393706774901950197841690441824738063162828586857741432581165364040218402724913393320949219498422442730427019873044536620350262386957804682003601447291997123095530057206141866974852846856186514832715974481203121946751686379343096189615107330065552421485195201762858595091051839472502863871632494167613804996319791441870254302706758495192008837915169401581740046711477877201459644461175204059453504764721807975761111720846273639279600339670470037613374509553184150073796412605047923251661354841291884211340823015473304754067072818763503617332908005951896325207071673904547777129682265206225651439919376804400292380903112437912614776255964694221981375146967079446870358004392507659451618379811859392049544036114915310782251072691486979809240946772142727012404377187409216756613634938900451232351668146089322400697993176017805338191849981933008410985993938760292601390911414526003720284872132411955424282101831204216104467404621635336900583664606591156298764745525068145003932941404131495400677602951005962253022823003631473824681059648442441324864573137437595096416168048024129351876204668135636877532814675538798871771836512893947195335061885003267607354388673368002074387849657014576090349857571243045102038730494854256702479339322809110526041538528994849203991091946129912491633289917998094380337879522093131466946149705939664152375949285890960489916121944989986384837022486672249148924678410206183364627416969576307632480235587975245253737035433882960862753427740016333434055083537048507374544819754722228975281083020898682633020285259923084168054539687911418297629988964576482765287504562854924265165217750799516259669229114977788962356670956627138482018191348321687995863652637620978285070099337294396784639879024914514222742527006363942327998483976739987154418554201562244154926653014515504685489258620276085761837129763358761215382565129633538141663949516556000264159186554850057052611431952919918807954522394649627635630178580896692226406235382898535867595990647008385687123810329591926494846250768992258419305480763620215089022149220528069842018350840586938493815498909445461977893029113576516775406232278298314033473276603952231603422824717528181818844304880921321933550869873395861276073670866652375555675803171490108477320096424318780070008797346032906278943553743564448851907191616455141155761939399690767415156402826543664026760095087523945507341556135867933066031744720924446513532366647649735400851967040771103640538150073486891798364049570606189535005089840913826869535090066783324472578712196604415284924840041850932811908963634175739897166596000759487800619164094854338758520657116541072260996288150123144377944008749301944744330784388995701842710004808305012177123560622895076269042856800047718893158089358515593863176652948089031267747029662545110861548958395087796755464137944895960527975209874813839762578592105756284401759349324162148339565350189196811389091843795734703269406342890087805846940352453479398080674273236297887100867175802531561302356064878709259865288416350972529537091114317204887747405539054009425375424119317944175137064689643861517718849867010341532542385911089624710885385808688837777258648564145934262121086647588489260031762345960769508849149662444156604419552086811989770240";
        assert_eq!(incr("0", "1.18973149535723176502e4932"), max);
        assert_eq!(incr("0", "-0x1.fffffffffffffffep16383"), format!("-{max}"));
        assert!(ld("1.18973149535723176509e4932").is_infinite());
        assert!(ld("0x1.ffffffffffffffffp16383").is_infinite());
        assert!(ld("1e4932").add(ld("1e4932")).is_infinite());
        assert!(ld("1e99999").is_infinite());
        assert!(ld("-1e99999").is_infinite());
        assert_eq!(ld("1e-99999"), LongDouble::ZERO);
        assert_eq!(ld("1.8e-4951"), LongDouble::ZERO);
        assert_eq!(ld("0x1p-16446"), LongDouble::ZERO);
        // The smallest subnormal, 2^-16445.
        let min = ld("0x1p-16445");
        assert_eq!(ld("1.9e-4951"), min);
        assert_eq!(ld("3.6e-4951"), min);
        assert_eq!(ld("0x1.00000000000000008p-16446"), min);
        assert_eq!(ld("0x1.0000000000000003p-16446"), min);
        // glibc rounds exactly 2^-16446 + 2^-16510 to zero.
        assert_eq!(ld("0x1.0000000000000001p-16446"), LongDouble::ZERO);
        assert_eq!(ld("0x10000000000000001p-16510"), LongDouble::ZERO);
        assert_eq!(
            ld("-0x1.0000000000000001p-16446").to_human(),
            ld("-0").to_human()
        );
        assert_eq!(min.add(min), ld("0x1p-16444"));
        assert_eq!(
            ld("0x1p-16382").add(ld("-0x1p-16445")),
            ld("0x0.fffffffffffffffep-16382")
        );
    }

    #[test]
    fn special_values_and_syntax() {
        for s in ["inf", "-inf", "INF", "InFiNiTy", "+infinity"] {
            assert!(ld(s).is_infinite(), "{s}");
        }
        for s in ["nan", "-nan", "NaN", "nan()", "nan(abc_12)"] {
            assert!(ld(s).is_nan(), "{s}");
        }
        assert!(ld("inf").add(ld("-inf")).is_nan());
        assert!(ld("inf").add(ld("1")).is_infinite());
        assert!(ld("nan").add(ld("1")).is_nan());
        assert!(!ld("1").is_nan() && !ld("1").is_infinite());
        assert_eq!(ld(" 1"), ld("1"));
        assert_eq!(ld("\t\n-2"), ld("-2"));
        for s in [
            "", " ", "1 ", "-", "+", ".", "e5", ".e5", "1e", "1e+", "1e-", "0x", "0xg", "0x.",
            "0x.p1", "0xp1", "0x1p", "infin", "nan(", "nan(a", "nan(a-b)", "+-5", "--5", "1.2.3",
            "1\0", "\0", "1\0abc", "abc", "1_000", "0x1.8q",
        ] {
            assert_eq!(LongDouble::parse(s.as_bytes()), None, "{s:?}");
        }
        assert_eq!(ld("0.e5"), LongDouble::ZERO);
        assert_eq!(ld("0x0p1"), LongDouble::ZERO);
        assert_eq!(ld("-0").to_human(), "0");
        assert_eq!(ld("-0"), zero(true));
        assert_eq!(ld("0").add(ld("-0")), LongDouble::ZERO);
        assert_eq!(ld("-0").add(ld("-0")), zero(true));
        assert_eq!(ld("inf").to_human(), "inf");
        assert_eq!(ld("-inf").to_human(), "-inf");
        assert_eq!(ld("nan").to_human(), "nan");
    }

    #[test]
    fn long_inputs() {
        // 0.1 written with 20000 digits and a nonzero tail: just above 0.1.
        let mut s = "0.1".to_string();
        s.push_str(&"0".repeat(20_000));
        s.push('1');
        assert_eq!(ld(&s), ld("0.1"));
        let ones = "1".repeat(30_000);
        assert!(ld(&ones).is_infinite());
        assert_eq!(
            ld(&format!("{ones}e-30000")).to_human(),
            "0.11111111111111111"
        );
        assert_eq!(ld(&format!("0.{}1", "0".repeat(6000))), LongDouble::ZERO);
        assert_eq!(ld(&format!("{}1", "0".repeat(6000))), ld("1"));
        assert_eq!(ld(&format!("1{}e-6000", "0".repeat(6000))), ld("1"));
        assert_eq!(ld(&format!("0x1{}p-400", "0".repeat(100))), ld("1"));
        assert_eq!(ld("1e99999999999999999999999999999999").to_human(), "inf");
        assert_eq!(ld("1e-99999999999999999999999999999999"), LongDouble::ZERO);
        assert_eq!(ld("0e99999999999999999999999999999999"), LongDouble::ZERO);
        assert_eq!(ld("0x1p99999999999999999999999999999").to_human(), "inf");
        assert_eq!(ld("0x1p-99999999999999999999999999"), LongDouble::ZERO);
    }

    #[test]
    fn rounding() {
        // 2^64 + 1 rounds to 2^64 (tie, even); 2^64 + 3 rounds up.
        assert_eq!(
            ld("18446744073709551617").to_human(),
            "18446744073709551616"
        );
        assert_eq!(
            ld("18446744073709551619").to_human(),
            "18446744073709551620"
        );
        assert_eq!(incr("18446744073709551616", "1"), "18446744073709551616");
        assert_eq!(incr("18446744073709551616", "3"), "18446744073709551620");
        assert_eq!(incr("1", "1e-30"), "1");
        assert_eq!(incr("1e30", "-1e-30"), "1000000000000000000024696061952");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("-0.1", "0.1"), "0");
    }
}
