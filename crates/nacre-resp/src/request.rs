//! Requests as a Redis server reads them: a multibulk (an array of bulk strings) or an inline
//! command (a line of words, with Redis's quoting), with Redis's limits and its protocol error
//! messages. After a [`RequestError`] a server replies with it and closes the connection.
//!
//! [`RequestParser`] resumes a request that arrives in pieces where it stopped, so a request
//! costs time linear in its size however it is split; [`parse_request`] is the same parse
//! without memory, for one buffer.

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
    RequestParser::default().parse(buf, limits)
}

/// A request parser for one connection: it remembers how far an incomplete request was
/// checked, so each call costs time in the bytes that arrived since, not in the request's
/// size.
///
/// Contract: between a call that returned `Ok(None)` and the one that completes the request,
/// `buf` starts at the same request and only grows at its end. After `Ok(Some)` or `Err` the
/// parser starts afresh at the next call.
#[derive(Debug, Default)]
pub struct RequestParser {
    partial: Option<Partial>,
}

/// How far an incomplete request was checked.
#[derive(Debug)]
enum Partial {
    /// A multibulk of `n` arguments: the `spans` checked so far, where the next argument's
    /// header starts, and how many bytes must be there before it is worth looking again.
    Multi {
        n: usize,
        spans: Vec<(usize, usize)>,
        pos: usize,
        need: usize,
    },
    /// An inline request: the first `scanned` bytes hold no line feed.
    Inline { scanned: usize },
}

impl RequestParser {
    /// The next request at the start of `buf` (see the contract above).
    pub fn parse(&mut self, buf: &[u8], limits: &RequestLimits) -> Parsed {
        let out = match buf.first() {
            None => Ok(None),
            Some(b'*') => self.multibulk(buf, limits),
            Some(_) => self.inline(buf),
        };
        if !matches!(out, Ok(None)) {
            self.partial = None;
        }
        out
    }

    /// Forgets an incomplete request (the connection dropped its bytes).
    pub fn reset(&mut self) {
        self.partial = None;
    }

    /// Whether a request is half-read.
    pub fn is_idle(&self) -> bool {
        self.partial.is_none()
    }

    fn multibulk(&mut self, buf: &[u8], limits: &RequestLimits) -> Parsed {
        let (n, mut spans, mut pos) = match self.partial.take() {
            Some(Partial::Multi {
                n,
                spans,
                pos,
                need,
            }) => {
                if buf.len() < need {
                    self.partial = Some(Partial::Multi {
                        n,
                        spans,
                        pos,
                        need,
                    });
                    return Ok(None);
                }
                (n, spans, pos)
            }
            _ => {
                let Some((head, pos)) = line(buf, 1) else {
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
                let spans = Vec::with_capacity((n as usize).min(1024));
                (n as usize, spans, pos)
            }
        };
        while spans.len() < n {
            let need = if pos >= buf.len() {
                Some(pos + 1)
            } else {
                None
            };
            let parsed = match need {
                Some(_) => None,
                None => line(buf, pos),
            };
            let Some((hdr, after)) = parsed else {
                if need.is_none() && buf.len() - pos > INLINE_MAX {
                    return err("too big bulk count string");
                }
                let need = need.unwrap_or(buf.len() + 1);
                self.partial = Some(Partial::Multi {
                    n,
                    spans,
                    pos,
                    need,
                });
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
                self.partial = Some(Partial::Multi {
                    n,
                    spans,
                    pos,
                    need: end + 2,
                });
                return Ok(None);
            }
            spans.push((after, end));
            pos = end + 2;
        }
        let args = spans.iter().map(|&(a, b)| buf[a..b].to_vec()).collect();
        Ok(Some((args, pos)))
    }

    fn inline(&mut self, buf: &[u8]) -> Parsed {
        let from = match self.partial.take() {
            Some(Partial::Inline { scanned }) => scanned.min(buf.len()),
            _ => 0,
        };
        let Some(nl) = buf[from..].iter().position(|&b| b == b'\n') else {
            if buf.len() > INLINE_MAX {
                return err("too big inline request");
            }
            self.partial = Some(Partial::Inline { scanned: buf.len() });
            return Ok(None);
        };
        inline_line(buf, nl + from)
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

/// The inline request whose line feed is at `nl`.
fn inline_line(buf: &[u8], nl: usize) -> Parsed {
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
        Some(&c) if !c_isspace(c) => None,
        _ => Some(i + 1),
    }
}

/// C's `isspace`: space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn c_isspace(c: u8) -> bool {
    c.is_ascii_whitespace() || c == 0x0b
}

/// Splits an inline command line into words as Redis's `sdssplitargs` does: any C whitespace
/// before a word is skipped, but only space, `\t`, `\r` and `\n` end an unquoted word (a
/// form feed inside one is kept); `"..."` takes `\n \r \t \b \a \\ \"` and `\xHH` escapes;
/// `'...'` takes `\'`; a closing quote must be followed by whitespace or the end; a NUL byte
/// ends the line. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    loop {
        while i < n && c_isspace(line[i]) {
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
                    b' ' | b'\t' | b'\r' | b'\n' => break,
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

    #[test]
    fn a_resumed_request_is_the_same_request() {
        let b = b"*3\r\n$3\r\nSET\r\n$5\r\nx\r\nyz\r\n$3\r\nfoo\r\n";
        // Every split into two pieces, and byte by byte, gives the same arguments.
        for cut in 0..b.len() {
            let mut p = RequestParser::default();
            assert_eq!(p.parse(&b[..cut], &RequestLimits::default()), Ok(None));
            assert_eq!(p.parse(b, &RequestLimits::default()), Ok(Some(ok(b))));
            assert!(p.is_idle());
        }
        let mut p = RequestParser::default();
        for end in 0..b.len() {
            assert_eq!(p.parse(&b[..end], &RequestLimits::default()), Ok(None));
        }
        assert_eq!(p.parse(b, &RequestLimits::default()), Ok(Some(ok(b))));
        let line = b"SET a b\r\n";
        let mut p = RequestParser::default();
        for end in 0..line.len() {
            assert_eq!(p.parse(&line[..end], &RequestLimits::default()), Ok(None));
        }
        assert_eq!(p.parse(line, &RequestLimits::default()), Ok(Some(ok(line))));
        // Errors are found in resumed requests too.
        let bad = b"*2\r\n$1\r\na\r\n:1\r\n";
        let mut p = RequestParser::default();
        assert_eq!(p.parse(&bad[..12], &RequestLimits::default()), Ok(None));
        assert!(p.parse(bad, &RequestLimits::default()).is_err());
    }

    #[test]
    fn a_request_in_many_pieces_costs_linear_time() {
        // 20,000 arguments arriving 7 bytes at a time: re-parsing from the first argument at
        // each piece would look at about 6 * 10^9 bytes; resuming looks at each about once.
        let mut req = b"*20001\r\n$3\r\nDEL\r\n".to_vec();
        for _ in 0..20_000 {
            req.extend_from_slice(b"$1\r\nk\r\n");
        }
        let started = std::time::Instant::now();
        let mut p = RequestParser::default();
        let mut end = 0;
        let got = loop {
            end = (end + 7).min(req.len());
            if let Some(r) = p
                .parse(&req[..end], &RequestLimits::default())
                .expect("valid")
            {
                break r;
            }
        };
        assert_eq!(got.0.len(), 20_001);
        assert_eq!(got.1, req.len());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn inline_words_split_as_redis_splits_them() {
        // A form feed or vertical tab inside a word is kept; before one, skipped.
        assert_eq!(
            ok(b"SET a\x0cb \x0b c\r\n").0,
            vec![b"SET".to_vec(), b"a\x0cb".to_vec(), b"c".to_vec()]
        );
        // A NUL ends the line.
        assert_eq!(ok(b"PING\x00 x\r\n").0, vec![b"PING".to_vec()]);
        assert_eq!(
            error(b"SET \"a\x00\"\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
    }
}
