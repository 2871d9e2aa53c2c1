//! Numbers in the text forms Redis reads: strict 64-bit integers and floats as `strtod`
//! reads them. Commands (`cmd/args.rs`) and operations (`types/`) share them.

/// A 64-bit signed integer written as Redis writes it: optional `-`, no `+`, no leading
/// zeros, no spaces, at most 20 bytes.
pub fn parse_i64_strict(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// A float as Redis reads one (`strtold`: decimal or exponent form, `inf`/`-inf`; no
/// spaces; NaN refused).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with(|c: char| c.is_whitespace())
        || s.ends_with(char::is_whitespace)
    {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v: f64 = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        l if l.contains("nan") || l.contains("inf") => return None,
        l if l.trim_start_matches(['+', '-']).starts_with("0x") => parse_hex_f64(l)?,
        _ => s.parse().ok()?,
    };
    // As strtod's ERANGE, which Redis refuses: a finite text that overflows, or one with a
    // nonzero digit that underflows to zero.
    let mantissa = lower.split(['e', 'p']).next().unwrap_or("");
    let nonzero = mantissa
        .trim_start_matches(['+', '-'])
        .trim_start_matches("0x")
        .bytes()
        .any(|c| c.is_ascii_hexdigit() && c != b'0');
    if v.is_nan() || v.is_infinite() || (v == 0.0 && nonzero) {
        return None;
    }
    Some(v)
}

/// A C99 hexadecimal float (`0x1.8p3`, `-0X10`, `0x.8`), lowercase, as strtod reads one:
/// hex digits with an optional point (at least one digit), then an optional binary
/// exponent `p[+-]digits`.
fn parse_hex_f64(l: &str) -> Option<f64> {
    let (neg, rest) = match l.as_bytes().first() {
        Some(b'-') => (true, &l[1..]),
        Some(b'+') => (false, &l[1..]),
        _ => (false, l),
    };
    let body = rest.strip_prefix("0x")?;
    let (digits, exp) = match body.split_once('p') {
        Some((d, e)) => {
            let e = e.strip_prefix('+').unwrap_or(e);
            let (neg_e, num) = e.strip_prefix('-').map_or((false, e), |n| (true, n));
            if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Exponents beyond any double saturate (the value overflows or underflows).
            let n = num.parse::<i64>().unwrap_or(100_000).min(100_000);
            (d, if neg_e { -n } else { n })
        }
        None => (body, 0),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut mant: u64 = 0;
    let mut shift: i64 = 0;
    for (i, c) in int.bytes().chain(frac.bytes()).enumerate() {
        let d = u64::from((c as char).to_digit(16)?);
        if mant >> 56 == 0 {
            mant = mant * 16 + d;
            if i >= int.len() {
                shift -= 4;
            }
        } else if i < int.len() {
            // Digits past a u64's precision still scale an integer part.
            shift += 4;
        }
    }
    let e = (exp + shift).clamp(-2000, 2000) as i32;
    // Two steps keep each power of two within a double's range.
    let v = (mant as f64) * 2f64.powi(e / 2) * 2f64.powi(e - e / 2);
    Some(if neg { -v } else { v })
}

/// A Redis range `start..=end` with negative indexes from the end, clamped to `len`;
/// `None` when empty.
pub fn range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if e >= len {
        e = len - 1;
    }
    if len == 0 || s > e || s >= len || e < 0 {
        return None;
    }
    Some((s as usize, e as usize))
}
