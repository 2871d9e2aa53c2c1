//! Encoding: [`encode_command`] for what a client sends, [`encode_reply`] for what a server
//! sends a RESP3 client and [`encode_reply_resp2`] a RESP2 one, [`format_double`] for doubles
//! as Redis 7.0 writes them.

use crate::Reply;

/// Appends a command to `out` as a RESP array of bulk strings, the form every Redis
/// command takes: `*<n>\r\n` then `$<len>\r\n<arg>\r\n` for each argument.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_header(out, b'*', args.len() as u64);
    for arg in args {
        push_blob(out, b'$', arg);
    }
}

/// Appends `reply` to `out` in RESP3 (RESP2 for the types RESP2 has, except that
/// [`Reply::Nil`] is written as RESP3's `_`).
///
/// A CR or LF in a simple string or an error is written as a space, as Redis writes the
/// errors it echoes: a line can never turn into several replies.
pub fn encode_reply(out: &mut Vec<u8>, reply: &Reply) {
    match reply {
        Reply::Simple(s) => push_text_line(out, b'+', s.as_bytes()),
        Reply::Error(s) => push_text_line(out, b'-', s.as_bytes()),
        Reply::Integer(i) => {
            out.push(b':');
            if *i < 0 {
                out.push(b'-');
            }
            push_decimal(out, i.unsigned_abs());
            out.extend_from_slice(b"\r\n");
        }
        Reply::Bulk(b) => push_blob(out, b'$', b),
        Reply::Nil | Reply::NilArray => out.extend_from_slice(b"_\r\n"),
        Reply::Array(v) => push_aggregate(out, b'*', v),
        Reply::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Reply::Double(d) => push_line(out, b',', format_double(*d).as_bytes()),
        Reply::BigNumber(n) => push_line(out, b'(', n.as_bytes()),
        Reply::Verbatim { format, text } => {
            push_header(out, b'=', (format.len() + 1 + text.len()) as u64);
            out.extend_from_slice(format.as_bytes());
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Map(pairs) => {
            push_header(out, b'%', pairs.len() as u64);
            for (k, v) in pairs {
                encode_reply(out, k);
                encode_reply(out, v);
            }
        }
        Reply::Set(v) => push_aggregate(out, b'~', v),
        Reply::Push(v) => push_aggregate(out, b'>', v),
        Reply::BlobError(b) => push_blob(out, b'!', b),
    }
}

/// Appends `reply` as a RESP2 client reads it, RESP3's types written the way Redis 7.0 writes
/// them to such a client: a null as a null bulk string, a boolean as the integer 1 or 0, a
/// double, big number or verbatim string as a bulk string of its text, a map as a flat array
/// of keys and values, a set or push as an array, a blob error as an error line.
pub fn encode_reply_resp2(out: &mut Vec<u8>, reply: &Reply) {
    match reply {
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
        Reply::Boolean(b) => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        Reply::Double(d) => push_blob(out, b'$', format_double(*d).as_bytes()),
        Reply::BigNumber(n) => push_blob(out, b'$', n.as_bytes()),
        Reply::Verbatim { text, .. } => push_blob(out, b'$', text),
        Reply::Map(pairs) => {
            push_header(out, b'*', 2 * pairs.len() as u64);
            for (k, v) in pairs {
                encode_reply_resp2(out, k);
                encode_reply_resp2(out, v);
            }
        }
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
            push_header(out, b'*', v.len() as u64);
            for item in v {
                encode_reply_resp2(out, item);
            }
        }
        Reply::BlobError(b) => push_text_line(out, b'-', b),
        Reply::Simple(_) | Reply::Error(_) | Reply::Integer(_) | Reply::Bulk(_) => {
            encode_reply(out, reply)
        }
    }
}

/// A double as Redis 7.0 writes it (C's `%.17g`, `inf`, `-inf`, `nan`): 17 significant
/// digits, trailing zeros dropped, exponent form below 1e-4 and from 1e17 (`1e+20`). The text
/// parses back to the same value.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // 17 significant digits, correctly rounded: d.dddddddddddddddde±x.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if !(-4..17).contains(&exp) {
        let frac = digits[1..].trim_end_matches('0');
        out.push_str(&digits[..1]);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(digits.trim_end_matches('0'));
    } else {
        let point = exp as usize + 1;
        out.push_str(&digits[..point]);
        let frac = digits[point..].trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
    }
    out
}

/// `<ty><line>\r\n` with every CR and LF of `line` written as a space.
fn push_text_line(out: &mut Vec<u8>, ty: u8, line: &[u8]) {
    out.push(ty);
    out.extend(
        line.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
    );
    out.extend_from_slice(b"\r\n");
}

fn push_line(out: &mut Vec<u8>, ty: u8, line: &[u8]) {
    out.push(ty);
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

/// `<ty><n>\r\n`: the header of a blob or an aggregate.
fn push_header(out: &mut Vec<u8>, ty: u8, n: u64) {
    out.push(ty);
    push_decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

fn push_blob(out: &mut Vec<u8>, ty: u8, data: &[u8]) {
    push_header(out, ty, data.len() as u64);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn push_aggregate(out: &mut Vec<u8>, ty: u8, items: &[Reply]) {
    push_header(out, ty, items.len() as u64);
    for item in items {
        encode_reply(out, item);
    }
}

/// Appends `n` in decimal without going through `fmt`.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod resp2_tests {
    use super::*;

    #[test]
    fn doubles_as_c_printf_percent_17g() {
        // Expected texts from C's printf("%.17g").
        for (d, want) in [
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (3.0, "3"),
            (1e20, "1e+20"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e-4, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (0.000123, "0.00012300000000000001"),
            (-2.5, "-2.5"),
            (5e-324, "4.9406564584124654e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (7.3, "7.2999999999999998"),
            (100.0, "100"),
            (0.0, "0"),
            (-0.0, "-0"),
            (9007199254740992.0, "9007199254740992"),
            (1.0 / 3.0, "0.33333333333333331"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_double(d), want, "{d:?}");
            if d.is_finite() {
                assert_eq!(want.parse::<f64>().unwrap().to_bits(), d.to_bits());
            }
        }
    }

    #[test]
    fn resp3_types_downgrade_as_redis_writes_them_to_resp2_clients() {
        let cases: Vec<(Reply, &[u8])> = vec![
            (Reply::Nil, b"$-1\r\n"),
            (Reply::NilArray, b"*-1\r\n"),
            (Reply::Boolean(true), b":1\r\n"),
            (Reply::Boolean(false), b":0\r\n"),
            (Reply::Double(1.5), b"$3\r\n1.5\r\n"),
            (Reply::BigNumber("-12".into()), b"$3\r\n-12\r\n"),
            (
                Reply::Verbatim {
                    format: "txt".into(),
                    text: b"hi".to_vec(),
                },
                b"$2\r\nhi\r\n",
            ),
            (
                Reply::Map(vec![(Reply::Bulk(b"k".to_vec()), Reply::Integer(1))]),
                b"*2\r\n$1\r\nk\r\n:1\r\n",
            ),
            (Reply::Set(vec![Reply::Nil]), b"*1\r\n$-1\r\n"),
            (
                Reply::Push(vec![Reply::Simple("x".into())]),
                b"*1\r\n+x\r\n",
            ),
            (Reply::BlobError(b"ERR a\r\nb".to_vec()), b"-ERR a  b\r\n"),
            (Reply::Integer(-7), b":-7\r\n"),
        ];
        for (r, want) in cases {
            let mut out = Vec::new();
            encode_reply_resp2(&mut out, &r);
            assert_eq!(out, want, "{r:?}");
        }
    }
}
