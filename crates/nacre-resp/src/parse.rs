//! The incremental RESP2/RESP3 parser: [`parse`] for a whole reply at the start of a
//! buffer, [`Parser`] for a stream that arrives in pieces.
//!
//! Both work on the caller's bytes in place. A length is checked against [`Limits`] before
//! anything of that size is allocated, and a reply is never re-parsed from its start:
//! [`Parser`] keeps the aggregates it has opened and the elements already complete, so a
//! reply split over many reads costs time linear in its size.

use crate::{CodecError, Reply};

/// Bounds on what the parser accepts; a stream over them fails with [`CodecError::TooLarge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string, verbatim string, blob error or streamed string, in bytes.
    pub max_bulk: usize,
    /// Most elements in one aggregate (pairs, for maps and attributes).
    pub max_elements: usize,
    /// Deepest nesting of aggregates.
    pub max_depth: usize,
    /// Longest line (simple string, error, number), in bytes without the CRLF.
    pub max_line: usize,
}

impl Limits {
    /// Redis' own bulk limit (`proto-max-bulk-len`, 512 MiB), 2^24 elements per aggregate,
    /// 256 levels of nesting, 1 MiB lines.
    pub const DEFAULT: Limits = Limits {
        max_bulk: 512 << 20,
        max_elements: 1 << 24,
        max_depth: 256,
        max_line: 1 << 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Parses one reply at the start of `buf` with [`Limits::DEFAULT`].
///
/// Returns `Ok(None)` when `buf` holds only the beginning of a reply, `Ok(Some((reply,
/// consumed)))` when it holds a whole one (`consumed` bytes long; the rest of `buf` is the
/// next reply), and `Err` when the bytes are not RESP. Attributes (`|`) before the reply are
/// parsed and dropped, their bytes counted in `consumed`.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, CodecError> {
    parse_with(buf, &Limits::DEFAULT)
}

/// [`parse`] with the given limits.
pub fn parse_with(buf: &[u8], limits: &Limits) -> Result<Option<(Reply, usize)>, CodecError> {
    let mut parser = Parser::with_limits(*limits);
    Ok(match parser.feed(buf)? {
        (used, Some(reply)) => Some((reply, used)),
        (_, None) => None,
    })
}

/// A resumable parser for a stream of replies.
///
/// Give [`Parser::feed`] the unconsumed bytes, drop the bytes it reports consumed, and call
/// it again with them followed by what arrived since. After an `Err` the parser's state is
/// meaningless: [`Parser::reset`] it and resynchronise the stream (in practice, reconnect).
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    /// Aggregates (and streamed strings) opened and not yet complete, innermost last.
    stack: Vec<Frame>,
    /// How many bytes of the incomplete token at the start of the next buffer are known to
    /// hold no line feed, so that a long line is not searched again from its start.
    scanned: usize,
}

#[derive(Debug)]
struct Frame {
    kind: Kind,
    /// Elements still to come (twice the pairs for maps); `None` for a streamed aggregate,
    /// which ends at a `.` element.
    left: Option<usize>,
    items: Vec<Reply>,
}

#[derive(Debug)]
enum Kind {
    Agg(Agg),
    /// A streamed string (`$?`) and the chunks joined so far.
    Str(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agg {
    Array,
    Set,
    Map,
    Push,
    Attribute,
}

impl Agg {
    /// Elements per entry: two for maps and attributes.
    fn width(self) -> usize {
        match self {
            Agg::Map | Agg::Attribute => 2,
            _ => 1,
        }
    }
}

/// One lexical element: a whole scalar, or the header or end of an aggregate.
enum Token {
    Value(Reply),
    /// An aggregate header; `None` for a streamed one (`*?`).
    Open(Agg, Option<usize>),
    /// `$?`: a streamed string follows as `;` chunks.
    OpenString,
    /// `;n`: a chunk of a streamed string; empty ends it.
    Chunk(Vec<u8>),
    /// `.`: the end of a streamed aggregate.
    End,
}

enum Step {
    /// More bytes are needed; the first `scanned` hold no line feed.
    Need { scanned: usize },
    /// A token and its length in bytes.
    Got(Token, usize),
}

/// A length after a type byte.
enum Len {
    Nil,
    Streamed,
    N(usize),
}

impl Parser {
    /// A parser with [`Limits::DEFAULT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        Parser {
            limits,
            ..Self::default()
        }
    }

    /// The limits this parser enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Forgets any partly parsed reply.
    pub fn reset(&mut self) {
        self.stack.clear();
        self.scanned = 0;
    }

    /// True when no aggregate is open, that is, the next byte starts a new reply as far as
    /// the bytes consumed so far tell.
    pub fn is_idle(&self) -> bool {
        self.stack.is_empty()
    }

    /// Parses as much of `buf` as it can.
    ///
    /// Returns the bytes consumed and, when a reply completed, that reply; parsing stops
    /// after one reply. Consumed bytes without a reply belong to a reply still incomplete,
    /// kept in the parser. `buf` must start at the first byte not consumed before.
    pub fn feed(&mut self, buf: &[u8]) -> Result<(usize, Option<Reply>), CodecError> {
        let mut pos = 0;
        loop {
            let rest = buf.get(pos..).unwrap_or_default();
            match token(rest, self.scanned, &self.limits)? {
                Step::Need { scanned } => {
                    self.scanned = scanned;
                    return Ok((pos, None));
                }
                Step::Got(tok, used) => {
                    self.scanned = 0;
                    pos += used;
                    if let Some(reply) = self.apply(tok)? {
                        return Ok((pos, Some(reply)));
                    }
                }
            }
        }
    }

    /// Adds a token to the open aggregates; returns the reply it completed, if any.
    fn apply(&mut self, tok: Token) -> Result<Option<Reply>, CodecError> {
        if let Some(Frame {
            kind: Kind::Str(_), ..
        }) = self.stack.last()
        {
            if !matches!(tok, Token::Chunk(_)) {
                return Err(protocol(
                    "a streamed string ($?) may hold only ';' chunks".into(),
                ));
            }
        }
        let mut value = match tok {
            Token::Value(v) => v,
            Token::Open(agg, Some(0)) => match finish(agg, Vec::new())? {
                Some(v) => v,
                None => return Ok(None),
            },
            Token::Open(agg, len) => {
                let left = len.map(|n| n.saturating_mul(agg.width()));
                self.open(Kind::Agg(agg), left)?;
                return Ok(None);
            }
            Token::OpenString => {
                self.open(Kind::Str(Vec::new()), None)?;
                return Ok(None);
            }
            Token::Chunk(bytes) => {
                let Some(Frame {
                    kind: Kind::Str(joined),
                    ..
                }) = self.stack.last_mut()
                else {
                    return Err(protocol("';' chunk outside a streamed string ($?)".into()));
                };
                if !bytes.is_empty() {
                    let total = joined.len().saturating_add(bytes.len());
                    if total > self.limits.max_bulk {
                        return Err(too_large(
                            "streamed string length",
                            total,
                            self.limits.max_bulk,
                        ));
                    }
                    joined.extend_from_slice(&bytes);
                    return Ok(None);
                }
                let joined = std::mem::take(joined);
                self.stack.pop();
                Reply::Bulk(joined)
            }
            Token::End => match self.stack.pop() {
                Some(Frame {
                    kind: Kind::Agg(agg),
                    left: None,
                    items,
                }) => match finish(agg, items)? {
                    Some(v) => v,
                    None => return Ok(None),
                },
                _ => {
                    return Err(protocol(
                        "'.' end marker outside a streamed aggregate".into(),
                    ))
                }
            },
        };
        // Hand the value up through every aggregate it completes.
        loop {
            let Some(top) = self.stack.last_mut() else {
                return Ok(Some(value));
            };
            let Kind::Agg(agg) = top.kind else {
                return Err(protocol(
                    "a streamed string ($?) may hold only ';' chunks".into(),
                ));
            };
            match &mut top.left {
                None => {
                    let cap = self.limits.max_elements.saturating_mul(agg.width());
                    if top.items.len() >= cap {
                        return Err(too_large(
                            "streamed aggregate length",
                            top.items.len() / agg.width() + 1,
                            self.limits.max_elements,
                        ));
                    }
                    top.items.push(value);
                    return Ok(None);
                }
                Some(left) => {
                    top.items.push(value);
                    *left -= 1;
                    if *left > 0 {
                        return Ok(None);
                    }
                }
            }
            let items = match self.stack.pop() {
                Some(frame) => frame.items,
                None => Vec::new(),
            };
            match finish(agg, items)? {
                Some(v) => value = v,
                None => return Ok(None),
            }
        }
    }

    fn open(&mut self, kind: Kind, left: Option<usize>) -> Result<(), CodecError> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(too_large(
                "nesting depth",
                self.stack.len() + 1,
                self.limits.max_depth,
            ));
        }
        // The announced length is within the limits but may still be a lie: reserve a
        // bounded amount and let the vector grow as elements actually arrive.
        let items = Vec::with_capacity(left.unwrap_or(0).min(1024));
        self.stack.push(Frame { kind, left, items });
        Ok(())
    }
}

/// The reply a complete aggregate makes; `None` for an attribute, which is dropped.
fn finish(agg: Agg, items: Vec<Reply>) -> Result<Option<Reply>, CodecError> {
    Ok(Some(match agg {
        Agg::Array => Reply::Array(items),
        Agg::Set => Reply::Set(items),
        Agg::Push => Reply::Push(items),
        Agg::Attribute => return Ok(None),
        Agg::Map => {
            if items.len() % 2 != 0 {
                return Err(protocol(format!(
                    "streamed map ended after an odd number ({}) of elements",
                    items.len()
                )));
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Reply::Map(pairs)
        }
    }))
}

/// Reads one token at the start of `buf`. `scanned`: bytes known to hold no line feed.
fn token(buf: &[u8], scanned: usize, limits: &Limits) -> Result<Step, CodecError> {
    let Some(&ty) = buf.first() else {
        return Ok(Step::Need { scanned: 0 });
    };
    if !b"+-:$*_#,(=%~>!|;.".contains(&ty) {
        return Err(protocol(format!(
            "unknown type byte {} at the start of a reply",
            show_byte(ty)
        )));
    }
    let from = scanned.clamp(1, buf.len());
    let Some(nl) = buf[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
    else {
        // The line is incomplete; 3 = type byte + CRLF.
        if buf.len() > limits.max_line.saturating_add(3) {
            return Err(too_large("line length", buf.len() - 3, limits.max_line));
        }
        return Ok(Step::Need { scanned: buf.len() });
    };
    // nl >= 1: buf[0] is a type byte, not a line feed.
    if buf[nl - 1] != b'\r' {
        return Err(protocol(format!(
            "line {} ends in LF without CR",
            show(&buf[..nl])
        )));
    }
    let line = &buf[1..nl - 1];
    if line.len() > limits.max_line {
        return Err(too_large("line length", line.len(), limits.max_line));
    }
    if line.contains(&b'\r') {
        return Err(protocol(format!("stray CR in line {}", show(&buf[..nl]))));
    }
    let after = nl + 1;
    let got = |tok| Ok(Step::Got(tok, after));
    let value = |v| Ok(Step::Got(Token::Value(v), after));
    match ty {
        b'+' => value(Reply::Simple(lossy(line))),
        b'-' => value(Reply::Error(lossy(line))),
        b':' => value(Reply::Integer(
            std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad_line("integer", ty, line))?,
        )),
        b'_' if line.is_empty() => value(Reply::Nil),
        b'#' => match line {
            b"t" => value(Reply::Boolean(true)),
            b"f" => value(Reply::Boolean(false)),
            _ => Err(bad_line("boolean", ty, line)),
        },
        b',' => value(Reply::Double(
            std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad_line("double", ty, line))?,
        )),
        b'(' => {
            let digits = line.strip_prefix(b"-").unwrap_or(line);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(bad_line("big number", ty, line));
            }
            value(Reply::BigNumber(lossy(line)))
        }
        b'.' if line.is_empty() => got(Token::End),
        b'_' | b'.' => Err(protocol(format!(
            "{} takes no data, got line {}",
            type_name(ty),
            show_line(ty, line)
        ))),
        b'$' | b'=' | b'!' | b';' => match length(ty, line, limits)? {
            Len::Nil => value(Reply::Nil),
            Len::Streamed => got(Token::OpenString),
            // The last chunk of a streamed string is `;0` with no data and no second CRLF.
            Len::N(0) if ty == b';' => got(Token::Chunk(Vec::new())),
            Len::N(n) => blob(buf, ty, n, after, nl),
        },
        // The aggregates: * ~ % > |
        _ => {
            let agg = match ty {
                b'*' => Agg::Array,
                b'~' => Agg::Set,
                b'%' => Agg::Map,
                b'>' => Agg::Push,
                _ => Agg::Attribute,
            };
            match length(ty, line, limits)? {
                Len::Nil => value(Reply::Nil),
                Len::Streamed => got(Token::Open(agg, None)),
                Len::N(n) => got(Token::Open(agg, Some(n))),
            }
        }
    }
}

/// The `n` data bytes after a length header ending at `after`, and their CRLF.
fn blob(buf: &[u8], ty: u8, n: usize, after: usize, nl: usize) -> Result<Step, CodecError> {
    let end = after.saturating_add(n);
    let Some(data) = buf.get(after..end) else {
        return Ok(Step::Need { scanned: nl });
    };
    let tail = buf.get(end..).unwrap_or_default();
    match tail {
        [b'\r', b'\n', ..] => {}
        [] | [b'\r'] => return Ok(Step::Need { scanned: nl }),
        _ => {
            return Err(protocol(format!(
                "{} bytes of {} data are followed by {} instead of CRLF",
                n,
                type_name(ty),
                show(&tail[..tail.len().min(2)])
            )));
        }
    }
    let tok = match ty {
        b'$' => Token::Value(Reply::Bulk(data.to_vec())),
        b'!' => Token::Value(Reply::BlobError(data.to_vec())),
        b';' => Token::Chunk(data.to_vec()),
        _ => {
            // '=': a three-byte format, ':', the text.
            if data.len() < 4 || data[3] != b':' {
                return Err(protocol(format!(
                    "verbatim string {} does not start with a three-byte format and ':'",
                    show(data)
                )));
            }
            Token::Value(Reply::Verbatim {
                format: lossy(&data[..3]),
                text: data[4..].to_vec(),
            })
        }
    };
    Ok(Step::Got(tok, end + 2))
}

/// The length after type byte `ty`: `-1` (nil) only for `$` and `*`, `?` (streamed) only
/// for `$` and aggregates, else decimal digits within the limits.
fn length(ty: u8, line: &[u8], limits: &Limits) -> Result<Len, CodecError> {
    let (what, limit, nil_ok, stream_ok) = match ty {
        b'$' => ("bulk string length", limits.max_bulk, true, true),
        b'=' => ("verbatim string length", limits.max_bulk, false, false),
        b'!' => ("blob error length", limits.max_bulk, false, false),
        b';' => (
            "streamed string chunk length",
            limits.max_bulk,
            false,
            false,
        ),
        b'*' => ("array length", limits.max_elements, true, true),
        b'~' => ("set length", limits.max_elements, false, true),
        b'%' => ("map length", limits.max_elements, false, true),
        b'>' => ("push length", limits.max_elements, false, true),
        _ => ("attribute length", limits.max_elements, false, true),
    };
    match line {
        b"-1" if nil_ok => return Ok(Len::Nil),
        b"?" if stream_ok => return Ok(Len::Streamed),
        _ => {}
    }
    if line.is_empty() || !line.iter().all(u8::is_ascii_digit) {
        let why = if line.first() == Some(&b'-') {
            "negative length"
        } else {
            "non-numeric length"
        };
        return Err(protocol(format!(
            "{why} in line {} ({} of {})",
            show_line(ty, line),
            what,
            type_name(ty)
        )));
    }
    let n = line.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    if n > limit as u64 {
        return Err(CodecError::TooLarge {
            what,
            len: n,
            limit: limit as u64,
        });
    }
    // n <= limit, a usize.
    Ok(Len::N(n as usize))
}

fn type_name(ty: u8) -> &'static str {
    match ty {
        b'+' => "simple string",
        b'-' => "error",
        b':' => "integer",
        b'$' => "bulk string",
        b'*' => "array",
        b'_' => "null",
        b'#' => "boolean",
        b',' => "double",
        b'(' => "big number",
        b'=' => "verbatim string",
        b'%' => "map",
        b'~' => "set",
        b'>' => "push",
        b'!' => "blob error",
        b'|' => "attribute",
        b';' => "streamed string chunk",
        b'.' => "streamed aggregate end",
        _ => "unknown type",
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn protocol(msg: String) -> CodecError {
    CodecError::Protocol(msg)
}

fn too_large(what: &'static str, len: usize, limit: usize) -> CodecError {
    CodecError::TooLarge {
        what,
        len: len as u64,
        limit: limit as u64,
    }
}

fn bad_line(expected: &str, ty: u8, line: &[u8]) -> CodecError {
    protocol(format!(
        "invalid {expected} in line {} ({})",
        show_line(ty, line),
        type_name(ty)
    ))
}

/// Bytes as an escaped, quoted string, cut at 64 bytes.
fn show(b: &[u8]) -> String {
    const MAX: usize = 64;
    let cut = &b[..b.len().min(MAX)];
    let more = if b.len() > MAX { "..." } else { "" };
    format!("\"{}\"{more}", cut.escape_ascii())
}

fn show_line(ty: u8, line: &[u8]) -> String {
    let mut b = Vec::with_capacity(line.len().min(64) + 1);
    b.push(ty);
    b.extend_from_slice(&line[..line.len().min(64)]);
    let mut s = show(&b);
    if line.len() > 64 {
        s.push_str("...");
    }
    s
}

fn show_byte(b: u8) -> String {
    format!("'{}' (0x{b:02x})", [b].escape_ascii())
}
