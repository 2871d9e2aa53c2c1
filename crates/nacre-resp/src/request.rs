//! Requests as a Redis server reads them: a multibulk (an array of bulk strings) or an inline
//! command (a line of words, with Redis's quoting), with Redis's limits and its protocol error
//! messages. After a [`RequestError`] a server replies with it and closes the connection.
//!
//! [`parse_request`] looks at the start of a buffer and copies nothing until a whole request
//! is there, so a request arriving in many pieces costs a header scan per piece.

/// Longest inline request, and longest multibulk or bulk count line (Redis: 64 KiB).
pub const INLINE_MAX: usize = 64 << 10;
/// Most arguments an unauthenticated client may send in one multibulk (Redis 7).
pub const UNAUTHENTICATED_ARGS: i64 = 10;
/// Longest bulk an unauthenticated client may send (Redis 7).
pub const UNAUTHENTICATED_BULK: i64 = 16384;

/// What a request may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Longest argument (`proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk: i64,
    /// Whether the client has authenticated (or needs not): the small limits above apply to
    /// others.
    pub authenticated: bool,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk: 512 << 20,
            authenticated: true,
        }
    }
}

/// A protocol error: the message Redis replies with (after `-ERR `) before it closes the
/// connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Protocol error: {0}")]
pub struct RequestError(pub String);

/// What [`parse_request`] returns: `Ok(None)` until a request is whole, then its arguments
/// and the bytes it used.
pub type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, RequestError>;

fn err<T>(msg: impl Into<String>) -> Result<T, RequestError> {
    Err(RequestError(msg.into()))
}

/// A request at the start of `buf`: `Ok(None)` until it is whole, then its arguments and the
/// bytes it used. Empty arguments (an empty line, a multibulk of zero or fewer elements) are
/// a request a server skips without a reply.
pub fn parse_request(buf: &[u8], limits: &RequestLimits) -> Parsed {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => multibulk(buf, limits),
        Some(_) => inline(buf),
    }
}

/// The line starting at `from` (without its CRLF) and where the next one starts.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let cr = buf[from..].iter().position(|&b| b == b'\r')? + from;
    // Redis wants the `\n` present; the byte after `\r` is not checked.
    (cr + 1 < buf.len()).then(|| (&buf[from..cr], cr + 2))
}

fn number(s: &[u8]) -> Option<i64> {
    // Redis's string2ll: optional '-', digits, no leading zeros or '+', fits in i64.
    let t = std::str::from_utf8(s).ok()?;
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || t == "-0"
    {
        return None;
    }
    t.parse().ok()
}

fn multibulk(buf: &[u8], limits: &RequestLimits) -> Parsed {
    let Some((head, mut pos)) = line(buf, 1) else {
        if buf.len() > INLINE_MAX {
            return err("too big mbulk count string");
        }
        return Ok(None);
    };
    if head.len() > INLINE_MAX {
        return err("too big mbulk count string");
    }
    let n = match number(head) {
        Some(n) if n <= i64::from(i32::MAX) => n,
        _ => return err("invalid multibulk length"),
    };
    if n <= 0 {
        return Ok(Some((Vec::new(), pos)));
    }
    if !limits.authenticated && n > UNAUTHENTICATED_ARGS {
        return err("unauthenticated multibulk length");
    }
    // Where each argument lies, checked before anything is copied.
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity((n as usize).min(1024));
    for _ in 0..n {
        if pos >= buf.len() {
            return Ok(None);
        }
        let Some((hdr, after)) = line(buf, pos) else {
            if buf.len() - pos > INLINE_MAX {
                return err("too big bulk count string");
            }
            return Ok(None);
        };
        if hdr.len() > INLINE_MAX {
            return err("too big bulk count string");
        }
        if hdr.first() != Some(&b'$') {
            let got = hdr.first().copied().unwrap_or(b'\r') as char;
            return err(format!("expected '$', got '{got}'"));
        }
        let len = match number(&hdr[1..]) {
            Some(l) if l >= 0 && l <= limits.max_bulk => l,
            _ => return err("invalid bulk length"),
        };
        if !limits.authenticated && len > UNAUTHENTICATED_BULK {
            return err("unauthenticated bulk length");
        }
        let end = after + len as usize;
        if end + 2 > buf.len() {
            return Ok(None);
        }
        spans.push((after, end));
        pos = end + 2;
    }
    let args = spans.iter().map(|&(a, b)| buf[a..b].to_vec()).collect();
    Ok(Some((args, pos)))
}

fn inline(buf: &[u8]) -> Parsed {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > INLINE_MAX {
            return err("too big inline request");
        }
        return Ok(None);
    };
    if nl > INLINE_MAX {
        return err("too big inline request");
    }
    let mut text = &buf[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    match split_args(text) {
        Some(args) => Ok(Some((args, nl + 1))),
        None => err("unbalanced quotes in request"),
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// After a closing quote at `i`: where the next word may start, or `None` when a character
/// other than whitespace follows the quote.
fn closed(line: &[u8], i: usize) -> Option<usize> {
    match line.get(i + 1) {
        Some(c) if !c.is_ascii_whitespace() => None,
        _ => Some(i + 1),
    }
}

/// Splits an inline command line into words as Redis does: whitespace separates; `"..."`
/// takes `\n \r \t \b \a \\ \"` and `\xHH` escapes; `'...'` takes `\'`; a closing quote
/// must be followed by whitespace or the end. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut word = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            if dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        word.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    word.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                } else if c == b'"' {
                    i = closed(line, i)?;
                    break;
                } else {
                    word.push(c);
                    i += 1;
                }
            } else if sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    word.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    i = closed(line, i)?;
                    break;
                } else {
                    word.push(c);
                    i += 1;
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    c if c.is_ascii_whitespace() => break,
                    b'"' => dq = true,
                    b'\'' => sq = true,
                    c => word.push(c),
                }
                i += 1;
            }
        }
        out.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(buf: &[u8]) -> (Vec<Vec<u8>>, usize) {
        parse_request(buf, &RequestLimits::default())
            .expect("valid")
            .expect("whole")
    }

    fn words(ws: &[&str]) -> Vec<Vec<u8>> {
        ws.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn error(buf: &[u8]) -> String {
        parse_request(buf, &RequestLimits::default())
            .expect_err("a protocol error")
            .to_string()
    }

    #[test]
    fn multibulk_requests() {
        let b = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$3\r\nfoo\r\n*1\r\n";
        assert_eq!(ok(b), (words(&["SET", "x", "foo"]), b.len() - 4));
        assert_eq!(ok(b"*0\r\n"), (vec![], 4));
        assert_eq!(ok(b"*-10\r\n"), (vec![], 6));
        // Binary-safe, every byte value.
        let all: Vec<u8> = (0..=255).collect();
        let mut req = b"*1\r\n$256\r\n".to_vec();
        req.extend_from_slice(&all);
        req.extend_from_slice(b"\r\n");
        assert_eq!(ok(&req).0, vec![all]);
        // Every proper prefix is incomplete, never an error.
        for cut in 0..b.len() - 4 {
            assert_eq!(
                parse_request(&b[..cut], &RequestLimits::default()),
                Ok(None),
                "{cut}"
            );
        }
    }

    #[test]
    fn multibulk_errors_are_redis_messages() {
        assert_eq!(
            error(b"*20000000000\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(error(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            error(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"),
            "Protocol error: expected '$', got 'f'"
        );
        assert_eq!(
            error(b"*1\r\n$-1\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        let mut long = b"*".to_vec();
        long.resize(INLINE_MAX + 10, b'1');
        assert_eq!(error(&long), "Protocol error: too big mbulk count string");
        let small = RequestLimits {
            max_bulk: 100,
            authenticated: false,
        };
        assert_eq!(
            parse_request(b"*11\r\n", &small).unwrap_err().0,
            "unauthenticated multibulk length"
        );
        assert_eq!(
            parse_request(b"*1\r\n$101\r\n", &small).unwrap_err().0,
            "invalid bulk length"
        );
    }

    #[test]
    fn inline_requests() {
        assert_eq!(ok(b"PING\r\n"), (words(&["PING"]), 6));
        assert_eq!(ok(b"set  a  b\n"), (words(&["set", "a", "b"]), 10));
        assert_eq!(ok(b"\r\n"), (vec![], 2));
        assert_eq!(
            ok(b"set k \"a\\x41\\n\\\"q\" 'it\\'s'\r\n").0,
            vec![
                b"set".to_vec(),
                b"k".to_vec(),
                b"aA\n\"q".to_vec(),
                b"it's".to_vec()
            ]
        );
        assert_eq!(parse_request(b"PING", &RequestLimits::default()), Ok(None));
        assert_eq!(
            error(b"set \"a\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            error(b"set \"a\"b\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let long = vec![b'a'; INLINE_MAX + 1];
        assert_eq!(error(&long), "Protocol error: too big inline request");
    }
}
