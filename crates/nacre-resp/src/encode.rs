//! Encoding: [`encode_command`] for what a client sends, [`encode_reply`] for what a server
//! sends (fake servers in tests, round trips through the parser).

use crate::Reply;

/// Appends a command to `out` as a RESP array of bulk strings, the form every Redis
/// command takes: `*<n>\r\n` then `$<len>\r\n<arg>\r\n` for each argument.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for arg in args {
        push_blob(out, b'$', arg);
    }
}

/// Appends `reply` to `out` in RESP3 (RESP2 for the types RESP2 has, except that
/// [`Reply::Nil`] is written as RESP3's `_`).
///
/// Simple strings and errors are written as given: a CR or LF in them makes the output
/// unparseable, as it would from a server.
pub fn encode_reply(out: &mut Vec<u8>, reply: &Reply) {
    match reply {
        Reply::Simple(s) => push_line(out, b'+', s.as_bytes()),
        Reply::Error(s) => push_line(out, b'-', s.as_bytes()),
        Reply::Integer(i) => {
            out.push(b':');
            if *i < 0 {
                out.push(b'-');
            }
            push_decimal(out, i.unsigned_abs());
            out.extend_from_slice(b"\r\n");
        }
        Reply::Bulk(b) => push_blob(out, b'$', b),
        Reply::Nil => out.extend_from_slice(b"_\r\n"),
        Reply::Array(v) => push_aggregate(out, b'*', v),
        Reply::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Reply::Double(d) => {
            let text = if d.is_nan() {
                "nan".to_string()
            } else if d.is_infinite() {
                if *d > 0.0 { "inf" } else { "-inf" }.to_string()
            } else {
                // Debug formatting is the shortest text that parses back to the same value.
                format!("{d:?}")
            };
            push_line(out, b',', text.as_bytes());
        }
        Reply::BigNumber(n) => push_line(out, b'(', n.as_bytes()),
        Reply::Verbatim { format, text } => {
            out.push(b'=');
            push_decimal(out, (format.len() + 1 + text.len()) as u64);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(format.as_bytes());
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Map(pairs) => {
            out.push(b'%');
            push_decimal(out, pairs.len() as u64);
            out.extend_from_slice(b"\r\n");
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

fn push_line(out: &mut Vec<u8>, ty: u8, line: &[u8]) {
    out.push(ty);
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

fn push_blob(out: &mut Vec<u8>, ty: u8, data: &[u8]) {
    out.push(ty);
    push_decimal(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn push_aggregate(out: &mut Vec<u8>, ty: u8, items: &[Reply]) {
    out.push(ty);
    push_decimal(out, items.len() as u64);
    out.extend_from_slice(b"\r\n");
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
