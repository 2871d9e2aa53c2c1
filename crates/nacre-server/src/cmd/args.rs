//! Argument parsing as Redis does it: integers, floats, options, expiry times.

use nacre_resp::Reply;

use super::err;
pub use crate::num::{parse_f64, parse_i64_strict, range};

/// Redis's integer error.
pub fn not_integer() -> Reply {
    err("value is not an integer or out of range")
}

/// Redis's float error.
pub fn not_float() -> Reply {
    err("value is not a valid float")
}

/// An integer argument, or Redis's integer error.
pub fn int(b: &[u8]) -> Result<i64, Reply> {
    parse_i64_strict(b).ok_or_else(not_integer)
}

/// A float argument, or Redis's float error.
pub fn float(b: &[u8]) -> Result<f64, Reply> {
    parse_f64(b).ok_or_else(not_float)
}

/// A number as Redis reads one for `INCRBYFLOAT`/`HINCRBYFLOAT` (C `long double`): no
/// spaces around it, nothing after it, under 5120 bytes, not NaN, and not a value too large
/// or too small for the format (a literal `inf` is accepted).
pub fn long_double(b: &[u8]) -> Option<crate::longdouble::LongDouble> {
    if b.is_empty() || b.len() >= 5120 || b[0].is_ascii_whitespace() {
        return None;
    }
    let v = crate::longdouble::LongDouble::parse(b)?;
    if v.is_nan() {
        return None;
    }
    let lower = b.to_ascii_lowercase();
    if v.is_infinite() && !lower.windows(3).any(|w| w == b"inf") {
        return None;
    }
    let mantissa_digits = lower
        .iter()
        .take_while(|c| !matches!(c, b'e' | b'p'))
        .skip(usize::from(lower.starts_with(b"0x")) * 2)
        .any(|c| c.is_ascii_hexdigit() && *c != b'0');
    if v == crate::longdouble::LongDouble::ZERO && mantissa_digits {
        return None;
    }
    Some(v)
}

/// Whether `b` equals the ASCII word `w` ignoring case.
pub fn is(b: &[u8], w: &str) -> bool {
    b.eq_ignore_ascii_case(w.as_bytes())
}

/// An argument as a lowercase string (for option names).
pub fn lower(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_lowercase()
}

/// A count that must be non-negative; a bad value of any kind gets `msg` (Redis's
/// `getPositiveLongFromObjectOrReply`).
pub fn positive_or(b: &[u8], msg: &str) -> Result<i64, Reply> {
    match parse_i64_strict(b) {
        Some(v) if v >= 0 => Ok(v),
        _ => Err(err(msg)),
    }
}

/// A count that must be non-negative (`ERR value is out of range, must be positive`).
pub fn positive(b: &[u8]) -> Result<i64, Reply> {
    positive_or(b, "value is out of range, must be positive")
}

/// An expiry given as `unit` ms per tick relative to now (`EX`/`PX`) or absolute
/// (`EXAT`/`PXAT`), turned into a Unix-ms time; Redis's errors for bad values.
pub fn expire_time(
    arg: &[u8],
    unit_ms: i64,
    absolute: bool,
    now: u64,
    cmd: &str,
) -> Result<u64, Reply> {
    let v = int(arg)?;
    let invalid = || err(format!("invalid expire time in '{cmd}' command"));
    if v <= 0 {
        return Err(invalid());
    }
    let ms = v.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now as i64).ok_or_else(invalid)?
    };
    if at <= 0 {
        return Err(invalid());
    }
    Ok(at as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn floats_read_as_strtod_reads_them_for_redis() {
        for (text, want) in [
            ("0x10", Some(16.0)),
            ("0x1p4", Some(16.0)),
            ("-0x1.8p1", Some(-3.0)),
            ("0X1P-2", Some(0.25)),
            ("0x.8", Some(0.5)),
            ("0x", None),
            ("0x1p", None),
            ("0x1p99999", None),
            ("0x1p-99999", None),
            ("1e999", None),
            ("1e-999", None),
            ("0e-999", Some(0.0)),
            ("1e-310", Some(1e-310)),
            ("  1", None),
            ("1.", Some(1.0)),
            (".5", Some(0.5)),
            ("+5", Some(5.0)),
            ("0x10 ", None),
            ("inf", Some(f64::INFINITY)),
            ("nan", None),
        ] {
            assert_eq!(parse_f64(text.as_bytes()), want, "{text}");
        }
    }

    use super::*;

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_i64_strict(b"0"), Some(0));
        assert_eq!(parse_i64_strict(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64_strict(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            &b"9223372036854775808"[..],
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"-0",
            b"1.0",
            b"abc",
        ] {
            assert_eq!(
                parse_i64_strict(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn floats_as_redis_reads_them() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        for bad in [&b"nan"[..], b" 1", b"1 ", b"", b"abc", b"1e"] {
            assert_eq!(parse_f64(bad), None);
        }
    }

    #[test]
    fn ranges_clamp() {
        assert_eq!(range(0, -1, 5), Some((0, 4)));
        assert_eq!(range(-100, 100, 5), Some((0, 4)));
        assert_eq!(range(3, 1, 5), None);
        assert_eq!(range(0, -1, 0), None);
        assert_eq!(range(5, 10, 5), None);
    }
}
